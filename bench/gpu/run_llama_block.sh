#!/usr/bin/env bash
# The exported Llama block on the GPUs (DIR from prepare_llama_block.sh; copy DIR, bench/gpu
# and python/ to the GPU machine): `--check` of the small block against the sim backend on its
# exported inputs, then the step time of the realistic block (dim 4096, 32 heads, sequence
# 4096, bf16) through the whole pipeline next to the same module in PyTorch, eager and under
# torch.compile, with the same parallelism (bench/gpu/llama_block_torch.py).
#   bench/gpu/run_llama_block.sh [DIR] [OUT] [CONFIGS]    (CONFIGS: "tp1" on one GPU,
#                                  "tp2 tp2sp tp2sp_fused" on two; default tp1)
set -uo pipefail
dir=${1:-.gpubench-llama}
out=${2:-${OUT:-gpu-out}}
configs=${3:-tp1}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
mkdir -p "$out"
log="$out/llama_block.txt"
R="$dir/commlir-run"
say() { echo "$*" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
if [ -f "$dir/attention_check.commlir" ]; then
  for e in attention flash; do
    say "== compute.attention: every lowering path against the sim (@$e)"
    timeout 300 "$R" "$dir/attention_check.commlir" --backend cuda --ranks 1 --check --entry "$e" \
      --check-against "$dir/attention_check.mlir" 2>&1 | grep -E '^check|error' | tee -a "$log"
  done
fi
for c in $configs; do
  n=1; [ "$c" = tp1 ] || n=2
  sp=""; case $c in tp2sp*) sp=--sp ;; esac
  say "== $c: small block, --check against the sim on the exported inputs"
  timeout 300 "$R" "$dir/small_$c.commlir" --backend cuda --ranks "$n" --check \
    --check-against "$dir/small_$c.mlir" --inputs "$dir/small_${c}_in_{rank}.safetensors" 2>&1 \
    | grep -E '^check|error' | tee -a "$log"
  say "== $c: realistic block (dim 4096, 32 heads, MLP 11008, sequence 4096, bf16), commlir"
  timeout 300 "$R" "$dir/big_$c.commlir" --backend cuda --ranks "$n" --bench-iters 20 --warmup 3 \
    --profile "$out/big_$c.profile.json" 2>&1 | grep -E '^time|peak|memory|error' | tee -a "$log"
  say "== $c: the same module in PyTorch ($n GPU(s))"
  timeout 400 python3 "$here/llama_block_torch.py" --tp "$n" $sp --iters 20 2>&1 | grep -E '^(eager|compile)|Error' \
    | tee -a "$log"
done
date -u | tee -a "$log"
