#!/usr/bin/env bash
# One short device call (2 GPUs): is a 1 MiB collective bound by the host? Raw NCCL's and
# commlir's host enqueue time per call next to their GPU time per call (2000 calls, 2 runs).
#   bench/gpu/run_host.sh [DIR]
set -uo pipefail
dir=${1:-.gpubench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
R="$dir/commlir-run"
for rep in 1 2; do
  timeout 120 $R --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 1 --bench-iters 2000 --warmup 50 --buffers registered 2>&1 | sed 's/ (2000 calls.*//'
  for op in all_reduce all_gather reduce_scatter; do
    o=$(timeout 60 $R $dir/colls/${op}_1MiB.commlir --backend cuda --ranks 2 --bench-iters 2000 --warmup 50 2>&1)
    echo "commlir,$op,1MiB,$(echo "$o" | grep '^time(events)' | sed 's/(events around.*host enqueue/host enqueue/; s/; slots.*//')$(echo "$o" | grep -m1 -i error)"
  done
done
