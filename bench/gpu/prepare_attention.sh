#!/usr/bin/env bash
# Builds, where LLVM is (`make setup`), what run_attention.sh needs on the GPU machine, into
# DIR (default .gpubench-attn): the stripped runner; the cuDNN attention check programs
# (bench/gpu/attention_check.cudnn.mlir) and, per benchmark shape (batch 1, 32 query heads
# over 32 or 8 key/value heads, sequence 4096 and 8192, head dim 128, causal, bf16), the
# training forward (`compute.attention {with_lse}`) and the backward
# (`compute.attention_backward`) compiled to artifacts.
#   bench/gpu/prepare_attention.sh [DIR]
set -euo pipefail
dir=${1:-.gpubench-attn}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cargo build --release -p commlir-run -p commlir-translate
rm -rf "$dir" && mkdir -p "$dir"
cp target/release/commlir-run "$dir/" && strip "$dir/commlir-run"
tr=target/release/commlir-translate
cp bench/gpu/attention_check.cudnn.mlir "$dir/check.mlir"
$tr "$dir/check.mlir" --emit=artifact -o "$dir/check.commlir"
for l in 4096 8192; do
  for hkv in 32 8; do
    q="tensor<1x32x${l}x128xbf16>"; kv="tensor<1x${hkv}x${l}x128xbf16>"; s="tensor<1x32x${l}xf32>"
    name="1x32x${hkv}x${l}x128"
    cat >"$dir/fwd_$name.mlir" <<MLIR
func.func @fwd(%q: $q, %k: $kv, %v: $kv) -> ($q, $s) {
  %o, %l = compute.attention %q, %k, %v {causal, scale = 0.08838834764831845 : f64, with_lse} : ($q, $kv, $kv) -> ($q, $s)
  return %o, %l : $q, $s
}
MLIR
    cat >"$dir/bwd_$name.mlir" <<MLIR
func.func @bwd(%q: $q, %k: $kv, %v: $kv, %o: $q, %do: $q, %l: $s) -> ($q, $kv, $kv) {
  %dq, %dk, %dv = compute.attention_backward %q, %k, %v, %o, %do, %l {causal, scale = 0.08838834764831845 : f64} : ($q, $kv, $kv, $q, $q, $s) -> ($q, $kv, $kv)
  return %dq, %dk, %dv : $q, $kv, $kv
}
MLIR
    for p in fwd bwd; do $tr "$dir/${p}_$name.mlir" --emit=artifact -o "$dir/${p}_$name.commlir"; done
  done
done
ls -la "$dir"
