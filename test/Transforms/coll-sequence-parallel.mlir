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

// -----

// Megatron's layer shape: the residual stream stays on this rank's rows from the first
// reduce-scatter on (the replicated input is sliced, never communicated), the RMSNorm-like
// chain (squares, a row sum, a reshape, rsqrt, its broadcast over the hidden dim by a rank-1
// matmul with a constant) runs on the shards, an all-gather precedes the column-parallel
// matmul, the second all-reduce only needed this rank's rows (a reduce-scatter), and one
// all-gather restores the full result at the return.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @megatron_layer
func.func @megatron_layer(%x: tensor<8x16xf32> {coll.replicated = @tp}, %h: tensor<8x32xf32>, %w1: tensor<16x32xf32>, %w2: tensor<32x16xf32>) -> tensor<8x16xf32> {
  // CHECK: %[[O:.*]] = compute.matmul
  // CHECK-NEXT: %[[RS:.*]] = coll.reduce_scatter_tensor %[[O]] {group = @tp, reduce_op = "sum"} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: %[[Y:.*]] = coll.wait_tensor %[[RS]] : tensor<4x16xf32>
  // CHECK-NEXT: %[[XS:.*]] = coll.all_slice %arg0 {dim = 0 : i64, group = @tp} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: %[[X1:.*]] = compute.add %[[XS]], %[[Y]] : tensor<4x16xf32>
  // CHECK-NEXT: %[[SQ:.*]] = compute.mul %[[X1]], %[[X1]] : tensor<4x16xf32>
  // CHECK-NEXT: compute.reduce_sum %[[SQ]] {dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<4xf32>
  // CHECK-NEXT: compute.reshape %{{.*}} : (tensor<4xf32>) -> tensor<4x1xf32>
  // CHECK-NEXT: compute.rsqrt %{{.*}} : tensor<4x1xf32>
  // CHECK-NEXT: compute.fill
  // CHECK-NEXT: compute.matmul %{{.*}}, %{{.*}} : (tensor<4x1xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: %[[N:.*]] = compute.mul %[[X1]], %{{.*}} : tensor<4x16xf32>
  // CHECK-NEXT: %[[AG:.*]] = coll.all_gather_into_tensor %[[N]] {group = @tp} : (tensor<4x16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: %[[NF:.*]] = coll.wait_tensor %[[AG]] : tensor<8x16xf32>
  // CHECK-NEXT: compute.matmul %[[NF]], %arg2
  // CHECK-NEXT: compute.gelu
  // CHECK-NEXT: %[[P:.*]] = compute.matmul
  // CHECK-NEXT: %[[RS2:.*]] = coll.reduce_scatter_tensor %[[P]] {group = @tp, reduce_op = "sum"} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: %[[Y2:.*]] = coll.wait_tensor %[[RS2]] : tensor<4x16xf32>
  // CHECK-NEXT: %[[X2:.*]] = compute.add %[[X1]], %[[Y2]] : tensor<4x16xf32>
  // CHECK-NEXT: %[[AG2:.*]] = coll.all_gather_into_tensor %[[X2]] {group = @tp} : (tensor<4x16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: %[[OUT:.*]] = coll.wait_tensor %[[AG2]] : tensor<8x16xf32>
  // CHECK-NEXT: return %[[OUT]] : tensor<8x16xf32>
  // CHECK-NOT: coll.all_reduce
  %o = compute.matmul %h, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<8x16xf32>
  %y = coll.wait_tensor %r : tensor<8x16xf32>
  %x1 = compute.add %x, %y : tensor<8x16xf32>
  %sq = compute.mul %x1, %x1 : tensor<8x16xf32>
  %ss = compute.reduce_sum %sq {dim = 1 : i64} : (tensor<8x16xf32>) -> tensor<8xf32>
  %s2 = compute.reshape %ss : (tensor<8xf32>) -> tensor<8x1xf32>
  %inv = compute.rsqrt %s2 : tensor<8x1xf32>
  %ones = compute.fill {value = 1.0 : f64} : tensor<1x16xf32>
  %bc = compute.matmul %inv, %ones : (tensor<8x1xf32>, tensor<1x16xf32>) -> tensor<8x16xf32>
  %n = compute.mul %x1, %bc : tensor<8x16xf32>
  %a = compute.matmul %n, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %a2 = compute.gelu %a : tensor<8x32xf32>
  %p = compute.matmul %a2, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %r2 = coll.all_reduce %p {reduce_op = "sum", group = @tp} : tensor<8x16xf32>
  %y2 = coll.wait_tensor %r2 : tensor<8x16xf32>
  %x2 = compute.add %x1, %y2 : tensor<8x16xf32>
  return %x2 : tensor<8x16xf32>
}
