#!/usr/bin/env bash
# Runs `rlock demo` N times (default 50) with two CPU-bound processes
# beside it, and prints how many runs passed. The hogs are bounded by
# `timeout` and killed at the end. Usage: scripts/demo-under-load.sh [N]
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-50}
bin=$(mktemp -d)/rlock
(cd cmd/rlock && go build -o "$bin" .) || exit 1
hogs=()
for _ in 1 2; do timeout 3600 sh -c 'while :; do :; done' & hogs+=($!); done
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
ok=0 start=$(date +%s)
for i in $(seq "$n"); do
  if out=$(timeout 120 "$bin" demo 2>&1); then
    ok=$((ok + 1))
  else
    echo "run $i failed:"; echo "$out" | tail -5
  fi
done
echo "demo: $ok of $n passed, $(( $(date +%s) - start ))s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$ok" -eq "$n" ]
