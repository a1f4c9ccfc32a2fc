#!/usr/bin/env bash
# Builds, where LLVM and the Python environment are (`make setup`), what run_llama_block.sh
# needs on the GPU machine, into DIR (default .gpubench-llama): the stripped runner; the Llama
# block of python/commlir_torch/models.py exported by `python -m commlir_torch export` at
# realistic size (dim 4096, 32 heads, MLP 11008, sequence 4096, batch 1, bf16) for TP 1 and 2
# (and 2 with --sp, and that on a symm_mem group through coll-fuse-matmul), each through the full pipeline into an artifact; and a small block
# (dim 256, 4 heads, MLP 512, sequence 128) with its inputs for `--check` (the sim backend is
# the reference, too slow at full size).
#   bench/gpu/prepare_llama_block.sh [DIR]
set -euo pipefail
dir=${1:-.gpubench-llama}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cargo build --release -p commlir-run -p commlir-translate
rm -rf "$dir" && mkdir -p "$dir"
cp target/release/commlir-run "$dir/" && strip "$dir/commlir-run"
cat >"$dir/llama_sizes.py" <<'PY'
from commlir_torch.models import LlamaBlock
def big():
    return LlamaBlock(dim=4096, n_heads=32, hidden=11008, seq=4096, batch=1)
def small():
    return LlamaBlock(dim=256, n_heads=4, hidden=512, seq=128, batch=1)
PY
py() { PYTHONPATH="$root/python:$dir" .venv/bin/python -m commlir_torch "$@"; }
pipe='builtin.module(func.func(coll-to-comm,comm-overlap-schedule,comm-plan-pools))'
# tp2sp_fused: symm_mem group, the SP all-gathers and reduce-scatters split into their
# matmuls by coll-fuse-matmul (async tensor parallelism).
fused='builtin.module(func.func(coll-fuse-matmul,coll-to-comm,comm-overlap-schedule,comm-plan-pools))'
tr=target/release/commlir-translate
for cfg in "tp1:--tp 1" "tp2:--tp 2" "tp2sp:--tp 2 --sp" "tp2sp_fused:--tp 2 --sp --symm-mem"; do
  name=${cfg%%:*}; flags=${cfg#*:}
  pipe_c=$pipe; [ "$name" = tp2sp_fused ] && pipe_c=$fused
  # shellcheck disable=SC2086
  py export "$dir/llama_sizes.py:big" $flags --dtype bf16 --no-rank-check -o "$dir/big_$name.mlir"
  $tr "$dir/big_$name.mlir" --pass-pipeline="$pipe_c" --emit=artifact -o "$dir/big_$name.commlir"
  # shellcheck disable=SC2086
  py export "$dir/llama_sizes.py:small" $flags --dtype bf16 -o "$dir/small_$name.mlir" \
    --inputs-out "$dir/small_${name}_in_{rank}.safetensors"
  $tr "$dir/small_$name.mlir" --pass-pipeline="$pipe_c" --emit=artifact -o "$dir/small_$name.commlir"
done
# compute.attention's lowering against the sim on every path (bench/gpu/attention_check.mlir).
cp bench/gpu/attention_check.mlir "$dir/"
$tr "$dir/attention_check.mlir" --emit=artifact -o "$dir/attention_check.commlir"
ls -la "$dir"
