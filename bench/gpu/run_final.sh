#!/usr/bin/env bash
# One device call (2 GPUs), eleventh run: accuracy probes of the bf16/f32/f64 transcendental
# kernels, --check of every example and small transformer, the 1 MiB collectives with more
# calls (1000 per run, three runs, raw NCCL before each), and the TP/FSDP step times.
#   bench/gpu/run_final.sh [DIR] [OUT]     (DIR from bench/gpu/prepare.sh plus DIR/probe)
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
say "== accuracy probes"
for t in bf16 f32 f64; do check_probe "transcendental_$t" 1; done
say "== --check"
check_programs
say "== collectives, 1000 calls per run, three runs"
for rep in 1 2 3; do
  timeout 120 "$R" --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 1,4 --bench-iters 1000 --warmup 20 --buffers registered 2>&1 | sed 's/ (1000 calls.*//' | tee -a "$log"
  for op in all_reduce all_gather reduce_scatter; do for mib in 1 4; do
    o=$(timeout 60 "$R" "$dir/colls/${op}_${mib}MiB.commlir" --backend cuda --ranks 2 --bench-iters 1000 --warmup 20 2>&1)
    say "commlir,$rep,$op,${mib}MiB,$(echo "$o" | grep '^time' | sed 's/ per call.*//' | tr '\n' ' ')$(echo "$o" | grep -m1 -i error)"
  done; done
done
say "== steps"
for t in tf/tp4_big.full tf/fsdp4_big.full; do
  o=$(timeout 120 "$R" "$dir/$t.commlir" --backend cuda --ranks 2 --bench-iters 30 --warmup 5 2>&1)
  say "commlir,$t,$(echo "$o" | grep '^time(events)' | sed 's/ per call.*//')$(echo "$o" | grep -m1 -i error)"
done
say "== done"; date -u | tee -a "$log"
