// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(coll-sequence-parallel))' | FileCheck %s
// (test/Run/compute-model-ops.mlir runs it on the sim: the rewrite changes no digest.)

// The model ops on the rows after a row-parallel matmul's all-reduce: an RMSNorm whose
// per-row factor and weight are broadcast, a causal mask (iota, compare) applied by select,
// sigmoid, a row max, and a permute keeping dim 0 before the next matmul. All row-local:
// the norm and the mask run on this rank's rows (the replicated weight's broadcast and the
// mask are sliced), one all-gather before the matmul and one per returned value.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @norm_mask
// CHECK: %[[RS:.*]] = coll.reduce_scatter_tensor %{{.*}} {group = @tp, reduce_op = "sum"} : (tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[Y:.*]] = coll.wait_tensor %[[RS]] : tensor<4x16xf32>
// CHECK: %[[RES:.*]] = compute.add %[[Y]], %{{.*}} : tensor<4x16xf32>
// CHECK: compute.reduce_sum %{{.*}} {dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<4xf32>
// CHECK: compute.broadcast %{{.*}} : (tensor<4x1xf32>) -> tensor<4x16xf32>
// CHECK: %[[GB:.*]] = compute.broadcast %arg3 : (tensor<16xf32>) -> tensor<8x16xf32>
// CHECK: coll.all_slice %[[GB]] {dim = 0 : i64, group = @tp} : (tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[C:.*]] = compute.compare %{{.*}}, %{{.*}} {predicate = "le"} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xi1>
// CHECK: %[[CS:.*]] = coll.all_slice %[[C]] {dim = 0 : i64, group = @tp} : (tensor<8x16xi1>) -> tensor<4x16xi1>
// CHECK: compute.select %[[CS]], %{{.*}}, %{{.*}} : (tensor<4x16xi1>, tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK: compute.sigmoid %{{.*}} : tensor<4x16xf32>
// CHECK: %[[MX:.*]] = compute.reduce_max %{{.*}} {dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<4xf32>
// CHECK: compute.permute %{{.*}} {perm = array<i64: 0, 2, 1>} : (tensor<4x2x8xf32>) -> tensor<4x8x2xf32>
// CHECK: %[[P:.*]] = compute.reshape %{{.*}} : (tensor<4x8x2xf32>) -> tensor<4x16xf32>
// CHECK: %[[G:.*]] = coll.all_gather_into_tensor %[[P]] {group = @tp} : (tensor<4x16xf32>) -> tensor<8x16xf32>
// CHECK: %[[GW:.*]] = coll.wait_tensor %[[G]]
// CHECK: %[[M:.*]] = compute.matmul %[[GW]], %arg4
// CHECK: coll.all_gather_into_tensor %[[RES]]
// CHECK: coll.all_gather_into_tensor %[[MX]] {group = @tp} : (tensor<4xf32>) -> tensor<8xf32>
// CHECK-NOT: coll.all_reduce
func.func @norm_mask(%x: tensor<8x16xf32> {coll.replicated = @tp}, %h: tensor<8x32xf32>, %w2: tensor<32x16xf32>, %g: tensor<16xf32> {coll.replicated = @tp}, %w3: tensor<16x32xf32>) -> (tensor<8x16xf32>, tensor<8x32xf32>, tensor<8xf32>) {
  %o = compute.matmul %h, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<8x16xf32>
  %y = coll.wait_tensor %r : tensor<8x16xf32>
  %res = compute.add %y, %x : tensor<8x16xf32>
  %sq = compute.mul %res, %res : tensor<8x16xf32>
  %ss = compute.reduce_sum %sq {dim = 1 : i64} : (tensor<8x16xf32>) -> tensor<8xf32>
  %rs = compute.rsqrt %ss : tensor<8xf32>
  %rc = compute.reshape %rs : (tensor<8xf32>) -> tensor<8x1xf32>
  %rb = compute.broadcast %rc : (tensor<8x1xf32>) -> tensor<8x16xf32>
  %gb = compute.broadcast %g : (tensor<16xf32>) -> tensor<8x16xf32>
  %n0 = compute.mul %res, %rb : tensor<8x16xf32>
  %n = compute.mul %n0, %gb : tensor<8x16xf32>
  %q = compute.iota {dim = 0 : i64} : tensor<8x16xf32>
  %k = compute.iota {dim = 1 : i64} : tensor<8x16xf32>
  %c = compute.compare %k, %q {predicate = "le"} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xi1>
  %z = compute.fill {value = 0.0 : f64} : tensor<8x16xf32>
  %s = compute.select %c, %n, %z : (tensor<8x16xi1>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %sg = compute.sigmoid %s : tensor<8x16xf32>
  %mx = compute.reduce_max %sg {dim = 1 : i64} : (tensor<8x16xf32>) -> tensor<8xf32>
  %s3 = compute.reshape %sg : (tensor<8x16xf32>) -> tensor<8x2x8xf32>
  %p = compute.permute %s3 {perm = array<i64: 0, 2, 1>} : (tensor<8x2x8xf32>) -> tensor<8x8x2xf32>
  %p2 = compute.reshape %p : (tensor<8x8x2xf32>) -> tensor<8x16xf32>
  %h2 = compute.matmul %p2, %w3 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %res, %h2, %mx : tensor<8x16xf32>, tensor<8x32xf32>, tensor<8xf32>
}

// Left alone: a transposing permute and a broadcast adding a leading dim keep 8 rows but
// mix them (row r of the result reads other rows of the operand).
// CHECK-LABEL: func.func @mixes_rows
// CHECK: coll.all_reduce
// CHECK-NOT: coll.reduce_scatter_tensor
// CHECK: return
func.func @mixes_rows(%h: tensor<8x32xf32>, %w2: tensor<32x8xf32>, %w3: tensor<8x4xf32>, %w4: tensor<8x8x4xf32>) -> (tensor<8x4xf32>, tensor<8x8x4xf32>) {
  %o = compute.matmul %h, %w2 : (tensor<8x32xf32>, tensor<32x8xf32>) -> tensor<8x8xf32>
  %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<8x8xf32>
  %y = coll.wait_tensor %r : tensor<8x8xf32>
  %p = compute.permute %y {perm = array<i64: 1, 0>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = compute.matmul %p, %w3 : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %b = compute.broadcast %y : (tensor<8x8xf32>) -> tensor<8x8x8xf32>
  %n = compute.matmul %b, %w4 : (tensor<8x8x8xf32>, tensor<8x8x4xf32>) -> tensor<8x8x4xf32>
  return %m, %n : tensor<8x4xf32>, tensor<8x8x4xf32>
}
