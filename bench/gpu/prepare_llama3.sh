#!/usr/bin/env bash
# Builds, where LLVM and the Python environment are (`make setup`), what run_llama3.sh needs
# on the GPU machine, into DIR (default .gpubench-llama3): the stripped runner and, per
# configuration, the Llama-3-8B-shaped training step (bench/gpu/llama3_sizes.py: two layers of
# dim 4096, 32 query heads over 8 key/value heads, FFN 14336, bf16, batch 1 per rank) exported
# with `python -m commlir_torch export --backward` and compiled through README's recommended
# pipeline (with coll-sequence-parallel,coll-fuse-matmul in front for TP), plus the small model
# of the same structure with its exported inputs for `--check` against the sim.
#   bench/gpu/prepare_llama3.sh [DIR] [CONFIGS] [SEQS]
# CONFIGS (default "single"): single (one GPU), fsdpN, tpN (TP with sequence parallelism on a
# symm_mem group), mesh2x2 (FSDP 2 x TP 2 with SP); SEQS default "4096 8192".
set -euo pipefail
dir=${1:-.gpubench-llama3}
configs=${2:-single}
seqs=${3:-4096 8192}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cargo build --release -p commlir-run -p commlir-translate
mkdir -p "$dir"
cp target/release/commlir-run "$dir/" && strip "$dir/commlir-run"
py() { PYTHONPATH="$root/python:$root/bench/gpu" .venv/bin/python -m commlir_torch "$@"; }
rec='coll-fold-prescale,coll-bucket,coll-to-comm,comm-overlap-schedule,comm-plan-pools'
tr=target/release/commlir-translate
for c in $configs; do
  pipe="builtin.module(func.func($rec))"
  case $c in
    single) flags="--tp 1" ;;
    fsdp*) flags="--fsdp ${c#fsdp}" ;;
    tp*) flags="--tp ${c#tp} --sp --symm-mem"
         pipe="builtin.module(func.func(coll-sequence-parallel,coll-fuse-matmul,$rec))" ;;
    mesh2x2) flags="--mesh 2x2 --sp --symm-mem"
             pipe="builtin.module(func.func(coll-sequence-parallel,coll-fuse-matmul,$rec))" ;;
    *) echo "unknown configuration $c" >&2; exit 1 ;;
  esac
  for s in $seqs; do
    # shellcheck disable=SC2086
    py export "bench/gpu/llama3_sizes.py:big_$s" $flags --dtype bf16 --backward --no-rank-check -o "$dir/${c}_$s.mlir"
    $tr "$dir/${c}_$s.mlir" --pass-pipeline="$pipe" --emit=artifact -o "$dir/${c}_$s.commlir"
    $tr "$dir/${c}_$s.mlir" --pass-pipeline="$pipe" --emit=rt -o "$dir/${c}_$s.rt.mlir"
    echo "${c}_$s: $(grep -c 'rt.launch' "$dir/${c}_$s.rt.mlir") kernel launches, $(grep -c 'rt.gemm' "$dir/${c}_$s.rt.mlir") GEMMs, $(grep -c 'rt.attention' "$dir/${c}_$s.rt.mlir") attention calls"
    rm "$dir/${c}_$s.mlir" "$dir/${c}_$s.rt.mlir"
  done
  # shellcheck disable=SC2086
  py export bench/gpu/llama3_sizes.py:small $flags --dtype bf16 --backward -o "$dir/small_$c.mlir" \
    --inputs-out "$dir/small_${c}_in_{rank}.safetensors"
  $tr "$dir/small_$c.mlir" --pass-pipeline="$pipe" --emit=artifact -o "$dir/small_$c.commlir"
done
ls -la "$dir"
