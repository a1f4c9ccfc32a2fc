#!/usr/bin/env bash
# `--cuda-graph` (one captured call, replayed) on 2 GPUs: single collectives at 1-64 MiB
# against raw NCCL, with and without graph replay (100 calls after 10 warm-up); `--check` of
# the graph path (single collectives, the two-graph `--no-slots` path, examples, upstream
# programs, small transformers); the 4-layer transformer steps with and without it.
#   bench/gpu/run_cuda_graph.sh [DIR]      (DIR from bench/gpu/prepare.sh)
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
# colls_src/: the single-collective sources (bench/gpu/gen_collectives.sh) for --check-against.
for op in all_reduce all_gather reduce_scatter; do for fl in "" --cuda-graph; do
  echo "\$ commlir-run colls/${op}_1MiB.commlir --check --check-against colls_src/${op}_1MiB.mlir $fl"
  timeout 60 $R $C/${op}_1MiB.commlir --backend cuda --ranks 2 --check --check-against $dir/colls_src/${op}_1MiB.mlir $fl 2>&1 | grep -E "check: |error"
done; done
for fl in "" --cuda-graph; do
  echo "\$ commlir-run colls/all_reduce_4MiB.commlir --no-slots --check --check-against colls_src/all_reduce_4MiB.mlir --bench-iters 20 --warmup 5 $fl"
  timeout 60 $R $C/all_reduce_4MiB.commlir --backend cuda --ranks 2 --no-slots --check --check-against $dir/colls_src/all_reduce_4MiB.mlir --bench-iters 20 --warmup 5 $fl 2>&1 | grep -E "check: |error|time\(events"
done
for a in "$dir"/examples/*.commlir "$dir"/upstream/*.commlir; do
  b=$(basename "$a" .commlir); src="$dir/src/$b.mlir"; [ -f "$src" ] || src="$dir/upstream/$b.ref.mlir"
  echo "\$ commlir-run $b.commlir --check"
  timeout 60 $R "$a" --backend cuda --ranks 2 --check --check-against "$src" 2>&1 | grep -E "check: |error"
done
for t in tp4_small.full fsdp4_small.full; do for fl in "" --cuda-graph; do
  p=${t%%.*}
  echo "\$ commlir-run tf/$t.commlir --check --check-against tf/$p.mlir $fl"
  timeout 90 $R $dir/tf/$t.commlir --backend cuda --ranks 2 --check --check-against $dir/tf/$p.mlir $fl 2>&1 | grep -E "check: |error"
done; done
for t in tp4_big.full fsdp4_big.full; do
  for fl in "" --cuda-graph; do
    o=$(timeout 120 $R $dir/tf/$t.commlir --backend cuda --ranks 2 --bench-iters 30 --warmup 5 $fl 2>&1)
    echo "commlir,$t,${fl:-plain},$(echo "$o" | grep 'time(events)' | sed 's/ per call.*//')$(echo "$o" | grep -m1 -i error)"
  done
done
