#!/usr/bin/env bash
# One device call (2 GPUs): like-for-like collective parity with and without `--cuda-graph`
# (one captured call replayed), and `--check` of the graph path.
#   bench/gpu/run_graph.sh [DIR]      (DIR from bench/gpu/prepare.sh)
set -uo pipefail
dir=${1:-.gpubench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
R="$dir/commlir-run"; C="$dir/colls"
nvidia-smi -L
timeout 120 $R --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 1,4,16,64 --bench-iters 100 --warmup 10 | grep registered
for op in all_reduce all_gather reduce_scatter; do for m in 1 4 16 64; do
  for fl in "" --cuda-graph; do
    o=$(timeout 60 $R $C/${op}_${m}MiB.commlir --backend cuda --ranks 2 --bench-iters 100 --warmup 10 $fl 2>&1)
    echo "commlir,$op,${m}MiB,${fl:-plain},$(echo "$o" | grep 'time(events)' | sed 's/ per call.*//')$(echo "$o" | grep -m1 -i error)"
  done
done; done
for op in all_reduce all_gather reduce_scatter; do
  echo "\$ commlir-run colls/${op}_1MiB.commlir --cuda-graph --check"
  timeout 60 $R $C/${op}_1MiB.commlir --backend cuda --ranks 2 --cuda-graph --check 2>&1 | grep -E "check|error"
done
echo "\$ commlir-run colls/all_reduce_4MiB.commlir --cuda-graph --no-slots --check --bench-iters 20 --warmup 5"
timeout 60 $R $C/all_reduce_4MiB.commlir --backend cuda --ranks 2 --cuda-graph --no-slots --check --bench-iters 20 --warmup 5 2>&1 | grep -E "check|error|time\(events"
for t in tp4_small.full fsdp4_small.full; do
  p=${t%%.*}
  echo "\$ commlir-run tf/$t.commlir --cuda-graph --check --check-against tf/$p.mlir"
  timeout 90 $R $dir/tf/$t.commlir --backend cuda --ranks 2 --cuda-graph --check --check-against $dir/tf/$p.mlir 2>&1 | grep -E "check: |error"
done
for t in tp4_big.full fsdp4_big.full; do
  for fl in "" --cuda-graph; do
    o=$(timeout 120 $R $dir/tf/$t.commlir --backend cuda --ranks 2 --bench-iters 30 --warmup 5 $fl 2>&1)
    echo "commlir,$t,${fl:-plain},$(echo "$o" | grep 'time(events)' | sed 's/ per call.*//')$(echo "$o" | grep -m1 -i error)"
  done
done
