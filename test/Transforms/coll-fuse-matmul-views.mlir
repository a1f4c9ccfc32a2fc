// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-fuse-matmul{ignore-cost=true}))' | FileCheck %s

// The sequence-parallel all-gather of a 1×4×16 shard reaches two matmuls through reshapes
// (K = 16 divides the 64-element shard): one fused op on the shard as 4×16 rows. The second
// `b` is a transpose defined after the first matmul; it moves up to the fused op. The
// gathered tensor keeps a later user: it is returned and reshaped back.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @gather_views
func.func @gather_views(%x: tensor<1x4x16xf32>, %w1: tensor<16x8xf32>, %w2t: tensor<8x16xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<2x4x16xf32>) {
  // CHECK-NOT: coll.
  // CHECK: %[[T:.*]] = compute.transpose %arg2
  // CHECK-NEXT: %[[A:.*]] = compute.reshape %arg0 : (tensor<1x4x16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: %[[F:.*]]:3 = symm.fused_all_gather_matmul %[[A]], %arg1, %[[T]] {group = @tp, return_a} : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> (tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x8xf32>)
  // CHECK-NEXT: %[[G:.*]] = compute.reshape %[[F]]#0 : (tensor<8x16xf32>) -> tensor<2x4x16xf32>
  // CHECK-NOT: compute.reshape
  // CHECK: %[[E:.*]] = compute.exp %[[G]]
  // CHECK-NEXT: return %[[F]]#1, %[[F]]#2, %[[E]]
  %g = coll.all_gather_into_tensor %x {group = @tp} : (tensor<1x4x16xf32>) -> tensor<2x4x16xf32>
  %w = coll.wait_tensor %g : tensor<2x4x16xf32>
  %v = compute.reshape %w : (tensor<2x4x16xf32>) -> tensor<1x8x16xf32>
  %v1 = compute.reshape %v : (tensor<1x8x16xf32>) -> tensor<8x16xf32>
  %m1 = compute.matmul %v1, %w1 : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %t = compute.transpose %w2t : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %v2 = compute.reshape %v : (tensor<1x8x16xf32>) -> tensor<8x16xf32>
  %m2 = compute.matmul %v2, %t : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %e = compute.exp %w : tensor<2x4x16xf32>
  return %m1, %m2, %e : tensor<8x8xf32>, tensor<8x8xf32>, tensor<2x4x16xf32>
}

// -----

// A reshape to a wider K that still divides the shard (64 elements as 2 rows of 32).
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @gather_wide_rows
func.func @gather_wide_rows(%x: tensor<1x4x16xf32>, %b: tensor<32x8xf32>) -> tensor<4x8xf32> {
  // CHECK: %[[A:.*]] = compute.reshape %arg0 : (tensor<1x4x16xf32>) -> tensor<2x32xf32>
  // CHECK-NEXT: symm.fused_all_gather_matmul %[[A]], %arg1 {group = @tp} : (tensor<2x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
  %g = coll.all_gather_into_tensor %x {group = @tp} : (tensor<1x4x16xf32>) -> tensor<2x4x16xf32>
  %w = coll.wait_tensor %g : tensor<2x4x16xf32>
  %v = compute.reshape %w : (tensor<2x4x16xf32>) -> tensor<4x32xf32>
  %m = compute.matmul %v, %b : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}

// -----

// K = 8 does not divide the 12-element shard: rank 1's data starts mid-row of the 3×8
// matrix, so no row-chunked pipeline computes this matmul. Left alone.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @gather_k_not_dividing
func.func @gather_k_not_dividing(%x: tensor<1x3x4xf32>, %b: tensor<8x8xf32>) -> tensor<3x8xf32> {
  // CHECK-NOT: symm.
  // CHECK: coll.all_gather_into_tensor
  // CHECK: compute.matmul
  %g = coll.all_gather_into_tensor %x {group = @tp} : (tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
  %w = coll.wait_tensor %g : tensor<2x3x4xf32>
  %v = compute.reshape %w : (tensor<2x3x4xf32>) -> tensor<3x8xf32>
  %m = compute.matmul %v, %b : (tensor<3x8xf32>, tensor<8x8xf32>) -> tensor<3x8xf32>
  return %m : tensor<3x8xf32>
}

// -----

// Batch 2: the gathered 4×4×16 holds (rank, batch) blocks; the slice/concat moves the rank
// blocks of each batch row next to each other (the operands' dim 0 is 2, not 1), so rank 1's
// rows are not one contiguous block of the matmul's operand. Left alone.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @gather_batch2
func.func @gather_batch2(%x: tensor<2x4x16xf32>, %b: tensor<16x8xf32>) -> tensor<16x8xf32> {
  // CHECK-NOT: symm.
  // CHECK: coll.all_gather_into_tensor
  // CHECK: compute.concat
  // CHECK: compute.matmul
  %g = coll.all_gather_into_tensor %x {group = @tp} : (tensor<2x4x16xf32>) -> tensor<4x4x16xf32>
  %w = coll.wait_tensor %g : tensor<4x4x16xf32>
  %s0 = compute.slice %w {dim = 0 : i64, start = 0 : i64, size = 2 : i64} : (tensor<4x4x16xf32>) -> tensor<2x4x16xf32>
  %s1 = compute.slice %w {dim = 0 : i64, start = 2 : i64, size = 2 : i64} : (tensor<4x4x16xf32>) -> tensor<2x4x16xf32>
  %c = compute.concat %s0, %s1 {dim = 1 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x8x16xf32>
  %v = compute.reshape %c : (tensor<2x8x16xf32>) -> tensor<16x16xf32>
  %m = compute.matmul %v, %b : (tensor<16x16xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  return %m : tensor<16x8xf32>
}

// -----

// A view with a user before the first matmul: the fused op would come after it. Left alone.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @gather_view_used_early
func.func @gather_view_used_early(%x: tensor<1x4x16xf32>, %b: tensor<16x8xf32>) -> (tensor<8x8xf32>, tensor<1x8x16xf32>) {
  // CHECK-NOT: symm.
  // CHECK: coll.all_gather_into_tensor
  %g = coll.all_gather_into_tensor %x {group = @tp} : (tensor<1x4x16xf32>) -> tensor<2x4x16xf32>
  %w = coll.wait_tensor %g : tensor<2x4x16xf32>
  %v = compute.reshape %w : (tensor<2x4x16xf32>) -> tensor<1x8x16xf32>
  %e = compute.exp %v : tensor<1x8x16xf32>
  %v1 = compute.reshape %v : (tensor<1x8x16xf32>) -> tensor<8x16xf32>
  %m = compute.matmul %v1, %b : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %m, %e : tensor<8x8xf32>, tensor<1x8x16xf32>
}

// -----

// The exported row-parallel matmul: product → reshape → split of the sequence into the two
// rank blocks → cat on dim 0 → reduce-scatter. The split/cat is a layout identity, so the
// product's rows [4r, 4r+4) are rank r's block: fused, the result reshaped back.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @scatter_views
func.func @scatter_views(%a: tensor<8x16xf32>, %b: tensor<16x8xf32>) -> tensor<1x4x8xf32> {
  // CHECK-NEXT: %[[F:.*]] = symm.fused_matmul_reduce_scatter %arg0, %arg1 {group = @tp, reduce_op = "sum", scatter_dim = 0 : i64} : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[R:.*]] = compute.reshape %[[F]] : (tensor<4x8xf32>) -> tensor<1x4x8xf32>
  // CHECK-NEXT: return %[[R]]
  %p = compute.matmul %a, %b : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %r = compute.reshape %p : (tensor<8x8xf32>) -> tensor<1x8x8xf32>
  %s0 = compute.slice %r {dim = 1 : i64, start = 0 : i64, size = 4 : i64} : (tensor<1x8x8xf32>) -> tensor<1x4x8xf32>
  %s1 = compute.slice %r {dim = 1 : i64, start = 4 : i64, size = 4 : i64} : (tensor<1x8x8xf32>) -> tensor<1x4x8xf32>
  %c = compute.concat %s0, %s1 {dim = 0 : i64} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<2x4x8xf32>
  %rs = coll.reduce_scatter_tensor %c {reduce_op = "sum", group = @tp} : (tensor<2x4x8xf32>) -> tensor<1x4x8xf32>
  %w = coll.wait_tensor %rs : tensor<1x4x8xf32>
  return %w : tensor<1x4x8xf32>
}

// -----

// Not layout identities: the slices out of order (the halves swapped); batch 2, where the cat
// on dim 0 interleaves the two batch rows' sequence halves; a product of 3 rows that two
// ranks cannot split into whole rows. All left alone.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @scatter_not_identity
func.func @scatter_not_identity(%a: tensor<8x16xf32>, %a2: tensor<16x16xf32>, %a3: tensor<3x16xf32>, %b: tensor<16x8xf32>) -> (tensor<1x4x8xf32>, tensor<2x4x8xf32>, tensor<1x12xf32>) {
  // CHECK-NOT: symm.
  // CHECK: return
  %p = compute.matmul %a, %b : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %r = compute.reshape %p : (tensor<8x8xf32>) -> tensor<1x8x8xf32>
  %s0 = compute.slice %r {dim = 1 : i64, start = 4 : i64, size = 4 : i64} : (tensor<1x8x8xf32>) -> tensor<1x4x8xf32>
  %s1 = compute.slice %r {dim = 1 : i64, start = 0 : i64, size = 4 : i64} : (tensor<1x8x8xf32>) -> tensor<1x4x8xf32>
  %c = compute.concat %s0, %s1 {dim = 0 : i64} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<2x4x8xf32>
  %rs = coll.reduce_scatter_tensor %c {reduce_op = "sum", group = @tp} : (tensor<2x4x8xf32>) -> tensor<1x4x8xf32>
  %w = coll.wait_tensor %rs : tensor<1x4x8xf32>
  %p2 = compute.matmul %a2, %b : (tensor<16x16xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %r2 = compute.reshape %p2 : (tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %t0 = compute.slice %r2 {dim = 1 : i64, start = 0 : i64, size = 4 : i64} : (tensor<2x8x8xf32>) -> tensor<2x4x8xf32>
  %t1 = compute.slice %r2 {dim = 1 : i64, start = 4 : i64, size = 4 : i64} : (tensor<2x8x8xf32>) -> tensor<2x4x8xf32>
  %c2 = compute.concat %t0, %t1 {dim = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<4x4x8xf32>
  %rs2 = coll.reduce_scatter_tensor %c2 {reduce_op = "sum", group = @tp} : (tensor<4x4x8xf32>) -> tensor<2x4x8xf32>
  %w2 = coll.wait_tensor %rs2 : tensor<2x4x8xf32>
  %p3 = compute.matmul %a3, %b : (tensor<3x16xf32>, tensor<16x8xf32>) -> tensor<3x8xf32>
  %r3 = compute.reshape %p3 : (tensor<3x8xf32>) -> tensor<2x12xf32>
  %rs3 = coll.reduce_scatter_tensor %r3 {reduce_op = "sum", group = @tp} : (tensor<2x12xf32>) -> tensor<1x12xf32>
  %w3 = coll.wait_tensor %rs3 : tensor<1x12xf32>
  return %w, %w2, %w3 : tensor<1x4x8xf32>, tensor<2x4x8xf32>, tensor<1x12xf32>
}
