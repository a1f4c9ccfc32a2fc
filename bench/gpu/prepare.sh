#!/usr/bin/env bash
# Builds, on a machine with LLVM, everything bench/gpu/run_all.sh needs on the GPU machine,
# into DIR (default .gpubench, listed in .git/info/exclude so that it travels only by carry).
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
bench/gpu/gen_collectives.sh /tmp/commlir-colls 2
for f in /tmp/commlir-colls/*.mlir; do
  $tr "$f" --pass-pipeline="$full" --emit=artifact -o "$dir/colls/$(basename "$f" .mlir).commlir"
done
# Transformer step-time programs (bench/gpu/run_transformer.sh): 4 layers, TP and FSDP, at the
# benchmark size (BIG, not simulated) and at a size the sim checks in seconds (SMALL).
gen=target/release/examples/gen_transformer
for p in tp fsdp; do
  for sz in "big 2048 4096 16384" "small 64 256 1024"; do
    set -- $sz
    $gen $p 4 $2 $3 $4 >"$dir/tf/${p}4_$1.mlir"
    $tr "$dir/tf/${p}4_$1.mlir" --pass-pipeline="$full" --emit=artifact -o "$dir/tf/${p}4_$1.full.commlir"
    $tr "$dir/tf/${p}4_$1.mlir" --pass-pipeline="$plain" --emit=artifact -o "$dir/tf/${p}4_$1.plain.commlir"
  done
done
du -sh "$dir"
