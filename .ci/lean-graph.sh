#!/usr/bin/env bash
# lean-graph.sh: the module graph of a program that imports only lock, of
# one that imports only multilock, and of one that imports only
# redissonconfig, must hold rlock, rueidis, backoff/v4 and their own
# requirements, nothing else (issue 18; redissonconfig's YAML parser,
# go.yaml.in/yaml/v3, is rueidis's own requirement, issue 17). Go's module graph
# carries test-only requirements to consumers, so a heavy test dependency
# of the core module fails this too.
#
# For each package it builds a throwaway consumer in a temporary folder
# with `replace github.com/rlock-go/rlock => <this repository>`, runs
# `go mod tidy` and `go list -m all` with GOWORK=off, prints the list and
# fails when a module outside the allow-list appears.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

# The allow-list: rlock, its two requirements, and rueidis's own.
allowed=(
	github.com/rlock-go/rlock
	github.com/redis/rueidis
	github.com/cenkalti/backoff/v4
	github.com/onsi/gomega
	github.com/google/go-cmp
	go.yaml.in/yaml/v3
	golang.org/x/net
	golang.org/x/sys
	golang.org/x/text
)

status=0
for pkg in lock multilock redissonconfig; do
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' EXIT
	cat >"$dir/go.mod" <<MOD
module example.com/consumer

go 1.26.0

require github.com/rlock-go/rlock v0.0.0-00010101000000-000000000000

replace github.com/rlock-go/rlock => $repo
MOD
	cat >"$dir/main.go" <<GO
package main

import _ "github.com/rlock-go/rlock/$pkg"

func main() {}
GO
	(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod go mod tidy >/dev/null && GOWORK=off go build ./...)
	mods=$(cd "$dir" && GOWORK=off go list -m all | tail -n +2) # the first line is the consumer
	echo "lean-graph: a consumer of github.com/rlock-go/rlock/$pkg has these modules:"
	echo "$mods" | sed 's/^/  /'
	while read -r path _; do
		ok=0
		for a in "${allowed[@]}"; do
			[[ $path == "$a" ]] && ok=1
		done
		if [[ $ok == 0 ]]; then
			echo "lean-graph: FAIL: $path is not on the allow-list (a consumer of $pkg should not need it)"
			status=1
		fi
	done <<<"$mods"
	rm -rf "$dir"
	trap - EXIT
done
[[ $status == 0 ]] && echo "lean-graph: ok"
exit $status
