#!/usr/bin/env bash
# Builds, on a machine with LLVM, what the bench/gpu/run_*.sh scripts need on the GPU machine
# (all but run_symm_kernels.sh, which has prepare_symm.sh), into DIR (default .gpubench): the
# stripped runner; every example through the full pipeline (examples/) and through
# coll-to-comm + comm-plan-pools only (examples_nosched/), with its source (src/); the upstream
# MLIR programs (upstream/); the probes (probe/); single-collective programs (colls/, their
# sources colls_src/, and colls_symm/ on a symm_mem group); the 4-layer transformers (tf/, and
# tf_symm/ for TP on a symm_mem group). Copy DIR and bench/gpu to the GPU machine.
#   bench/gpu/prepare.sh [DIR]
set -euo pipefail
dir=${1:-.gpubench}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cargo build --release -p commlir-run -p commlir-translate
cargo build --release -p commlir-passes --example gen_transformer
rm -rf "$dir" && mkdir -p "$dir"/{examples,examples_nosched,colls,src,tf}
cp target/release/commlir-run "$dir/" && strip "$dir/commlir-run"
full='builtin.module(func.func(coll-to-comm,comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools))'
plain='builtin.module(func.func(coll-to-comm,comm-plan-pools))'
tr=target/release/commlir-translate
for f in examples/*.mlir; do
  b=$(basename "$f" .mlir)
  cp "$f" "$dir/src/"
  $tr "$f" --pass-pipeline="$full" --emit=artifact -o "$dir/examples/$b.commlir"
  $tr "$f" --pass-pipeline="$plain" --emit=artifact -o "$dir/examples_nosched/$b.commlir"
done
# Upstream MLIR programs (shard + arith in custom syntax), read through real MLIR: the
# converted program (the sim reference) and the artifact of the full pipeline.
mkdir -p "$dir/upstream"
conv='shard-to-coll,func.func(arith-to-compute)'
for f in examples/upstream/*.mlir; do
  b=$(basename "$f" .mlir)
  $tr --import-mlir "$f" --pass-pipeline="builtin.module($conv)" -o "$dir/upstream/$b.ref.mlir"
  $tr --import-mlir "$f" --emit=artifact -o "$dir/upstream/$b.commlir" \
    --pass-pipeline="builtin.module($conv,func.func(coll-to-comm,comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools))"
done
# Probes (run_check.sh): the transcendental ones run on 1 rank with no collective; the others
# through the full pipeline.
mkdir -p "$dir/probe"
for f in bench/gpu/probe/*.mlir; do
  b=$(basename "$f" .mlir)
  cp "$f" "$dir/probe/"
  case $b in
    transcendental*) $tr "$f" --emit=artifact -o "$dir/probe/$b.commlir" ;;
    *) $tr "$f" --pass-pipeline="$full" --emit=artifact -o "$dir/probe/$b.commlir" ;;
  esac
done
bench/gpu/gen_collectives.sh "$dir/colls_src" 2
mkdir -p "$dir/colls_symm"
for f in "$dir"/colls_src/*.mlir; do
  b=$(basename "$f" .mlir)
  $tr "$f" --pass-pipeline="$full" --emit=artifact -o "$dir/colls/$b.commlir"
  sed 's/{size = 2 : i64}/{size = 2 : i64, symm_mem}/' "$f" >"$dir/colls_symm/$b.mlir"
  $tr "$dir/colls_symm/$b.mlir" --pass-pipeline="$full" --emit=artifact -o "$dir/colls_symm/$b.commlir"
done
# Transformer step-time programs (run_steps.sh): 4 layers, TP and FSDP, at the benchmark size
# (BIG, not simulated) and at a size the sim checks in seconds (SMALL); TP also on a symm_mem
# group (run_symm_windows.sh).
gen=target/release/examples/gen_transformer
overlap='builtin.module(func.func(coll-to-comm,comm-overlap-schedule,comm-plan-pools))'
bucketed='builtin.module(func.func(coll-bucket,coll-to-comm,comm-overlap-schedule,comm-plan-pools))'
for p in tp fsdp; do
  for sz in "big 2048 4096 16384" "small 64 256 1024"; do
    set -- $sz
    $gen $p 4 $2 $3 $4 >"$dir/tf/${p}4_$1.mlir"
    $tr "$dir/tf/${p}4_$1.mlir" --pass-pipeline="$full" --emit=artifact -o "$dir/tf/${p}4_$1.full.commlir"
    $tr "$dir/tf/${p}4_$1.mlir" --pass-pipeline="$plain" --emit=artifact -o "$dir/tf/${p}4_$1.plain.commlir"
    # comm-overlap-schedule (and with coll-bucket first): the scheduler of docs/passes.
    $tr "$dir/tf/${p}4_$1.mlir" --pass-pipeline="$overlap" --emit=artifact -o "$dir/tf/${p}4_$1.overlap.commlir"
    $tr "$dir/tf/${p}4_$1.mlir" --pass-pipeline="$bucketed" --emit=artifact -o "$dir/tf/${p}4_$1.bucket.commlir"
  done
done
# FSDP with @dp on a symm_mem group (run_steps.sh), through the bucketed pipeline: with NCCL's
# all-gathers (symm), and with copy engines pushing them into the peer-mapped pools (push,
# COMMLIR_PUSH_ALL_GATHER=1).
for sz in big small; do
  sed 's/coll.group @dp {size = 2 : i64}/coll.group @dp {size = 2 : i64, symm_mem}/' \
    "$dir/tf/fsdp4_$sz.mlir" >"$dir/tf/fsdp4_${sz}_symm.mlir"
  $tr "$dir/tf/fsdp4_${sz}_symm.mlir" --pass-pipeline="$bucketed" --emit=artifact -o "$dir/tf/fsdp4_$sz.symm.commlir"
  COMMLIR_PUSH_ALL_GATHER=1 $tr "$dir/tf/fsdp4_${sz}_symm.mlir" --pass-pipeline="$bucketed" \
    --emit=artifact -o "$dir/tf/fsdp4_$sz.push.commlir"
done
# FSDP with the backward stand-in's scales folded into its reduce-scatters (NCCL's
# pre-multiplied sum; fold): coll-fold-prescale in front of the bucketed pipeline.
folded='builtin.module(func.func(coll-fold-prescale,coll-bucket,coll-to-comm,comm-overlap-schedule,comm-plan-pools))'
for sz in big small; do
  $tr "$dir/tf/fsdp4_$sz.mlir" --pass-pipeline="$folded" --emit=artifact -o "$dir/tf/fsdp4_$sz.fold.commlir"
done
mkdir -p "$dir/tf_symm"
for sz in "big 2048 4096 16384" "small 64 256 1024"; do
  set -- $sz
  $gen tp 4 $2 $3 $4 bf16 symm >"$dir/tf_symm/tp4_$1.mlir"
  $tr "$dir/tf_symm/tp4_$1.mlir" --pass-pipeline="$full" --emit=artifact -o "$dir/tf_symm/tp4_$1.full.commlir"
done
du -sh "$dir"
