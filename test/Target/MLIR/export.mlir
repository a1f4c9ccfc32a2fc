// REQUIRES: commlir-translate, mlir-opt
// RUN: commlir-translate --export-mlir %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-sink-waits-iterative,comm-plan-pools))' | FileCheck %s
// RUN: commlir-translate --export-mlir %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' | mlir-opt --allow-unregistered-dialect --verify-each | FileCheck %s --check-prefix=MLIR
// RUN: commlir-translate --export-mlir %s --mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// Planned comm-level IR written as real MLIR. Upstream ops (func, arith, tensor) in their syntax,
// commlir's in the generic form; real MLIR parses and verifies it.

coll.group @tp {size = 2 : i64}
// CHECK: "coll.group"() {size = 2 : i64, sym_name = "tp"} : () -> ()
// CHECK-LABEL: func.func @f
// CHECK: "comm.pool"
// CHECK: "comm.all_reduce"(%{{.*}}) {group = @tp, reduce_op = "sum"} : (tensor<16x64xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: return
// MLIR-LABEL: func.func @f
// MLIR: tensor.empty() : tensor<4xf32>
// LOC: loc("{{.*}}export.mlir":[[@LINE+1]]:1)
func.func @f(%x: tensor<16x64xf32>, %w: tensor<64x64xf32>) -> (tensor<16x64xf32>, tensor<4xf32>) {
  %a = compute.matmul %x, %w : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %r = coll.all_reduce %a {reduce_op = "sum", group = @tp} : tensor<16x64xf32>
  %b = compute.relu %a : tensor<16x64xf32>
  %y = coll.wait_tensor %r : tensor<16x64xf32>
  %z = compute.add %y, %b : tensor<16x64xf32>
  %e = "tensor.empty"() : () -> tensor<4xf32>
  return %z, %e : tensor<16x64xf32>, tensor<4xf32>
}
