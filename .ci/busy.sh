#!/usr/bin/env bash
# The packages that wait, run again with two CPU-bound processes beside
# them: green on an idle machine proves little. The hogs are bounded by
# `timeout` and killed when the pass ends, whatever its outcome.
set -euo pipefail
cd "$(dirname "$0")/.."
hogs=()
for _ in 1 2; do
  timeout 1800 sh -c 'while :; do :; done' &
  hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null || true' EXIT
echo "busy.sh: two CPU hogs running (pids ${hogs[*]})"
go test -race -count=1 -timeout 25m ./lock/ ./multilock/ ./pubsub/ ./integration/
(cd cmd/rlock && go test -race -count=1 -timeout 15m ./...)
