#!/usr/bin/env bash
# symm_mem pools as NCCL symmetric windows (ncclCommWindowRegister), on 2 GPUs.
# --check of the symm_mem example and a symm_mem TP transformer (with the runner's notes, which
# say whether the windows were registered), then ROUNDS rounds (default 4) of 1/4/16 MiB:
# raw NCCL (registered buffers, one event per call), commlir with an nccl pool and commlir with
# a symm_mem pool (DIR/colls_symm), one collective per process, 2000 calls after 50 warm-up;
# and the 4-layer TP step with and without symm_mem.
#   bench/gpu/run_symm_windows.sh [DIR] [OUT] [ROUNDS]
# Lines: RUN,raw|nccl|symm,OP,MIB,GPU us/call
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
rounds=${3:-4}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
say "\$ commlir-run examples/tp_mlp.commlir --check"
timeout 60 "$R" "$dir/examples/tp_mlp.commlir" --backend cuda --ranks 2 --check --check-against "$dir/src/tp_mlp.mlir" 2>&1 | grep -E '^check: |note|error' | tee -a "$log"
say "\$ commlir-run tf_symm/tp4_small.full.commlir --check"
timeout 60 "$R" "$dir/tf_symm/tp4_small.full.commlir" --backend cuda --ranks 2 --check --check-against "$dir/tf_symm/tp4_small.mlir" 2>&1 | grep -E '^check: |note|error' | tee -a "$log"
ours() {  # ours RUN LABEL FILE OP MIB
  o=$(timeout 60 "$R" "$3" --backend cuda --ranks 2 --bench-iters 2000 --warmup 50 2>&1)
  t=$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us per call.*/\1/p')
  say "$1,$2,$4,$5,${t:-?}$(echo "$o" | grep -m1 -i error | sed 's/^/,/')"
}
start=$SECONDS
for run in $(seq "$rounds"); do
  [ $((SECONDS - start)) -gt 330 ] && say "stopped at $((SECONDS - start)) s" && break
  for mib in 1 4 16; do
    for op in all_reduce all_gather reduce_scatter; do
      timeout 60 "$R" --nccl-baseline "$op" --ranks 2 --sizes-mib "$mib" --bench-iters 2000 --warmup 50 \
        --buffers registered --baseline-events 2>&1 |
        awk -v run="$run" -v mib="$mib" '/^baseline / { print run ",raw," $2 "," mib "," $6 }' | tee -a "$log"
      ours "$run" nccl "$dir/colls/${op}_${mib}MiB.commlir" "$op" "$mib"
      ours "$run" symm "$dir/colls_symm/${op}_${mib}MiB.commlir" "$op" "$mib"
    done
  done
done
say "== steps (30 timed calls after 5 warm-up)"
time_steps step tf/tp4_big.full tf_symm/tp4_big.full tf/tp4_big.full tf_symm/tp4_big.full
say "== done in $((SECONDS - start)) s"; date -u | tee -a "$log"
