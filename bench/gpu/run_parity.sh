#!/usr/bin/env bash
# Small-size parity with raw NCCL on 2 GPUs, one collective per process on
# both sides (as nccl-tests runs one binary per collective), so that each measurement draws
# its own process start (thread and NCCL proxy placement, which the slow runs track). Per
# round and collective: raw NCCL (registered buffers laid out as the pool, one event per call,
# like a program's) and commlir's program, the order alternating by round; 2000 calls after
# 50 warm-up per run.
#   bench/gpu/run_parity.sh [DIR] [OUT] [ROUNDS] [MIB]
# Lines: RUN,raw|commlir,OP,MIB,GPU us/call
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
rounds=${3:-20}
mib=${4:-1}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
raw() {  # raw RUN OP
  timeout 60 "$R" --nccl-baseline "$2" --ranks 2 --sizes-mib "$mib" \
    --bench-iters 2000 --warmup 50 --buffers registered --baseline-events 2>&1 |
    awk -v run="$1" -v mib="$mib" '/^baseline / { print run ",raw," $2 "," mib "," $6 } /error/ { print run ",error," $0 }' | tee -a "$log"
}
ours() {  # ours RUN OP
  o=$(timeout 60 "$R" "$dir/colls/${2}_${mib}MiB.commlir" --backend cuda --ranks 2 --bench-iters 2000 --warmup 50 2>&1)
  t=$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us per call.*/\1/p')
  say "$1,commlir,$2,$mib,${t:-?}$(echo "$o" | grep -m1 -i error | sed 's/^/,/')"
}
say "== parity $mib MiB, one collective per process ($rounds rounds)"
start=$SECONDS
for run in $(seq "$rounds"); do
  [ $((SECONDS - start)) -gt 400 ] && say "stopped at $((SECONDS - start)) s" && break
  for op in all_reduce all_gather reduce_scatter; do
    if [ $((run % 2)) = 1 ]; then raw "$run" "$op"; ours "$run" "$op"; else ours "$run" "$op"; raw "$run" "$op"; fi
  done
done
say "== done in $((SECONDS - start)) s"; date -u | tee -a "$log"
