#!/usr/bin/env bash
# Writes single-collective programs (bf16, 2 ranks by default) for the bus-bandwidth sweep:
#   bench/gpu/gen_collectives.sh OUTDIR [RANKS]
# Sizes follow nccl-tests: the message is the all-reduce buffer, the all-gather output and
# the reduce-scatter input; 1 MiB to 1 GiB by factors of 4.
set -euo pipefail
out=${1:?usage: gen_collectives.sh OUTDIR [RANKS]}
g=${2:-2}
mkdir -p "$out"
for mib in 1 4 16 64 256 1024; do
  n=$((mib * 1024 * 1024 / 2))      # bf16 elements in the message
  s=$((n / g))                      # one rank's shard
  cat >"$out/all_reduce_${mib}MiB.mlir" <<M
module {
  coll.group @w {size = $g : i64}
  func.func @main(%x: tensor<${n}xbf16>) -> tensor<${n}xbf16> {
    %r = coll.all_reduce %x {reduce_op = "sum", group = @w} : tensor<${n}xbf16>
    %y = coll.wait_tensor %r : tensor<${n}xbf16>
    return %y : tensor<${n}xbf16>
  }
}
M
  cat >"$out/all_gather_${mib}MiB.mlir" <<M
module {
  coll.group @w {size = $g : i64}
  func.func @main(%x: tensor<${s}xbf16>) -> tensor<${n}xbf16> {
    %r = coll.all_gather_into_tensor %x {group = @w} : (tensor<${s}xbf16>) -> tensor<${n}xbf16>
    %y = coll.wait_tensor %r : tensor<${n}xbf16>
    return %y : tensor<${n}xbf16>
  }
}
M
  cat >"$out/reduce_scatter_${mib}MiB.mlir" <<M
module {
  coll.group @w {size = $g : i64}
  func.func @main(%x: tensor<${n}xbf16>) -> tensor<${s}xbf16> {
    %r = coll.reduce_scatter_tensor %x {reduce_op = "sum", group = @w} : (tensor<${n}xbf16>) -> tensor<${s}xbf16>
    %y = coll.wait_tensor %r : tensor<${s}xbf16>
    return %y : tensor<${s}xbf16>
  }
}
M
done
