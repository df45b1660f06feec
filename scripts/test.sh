#!/usr/bin/env bash
# The project's test command: README.md names it, .ci/run calls it. Beyond the Rust
# toolchain a fresh machine has (rustup's stable, with rustfmt and clippy) it installs only
# what the native benchmark peers need (scripts/bench-deps.sh: Debian's libclang-dev for
# RocksDB), because every adapter is built and tested here (--all-features).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== native dependencies of the benchmark peers"
bash scripts/bench-deps.sh

echo "== format and lints"
cargo fmt --all --check
cargo clippy --workspace --all-targets --all-features -- -D warnings

echo "== loom model of the fill ring and the sync stream"
# Its own target dir: --cfg loom rebuilds every dependency.
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p silt-wal --lib --release loom

echo "== tests (unit, property, concurrency, power loss, kill -9, fuzz corpus)"
cargo test --workspace --all-features
