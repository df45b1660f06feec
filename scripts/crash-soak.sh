#!/usr/bin/env bash
# The long crash soak (docs/reliability.md): for N hours, rounds of black-box kills,
# white-box kill points (sync none and full), simulated power losses and the I/O-error
# loop, each with a fresh seed, on a release build of silt-stress. Every round appends its
# JSON summary to crash-soak.log (or --log FILE); at the end, and at any violation, it
# prints the totals: cycles, writes acknowledged, keys verified, violations. A violation
# stops the soak with the command that replays it.
#
#   bash scripts/crash-soak.sh --hours 2 [--cycles 1000] [--log FILE] [--dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
hours=1
cycles=1000
log=crash-soak.log
dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hours) hours="$2"; shift 2 ;;
    --cycles) cycles="$2"; shift 2 ;;
    --log) log="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) echo "usage: $0 --hours N [--cycles N] [--log FILE] [--dir DIR]" >&2; exit 2 ;;
  esac
done
cargo build --release -q -p silt-stress
bin=target/release/silt-stress
work="${dir:-$(mktemp -d)}"
end=$(( $(date +%s) + $(awk "BEGIN { printf \"%d\", $hours * 3600 }") ))
round=0
run() {
  local out
  if ! out="$("$bin" "$@" --json)"; then
    echo "$out" >> "$log"
    echo "violation in round $round: $bin $*" >&2
    echo "$out" >&2
    totals
    exit 1
  fi
  echo "$out" >> "$log"
}
totals() {
  python3 - "$log" <<'EOF'
import json, sys
t = {"rounds": 0, "cycles": 0, "writes": 0, "verified": 0, "violations": 0}
modes = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    t["rounds"] += 1
    for k in ("cycles", "writes", "verified", "violations"):
        t[k] += r[k]
    m = modes.setdefault(r["mode"], {"cycles": 0, "seconds": 0.0})
    m["cycles"] += r["cycles"]
    m["seconds"] += r["seconds"]
print("totals:", json.dumps(t))
for m, v in sorted(modes.items()):
    per = v["seconds"] / v["cycles"] if v["cycles"] else 0
    print(f"  {m}: {v['cycles']} cycles, {per:.3f} s per cycle")
EOF
}
while [[ $(date +%s) -lt $end ]]; do
  round=$((round + 1))
  seed=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
  rm -rf "$work/bb" "$work/wbn" "$work/wbf"
  run crash --mode blackbox --cycles "$cycles" --dir "$work/bb" --seed "$seed"
  run crash --mode whitebox --cycles "$cycles" --dir "$work/wbn" --seed "$seed" --sync none
  run crash --mode whitebox --cycles "$cycles" --dir "$work/wbf" --seed "$seed" --sync full
  run power-loss --cycles "$cycles" --seed "$seed"
  run io-errors --seed "$seed"
done
totals
