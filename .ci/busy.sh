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
retest_dir=$(mktemp -d "$PWD/.retest.XXXXXX")
trap 'kill "${hogs[@]}" 2>/dev/null || true; rm -rf "$retest_dir"' EXIT
go build -o "$retest_dir/retest" ./internal/retest
echo "busy.sh: two CPU hogs running (pids ${hogs[*]})"
# internal/retest, as in test.sh: a failure runs again only when a stall
# of the machine was seen while it ran.
"$retest_dir/retest" -- -race -count=1 -timeout=25m ./lock/ ./multilock/ ./pubsub/ ./integration/
(cd cmd/rlock && "$retest_dir/retest" -- -race -count=1 -timeout=15m ./...)
