#!/usr/bin/env bash
# TP and FSDP transformer step time at sizes other than the benchmark's (after
# bench/gpu/prepare_step_sizes.sh DIR), 2 GPUs, one call: per size, commlir's programs (30 calls
# after 5 warm-up, `time(events)` and the device memory peak) and PyTorch eager and
# torch.compile of the same programs (bench/gpu/steps_transformer.py, same call).
#   bench/gpu/run_step_sizes.sh [DIR] [OUT]
# Lines: commlir,PROGRAM,time(events): T us,device memory: peak P MiB / MODE,PROG,mean,median,peak.
set -uo pipefail
dir=${1:-.gpubench-sizes}
out=${2:-${OUT:-gpu-out}}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
for a in "$dir"/tp_*.full.commlir; do
  size=$(basename "$a" .full.commlir); size=${size#tp_}
  IFS=x read -r l t h f <<<"$size"
  say "== $size (layers x tokens x hidden x ffn)"
  time_steps commlir tp_$size.full tp_$size.sp fsdp_$size.full fsdp_$size.bucket fsdp_$size.fold fsdp_$size.plain
  say "\$ python3 steps_transformer.py $l $t $h $f 30"
  PYTHONUNBUFFERED=1 timeout ${STEPS_TIMEOUT:-300} python3 "$here/steps_transformer.py" "$l" "$t" "$h" "$f" 30 2>&1 | grep -vi warn | tee -a "$log"
done
say "== done"; date -u | tee -a "$log"
