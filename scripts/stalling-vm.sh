#!/usr/bin/env bash
# Runs a command the way a VM that freezes its processes would: the
# command and everything it starts (test binaries, redis-server) go into
# a cgroup-v1 freezer group, frozen again and again, for 50-650 ms every
# 200-800 ms (STALL_MODE=all). STALL_MODE=threads freezes the threads
# that last ran on one CPU, at random, as a host that deschedules one vCPU
# stalls whatever runs there; STALL_MODE=cpu takes one CPU with a real-time busy
# loop (milder: the kernel moves threads off it). mixed (the default) is
# all or threads, at random. The profile is the one measured on the VMs of session 23 and
# of stop 41's CI (docs/safety.md, "A VM that stalls"): p99 of a 10 ms
# timer about 380 ms late, the longest stall about 600 ms.
#
#   scripts/stalling-vm.sh go test -race -count=1 ./lock/
#
# Needs root, /sys/fs/cgroup/freezer (cgroup v1) and chrt (real-time
# scheduling). Docker containers
# run in Docker's own groups and are not frozen. STALL_SEED fixes the
# sequence of stalls; STALL_OFF=1 runs the command in the group unfrozen.
set -euo pipefail
fz=/sys/fs/cgroup/freezer
[ -d "$fz" ] || { echo "stalling-vm.sh: no cgroup-v1 freezer at $fz" >&2; exit 2; }
group="$fz/rlock-stall-$$"
mkdir "$group" "$group/part"
cleanup() {
  if [ -n "${ctl:-}" ]; then
    kill "$ctl" 2>/dev/null || true
    wait "$ctl" 2>/dev/null || true
  fi
  echo THAWED >"$group/part/freezer.state" 2>/dev/null || true
  echo THAWED >"$group/freezer.state" 2>/dev/null || true
  rmdir "$group/part" "$group" 2>/dev/null || true
}
trap cleanup EXIT
RANDOM=${STALL_SEED:-$$}
(
  # The controller stays outside the group: it must run to thaw it.
  frozen_ms=0; n=0; start=$(date +%s%N)
  progress() {
    if [ $((n % 200)) -eq 0 ]; then
      el=$(( ($(date +%s%N) - start) / 1000000 ))
      echo "stalling-vm.sh: $n stalls, ${frozen_ms} ms frozen in ${el} ms" >&2
    fi
  }
  while :; do
    gap=$((200 + RANDOM % 600))
    sleep "0.$(printf '%03d' "$gap")"
    r=$((RANDOM % 100))
    if [ "$r" -lt 70 ]; then d=$((50 + RANDOM % 100))
    elif [ "$r" -lt 95 ]; then d=$((150 + RANDOM % 250))
    else d=$((400 + RANDOM % 250)); fi
    [ "${STALL_OFF:-0}" = 1 ] && continue
    mode=${STALL_MODE:-mixed}
    [ "$mode" = mixed ] && mode=$([ $((RANDOM % 2)) = 0 ] && echo all || echo threads)
    if [ "$mode" = threads ]; then
      # The threads that last ran on one CPU, at random, frozen in a child
      # group: what runs on a descheduled vCPU stays there (the guest
      # cannot move it), the stall meter's thread pinned there included.
      k=$((RANDOM % $(nproc)))
      while read -r tid; do
        stat=$(cat "/proc/$tid/stat" 2>/dev/null) || continue
        read -ra f <<<"${stat##*) }"
        [ "${f[36]:-}" = "$k" ] && echo "$tid" >"$group/part/tasks" 2>/dev/null || true
      done <"$group/tasks"
      echo FROZEN >"$group/part/freezer.state" 2>/dev/null || exit 0
      sleep "0.$(printf '%03d' "$d")"
      echo THAWED >"$group/part/freezer.state" 2>/dev/null || exit 0
      while read -r tid; do
        echo "$tid" >"$group/tasks" 2>/dev/null || true
      done <"$group/part/tasks"
      frozen_ms=$((frozen_ms + d)); n=$((n + 1))
      progress
      continue
    fi
    if [ "$mode" = cpu ]; then
      cpu=$((RANDOM % $(nproc)))
      timeout "0.$(printf '%03d' "$d")" chrt -f 50 taskset -c "$cpu" sh -c 'while :; do :; done' || true
      frozen_ms=$((frozen_ms + d)); n=$((n + 1))
      continue
    fi
    echo FROZEN >"$group/freezer.state" 2>/dev/null || exit 0
    sleep "0.$(printf '%03d' "$d")"
    echo THAWED >"$group/freezer.state" 2>/dev/null || exit 0
    frozen_ms=$((frozen_ms + d)); n=$((n + 1))
    progress
  done
) &
ctl=$!
sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' sh "$group" "$@"
