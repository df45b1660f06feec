#!/usr/bin/env bash
# What silt-bench's native peers need beyond the Rust toolchain, installed on Debian:
# RocksDB (feature `rocksdb`) is C++ whose bindgen step needs libclang; TidesDB (feature
# `tidesdb`) is C built with CMake. gcc, g++ and cmake are on a fresh machine here, but
# are checked too. Does nothing when everything is there already.
set -euo pipefail

need=()
have_libclang() {
  ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1
}
have_libclang || need+=(libclang-dev)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

echo "bench-deps: installing ${need[*]}"
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "bench-deps: need root (or sudo) to apt-get install ${need[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get install -y --no-install-recommends "${need[@]}" >/dev/null ||
  { "${sudo[@]}" apt-get update >/dev/null && "${sudo[@]}" apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
