#!/usr/bin/env bash
# Runs every fuzz target of the log and the engine for a number of executions (default 10M
# each), then merges the inputs that found new coverage into the committed corpora (which
# `cargo test` replays). Prints one line per target: executions, seconds, new corpus
# entries, and whether a crash was found (libFuzzer's artifact is kept under
# crates/*/fuzz/artifacts/ with the command that reproduces it).
#
#   bash scripts/fuzz-soak.sh [--runs N] [--targets "silt-wal:record_decoder silt:manifest ..."]
#
# Needs the nightly toolchain (rustup's) and cargo-fuzz; installs cargo-fuzz if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=10000000
targets="silt-wal:record_decoder silt-wal:recover silt:sstable_block silt:sstable_file silt:manifest silt:write_batch"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--targets \"crate:target ...\"]" >&2; exit 2 ;;
  esac
done
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
log=fuzz-soak.log
for t in $targets; do
  crate="${t%%:*}"; target="${t##*:}"
  dir="crates/$crate/fuzz"
  scratch="$(mktemp -d)"
  cp -r "$dir/corpus/$target/." "$scratch/" 2>/dev/null || true
  start=$(date +%s)
  status=ok
  if ! (cd "crates/$crate" && cargo +nightly fuzz run --release "$target" "$scratch" -- \
        -runs="$runs" -print_final_stats=1 >"/tmp/fuzz-$target.out" 2>&1); then
    if grep -q "failed to build fuzz script" "/tmp/fuzz-$target.out"; then
      # The target never ran: not a finding, and no executions to count.
      status="BUILD FAILED (see /tmp/fuzz-$target.out)"
    else
      status="CRASH (see /tmp/fuzz-$target.out and $dir/artifacts/$target/)"
    fi
  fi
  secs=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "/tmp/fuzz-$target.out" | grep -o '[0-9]*$' || echo "?")
  before=$(ls "$dir/corpus/$target" | wc -l)
  (cd "crates/$crate" && cargo +nightly fuzz run --release "$target" "fuzz/corpus/$target" "$scratch" -- \
      -merge=1 >/dev/null 2>&1) || true
  after=$(ls "$dir/corpus/$target" | wc -l)
  rm -rf "$scratch"
  line="$(date -u +%FT%TZ) $crate/$target executions=$execs seconds=$secs new_corpus=$((after - before)) status=$status"
  echo "$line" | tee -a "$log"
done
