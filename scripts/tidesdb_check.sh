#!/usr/bin/env bash
# A small C driver (scripts/tidesdb_check/driver.c) that writes to TidesDB in the loop of
# TidesDB's own benchmark tool (bench/tidesdb__bench.c in TidesDB's repository: one
# transaction per batch of puts, each thread its slice), linked against the very
# libtidesdb.a that silt-bench's TidesDB adapter links: the `tidesdb` crate's bundled TidesDB,
# built by its build script with CMake (RelWithDebInfo). So a difference between the driver's
# figures and silt-bench's is the harness (options, loop, keys), never the library.
#
# Usage: bash scripts/tidesdb_check.sh [driver flags...]
#   Builds target/tidesdb_check/driver if it is missing or older than the library or the
#   source, then runs it with the flags given (none: just build and print its path).
#
#        bash scripts/tidesdb_check.sh --tool SRC PATTERN THREADS NUM
#   Builds TidesDB's own benchmark tool (bench/tidesdb__bench.c) from a TidesDB source tree
#   SRC (a checkout of any release, e.g. v9.3.14) and prints its path. Its workload is fixed at
#   compile time (CMake -DBENCH_*): PATTERN (sequential or random), THREADS, NUM operations;
#   everything else stays the tool's default (batch 1000, LZ4, sync none, ...). Built with the
#   adapter's library flags (RelWithDebInfo), static, LZ4 on (Debian's liblz4-dev, installed
#   if missing), Snappy and Zstd off (the tool asks for LZ4 only). Nothing is copied into the
#   repository: the build lives in target/tidesdb_check/tool-<version>-<pattern>-t<threads>-n<num>.
#
#        bash scripts/tidesdb_check.sh --driver-for SRC [driver flags...]
#   The same driver, built against TidesDB built from the source tree SRC instead (9.x: with
#   -DTIDESDB_V9, the 9.x configuration), in target/tidesdb_check/driver-<version>; runs it
#   with the flags given, or prints its path. Same keys, loop and options on two versions:
#   the difference is the version.
#
# Needs: a release build of silt-bench with the `tidesdb` feature first
#   (cargo build --release -p silt-bench --features tidesdb), so that the library exists.
#
# The driver's own code is a loop around the library's calls; it is compiled with the
# library's flags (CMake's RelWithDebInfo: -O2 -g, for baseline x86-64, as cargo built it).
set -euo pipefail
cd "$(dirname "$0")/.."

need_lz4() {
  if ! [[ -e /usr/include/lz4.h ]]; then
    echo "tidesdb_check: installing liblz4-dev" >&2
    sudo=(); [[ "$(id -u)" -eq 0 ]] || sudo=(sudo)
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends liblz4-dev >/dev/null
  fi
}

if [[ "${1:-}" == --driver-for ]]; then
  [[ $# -ge 2 ]] || { echo "usage: $0 --driver-for SRC [driver flags...]" >&2; exit 2; }
  src=$(cd "$2" && pwd)
  shift 2
  tver=$(awk '/^project\(tidesdb/{f=1} f&&/VERSION/{print $2; exit}' "$src/CMakeLists.txt")
  need_lz4
  lb="target/tidesdb_check/lib-$tver"
  bin="target/tidesdb_check/driver-$tver"
  if ! [[ -s "$lb/libtidesdb.a" ]]; then
    cmake -S "$src" -B "$lb" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_SHARED_LIBS=OFF \
      -DTIDESDB_BUILD_TESTS=OFF -DTIDESDB_WITH_SNAPPY=OFF -DTIDESDB_WITH_ZSTD=OFF \
      -DTIDESDB_WITH_LZ4=ON >"$lb.log" 2>&1
    make -C "$lb" -j"$(nproc)" tidesdb >>"$lb.log" 2>&1
  fi
  if ! [[ -x "$bin" && "$bin" -nt "$lb/libtidesdb.a" && "$bin" -nt scripts/tidesdb_check/driver.c ]]; then
    v9=(); [[ "${tver%%.*}" == 9 ]] && v9=(-DTIDESDB_V9)
    gcc -O2 -g -DNDEBUG -march=x86-64 -std=gnu11 -D_GNU_SOURCE "${v9[@]}" \
      -I"$src/src" -I"$src/external" -I"$lb" -o "$bin" scripts/tidesdb_check/driver.c \
      "$lb/libtidesdb.a" -llz4 -lpthread -lm
    echo "tidesdb_check: built $bin against $lb/libtidesdb.a (TidesDB $tver)" >&2
  fi
  if [[ $# -eq 0 ]]; then echo "$bin"; else exec "$bin" "$@"; fi
  exit 0
fi

if [[ "${1:-}" == --tool ]]; then
  [[ $# -eq 5 ]] || { echo "usage: $0 --tool SRC PATTERN THREADS NUM" >&2; exit 2; }
  src=$(cd "$2" && pwd) pattern=$3 threads=$4 num=$5
  tver=$(awk '/^project\(tidesdb/{f=1} f&&/VERSION/{print $2; exit}' "$src/CMakeLists.txt")
  need_lz4
  b="target/tidesdb_check/tool-$tver-$pattern-t$threads-n$num"
  if ! [[ -x "$b/tidesdb_bench" ]]; then
    cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_SHARED_LIBS=OFF \
      -DTIDESDB_WITH_SNAPPY=OFF -DTIDESDB_WITH_ZSTD=OFF -DTIDESDB_WITH_LZ4=ON \
      -DBENCH_KEY_PATTERN="$pattern" -DBENCH_NUM_THREADS="$threads" \
      -DBENCH_NUM_OPERATIONS="$num" >"$b.log" 2>&1
    make -C "$b" -j"$(nproc)" tidesdb_bench >>"$b.log" 2>&1
    echo "tidesdb_check: built $b/tidesdb_bench (TidesDB $tver)" >&2
  fi
  echo "$b/tidesdb_bench"
  exit 0
fi

# The library of the tidesdb crate version in Cargo.lock, from a release build.
version=$(awk '/^name = "tidesdb"/{getline; gsub(/"/,"",$3); print $3}' Cargo.lock)
[[ -n "$version" ]] || { echo "tidesdb_check: no tidesdb crate in Cargo.lock" >&2; exit 1; }
crate=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"tidesdb-$version" 2>/dev/null | head -1)
want=$(awk -F'"' '/^const TIDESDB_VERSION/{print $2}' "$crate/build.rs" 2>/dev/null || true)
# The newest release build whose library is the bundled TidesDB this crate version pins.
out=""
for o in $(ls -t target/release/build/tidesdb-*/output 2>/dev/null); do
  d="$(dirname "$o")/out"
  if [[ -s "$d/lib/libtidesdb.a" ]] &&
    grep -qx "cargo:rustc-env=TIDESDB_LINKED_VERSION=${want:-.*}" "$o"; then
    out="$d"
    break
  fi
done
[[ -n "$out" ]] || {
  echo "tidesdb_check: no release libtidesdb.a; run: cargo build --release -p silt-bench --features tidesdb" >&2
  exit 1
}
lib="$out/lib/libtidesdb.a"
linked=$(awk -F= '/^cargo:rustc-env=TIDESDB_LINKED_VERSION=/{print $3}' "$(dirname "$out")/output")

dst=target/tidesdb_check
bin=$dst/driver
src=scripts/tidesdb_check/driver.c
if ! [[ -x "$bin" && "$bin" -nt "$lib" && "$bin" -nt "$src" ]]; then
  mkdir -p "$dst"
  gcc -O2 -g -DNDEBUG -march=x86-64 -std=gnu11 -Wall -Wextra -Wno-unused-parameter \
    -I"$out/include" -o "$bin" "$src" "$lib" -lpthread -lm
  echo "tidesdb_check: built $bin against $lib (TidesDB $linked, crate tidesdb $version)" >&2
fi

if [[ $# -eq 0 ]]; then
  echo "$bin"
else
  exec "$bin" "$@"
fi
