#!/usr/bin/env bash
# Step time of the 4-layer TP and FSDP transformers (2048 tokens, hidden 4096, ffn 16384, bf16)
# on 2 GPUs: commlir with the full pipeline (Inductor's sequence), with comm-overlap-schedule
# (alone and after coll-bucket; FSDP also bucketed with its scales folded into the
# reduce-scatters: fold, and on a symm_mem @dp with NCCL's all-gathers and with copy engines
# pushing them: symm, push; all three --checked small first) and with
# coll-to-comm + comm-plan-pools only (`time(events)`,
# 30 calls after 5 warm-up, and the runtime's device memory peak), and PyTorch eager and
# torch.compile of the same programs op for op (bench/gpu/steps_transformer.py, same machine,
# same call).
#   bench/gpu/run_steps.sh [DIR] [OUT]     (DIR from bench/gpu/prepare.sh)
# Lines: commlir,PROGRAM,time(events): T us / MODE,PROGRAM,... (steps_transformer.py)
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
say "== --check of the small FSDP folded (fold) and on a symm_mem group (push, symm)"
for v in fold push symm; do
  src=tf/fsdp4_small_symm.mlir; [ $v = fold ] && src=tf/fsdp4_small.mlir
  say "\$ commlir-run tf/fsdp4_small.$v.commlir --check --check-against $src"
  timeout 60 "$R" "$dir/tf/fsdp4_small.$v.commlir" --backend cuda --ranks 2 --check \
    --check-against "$dir/$src" 2>&1 | grep -E '^check: |error|element' | tee -a "$log"
done
say "== commlir (30 timed calls after 5 warm-up)"
time_steps commlir ${STEP_PROGRAMS:-tf/tp4_big.full tf/tp4_big.overlap tf/tp4_big.plain \
  tf/fsdp4_big.full tf/fsdp4_big.overlap tf/fsdp4_big.bucket tf/fsdp4_big.plain \
  tf/fsdp4_big.symm tf/fsdp4_big.push tf/fsdp4_big.fold}
say "\$ python3 steps_transformer.py 4 2048 4096 16384 30"
PYTHONUNBUFFERED=1 timeout ${STEPS_TIMEOUT:-200} python3 "$here/steps_transformer.py" 4 2048 4096 16384 30 2>&1 | grep -vi warn | tee -a "$log"
say "== done"; date -u | tee -a "$log"
