#!/usr/bin/env bash
# Collective bus bandwidth on 2 GPUs, 1 MiB to 1 GiB, like for like: raw NCCL
# (`commlir-run --nccl-baseline`, registered and plain buffers, back-to-back calls, CUDA
# events around the loop) against commlir's single-collective programs
# (bench/gpu/gen_collectives.sh, full pipeline) timed the same way (`time(events)`), with
# argument/result slots (the default: no copies) and with `--no-slots` (copy in and out).
# 100 calls after 10 warm-up up to 64 MiB, 20 after 5 above; bf16; mean over ranks.
#   bench/gpu/run_busbw.sh [DIR] [OUT]     (DIR from bench/gpu/prepare.sh)
# Lines: `baseline OP BYTES ...` (raw NCCL) and OUT/commlir_colls.csv:
#   op,bytes,slots,us_events
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
say "== raw NCCL (registered and plain buffers)"
timeout 120 "$R" --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 1,4,16,64 --bench-iters 100 --warmup 10 2>&1 | tee -a "$log"
timeout 120 "$R" --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 256,1024 --bench-iters 20 --warmup 5 2>&1 | tee -a "$log"
say "== commlir single-collective programs (time(events)), slots and --no-slots"
csv="$out/commlir_colls.csv"
echo "op,bytes,slots,us_events" >"$csv"
for op in all_reduce all_gather reduce_scatter; do
  for mib in 1 4 16 64 256 1024; do
    if [ $mib -le 64 ]; then it=100; wu=10; else it=20; wu=5; fi
    for sl in slots no-slots; do
      fl=""; [ $sl = no-slots ] && fl=--no-slots
      o=$(timeout 60 "$R" "$dir/colls/${op}_${mib}MiB.commlir" --backend cuda --ranks 2 --bench-iters $it --warmup $wu $fl 2>&1)
      te=$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us.*/\1/p')
      echo "$op,$((mib * 1048576)),$sl,${te:-?}$(echo "$o" | grep -m1 -i error | sed 's/^/,/')" | tee -a "$csv" "$log"
    done
  done
done
say "== done"; date -u | tee -a "$log"
