#!/usr/bin/env bash
# .ci/release-check.sh: can a user install rlock from a module proxy?
# (issue 27; docs/releasing.md)
#
# In a throwaway clone of this repository's HEAD, scripts/release makes
# the made-up release $RELEASE_CHECK_VERSION (default v0.99.0-check) and
# its file proxy. Then, from a folder outside the repository, with
# GOWORK=off, GOFLAGS empty, an empty GOPATH and build cache, and
# GOPROXY=file://<that proxy>,https://proxy.golang.org (GONOSUMDB for
# rlock's modules, the checksum database for the rest):
#
#   - go install github.com/rlock-go/rlock/cmd/rlock@VERSION, then every
#     "go install" line of README.md exactly as written (@latest);
#   - go version -m on the binary: rlock's modules at VERSION, no "=>",
#     no google.golang.org/grpc nor grpc-gateway; rlock version says
#     VERSION; rlock run holds a lock on a local redis-server;
#   - a program importing lock, multilock, redissonconfig, tracing and
#     integration at VERSION builds and runs (a RedLock on three
#     redis-servers that integration starts).
#
# It prints how long each step took. Exit 0 when all holds, 1 otherwise.
#
# .ci/release-check.sh --self-test checks the check: it breaks the clone in
# each way the check must catch (a replace directive in a published
# go.mod, a pseudo-version of an rlock module, gRPC linked into the default
# binary) and fails unless every run fails and says why. Those runs share
# one build cache (not empty), to keep them short.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
version=${RELEASE_CHECK_VERSION:-v0.99.0-check}
upstream=https://proxy.golang.org

say() { echo "release-check: $*"; }
fail() {
	say "FAIL: $*"
	exit 1
}
now() { date +%s%N; }
# took START: the seconds since START (a now), to a tenth.
took() {
	local ms=$((($(now) - $1) / 1000000))
	echo "$((ms / 1000)).$((ms % 1000 / 100))"
}

# check [MUTATION]: the whole check, on a clone broken by MUTATION if given.
check() {
	local mutation=${1:-} t0 tmp
	t0=$(now)
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlock-release-check.XXXXXX")
	# The module cache is read-only; the server is stopped by its pid.
	trap "[[ -z \${redis_pid:-} ]] || kill \$redis_pid 2>/dev/null; chmod -R u+w '$tmp' 2>/dev/null; rm -rf '$tmp'" EXIT

	# --- the release, in a throwaway clone ------------------------------
	git clone -q "$repo" "$tmp/clone"
	git -C "$tmp/clone" checkout -q --detach "$(git -C "$repo" rev-parse HEAD)"
	export GIT_AUTHOR_NAME=release-check GIT_AUTHOR_EMAIL=release-check@localhost
	export GIT_COMMITTER_NAME=release-check GIT_COMMITTER_EMAIL=release-check@localhost
	if [[ -n $mutation ]]; then
		mutate "$tmp/clone" "$mutation"
		git -C "$tmp/clone" commit -q -am "release-check: $mutation"
	fi
	local t
	t=$(now)
	# Its own module cache: a made-up version must not stay in the
	# developer's, where a later check would find an older zip.
	(cd "$tmp/clone" && GOPATH="$tmp/release-gopath" GOMODCACHE="$tmp/release-gopath/pkg/mod" \
		RLOCK_RELEASE_PROXY="$tmp/proxy" scripts/release "$version") >"$tmp/release.log" 2>&1 || {
		cat "$tmp/release.log"
		fail "scripts/release $version failed"
	}
	say "scripts/release $version: $(took "$t")s"

	# --- a user, outside the repository --------------------------------
	mkdir -p "$tmp/user" "$tmp/bin"
	local cache=${RELEASE_CHECK_GOCACHE:-$tmp/gocache}
	user() {
		(cd "$tmp/user" && env GOWORK=off GOFLAGS= GOPATH="$tmp/gopath" GOMODCACHE="$tmp/gopath/pkg/mod" \
			GOCACHE="$cache" GOBIN="$tmp/bin" GOPROXY="file://$tmp/proxy,$upstream" \
			GONOSUMDB=github.com/rlock-go GOPRIVATE= GONOPROXY= GOSUMDB=sum.golang.org GOTOOLCHAIN=local "$@")
	}
	t=$(now)
	user go install "github.com/rlock-go/rlock/cmd/rlock@$version" || fail "go install github.com/rlock-go/rlock/cmd/rlock@$version failed"
	say "go install ...cmd/rlock@$version (empty GOPATH and build cache, downloads included): $(took "$t")s"
	binary_ok "$tmp/bin/rlock" "$cache"

	local line n=0
	while read -r line; do
		rm -f "$tmp/bin/rlock"
		t=$(now)
		# shellcheck disable=SC2086 # the README's words, as a shell splits them
		user $line || fail "README.md's \"$line\" failed"
		say "README.md's \"$line\": $(took "$t")s"
		binary_ok "$tmp/bin/rlock" "$cache"
		n=$((n + 1))
	done < <(grep -E '^go install ' "$repo/README.md")
	((n > 0)) || fail "README.md has no go install line"

	# rlock run against a local redis-server.
	local port out
	port=$(free_port)
	# The log exists before tail looks for it: the background job's own
	# redirection may come after tail starts (seen once: "tail: cannot
	# open ... redis.log", then "redis-server did not start").
	: >"$tmp/redis.log"
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no >>"$tmp/redis.log" 2>&1 &
	redis_pid=$!
	timeout 10 grep -q -m1 'Ready to accept connections' <(tail -n +1 -f --pid="$redis_pid" "$tmp/redis.log") || fail "redis-server did not start: $(cat "$tmp/redis.log")"
	out=$("$tmp/bin/rlock" run --addr "127.0.0.1:$port" --name release-check -- sh -c 'echo "held, fence $RLOCK_FENCE"') ||
		fail "rlock run exited $?"
	[[ $out == "held, fence 1" ]] || fail "rlock run printed \"$out\""
	kill "$redis_pid"
	wait "$redis_pid" 2>/dev/null || true
	redis_pid=
	say "rlock run on a local redis-server: $out"

	# --- a program importing the libraries at $version ---------------------
	consumer "$tmp/user"
	t=$(now)
	user go get "github.com/rlock-go/rlock@$version" "github.com/rlock-go/rlock/tracing@$version" ||
		fail "go get github.com/rlock-go/rlock@$version github.com/rlock-go/rlock/tracing@$version failed"
	user go mod tidy || fail "go mod tidy in the consumer failed"
	user go build -o "$tmp/consumer" . || fail "the consumer does not build"
	out=$("$tmp/consumer") || fail "the consumer exited $?: $out"
	say "a program importing lock, multilock, redissonconfig, tracing, integration: built and ran in $(took "$t")s: $out"
	local mods
	mods=$(user go version -m "$tmp/consumer")
	for m in github.com/rlock-go/rlock github.com/rlock-go/rlock/tracing; do
		grep -qP "^\tdep\t\Q$m\E\t\Q$version\E\t" <<<"$mods" || fail "the consumer does not link $m at $version:
$mods"
	done
	say "done in $(took "$t0")s"
}

# binary_ok BIN: go version -m shows rlock's modules at the version, no
# replacement, no gRPC; rlock version agrees.
binary_ok() {
	local bin=$1 mods
	[[ -x $bin ]] || fail "no $bin"
	mods=$(go version -m "$bin")
	grep -q '=>' <<<"$mods" && fail "go version -m shows a replaced module:
$mods"
	grep -qP "^\tmod\tgithub.com/rlock-go/rlock/cmd/rlock\t\Q$version\E\t" <<<"$mods" || fail "the binary's main module is not cmd/rlock@$version:
$mods"
	for m in github.com/rlock-go/rlock github.com/rlock-go/rlock/tracing; do
		grep -qP "^\tdep\t\Q$m\E\t\Q$version\E\t" <<<"$mods" || fail "the binary does not link $m at $version:
$mods"
	done
	for m in google.golang.org/grpc github.com/grpc-ecosystem/grpc-gateway; do
		grep -qP "^\tdep\t\Q$m\E[/\t]" <<<"$mods" && fail "the default binary links $m:
$mods"
	done
	local v
	v=$("$bin" version) || fail "rlock version exited $?"
	grep -qx "rlock    $version github.com/rlock-go/rlock/cmd/rlock" <<<"$v" &&
		grep -qx "library  $version github.com/rlock-go/rlock" <<<"$v" || fail "rlock version printed:
$v"
	say "$bin: $(stat -c %s "$bin") bytes, $(grep -c $'^\tdep\t' <<<"$mods") modules linked, all of rlock's at $version, no gRPC"
}

# free_port prints a loopback TCP port that nothing listens on.
free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 40000))
		if ! (: </dev/tcp/127.0.0.1/$p) 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	fail "no free port"
}

# consumer DIR: writes a program using each published library package.
consumer() {
	cat >"$1/go.mod" <<'EOF'
module example.com/consumer

go 1.26.0
EOF
	cat >"$1/main.go" <<'EOF'
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/redissonconfig"
	"github.com/rlock-go/rlock/tracing"
)

func main() {
	if err := run(); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srvs, err := integration.StartMasters(ctx, 3, integration.Options{})
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range srvs {
			s.Close()
		}
	}()
	var ms []*lock.Mutex
	for _, s := range srvs {
		cfg, _, err := redissonconfig.Load([]byte("singleServerConfig:\n  address: redis://" + s.Addr() + "\n"))
		if err != nil {
			return err
		}
		cfg.Observer = tracing.New()
		c, err := lock.New(ctx, cfg)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		ms = append(ms, c.Mutex("release-check"))
	}
	h, err := multilock.NewRedLock(ms...).Lock(ctx, lock.Fenced())
	if err != nil {
		return err
	}
	if err := h.Unlock(ctx); err != nil {
		return err
	}
	fmt.Println("RedLock on 3 masters: acquired and released")
	return nil
}
EOF
}

# mutate DIR NAME: breaks the clone as the self-test asks.
mutate() {
	local d=$1
	case $2 in
	replace)
		printf '\nreplace github.com/rlock-go/rlock => ../..\n' >>"$d/cmd/rlock/go.mod"
		;;
	pseudo)
		sed -i 's#^\tgithub.com/rlock-go/rlock v.*#\tgithub.com/rlock-go/rlock v0.0.0-00010101000000-000000000000#' "$d/tracing/go.mod"
		;;
	grpc)
		# The OTLP exporter in the default build.
		sed -i '/^\/\/go:build otlp$/d' "$d/cmd/rlock/otlp.go"
		git -C "$d" rm -q cmd/rlock/otlp_off.go
		;;
	*) fail "unknown mutation $2" ;;
	esac
}

if [[ ${1:-} == --self-test ]]; then
	t0=$(now)
	export RELEASE_CHECK_GOCACHE
	RELEASE_CHECK_GOCACHE=$(mktemp -d "${TMPDIR:-/tmp}/rlock-release-check-cache.XXXXXX")
	trap 'rm -rf "$RELEASE_CHECK_GOCACHE"' EXIT
	status=0
	for m in replace:'has a replace directive' pseudo:'at the pseudo-version' grpc:'the default binary links google.golang.org/grpc'; do
		name=${m%%:*} want=${m#*:}
		out=$("$0" --mutate "$name" 2>&1) && {
			echo "$out"
			say "SELF-TEST FAIL: the check passed with the mutation $name"
			status=1
			continue
		}
		if grep -qF "$want" <<<"$out"; then
			say "self-test: the mutation $name fails the check, saying: $(grep -F "$want" <<<"$out" | head -1)"
		else
			echo "$out"
			say "SELF-TEST FAIL: the mutation $name failed the check, but not by \"$want\""
			status=1
		fi
	done
	say "self-test: done in $(took "$t0")s"
	exit $status
fi
if [[ ${1:-} == --mutate ]]; then
	check "$2"
	exit
fi
[[ $# == 0 ]] || {
	echo "usage: .ci/release-check.sh [--self-test]" >&2
	exit 64
}
check
