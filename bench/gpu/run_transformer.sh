#!/usr/bin/env bash
# One device call (2 GPUs): the 4-layer TP and FSDP transformer step times (commlir scheduled /
# unscheduled, PyTorch eager / torch.compile), --check of the same programs at a small size,
# and the small-size collective parity (commlir per-op events vs raw NCCL per-call events).
# Expects bench/gpu/prepare.sh's DIR (default .gpubench); writes OUT (default ./gpu-out).
#   bench/gpu/run_transformer.sh [DIR] [OUT]
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
run="$dir/commlir-run"
log="$out/log.txt"
say() { echo "$@" | tee -a "$log"; }
say "== machine"; nvidia-smi -L 2>&1 | tee -a "$log"

say "== --check, 4-layer transformers at 64x256x1024 (the big ones are not simulated)"
for p in tp fsdp; do
  for v in full plain; do
    say "\$ commlir-run tf/${p}4_small.$v.commlir --backend cuda --ranks 2 --check --check-against tf/${p}4_small.mlir"
    timeout 60 "$run" "$dir/tf/${p}4_small.$v.commlir" --backend cuda --ranks 2 --check --check-against "$dir/tf/${p}4_small.mlir" 2>&1 | grep -E 'check|error' | tee -a "$log"
  done
done

say "== step times, 4 layers, tokens 2048, hidden 4096, ffn 16384, bf16"
for p in tp fsdp; do
  for v in full plain; do
    o=$(timeout 120 "$run" "$dir/tf/${p}4_big.$v.commlir" --backend cuda --ranks 2 --bench-iters ${ITERS:-50} --warmup 5 2>>"$log")
    echo "$o" | grep -E '^(time|op )' >>"$log"
    say "commlir,$p,$v,$(echo "$o" | sed -n 's/^time: \([0-9.]*\) us.*/\1/p')"
  done
done
PYTHONUNBUFFERED=1 timeout ${STEPS_TIMEOUT:-240} python3 "$here/steps_transformer.py" 4 2048 4096 16384 ${ITERS:-50} 2>&1 | grep -vi warn | tee -a "$log"

say "== small-size parity: commlir per-op events vs raw NCCL per-call events"
echo "op,bytes,us_nccl,busbw_nccl_GBps" >"$out/commlir_colls.csv"
for op in all_reduce all_gather reduce_scatter; do
  for mib in 1 4 16 1024; do
    o=$(timeout 60 "$run" "$dir/colls/${op}_${mib}MiB.commlir" --backend cuda --ranks 2 --bench-iters 50 --warmup 5 2>>"$log")
    c=$(echo "$o" | grep "comm $op" | sed -n 's/.*: \([0-9.]*\) us, algbw.*busbw \([0-9.]*\) GB.*/\1,\2/p')
    echo "$op,$((mib * 1048576)),$c" | tee -a "$out/commlir_colls.csv" "$log"
  done
done
PYTHONUNBUFFERED=1 timeout 120 python3 "$here/nccl_torch.py" 2 50 5 1,4,16,1024 2>&1 | grep -vi warn | tee "$out/torch_colls.csv" | tee -a "$log"
say "== done"
