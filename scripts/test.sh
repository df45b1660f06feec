#!/usr/bin/env bash
# The project's test command: README.md names it, .ci/run calls it. Beyond the Rust
# toolchain a fresh machine has (rustup's stable, with rustfmt and clippy) it installs only
# what the native benchmark peers need (scripts/bench-deps.sh: Debian's libclang-dev for
# RocksDB), because every adapter is built and tested here (--all-features), and it keeps
# one compiled RocksDB per machine in ~/.cache/silt (scripts/rocksdb-lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, so CI's budget can be watched stage by stage.
stage_start=$SECONDS
stage() {
  if [[ -n "${stage_name:-}" ]]; then
    echo "-- $stage_name: $((SECONDS - stage_start)) s"
  fi
  stage_name="$1"
  stage_start=$SECONDS
  echo "== $1"
}
trap 'stage done' EXIT

# A cold build of everything below takes about 16 GB (debug, stress and loom targets without
# incremental state); say so up front rather than fail 95 s in with ENOSPC.
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
if [[ -n "$free_kb" && "$free_kb" -lt $((20 * 1024 * 1024)) ]]; then
  echo "warning: $((free_kb / 1024 / 1024)) GB free here; a cold build needs about 16 GB" >&2
fi

stage "native dependencies of the benchmark peers"
bash scripts/bench-deps.sh
# RocksDB compiled once per machine, not once per build unit and clone (see the script).
source scripts/rocksdb-lib.sh

stage "format and lints"
cargo fmt --all --check
cargo clippy --workspace --all-targets --all-features -- -D warnings
# openraft's example store in the replication benchmark's harness: a workspace of its own
# (openraft-memstore 0.9 does not build with the `storage-v2` feature silt-raft needs).
cargo fmt --manifest-path crates/silt-raft-compare/memstore/Cargo.toml --check
cargo clippy --manifest-path crates/silt-raft-compare/memstore/Cargo.toml --target-dir "${CARGO_TARGET_DIR:-target}" \
  --all-targets -- -D warnings

stage "loom model of the fill ring and the sync stream"
# Its own target dir: --cfg loom rebuilds every dependency.
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p silt-wal --lib --release loom

stage "tests (unit, property, concurrency, power loss, kill -9, fuzz corpus)"
# The storage crates' tests (the engine's model, kill -9, transaction and corruption tests,
# the log's power-loss and kill -9 tests, silt-stress's thousand crash cycles) run optimized
# with debug assertions and overflow checks kept (profile `stress` in Cargo.toml): the same
# checks, several times faster than a debug build, which spent most of this stage there
# (measured: silt-stress's crash tests 1,111 s -> 137 s, silt-wal's power loss 191 s -> 32 s
# on a loaded machine). The crates above them stay in the dev profile the wheel builds on.
cargo test --workspace --all-features --exclude silt-stress --exclude silt-wal --exclude silt
cargo test -p silt-stress -p silt-wal -p silt --all-features --profile stress
cargo test --manifest-path crates/silt-raft-compare/memstore/Cargo.toml --target-dir "${CARGO_TARGET_DIR:-target}"

stage "Python package: wheel (maturin), pytest in a virtual environment"
bash scripts/py-test.sh
