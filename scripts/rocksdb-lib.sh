#!/usr/bin/env bash
# A compiled RocksDB for the test build, kept outside the checkout so it is compiled once per
# machine instead of once per build unit and per clone.
#
# Why: `librocksdb-sys` compiles RocksDB's C++ (~340 files, ~9 minutes on 2 cores) inside its
# build script, and `cargo clippy` and `cargo test` resolve that build script to different
# units (clippy checks the normal dependencies, so the build-time ones are not shared with
# them and hash differently), so CI compiled it twice, and again on every fresh clone.
# `librocksdb-sys` links a prebuilt static library instead when ROCKSDB_LIB_DIR and
# ROCKSDB_STATIC are set (its build script then only runs bindgen).
#
# Usage: `source scripts/rocksdb-lib.sh` (from scripts/test.sh). It sets ROCKSDB_LIB_DIR and
# ROCKSDB_STATIC for the test profile (dev: unoptimized, with debug info), building the
# library once with cargo and copying it into the cache if missing. The cache is keyed by the
# librocksdb-sys version in Cargo.lock, the C++ compiler's version and the target, so a new
# RocksDB or compiler gets a fresh build. Location: $SILT_CACHE_DIR, else
# $XDG_CACHE_HOME/silt, else ~/.cache/silt. SILT_ROCKSDB_CACHE=0 turns it off.
#
# Release builds (the benchmarks) never use it: they compile RocksDB optimized, as its own
# build does, so a peer's number is its real number. Do not build the benchmark in a shell
# where ROCKSDB_LIB_DIR still points here: it would link this -O0 library and every RocksDB
# figure would be several times too slow (docs/bench.md, "Which librocksdb.a a release
# build links").

# The newest librocksdb.a that a dev build of librocksdb-sys $1 left in the target directory
# (its build script's output names the crate's source directory, which carries the version).
rocksdb_lib_built() {
  local out
  for out in $(ls -t "${CARGO_TARGET_DIR:-target}"/debug/build/librocksdb-sys-*/output 2>/dev/null); do
    if grep -q "^cargo:cargo_manifest_dir=.*/librocksdb-sys-$1\$" "$out" &&
      [[ -s "$(dirname "$out")/out/librocksdb.a" ]]; then
      echo "$(dirname "$out")/out/librocksdb.a"
      return 0
    fi
  done
}

rocksdb_lib_setup() {
  if [[ "${SILT_ROCKSDB_CACHE:-1}" == 0 ]]; then
    echo "rocksdb-lib: cache off (SILT_ROCKSDB_CACHE=0)"
    return 0
  fi
  local version cxx target key cache lib built
  version="$(awk '/^name = "librocksdb-sys"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)"
  if [[ -z "$version" ]]; then
    echo "rocksdb-lib: librocksdb-sys is not in Cargo.lock; nothing to cache"
    return 0
  fi
  cxx="$(${CXX:-c++} --version 2>/dev/null | head -1 | tr -c 'A-Za-z0-9.+-' '_')"
  target="$(rustc -vV | awk '/^host:/ { print $2 }')"
  key="librocksdb-sys-${version}-dev-${target}-$(printf '%s' "$cxx" | cksum | cut -d' ' -f1)"
  cache="${SILT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/silt}/$key"
  lib="$cache/librocksdb.a"
  if [[ ! -s "$lib" ]]; then
    built="$(rocksdb_lib_built "$version")"
    if [[ -z "$built" ]]; then
      echo "rocksdb-lib: no compiled RocksDB in $cache; compiling it once (about 10 minutes on 2 cores)"
      # The adapter's own dev build, without the cache, so the archive is exactly the one
      # the tests would have compiled.
      (unset ROCKSDB_LIB_DIR ROCKSDB_STATIC; cargo build -q -p silt-bench --features rocksdb)
      built="$(rocksdb_lib_built "$version")"
    fi
    if [[ -z "$built" ]]; then
      echo "rocksdb-lib: cargo built librocksdb-sys $version but left no librocksdb.a" >&2
      return 1
    fi
    mkdir -p "$cache"
    cp "$built" "$lib.tmp.$$"
    # RocksDB's debug info is three quarters of the archive and slows every link; the tests
    # never step into RocksDB.
    if command -v strip >/dev/null 2>&1; then
      strip --strip-debug "$lib.tmp.$$"
    fi
    mv "$lib.tmp.$$" "$lib"
    printf 'librocksdb-sys %s, %s, %s, from %s\n' "$version" "$cxx" "$target" "$built" >"$cache/SOURCE"
    echo "rocksdb-lib: cached $built as $lib"
  fi
  export ROCKSDB_LIB_DIR="$cache" ROCKSDB_STATIC=1
  echo "rocksdb-lib: linking $lib"
}
rocksdb_lib_setup
