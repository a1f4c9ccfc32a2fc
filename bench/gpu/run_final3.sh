#!/usr/bin/env bash
# One device call (2 GPUs): the probes (func.call, i1, integers), --check of every example,
# small transformer and upstream program, then small-size parity with raw NCCL: ROUNDS rounds
# (default 20), each raw NCCL (one event per call, like a program's) for all_reduce,
# all_gather and reduce_scatter at 1 MiB, then commlir's program of each, alternating so that
# drift hits both alike; 2000 calls after 50 warm-up per run; plus 6 rounds at 4 MiB.
#   bench/gpu/run_final3.sh [DIR] [OUT] [ROUNDS]
# Parity lines: RUN,raw|commlir,OP,MIB,GPU us/call
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
rounds=${3:-20}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
check_probes
say "== --check"
check_programs
parity() {  # parity RUN MIB
  timeout 60 "$R" --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib "$2" \
    --bench-iters 2000 --warmup 50 --buffers registered --baseline-events 2>&1 |
    awk -v run="$1" -v mib="$2" '/^baseline / { print run ",raw," $2 "," mib "," $6 } /error/ { print run ",error," $0 }' | tee -a "$log"
  for op in all_reduce all_gather reduce_scatter; do
    o=$(timeout 60 "$R" "$dir/colls/${op}_${2}MiB.commlir" --backend cuda --ranks 2 --bench-iters 2000 --warmup 50 2>&1)
    t=$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us per call.*/\1/p')
    say "$1,commlir,$op,$2,${t:-?}$(echo "$o" | grep -m1 -i error | sed 's/^/,/')"
  done
}
say "== parity 1 MiB ($rounds rounds)"
start=$SECONDS
for run in $(seq "$rounds"); do
  [ $((SECONDS - start)) -gt 300 ] && say "stopped at $((SECONDS - start)) s" && break
  parity "$run" 1
done
say "== parity 4 MiB"
for run in $(seq 6); do parity "$run" 4; done
say "== done"; date -u | tee -a "$log"
