#!/usr/bin/env bash
# Writes single-collective programs (bf16, 2 ranks by default) for the bus-bandwidth sweep:
#   bench/gpu/gen_collectives.sh OUTDIR [RANKS] [OPS]
# OPS: any of all_reduce,all_gather,reduce_scatter,all_to_all (default: the first three).
# Sizes follow nccl-tests: the message is the all-reduce buffer, the all-gather output, the
# reduce-scatter input and the all-to-all buffer; 1 MiB to 1 GiB by factors of 4.
set -euo pipefail
out=${1:?usage: gen_collectives.sh OUTDIR [RANKS] [OPS]}
g=${2:-2}
ops=,${3:-all_reduce,all_gather,reduce_scatter},
mkdir -p "$out"
for mib in 1 4 16 64 256 1024; do
  n=$((mib * 1024 * 1024 / 2))      # bf16 elements in the message
  s=$((n / g))                      # one rank's shard
  [[ $ops == *,all_reduce,* ]] && cat >"$out/all_reduce_${mib}MiB.mlir" <<M
module {
  coll.group @w {size = $g : i64}
  func.func @main(%x: tensor<${n}xbf16>) -> tensor<${n}xbf16> {
    %r = coll.all_reduce %x {reduce_op = "sum", group = @w} : tensor<${n}xbf16>
    %y = coll.wait_tensor %r : tensor<${n}xbf16>
    return %y : tensor<${n}xbf16>
  }
}
M
  [[ $ops == *,all_gather,* ]] && cat >"$out/all_gather_${mib}MiB.mlir" <<M
module {
  coll.group @w {size = $g : i64}
  func.func @main(%x: tensor<${s}xbf16>) -> tensor<${n}xbf16> {
    %r = coll.all_gather_into_tensor %x {group = @w} : (tensor<${s}xbf16>) -> tensor<${n}xbf16>
    %y = coll.wait_tensor %r : tensor<${n}xbf16>
    return %y : tensor<${n}xbf16>
  }
}
M
  [[ $ops == *,reduce_scatter,* ]] && cat >"$out/reduce_scatter_${mib}MiB.mlir" <<M
module {
  coll.group @w {size = $g : i64}
  func.func @main(%x: tensor<${n}xbf16>) -> tensor<${s}xbf16> {
    %r = coll.reduce_scatter_tensor %x {reduce_op = "sum", group = @w} : (tensor<${n}xbf16>) -> tensor<${s}xbf16>
    %y = coll.wait_tensor %r : tensor<${s}xbf16>
    return %y : tensor<${s}xbf16>
  }
}
M
  [[ $ops == *,all_to_all,* ]] && cat >"$out/all_to_all_${mib}MiB.mlir" <<M
module {
  coll.group @w {size = $g : i64}
  func.func @main(%x: tensor<${n}xbf16>) -> tensor<${n}xbf16> {
    %r = coll.all_to_all_single %x {group = @w} : tensor<${n}xbf16>
    %y = coll.wait_tensor %r : tensor<${n}xbf16>
    return %y : tensor<${n}xbf16>
  }
}
M
  true
done
