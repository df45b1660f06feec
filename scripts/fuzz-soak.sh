#!/usr/bin/env bash
# Runs every fuzz target of the log and the engine for a number of executions (default 10M
# each), then merges the inputs that found new coverage into the committed corpora (which
# `cargo test` replays). Prints one line per target: executions, seconds, new corpus
# entries, and whether a crash was found (libFuzzer's artifact is kept under
# crates/*/fuzz/artifacts/ with the command that reproduces it).
#
#   bash scripts/fuzz-soak.sh [--runs N] [--jobs J] [--sanitizer address|none]
#                             [--targets "silt-wal:record_decoder silt:manifest ..."]
#
# --jobs J runs J fuzzer processes per target (each N/J executions, its own seed and
# scratch corpus) and reports their sum. --sanitizer none drops AddressSanitizer, which
# costs the log's `recover` target ~4x (its runs are allocation-heavy) and finds nothing
# Rust's own checks would not in safe code; the default stays address.
#
# Needs the nightly toolchain (rustup's) and cargo-fuzz; installs cargo-fuzz if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=10000000
jobs=1
sanitizer=address
targets="silt-wal:record_decoder silt-wal:recover silt:sstable_block silt:sstable_file silt:manifest silt:write_batch"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --sanitizer) sanitizer="$2"; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--jobs J] [--sanitizer address|none] [--targets \"crate:target ...\"]" >&2; exit 2 ;;
  esac
done
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
log=fuzz-soak.log
for t in $targets; do
  crate="${t%%:*}"; target="${t##*:}"
  dir="crates/$crate/fuzz"
  start=$(date +%s)
  status=ok
  scratches=()
  pids=()
  for j in $(seq 1 "$jobs"); do
    scratch="$(mktemp -d)"
    scratches+=("$scratch")
    cp -r "$dir/corpus/$target/." "$scratch/" 2>/dev/null || true
    (cd "crates/$crate" && cargo +nightly fuzz run -s "$sanitizer" --release "$target" "$scratch" -- \
        -runs=$(( runs / jobs )) -seed=$(( (RANDOM << 15 | RANDOM) + j )) -print_final_stats=1 \
        >"/tmp/fuzz-$target.$j.out" 2>&1) &
    pids+=($!)
  done
  execs=0
  for j in $(seq 1 "$jobs"); do
    out="/tmp/fuzz-$target.$j.out"
    if ! wait "${pids[$((j - 1))]}"; then
      if grep -q "failed to build fuzz script" "$out"; then
        # The target never ran: not a finding, and no executions to count.
        status="BUILD FAILED (see $out)"
      else
        status="CRASH (see $out and $dir/artifacts/$target/)"
      fi
    fi
    n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out" | grep -o '[0-9]*$' || echo 0)
    execs=$(( execs + n ))
  done
  secs=$(( $(date +%s) - start ))
  before=$(ls "$dir/corpus/$target" | wc -l)
  (cd "crates/$crate" && cargo +nightly fuzz run -s "$sanitizer" --release "$target" "fuzz/corpus/$target" "${scratches[@]}" -- \
      -merge=1 >/dev/null 2>&1) || true
  after=$(ls "$dir/corpus/$target" | wc -l)
  rm -rf "${scratches[@]}"
  line="$(date -u +%FT%TZ) $crate/$target executions=$execs jobs=$jobs sanitizer=$sanitizer seconds=$secs new_corpus=$((after - before)) status=$status"
  echo "$line" | tee -a "$log"
done
