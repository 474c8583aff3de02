#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine or a developer's:
# installs Debian's redis-server (and faketime, for clock faults) when
# missing, builds the local Redis image for the Docker backend when Docker
# is there, then, in every module, checks formatting, vets and runs every
# test with -race, and checks that the lock packages' module graph is lean.
set -euo pipefail
cd "$(dirname "$0")"

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || [ -n "$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null)" ] || need+=(faketime)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "test.sh: installing ${need[*]} from Debian"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
# A packaged redis-server may start as a service; the tests start their own.

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 && [ -x integration/docker/build-image.sh ]; then
  integration/docker/build-image.sh
fi

# Every module of the repository (see go.work): the core, the Docker
# backend, tracing, the fault suite, the CLI and the benchmarks, each vetted
# and tested in its own folder, with the workspace on.
modules=$(git ls-files --cached --others --exclude-standard '*go.mod' 2>/dev/null || find . -name go.mod -not -path './.git/*')
modules=$(echo "$modules" | xargs -n1 dirname | sort)

echo "test.sh: gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed: $unformatted"
  exit 1
fi
for m in $modules; do
  echo "test.sh: go vet ($m)"
  (cd "$m" && go vet ./...)
done
echo "test.sh: lean module graph"
.ci/lean-graph.sh
# go test runs under internal/retest: a test that fails while the machine
# was seen to stall (a CPU not scheduled for 100 ms or more) runs again,
# alone, up to 3 runs in all; any other failure is final (README, "Tests";
# docs/safety.md, "A machine that stalls"). Built in the clone, not in
# /tmp, which may be mounted noexec.
retest_dir=$(mktemp -d "$PWD/.retest.XXXXXX")
trap 'rm -rf "$retest_dir"' EXIT
go build -o "$retest_dir/retest" ./internal/retest
for m in $modules; do
  echo "test.sh: go test -race ($m)"
  (cd "$m" && "$retest_dir/retest" -- -race -count=1 -timeout=40m ./...)
done
if [ -f bench/go.mod ]; then
  echo "test.sh: bench -quick"
  (cd bench && go run . -quick)
fi
