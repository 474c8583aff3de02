#!/usr/bin/env bash
# Checks docs/model/rlock.pml, fair.pml, replicas.pml, kinds.pml and hold.pml with spin
# (see README.md):
#   - the model of the code: no violation, search complete;
#   - each mutation (behaviours of db82bdb and of 5225b73, before this
#     model's fixes): spin MUST find a violation;
#   - the witness: the bounds (lost request, lost reply, reordering, lease
#     expiry) are reachable together in one run;
#   - liveness: every goroutine finishes under weak fairness.
# Exits non-zero on any failure. Prints each run's time and states.
# Environment: MODEL_MEMLIM (MB per pan run, default 4096), MODEL_JOBS (2),
# MODEL_FULL=1 adds the long run (a reset and a delayed reply together),
# MODEL_ONLY=REGEX runs only the runs whose names match (no total check).
#
# Flags:
#   --stamp  runs every check (as without flags) and, when all pass, writes
#            the digest of the inputs (the .pml files, this script, spin's
#            version) to docs/model/stamp;
#   --ci     as CI runs it: when the inputs' digest is the stamp's, the long
#            pass runs (LONG below) and the coverage checks, whose outcome
#            those same inputs decide, are skipped, and every other run,
#            every mutation included, is made; otherwise every check runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v spin >/dev/null || { echo "check.sh: spin is not installed (apt-get install spin)"; exit 2; }
command -v gcc >/dev/null || { echo "check.sh: gcc is not installed"; exit 2; }
mode=all
[ $# -le 1 ] || { echo "check.sh: one flag at most (--ci or --stamp)"; exit 2; }
case ${1:-} in
--ci) mode=ci ;;
--stamp) mode=stamp ;;
"") ;;
*) echo "check.sh: unknown flag $1 (--ci, --stamp)"; exit 2 ;;
esac
# The longest pass runs (README, "How to run"): skipped by --ci when the
# stamp says they passed on these very inputs.
LONG='^(main|drift-rst|fair-main|fair-lrep-dly|fair-prune|fair-live)$'
# digest: each input file's SHA-256 with its name, spin's version, and the
# settings a run depends on (a stamp made with more memory or the long run
# is not CI's).
digest() {
  { (cd "$here" && sha256sum ./*.pml check.sh); spin -V; echo "memlim=${MODEL_MEMLIM:-4096} full=${MODEL_FULL:-0}"; } | sha256sum | cut -d' ' -f1
}
skiplong=0
digest=
if [ $mode != all ]; then
  command -v sha256sum >/dev/null || { echo "check.sh: --ci and --stamp need sha256sum"; exit 2; }
  digest=$(digest)
fi
if [ $mode = ci ]; then
  if [ -f "$here/stamp" ] && [ "$(sed -n 's/^digest //p' "$here/stamp")" = "$digest" ]; then
    skiplong=1
    echo "check.sh --ci: the inputs are those of the stamp ($(sed -n 's/^checked //p' "$here/stamp")): the long pass runs and the coverage checks are not run again"
  else
    echo "check.sh --ci: the inputs differ from docs/model/stamp: every check runs (record a pass with --stamp)"
  fi
fi
if [ $mode = stamp ] && [ -n "${MODEL_ONLY:-}" ]; then echo "check.sh: --stamp runs every check; unset MODEL_ONLY"; exit 2; fi
memlim=${MODEL_MEMLIM:-4096}
jobs=${MODEL_JOBS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)

# run NAME EXPECT TIMEOUT "SPIN -D FLAGS" "CC FLAGS" "PAN FLAGS"
#   EXPECT: pass (no error, complete search; unreached statements collected)
#           fail (spin must report an error)
run() {
  local name=$1 expect=$2 to=$3 dflags=$4 cflags=$5 pflags=$6
  local d="$work/$name"
  local model=rlock.pml
  case $name in fair*) model=fair.pml ;; rep-*) model=replicas.pml ;; kinds-*) model=kinds.pml ;; hold-*) model=hold.pml ;; esac
  mkdir -p "$d"
  cp "$here/$model" "$d/"
  (
    cd "$d"
    t0=$(date +%s)
    spin -o3 -a $dflags $model >spin.out 2>&1 || { echo "FAIL $name: spin -a"; cat spin.out; exit 1; }
    gcc -w -DMEMLIM=$memlim $cflags -o pan pan.c >cc.out 2>&1 || { echo "FAIL $name: gcc"; cat cc.out; exit 1; }
    set +e
    timeout "$to" ./pan $pflags >pan.out 2>&1
    rc=$?
    set -e
    t1=$(date +%s)
    states=$(awk '/states, stored/ {print $1; exit}' pan.out)
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -1)
    summary="$name: $((t1 - t0))s, ${states:-?} states, errors ${errors:-?}"
    if [ $rc -eq 124 ]; then echo "FAIL $summary: timed out after ${to}s"; exit 1; fi
    case $expect in
    pass)
      if [ "${errors:-1}" != 0 ]; then
        echo "FAIL $summary: spin found a violation; trail:"
        spin -t $dflags $model 2>&1 | grep -E 'T=[0-9]+|assert|Error' | grep -v 'tick$' | tail -60
        exit 1
      fi
      if grep -qE 'Search not completed|max search depth too small|reached -DMEMLIM' pan.out; then
        echo "FAIL $summary: search truncated"; grep -E 'Search not|depth too small|MEMLIM' pan.out; exit 1
      fi
      # statements of the processes that model operations left unreached
      awk '/unreached in proctype (G|Redis|Watchdog|Clock|Settler)/ {p=1; next} /unreached in/ {p=0}
           p && /rlock.pml:[0-9]+, state/ && !/"-end-"/ {sub(/^[ \t]+/, ""); sub(/, state [0-9]+,/, ":"); print}' pan.out | sort -u >unreached.txt
      case $model in
      rlock.pml|fair.pml) echo "ok   $summary (complete; $(wc -l <unreached.txt) unreached statements in this configuration)" ;;
      *) echo "ok   $summary (complete)" ;;
      esac
      if [ "$name" != liveness ] && [ "$name" != live-notimer ] && [ "$model" = rlock.pml ]; then
        ./pan -d >tables.txt 2>/dev/null || true
        cp tables.txt "$work/tables.$name"
        cp pan.out "$work/pan.$name"
      fi
      if [ "$model" = replicas.pml ] || [ "$model" = kinds.pml ]; then
        ./pan -d >tables.txt 2>/dev/null || true
        cp tables.txt "$work/xtables.$name"
        cp pan.out "$work/xpan.$name"
      fi
      ;;
    fail)
      if [ "${errors:-0}" = 0 ]; then echo "FAIL $summary: spin found NO violation (the model lost its teeth)"; exit 1; fi
      what=$(grep -m1 -E 'assertion violated|acceptance cycle|invalid end state' pan.out | sed 's/ (at depth.*//')
      echo "ok   $summary (violation found as expected: ${what})"
      ;;
    esac
  )
}

SAFE="-DSAFETY -DHC4"   # hash-compact state storage (see README)
# name         expect to    spin flags                                       cc flags   pan flags
specs=(
  "main         pass 420 -DDRIFT=0~-DB_RST=0~-DB_LATE=0                   SAFE2 -m400000~-c1~-w27"
  "drift-rst    pass 120 -DB_LREQ=0~-DB_LREP=0~-DB_LATE=0                 SAFE2 -m400000~-c1~-w25"
  "drift-late   pass 120 -DB_LREQ=0~-DB_LREP=0~-DB_RST=0                  SAFE2 -m400000~-c1~-w25"
  "drift-lrep   pass 120 -DB_LREQ=0~-DB_RST=0~-DB_LATE=0                  SAFE2 -m400000~-c1~-w25"
  "drift-lreq   pass 120 -DB_LREP=0~-DB_RST=0~-DB_LATE=0                  SAFE2 -m400000~-c1~-w25"
  "delay        pass 120 -DB_DREQ=1~-DB_LREQ=0~-DB_LREP=0~-DB_RST=0~-DB_LATE=0 SAFE2 -m400000~-c1~-w25"
  "ri3          pass 120 -DRI=3~-DB_LREQ=0~-DB_LREP=0~-DB_RST=0~-DB_LATE=0 SAFE2 -m400000~-c1~-w25"
  "M1           fail 120 -DM1~-DB_LREQ=0~-DB_RST=0~-DB_LATE=0              SAFE0 -m400000~-c1~-w24"
  "M2           fail 120 -DM2~-DB_LREQ=0~-DB_RST=0~-DB_LATE=0              SAFE0 -m400000~-c1~-w24"
  "M3           fail 120 -DM3~-DB_LREQ=0~-DB_LREP=0~-DB_RST=0~-DB_LATE=0   SAFE0 -m400000~-c1~-w24"
  "M4           fail 120 -DM4~-DRI=3~-DB_LREQ=0~-DB_LREP=0~-DB_RST=0~-DB_LATE=0 SAFE0 -m400000~-c1~-w24"
  "M5           fail 120 -DM5~-DB_LREP=0~-DB_RST=0~-DB_LATE=0              SAFE0 -m400000~-c1~-w24"
  "M6           fail 120 -DM6~-DB_LREQ=0~-DB_RST=0~-DB_LATE=0              SAFE0 -m400000~-c1~-w24"
  "M7           fail 120 -DM7~-DB_DREQ=1~-DB_LREQ=0~-DB_LREP=0~-DB_RST=0~-DB_LATE=0 SAFE0 -m400000~-c1~-w24"
  "M8           fail 120 -DM8~-DB_DREQ=1~-DB_LREQ=0~-DB_LREP=0~-DB_RST=0~-DB_LATE=0 SAFE0 -m400000~-c1~-w24"
  "witness      fail 120 -DWITNESS~-DDRIFT=0~-DB_RST=0~-DB_LATE=0          SAFE0 -m400000~-c1~-w24"
  "liveness     pass 120 -DLIVE                                            LIVE  -m400000~-a~-f~-w24"
  "live-notimer fail 120 -DLIVE~-DNOTIMER                                  LIVE  -m400000~-a~-f~-w24"
  # fair.pml: the fair lock's queue (README, "The fair lock's queue")
  "fair-main    pass 600 -DNL2=1                                          SAFE2 -m400000~-c1~-w26"
  "fair-lrep-dly pass 600 -DB_LREQ=0                                       SAFE2 -m400000~-c1~-w26"
  "fair-prune   pass 600 -DPRUNE~-DNL2=1                                  SAFE2 -m400000~-c1~-w26"
  "fair-live    pass 600 -DLIVE~-DB_LREQ=0~-DB_DREQ=0                      LIVE  -m400000~-a~-f~-w25"
  "fair-M1      fail 120 -DM1~-DB_LREQ=0~-DB_LREP=0                        SAFE0 -m400000~-c1~-w24"
  "fair-M2      fail 120 -DM2~-DB_LREQ=0~-DB_LREP=0~-DB_DREQ=0             SAFE0 -m400000~-c1~-w24"
  "fair-M3      fail 120 -DM3~-DB_LREQ=0~-DB_LREP=0~-DB_DREQ=0             SAFE0 -m400000~-c1~-w24"
  "fair-M4      fail 120 -DM4~-DB_LREQ=0~-DB_LREP=0                        SAFE0 -m400000~-c1~-w24"
  "fair-M5      fail 120 -DM5~-DB_LREQ=0~-DB_DREQ=0~-DNL2=1                SAFE0 -m400000~-c1~-w24"
  "fair-M6      fail 120 -DM6~-DB_LREP=0~-DNL2=1                           SAFE0 -m400000~-c1~-w24"
  # replicas.pml: replica sync around a failover (README, "Replica sync")
  "rep-main     pass 300 (none)                                            EXACT2 -m100000~-c1~-w24"
  "rep-deny     pass 120 -DDENYALL=1                                       EXACT0 -m100000~-c1~-w22"
  "rep-R31      fail 120 -DR31~-DNEWOK                                     EXACT0 -m100000~-c1~-w22"
  "rep-R31-deny fail 120 -DR31~-DDENYALL=1~-DB_LOST=0~-DB_DL=0             EXACT0 -m100000~-c1~-w22"
  "rep-R32      fail 120 -DR32~-DDENYALL=1                                 EXACT0 -m100000~-c1~-w22"
  "rep-MHAD     fail 120 -DMHAD                                            EXACT0 -m100000~-c1~-w22"
  "rep-CUTEARLY fail 120 -DCUTEARLY                                        EXACT0 -m100000~-c1~-w22"
  # kinds.pml: a read stray and the plain lock on one field (README, "Two kinds on one field")
  "kinds-main   pass 120 (none)                                            EXACT0 -m100000~-c1~-w22"
  "kinds-big    pass 120 -DB_LSET=2~-DNTRY=3                               EXACT0 -m100000~-c1~-w22"
  "kinds-attempt-only pass 120 -DOLDSCRIPTS                                EXACT0 -m100000~-c1~-w22"
  "kinds-scripts-only pass 120 -DOLDATTEMPT                                EXACT0 -m100000~-c1~-w22"
  "kinds-R33    fail 120 -DR33                                             EXACT0 -m100000~-c1~-w22"
  "kinds-R33-rw fail 120 -DR33~-DK1READ~-DWEAK                             EXACT0 -m100000~-c1~-w22"
  # hold.pml: a hold as one state machine (README, "The hold state machine")
  "hold-main        pass 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0 SAFE2 -m300000~-c1~-w25"
  "hold-retire      pass 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=1~-DB_CLOSE=0~-DK0=1~-DK1=0~-DKB=2 SAFE2 -m300000~-c1~-w25"
  "hold-write       pass 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DK0=2~-DK1=2~-DKB=1 SAFE2 -m300000~-c1~-w25"
  "hold-close       pass 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=1~-DG1ON=0 SAFE2 -m300000~-c1~-w25"
  "hold-lost        pass 120 -DB_LREQ=1~-DB_LREP=1~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DG1ON=0 SAFE2 -m300000~-c1~-w25"
  "hold-late        pass 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=1~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DG1ON=0 SAFE2 -m300000~-c1~-w25"
  "hold-renew       pass 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=1~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DG1ON=0 SAFE2 -m300000~-c1~-w25"
  "hold-failover    pass 180 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=1~-DB_CUT=1~-DB_FO=1~-DB_LSET=0~-DB_CLOSE=0~-DG1ON=0 SAFE2 -m300000~-c1~-w26"
  "hold-R31         fail 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=1~-DB_CUT=1~-DB_FO=1~-DB_LSET=0~-DB_CLOSE=0~-DR31~-DG1ON=0 SAFE0 -m300000~-c1~-w22"
  "hold-R33         fail 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=1~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DR33~-DK0=1~-DK1=0~-DKB=2 SAFE0 -m300000~-c1~-w24"
  "hold-R36         fail 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=1~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DR36 SAFE0 -m300000~-c1~-w22"
  "hold-STRAYONLY   fail 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DSTRAYONLY SAFE0 -m300000~-c1~-w25"
  "hold-TOKEN       pass 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=1~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DG1ON=0~-DTOKEN~-DR36 SAFE2 -m300000~-c1~-w25"
  "hold-R311        fail 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DR311~-DK0=2~-DK1=2~-DKB=1 SAFE0 -m300000~-c1~-w22"
  "hold-CLOSE_NOP   fail 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=1~-DCLOSE_NOP~-DG0TWO=0 SAFE0 -m300000~-c1~-w22"
  "hold-CLOSE_LATE  fail 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=1~-DCLOSE_LATE~-DG1ON=0 SAFE0 -m300000~-c1~-w24"
  "hold-M1          fail 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=1~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DM1~-DG0TWO=0 SAFE0 -m300000~-c1~-w24"
  "hold-ri2         pass 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DRI=2~-DLEASE=4~-DG1L=SLEASE~-DG0TWO=0 SAFE2 -m300000~-c1~-w24"
  "hold-M4          fail 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DRI=2~-DLEASE=4~-DG1L=SLEASE~-DG0TWO=0~-DM4 SAFE0 -m300000~-c1~-w22"
  "hold-M7          fail 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=1~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DM7~-DG1ON=0 SAFE0 -m300000~-c1~-w22"
  "hold-M8          fail 120 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=1~-DB_RGU=0~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0~-DM8~-DG1ON=0 SAFE0 -m300000~-c1~-w22"
)
if [ "${MODEL_FULL:-0}" = 1 ]; then
  # the long run: a reset and a delayed reply in one run, with drift (about 5 min alone)
  # hold.pml with both goroutines of A and every fault of a kind together (a few minutes each)
  specs+=("hold-full-renew pass 600 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=1~-DB_ROLE=0~-DB_CUT=0~-DB_FO=0~-DB_LSET=0~-DB_CLOSE=0 SAFE2 -m300000~-c1~-w27"
          "hold-full-failover pass 900 -DB_LREQ=0~-DB_LREP=0~-DB_DLY=0~-DB_RGU=0~-DB_ROLE=1~-DB_CUT=1~-DB_FO=1~-DB_LSET=0~-DB_CLOSE=0 SAFE2 -m300000~-c1~-w27")
  specs=("drift-reset  pass 900 -DB_LREQ=0~-DB_LREP=0                            SAFE2 -m400000~-c1~-w27" "${specs[@]}")
fi
pids=()
names=()
out="$work/results"
mkdir -p "$out"
i=0
for spec in "${specs[@]}"; do
  read -r name expect to dflags cf pflags <<<"$spec"
  if [ -n "${MODEL_ONLY:-}" ] && ! [[ $name =~ $MODEL_ONLY ]]; then continue; fi
  if [ $skiplong = 1 ] && [[ $name =~ $LONG ]]; then continue; fi
  dflags=${dflags//\~/ }
  [ "$dflags" = "(none)" ] && dflags=
  pflags=${pflags//\~/ }
  case $cf in
  SAFE2) cflags="-O2 $SAFE" ;;              # big searches: optimise
  SAFE0) cflags="-O0 $SAFE" ;;              # small searches: compile fast
  LIVE) cflags="-O0 -DNOREDUCE -DNFAIR=3" ;;
  EXACT2) cflags="-O2 -DSAFETY" ;;          # small models: exact state storage
  EXACT0) cflags="-O0 -DSAFETY" ;;
  esac
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
  run "$name" "$expect" "$to" "$dflags" "$cflags" "$pflags" >"$out/$i.$name" 2>&1 &
  pids+=($!)
  names+=("$i.$name")
  i=$((i + 1))
done
status=0
for j in "${!pids[@]}"; do
  if ! wait "${pids[$j]}"; then status=1; fi
  cat "$out/${names[$j]}"
done
# Coverage: a source line of G, Settler, Redis, Watchdog or Clock counts as reached
# when some safety run reached some statement compiled from it (inline
# code is compiled once per call site; a call site may be unreachable by
# construction, e.g. client B never re-enters, so never gets MISMATCH).
if [ $skiplong = 0 ] && ls "$work"/tables.* >/dev/null 2>&1; then
  cover=$(for t in "$work"/tables.*; do
      n=${t##*/tables.}
      awk -v cfg="$n" '
        FNR == 1 { f++ }
        f == 1 && /^proctype / { p = $2; next }
        f == 1 && /-\(tr/ && /rlock.pml:[0-9]+/ {
          if (p !~ /^(G|Redis|Watchdog|Clock|Settler)$/) next
          match($0, /state +[0-9]+/); st = substr($0, RSTART, RLENGTH); sub(/state +/, "", st)
          match($0, /rlock.pml:[0-9]+/); ln = substr($0, RSTART + 10, RLENGTH - 10)
          print "ALL", p ":" ln
          line[p ":" st] = ln
          next }
        f == 2 && /unreached in proctype/ { q = $4; next }
        f == 2 && /rlock.pml:[0-9]+, state [0-9]+/ {
          match($0, /state [0-9]+/); st = substr($0, RSTART + 6, RLENGTH - 6); unr[q ":" st] = 1 }
        END { for (k in line) if (!(k in unr)) { split(k, a, ":"); print "REACHED", a[1] ":" line[k] } }
      ' "$t" "$work/pan.$n"
    done | sort -u)
  missing=$(comm -23 <(echo "$cover" | awk '$1 == "ALL" {print $2}' | sort -u) \
                     <(echo "$cover" | awk '$1 == "REACHED" {print $2}' | sort -u))
  total=$(echo "$cover" | awk '$1 == "ALL"' | wc -l)
  if [ -n "$missing" ]; then
    echo "FAIL source lines of G, Settler, Redis, Watchdog, Clock reached by no safety run:"
    for m in $missing; do echo "  $m: $(sed -n "${m#*:}p" "$here/rlock.pml" | sed 's/^ *//')"; done
    status=1
  else
    echo "ok   coverage: all $total source lines of G, Settler, Redis, Watchdog and Clock were reached by some safety run"
  fi
fi
# Coverage of replicas.pml and kinds.pml: a source line of any process
# counts as reached when some pass run of that model reached a statement
# compiled from it; a line reached by none fails, unless it carries the
# marker "never reached:" with the reason (README).
for m in replicas kinds; do
  [ $skiplong = 0 ] || break
  ls "$work"/xtables.* >/dev/null 2>&1 || break
  cover=$(for t in "$work"/xtables.*; do
      n=${t##*/xtables.}
      case $n in rep-*) [ $m = replicas ] || continue ;; kinds-*) [ $m = kinds ] || continue ;; esac
      awk -v M="$m.pml" '
        FNR == 1 { f++ }
        f == 1 && /^proctype / { p = $2; next }
        f == 1 && /-\(tr/ && index($0, M ":") {
          match($0, /state +[0-9]+/); st = substr($0, RSTART, RLENGTH); sub(/state +/, "", st)
          i = index($0, M ":"); ln = substr($0, i + length(M) + 1); sub(/[^0-9].*/, "", ln)
          print "ALL", ln
          line[p ":" st] = ln
          next }
        f == 2 && /unreached in proctype/ { q = $4; next }
        f == 2 && index($0, M ":") && /state [0-9]+/ {
          match($0, /state [0-9]+/); st = substr($0, RSTART + 6, RLENGTH - 6); unr[q ":" st] = 1 }
        END { for (k in line) if (!(k in unr)) print "REACHED", line[k] }
      ' "$t" "$work/xpan.$n"
    done | sort -u)
  [ -n "$cover" ] || continue
  missing=$(comm -23 <(echo "$cover" | awk '$1 == "ALL" {print $2}' | sort -u) \
                     <(echo "$cover" | awk '$1 == "REACHED" {print $2}' | sort -u) | sort -n)
  total=$(echo "$cover" | awk '$1 == "ALL"' | wc -l)
  bad=0; allowed=0
  for l in $missing; do
    if sed -n "${l}p" "$here/$m.pml" | grep -q "never reached:"; then allowed=$((allowed + 1)); continue; fi
    [ $bad = 0 ] && echo "FAIL source lines of $m.pml reached by no pass run:"
    echo "  $l: $(sed -n "${l}p" "$here/$m.pml" | sed 's/^ *//')"
    bad=1
  done
  if [ $bad = 1 ]; then status=1
  else echo "ok   coverage: $((total - allowed)) of $total source lines of $m.pml reached by some pass run; $allowed marked \"never reached\" (README)"; fi
done
took=$(( $(date +%s) - start ))
echo "check.sh: ${took}s in all"
if [ $status -ne 0 ]; then echo "check.sh: FAILED"; else echo "check.sh: all checks passed"; fi
if [ $status -eq 0 ] && [ $mode = stamp ] && [ "$(digest)" != "$digest" ]; then
  echo "check.sh: the inputs changed during the run: no stamp written"; status=1
fi
if [ $status -eq 0 ] && [ $mode = stamp ]; then
  printf 'digest %s\nchecked %s, every check passed in %ss (%s)\n' "$digest" "$(date -u +%Y-%m-%d)" "$took" "$(spin -V)" >"$here/stamp"
  echo "check.sh: wrote docs/model/stamp"
fi
exit $status
