// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-sequence-parallel))' | FileCheck %s

// The all-reduce of a row-parallel matmul feeds a residual add (with a replicated argument)
// and a softmax along dim 1 into the next matmul: reduce-scatter, the add and softmax on this
// rank's rows, the argument sliced, and all-gathers before the matmul and the return.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @layer
func.func @layer(%x: tensor<8x16xf32> {coll.replicated = @tp}, %w2: tensor<32x16xf32>, %h: tensor<8x32xf32>, %w3: tensor<16x32xf32>) -> (tensor<8x16xf32>, tensor<8x32xf32>) {
  // CHECK: %[[P:.*]] = compute.matmul
  // CHECK-NEXT: %[[RS:.*]] = coll.reduce_scatter_tensor %[[P]] {group = @tp, reduce_op = "sum"} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: %[[W:.*]] = coll.wait_tensor %[[RS]] : tensor<4x16xf32>
  // CHECK-NEXT: %[[S:.*]] = coll.all_slice %arg0 {dim = 0 : i64, group = @tp} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: %[[A:.*]] = compute.add %[[W]], %[[S]] : tensor<4x16xf32>
  // CHECK-NEXT: %[[N:.*]] = compute.softmax %[[A]] {dim = 1 : i64} : tensor<4x16xf32>
  // CHECK-NEXT: %[[G:.*]] = coll.all_gather_into_tensor %[[N]] {group = @tp} : (tensor<4x16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: %[[GW:.*]] = coll.wait_tensor %[[G]]
  // CHECK-NEXT: %[[M:.*]] = compute.matmul %[[GW]], %arg3
  // CHECK-NEXT: %[[G2:.*]] = coll.all_gather_into_tensor %[[A]]
  // CHECK-NEXT: %[[GW2:.*]] = coll.wait_tensor %[[G2]]
  // CHECK-NEXT: return %[[GW2]], %[[M]]
  %o = compute.matmul %h, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<8x16xf32>
  %y = coll.wait_tensor %r : tensor<8x16xf32>
  %res = compute.add %y, %x : tensor<8x16xf32>
  %n = compute.softmax %res {dim = 1 : i64} : tensor<8x16xf32>
  %h2 = compute.matmul %n, %w3 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %res, %h2 : tensor<8x16xf32>, tensor<8x32xf32>
}

// -----

// Left alone: the residual operand is an unmarked argument (it may differ per rank).
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @unmarked
func.func @unmarked(%x: tensor<8x16xf32>, %o: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  // CHECK: coll.all_reduce
  // CHECK-NOT: coll.reduce_scatter_tensor
  %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<8x16xf32>
  %y = coll.wait_tensor %r : tensor<8x16xf32>
  %res = compute.add %y, %x : tensor<8x16xf32>
  %m = compute.matmul %res, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  return %m : tensor<8x16xf32>
}

// -----

// Left alone: dim 0 does not divide by the group size; a softmax along dim 0 is not row-local
// (so no row-local path reaches a matmul); no matmul consumes the result.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @not_row_local
func.func @not_row_local(%o: tensor<7x16xf32>, %p: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> (tensor<7x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK-NOT: coll.reduce_scatter_tensor
  // CHECK: return
  %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<7x16xf32>
  %y = coll.wait_tensor %r : tensor<7x16xf32>
  %r2 = coll.all_reduce %p {reduce_op = "sum", group = @tp} : tensor<8x16xf32>
  %y2 = coll.wait_tensor %r2 : tensor<8x16xf32>
  %s = compute.softmax %y2 {dim = 0 : i64} : tensor<8x16xf32>
  %m = compute.matmul %s, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %r3 = coll.all_reduce %p {reduce_op = "avg", group = @tp} : tensor<8x16xf32>
  %y3 = coll.wait_tensor %r3 : tensor<8x16xf32>
  %e = compute.exp %y3 : tensor<8x16xf32>
  %a = compute.add %e, %m : tensor<8x16xf32>
  return %y, %a, %m : tensor<7x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}
