#!/usr/bin/env bash
# Builds, on a machine with LLVM, what bench/gpu/run_symm_kernels.sh needs on the GPU machine,
# into DIR (default .gpubench-symm; travels by carry):
# the stripped runner; the one-GPU self-test of the symm kernels (G = 2 and 4 virtual ranks); the symm probes (bench/gpu/probe/symm_*.mlir) lowered two ways; one
# bf16 all-reduce program per size, compiled for each all-reduce algorithm (coll-to-comm's
# symm-algo: one-shot, two-shot, auto = chosen by the cost model, nccl); the decode-like TP
# program (bench/gpu/gen_decode.py) at several token counts with and without symm_mem.
#   bench/gpu/prepare_symm.sh [DIR]
set -euo pipefail
dir=${1:-.gpubench-symm}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cargo build --release -p commlir-run -p commlir-translate
cargo build --release -p commlir-runtime --example symm_selftest
rm -rf "$dir" && mkdir -p "$dir"/{probe,ar,decode,selftest}
cp target/release/commlir-run "$dir/" && strip "$dir/commlir-run"
cp target/release/examples/symm_selftest "$dir/" && strip "$dir/symm_selftest"
tr=target/release/commlir-translate
# The kernels at G = 2 and 4 for the one-GPU self-test (virtual ranks).
for g in 2 4; do
  python3 bench/gpu/gen_symm_selftest.py "$g" >"$dir/selftest/selftest_$g.mlir"
  $tr "$dir/selftest/selftest_$g.mlir" --pass-pipeline="builtin.module(func.func(coll-to-comm,comm-plan-pools))" \
    --emit=artifact -o "$dir/selftest/selftest_$g.commlir"
done
full='comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools'
for f in bench/gpu/probe/symm_*.mlir examples/tp_mlp.mlir; do
  b=$(basename "$f" .mlir)
  cp "$f" "$dir/probe/"
  $tr "$f" --pass-pipeline="builtin.module(func.func(coll-to-comm,comm-plan-pools))" --emit=artifact -o "$dir/probe/$b.plain.commlir"
  $tr "$f" --pass-pipeline="builtin.module(func.func(coll-to-comm,$full))" --emit=artifact -o "$dir/probe/$b.full.commlir"
done
for bytes in 4096 16384 65536 262144 1048576 4194304 16777216; do
  n=$((bytes / 2))
  src="$dir/ar/ar_$bytes.mlir"
  cat >"$src" <<MLIR
module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @main(%x: tensor<${n}xbf16>) -> tensor<${n}xbf16> {
    %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<${n}xbf16>
    %y = coll.wait_tensor %r : tensor<${n}xbf16>
    return %y : tensor<${n}xbf16>
  }
}
MLIR
  for algo in one-shot two-shot auto nccl; do
    $tr "$src" --pass-pipeline="builtin.module(func.func(coll-to-comm{symm-algo=$algo},comm-plan-pools))" \
      --emit=artifact -o "$dir/ar/ar_${bytes}_$algo.commlir"
  done
done
for t in 1 8 32 128; do
  for s in 1 0; do
    python3 bench/gpu/gen_decode.py "$t" 4096 4 "$s" >"$dir/decode/decode_${t}_$s.mlir"
    $tr "$dir/decode/decode_${t}_$s.mlir" --pass-pipeline="builtin.module(func.func(coll-to-comm,$full))" \
      --emit=artifact -o "$dir/decode/decode_${t}_$s.commlir"
  done
done
cp bench/gpu/symm_torch.py bench/gpu/decode_torch.py "$dir/"
du -sh "$dir"
