#!/usr/bin/env bash
# Builds, on a machine with LLVM, what bench/gpu/run_step_sizes.sh needs on the GPU machine,
# into DIR (default .gpubench-sizes; travels by carry): the stripped runner, steps_transformer.py
# and the TP and FSDP transformers at sizes other than the benchmark's (SIZES, default
# "6x4096x4096x11008 4x1024x8192x28672": layers x tokens x hidden x ffn), bf16, 2 ranks:
#   tp_<size>.full   the full pipeline (Inductor's sequence), no symm_mem;
#   tp_<size>.sp     @tp on symm_mem, coll-sequence-parallel + coll-fuse-matmul in front of it;
#   fsdp_<size>.{full,bucket,fold,plain}: Inductor's sequence; coll-bucket +
#                    comm-overlap-schedule; coll-fold-prescale in front of that (README's
#                    recommended pipeline); coll-to-comm + comm-plan-pools only.
#   bench/gpu/prepare_step_sizes.sh [DIR]
# COMMLIR_BIN=/path/to/target/release uses binaries built elsewhere.
set -euo pipefail
dir=${1:-.gpubench-sizes}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=${COMMLIR_BIN:-target/release}
if [ -z "${COMMLIR_BIN:-}" ]; then
  cargo build --release -p commlir-run -p commlir-translate
  cargo build --release -p commlir-passes --example gen_transformer
fi
gen="$bin/examples/gen_transformer"
[ -x "$gen" ] || gen="$bin/gen_transformer"
tr="$bin/commlir-translate"
rm -rf "$dir" && mkdir -p "$dir"
cp "$bin/commlir-run" "$dir/" && strip "$dir/commlir-run"
sched='comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools'
full="builtin.module(func.func(coll-to-comm,$sched))"
sp="builtin.module(func.func(coll-sequence-parallel,coll-fuse-matmul,coll-to-comm,$sched))"
bucket='builtin.module(func.func(coll-bucket,coll-to-comm,comm-overlap-schedule,comm-plan-pools))'
fold='builtin.module(func.func(coll-fold-prescale,coll-bucket,coll-to-comm,comm-overlap-schedule,comm-plan-pools))'
plain='builtin.module(func.func(coll-to-comm,comm-plan-pools))'
for size in ${SIZES:-6x4096x4096x11008 4x1024x8192x28672}; do
  IFS=x read -r l t h f <<<"$size"
  $gen tp "$l" "$t" "$h" "$f" >"$dir/tp_$size.mlir"
  $gen tp "$l" "$t" "$h" "$f" bf16 symm >"$dir/tp_${size}_symm.mlir"
  $tr "$dir/tp_$size.mlir" --pass-pipeline="$full" --emit=artifact -o "$dir/tp_$size.full.commlir"
  $tr "$dir/tp_${size}_symm.mlir" --pass-pipeline="$sp" --emit=artifact -o "$dir/tp_$size.sp.commlir"
  $gen fsdp "$l" "$t" "$h" "$f" >"$dir/fsdp_$size.mlir"
  for v in full bucket fold plain; do
    $tr "$dir/fsdp_$size.mlir" --pass-pipeline="${!v}" --emit=artifact -o "$dir/fsdp_$size.$v.commlir"
  done
done
echo "$(ls "$dir"/*.commlir | wc -l) artifacts in $dir ($(du -sh "$dir" | cut -f1))"
