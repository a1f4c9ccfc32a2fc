// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-raise-comms))' | FileCheck %s

// PyTorch's test_raise_comms: `c = a @ a; d = c @ c; ar = all_reduce(a); e = d @ ar`.
// score_0 is the smallest index of the collectives an op must precede: 0 for the all-reduce,
// infinity for everything else (the all-reduce needs only the argument). Ready at the start:
// c (inf, 0) and the all-reduce (0, 2): the all-reduce goes first. Then, by original index:
// c (0), d (1), the wait (3), e (4).
coll.group @tp {size = 2 : i64}
// CHECK-LABEL: func.func @raise_comms
// CHECK-NEXT: coll.all_reduce %arg0
// CHECK-NEXT: compute.matmul %arg0, %arg0
// CHECK-NEXT: compute.matmul
// CHECK-NEXT: coll.wait_tensor
// CHECK-NEXT: compute.matmul
// CHECK-NEXT: return
func.func @raise_comms(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %c = compute.matmul %a, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %d = compute.matmul %c, %c : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %ar = coll.all_reduce %a {reduce_op = "sum", group = @tp} : tensor<4x4xf32>
  %w = coll.wait_tensor %ar : tensor<4x4xf32>
  %e = compute.matmul %d, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %e : tensor<4x4xf32>
}
