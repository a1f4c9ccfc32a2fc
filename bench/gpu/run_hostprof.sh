#!/usr/bin/env bash
# One short device call (2 GPUs, about a minute): where the host time of a 1 MiB collective's
# call goes, raw NCCL next to commlir. Per rep (3): raw NCCL (registered buffers, 1 MiB, all
# three collectives, 2000 calls after 50 warm-up; plain, then with an event recorded after
# every call as a program records one) and commlir's three 1 MiB programs, first without
# profiling (clean timings), then once more each with COMMLIR_HOST_PROFILE=1 (the host-time
# breakdown; its own timings are inflated by the clock reads, so compare the clean ones).
#   bench/gpu/run_hostprof.sh DIR        (DIR holds commlir-run and colls/*_1MiB.commlir)
# Lines (µs per call; GPU = events around the loop, host = the loop's enqueue time):
#   REP,baseline[+event],OP,GPU,host
#   REP,commlir,OP,GPU,host
#   REP,prof,baseline+event|commlir,OP,GPU,host,host profile: ...
set -uo pipefail
dir=${1:-.gpubench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
R="$dir/commlir-run"
ops="all_reduce all_gather reduce_scatter"
start=$SECONDS
# The whole script must stay well under the device call's 3 minutes: stop early if not.
late() { [ $((SECONDS - start)) -gt 150 ] && echo "stopped: ${SECONDS}s elapsed" && return 0; return 1; }
# baseline REP LABEL [FLAGS...]: one run of the raw NCCL loops, a line per collective.
baseline() {
  local rep=$1 label=$2
  shift 2
  timeout 40 "$R" --nccl-baseline ${ops// /,} --ranks 2 --sizes-mib 1 --bench-iters 2000 \
    --warmup 50 --buffers registered "$@" 2>&1 | awk -v rep="$rep" -v label="$label" '
    /^baseline / { op = $2; gpu = $6; for (i = 1; i <= NF; i++) if ($i == "host") host = $(i + 1)
                   if (label !~ /^prof/) print rep "," label "," op "," gpu "," host; next }
    /^host profile:/ { print rep "," label "," op "," gpu "," host "," $0; next }
    /error/ { print rep "," label ",error," $0 }'
}
# commlir REP LABEL OP: one run of a compiled program.
commlir() {
  local rep=$1 label=$2 op=$3 o t
  o=$(timeout 40 "$R" "$dir/colls/${op}_1MiB.commlir" --backend cuda --ranks 2 --bench-iters 2000 --warmup 50 2>&1)
  t=$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us per call.*host enqueue \([0-9.]*\) us.*/\1,\2/p')
  echo "$rep,$label,$op,${t:-?,?}$(echo "$o" | grep -m1 '^host profile:' | sed 's/^/,/')$(echo "$o" | grep -m1 -i error | sed 's/^/,/')"
}
for rep in 1 2 3; do
  late && break
  baseline "$rep" baseline
  baseline "$rep" baseline+event --baseline-events
  for op in $ops; do commlir "$rep" commlir "$op"; done
  late && break
  COMMLIR_HOST_PROFILE=1 baseline "$rep" prof,baseline+event --baseline-events
  for op in $ops; do COMMLIR_HOST_PROFILE=1 commlir "$rep" prof,commlir "$op"; done
done
echo "done in $((SECONDS - start)) s"
