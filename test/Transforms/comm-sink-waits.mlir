// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comm-sink-waits))' | FileCheck %s
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-sink-waits))' | FileCheck %s --check-prefix=COMM

// PyTorch's test_sink_waits: `ar = all_reduce(a); b = a @ a; return ar @ b`.
// Scores are (is_wait, original index). Ready at the start: the all-reduce (0, 0) and the
// matmul b (0, 2); the all-reduce goes first and releases its wait (1, 1), which loses to
// b (0, 2); then the wait, then the last matmul.
coll.group @tp {size = 2 : i64}
// CHECK-LABEL: func.func @sink_waits
// CHECK-NEXT: coll.all_reduce
// CHECK-NEXT: compute.matmul %arg0, %arg0
// CHECK-NEXT: coll.wait_tensor
// CHECK-NEXT: compute.matmul
// CHECK-NEXT: return
// At the comm level the same order holds for the start op and its wait.
// COMM-LABEL: func.func @sink_waits
// COMM: comm.all_reduce
// COMM-NEXT: compute.matmul %arg0, %arg0
// COMM-NEXT: comm.wait
func.func @sink_waits(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %ar = coll.all_reduce %a {reduce_op = "sum", group = @tp} : tensor<4x4xf32>
  %w = coll.wait_tensor %ar : tensor<4x4xf32>
  %b = compute.matmul %a, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %c = compute.matmul %w, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %c : tensor<4x4xf32>
}

// -----

// The seed's sink_waits alone would let the independent all-reduce of %b (index 3) overtake
// the all-reduce of %1 (index 2), which waits behind the deferred wait %1: a per-group order
// change, an SPMD hazard. The group-order edge keeps %b's all-reduce after it; only the wait
// of the first sinks as far as the second all-reduce allows.
coll.group @tp {size = 2 : i64}
// CHECK-LABEL: func.func @keeps_group_order
// CHECK-NEXT: %[[R0:.*]] = coll.all_reduce %arg0
// CHECK-NEXT: %[[W0:.*]] = coll.wait_tensor %[[R0]]
// CHECK-NEXT: coll.all_reduce %[[W0]]
// CHECK-NEXT: coll.all_reduce %arg1
func.func @keeps_group_order(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = coll.all_reduce %a {reduce_op = "sum", group = @tp} : tensor<4xf32>
  %1 = coll.wait_tensor %0 : tensor<4xf32>
  %2 = coll.all_reduce %1 {reduce_op = "sum", group = @tp} : tensor<4xf32>
  %3 = coll.all_reduce %b {reduce_op = "sum", group = @tp} : tensor<4xf32>
  %4 = coll.wait_tensor %2 : tensor<4xf32>
  %5 = coll.wait_tensor %3 : tensor<4xf32>
  return %4, %5 : tensor<4xf32>, tensor<4xf32>
}
