#!/usr/bin/env bash
# Wall time of every test binary of the workspace (all features, dev profile), one after
# another, slowest first at the end: where scripts/test.sh's test stage spends its time.
# Usage: bash scripts/time-tests.sh   (uses ${CARGO_TARGET_DIR:-target}; RocksDB from the cache)
set -u
cd "$(dirname "$0")/.."
source scripts/rocksdb-lib.sh >/dev/null
list=$(mktemp)
cargo test --workspace --all-features --no-run --message-format=json 2>/dev/null |
  python3 -c '
import sys, json
for l in sys.stdin:
    try:
        m = json.loads(l)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"], m["executable"], m["manifest_path"])
' >"$list"
out=$(mktemp)
while read -r name exe manifest; do
  s=$(date +%s.%N)
  (cd "$(dirname "$manifest")" && "$exe" -q >/dev/null 2>&1)
  rc=$?
  printf "%8.1f %s rc=%s\n" "$(echo "$(date +%s.%N) - $s" | bc)" "$name" "$rc" | tee -a "$out"
done <"$list"
echo "-- slowest:"
sort -rn "$out" | head -15
rm -f "$list" "$out"
