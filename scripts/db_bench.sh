#!/usr/bin/env bash
# RocksDB's own benchmark tool, db_bench, built from the source tree that `librocksdb-sys`
# ships and linked against the very librocksdb.a that silt-bench's RocksDB adapter links:
# the same code, compiled with the same flags, so a difference between the two harnesses'
# figures is the harness (options, loop, measurement), never the library.
#
# Usage: bash scripts/db_bench.sh [db_bench flags...]
#   Builds target/db_bench/db_bench if it is missing or older than the library, then runs it
#   with the flags given (none: just build and print its path).
#
# Needs: a release build of silt-bench with the `rocksdb` feature first
#   (cargo build --release -p silt-bench --features rocksdb), so that the library exists;
#   Debian's libgflags-dev (installed here if missing, as root or with sudo).
#
# The compile flags copy librocksdb-sys's build script (build.rs): the defines it sets for
# Linux, C++20, -O3 (cargo's release opt-level, which the cc crate passes), plus whatever
# CXXFLAGS the cargo build used (.cargo/config.toml sets them for the peer, see there).
set -euo pipefail
cd "$(dirname "$0")/.."

# The source tree and the library of the librocksdb-sys version in Cargo.lock.
version=$(awk '/^name = "librocksdb-sys"/{getline; gsub(/"/,"",$3); print $3}' Cargo.lock)
src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"librocksdb-sys-$version" 2>/dev/null | head -1)
[[ -d "$src/rocksdb" ]] || { echo "db_bench: no source of librocksdb-sys $version (run the cargo build first)" >&2; exit 1; }
lib=""
for out in $(ls -t target/release/build/librocksdb-sys-*/output 2>/dev/null); do
  if grep -q "^cargo:cargo_manifest_dir=.*/librocksdb-sys-$version\$" "$out" &&
    [[ -s "$(dirname "$out")/out/librocksdb.a" ]]; then
    lib="$(dirname "$out")/out/librocksdb.a"
    break
  fi
done
[[ -n "$lib" ]] || {
  echo "db_bench: no release librocksdb.a; run: cargo build --release -p silt-bench --features rocksdb" >&2
  exit 1
}

if ! [[ -e /usr/include/gflags/gflags.h ]]; then
  echo "db_bench: installing libgflags-dev" >&2
  sudo=(); [[ "$(id -u)" -eq 0 ]] || sudo=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends libgflags-dev >/dev/null ||
    { "${sudo[@]}" apt-get update >/dev/null &&
      DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends libgflags-dev >/dev/null; }
fi

out=target/db_bench
bin=$out/db_bench
# The CXXFLAGS cargo gave the cc crate (see .cargo/config.toml), so the tool's objects are
# compiled like the library's.
extra=$(awk -F'"' '/^CXXFLAGS_x86_64_unknown_linux_gnu/{print $2}' .cargo/config.toml 2>/dev/null || true)
if [[ "$(uname -m)" != x86_64 ]]; then extra=""; fi

if ! [[ -x "$bin" && "$bin" -nt "$lib" ]]; then
  mkdir -p "$out/obj"
  flags=(-O3 -std=c++20 -include cstdint $extra
    -DNDEBUG=1 -DHAVE_ALIGNED_NEW -DHAVE_UINT128_EXTENSION
    -DOS_LINUX -DROCKSDB_PLATFORM_POSIX -DROCKSDB_LIB_IO_POSIX -DROCKSDB_SCHED_GETCPU_PRESENT
    -DROCKSDB_AUXV_GETAUXVAL_PRESENT -DROCKSDB_FALLOCATE_PRESENT -DROCKSDB_RANGESYNC_PRESENT
    -DGFLAGS=1
    -I"$src/rocksdb/include" -I"$src/rocksdb" -I"$src/rocksdb/third-party/gtest-1.8.1/fused-src" -I"$src")
  objs=()
  # db_bench's main, its library (src.mk: BENCH_LIB_SOURCES) and the test utilities it uses.
  for f in tools/db_bench.cc tools/db_bench_tool.cc tools/tool_hooks.cc \
    tools/simulated_hybrid_file_system.cc test_util/testutil.cc; do
    o="$out/obj/$(echo "$f" | tr / _).o"
    echo "db_bench: compiling $f" >&2
    g++ "${flags[@]}" -c "$src/rocksdb/$f" -o "$o"
    objs+=("$o")
  done
  # librocksdb-sys's pre-generated build_version.cc defines RocksDbIOUringEnable() (returns
  # true), which db_bench_tool.cc defines too (returns --io_uring_enabled); RocksDB's own
  # build has only db_bench's. The tool's objects come first, so the linker keeps its one.
  # (io_uring is not compiled into this library either way: no ROCKSDB_IOURING_PRESENT.)
  g++ -o "$bin" "${objs[@]}" "$lib" -Wl,--allow-multiple-definition -lgflags -lpthread -ldl
  echo "db_bench: built $bin against $lib" >&2
fi

if [[ $# -eq 0 ]]; then
  echo "$bin"
else
  exec "$bin" "$@"
fi
