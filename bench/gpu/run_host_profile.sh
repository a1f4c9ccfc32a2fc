#!/usr/bin/env bash
# Where the host time of a 1 MiB collective's call goes, on 2 GPUs (about a minute): 10 runs
# each of commlir's all_gather and reduce_scatter 1 MiB programs and of raw NCCL (+ one event
# per call, what a program records), every run with the host profile on
# (COMMLIR_HOST_PROFILE=1, docs/runtime.md), 2000 calls after 50 warm-up; plus the CPU
# topology. The profile's clock reads inflate its timings slightly: take GPU times per call
# from run_parity.sh.
#   bench/gpu/run_host_profile.sh [DIR]
# Lines: RUN,raw+event|commlir,OP,GPU us/call,host us/call,host profile: ...
set -uo pipefail
dir=${1:-.gpubench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
R="$dir/commlir-run"
echo "cpu0 siblings: $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null); cpu1: $(cat /sys/devices/system/cpu/cpu1/topology/thread_siblings_list 2>/dev/null); model: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
start=$SECONDS
export COMMLIR_HOST_PROFILE=1
for run in $(seq 10); do
  [ $((SECONDS - start)) -gt 150 ] && echo "stopped at ${SECONDS}s" && break
  timeout 60 "$R" --nccl-baseline all_gather,reduce_scatter --ranks 2 --sizes-mib 1 \
    --bench-iters 2000 --warmup 50 --buffers registered --baseline-events 2>&1 |
    awk -v run=$run '/^baseline / { op = $2; gpu = $6; for (i = 1; i <= NF; i++) if ($i == "host") h = $(i + 1); next }
      /^host profile:/ { print run ",raw+event," op "," gpu "," h "," $0 } /error/ { print run ",error," $0 }'
  for op in all_gather reduce_scatter; do
    o=$(timeout 60 "$R" "$dir/colls/${op}_1MiB.commlir" --backend cuda --ranks 2 --bench-iters 2000 --warmup 50 2>&1)
    t=$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us per call.*host enqueue \([0-9.]*\) us.*/\1,\2/p')
    echo "$run,commlir,$op,${t:-?,?}$(echo "$o" | grep -m1 '^host profile:' | sed 's/^/,/')$(echo "$o" | grep -m1 -i error | sed 's/^/,/')"
  done
done
echo "done in $((SECONDS - start)) s"
