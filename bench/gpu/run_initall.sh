#!/usr/bin/env bash
# One short device call (2 GPUs): the runner with world communicators from ncclCommInitAll —
# --check of the examples and small transformers, the collectives at 1/4/16 MiB against raw
# NCCL, and one process per GPU through the file rendezvous (ncclCommInitRank, unchanged).
#   bench/gpu/run_initall.sh [DIR]
set -uo pipefail
dir=${1:-.gpubench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
R="$dir/commlir-run"
for a in "$dir"/examples/*.commlir; do b=$(basename $a .commlir); echo "check $b: $(timeout 60 $R $a --backend cuda --ranks 2 --check --check-against $dir/src/$b.mlir 2>&1 | grep -E '^check|error')"; done
for t in tp4_small fsdp4_small; do echo "check $t: $(timeout 60 $R $dir/tf/$t.full.commlir --backend cuda --ranks 2 --check --check-against $dir/tf/$t.mlir 2>&1 | grep -E '^check|error')"; done
timeout 120 $R --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 1,4,16 --bench-iters 1000 --warmup 20 --buffers registered 2>&1 | sed 's/ (1000 calls.*//'
for op in all_reduce all_gather reduce_scatter; do for mib in 1 4 16; do
  o=$(timeout 60 $R $dir/colls/${op}_${mib}MiB.commlir --backend cuda --ranks 2 --bench-iters 1000 --warmup 20 2>&1)
  echo "commlir,$op,${mib}MiB,$(echo "$o" | grep '^time' | sed 's/ per call.*//' | tr '\n' ' ')$(echo "$o" | grep -m1 -i error)"
done; done
# One process per GPU (file rendezvous): both ranks' check lines.
rd=$(mktemp -d)
for r in 0 1; do
  WORLD_SIZE=2 RANK=$r LOCAL_RANK=$r COMMLIR_RDZV_FILE=$rd/id timeout 90 $R $dir/examples/tp_mlp.commlir --backend cuda --check --check-against $dir/src/tp_mlp.mlir > $rd/out$r 2>&1 &
done
wait
for r in 0 1; do echo "process rank $r: $(grep -E '^check|error' $rd/out$r | head -2)"; done
