#!/usr/bin/env bash
# build-image.sh builds the local image the Docker backend of package
# integration runs: FROM scratch, holding the host's redis-server, the shared
# libraries ldd lists for it, and libfaketime with glibc's libc_malloc_debug
# for Options.ClockRate. Nothing is pulled: there may be no registry.
#
# Usage: build-image.sh [image]   (default rlock-redis:<version>-local)
# Idempotent: does nothing when the image exists. REBUILD=1 forces a build.
# The Go backend (docker.go) builds the same image itself when it is missing;
# keep the two layouts alike.
set -euo pipefail

bin=$(command -v redis-server)
version=$("$bin" --version | sed -n 's/.* v=\([0-9.]*\).*/\1/p')
image=${1:-rlock-redis:${version}-local}

if [[ -z ${REBUILD:-} ]] && docker image inspect "$image" >/dev/null 2>&1; then
	echo "$image exists"
	exit 0
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
root=$ctx/rootfs

# copy puts a file at the same path in the image, following symlinks.
copy() {
	mkdir -p "$root$(dirname "$1")"
	cp -L "$1" "$root$1"
}

# libs lists the absolute paths ldd names for a binary, the loader included.
libs() {
	ldd "$1" | awk '/=> \//{print $3} /^[ \t]*\/[^ ]+ \(/{print $1}'
}

extras=()
for f in /usr/lib/*-linux-gnu/faketime/libfaketime.so.1 /lib/*-linux-gnu/libc_malloc_debug.so.0; do
	[[ -e $f ]] && extras+=("$f")
done

copy "$bin"
mkdir -p "$root/usr/bin"
[[ $bin == /usr/bin/redis-server ]] || cp -L "$bin" "$root/usr/bin/redis-server"
for f in "$bin" "${extras[@]}"; do
	copy "$f"
	for l in $(libs "$f"); do
		copy "$l"
	done
done
mkdir -p "$root/data" "$root/tmp"

cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/usr/bin/redis-server"]
DOCKERFILE

docker build --label org.rlock.integration=image -t "$image" "$ctx"
