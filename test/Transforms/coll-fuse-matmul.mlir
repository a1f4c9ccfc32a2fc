// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-fuse-matmul))' | FileCheck %s
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-fuse-matmul{ignore-cost=true}))' | FileCheck %s --check-prefix=FORCE

// all_gather → wait → two matmuls on the gathered left operand, and another user of the
// gathered tensor after them: one fused op with two `b`s, returning the gathered `a`.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @all_gather
func.func @all_gather(%a: tensor<4x16xbf16>, %b: tensor<16x8xbf16>, %c: tensor<16x12xbf16>) -> (tensor<8x8xbf16>, tensor<8x12xbf16>, tensor<8x16xbf16>) {
  // CHECK-NOT: coll.
  // CHECK: %[[F:.*]]:3 = symm.fused_all_gather_matmul %arg0, %arg1, %arg2 {group = @tp, return_a} : (tensor<4x16xbf16>, tensor<16x8xbf16>, tensor<16x12xbf16>) -> (tensor<8x16xbf16>, tensor<8x8xbf16>, tensor<8x12xbf16>)
  // CHECK-NEXT: %[[R:.*]] = compute.relu %[[F]]#0
  // CHECK-NEXT: return %[[F]]#1, %[[F]]#2, %[[R]]
  %g = coll.all_gather_into_tensor %a {group = @tp, cost_ns = 200000} : (tensor<4x16xbf16>) -> tensor<8x16xbf16>
  %w = coll.wait_tensor %g : tensor<8x16xbf16>
  %y = compute.matmul %w, %b {cost_ns = 200000} : (tensor<8x16xbf16>, tensor<16x8xbf16>) -> tensor<8x8xbf16>
  %z = compute.matmul %w, %c {cost_ns = 200000} : (tensor<8x16xbf16>, tensor<16x12xbf16>) -> tensor<8x12xbf16>
  %r = compute.relu %w : tensor<8x16xbf16>
  return %y, %z, %r : tensor<8x8xbf16>, tensor<8x12xbf16>, tensor<8x16xbf16>
}

// -----

// matmul → reduce_scatter → wait: one fused op at the reduce-scatter.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @reduce_scatter
func.func @reduce_scatter(%a: tensor<8x32xf32>, %b: tensor<32x16xf32>) -> tensor<4x16xf32> {
  // CHECK-NEXT: %[[F:.*]] = symm.fused_matmul_reduce_scatter %arg0, %arg1 {group = @tp, reduce_op = "avg", scatter_dim = 0 : i64} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: return %[[F]]
  %p = compute.matmul %a, %b {cost_ns = 200000} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %r = coll.reduce_scatter_tensor %p {reduce_op = "avg", group = @tp, cost_ns = 200000} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %w = coll.wait_tensor %r : tensor<4x16xf32>
  return %w : tensor<4x16xf32>
}

// -----

// Small patterns lose to the unfused sequence (launches per chunk): left alone unless forced.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @too_small
// FORCE-LABEL: func.func @too_small
func.func @too_small(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>) -> tensor<8x8xf32> {
  // CHECK: coll.all_gather_into_tensor
  // CHECK: compute.matmul
  // FORCE: symm.fused_all_gather_matmul %arg0, %arg1 {group = @tp}
  %g = coll.all_gather_into_tensor %a {group = @tp} : (tensor<4x16xf32>) -> tensor<8x16xf32>
  %w = coll.wait_tensor %g : tensor<8x16xf32>
  %y = compute.matmul %w, %b : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

// Left alone: no symmetric memory on the group.
coll.group @tp {size = 2 : i64}
// FORCE-LABEL: func.func @no_symm_mem
func.func @no_symm_mem(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>) -> tensor<8x8xf32> {
  // FORCE-NOT: symm.
  // FORCE: return
  %g = coll.all_gather_into_tensor %a {group = @tp} : (tensor<4x16xf32>) -> tensor<8x16xf32>
  %w = coll.wait_tensor %g : tensor<8x16xf32>
  %y = compute.matmul %w, %b : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

// Left alone: the gathered tensor is used before the matmul; the matmul reads it as its
// right operand; a transpose sits in between; the reduce-scatter's input is no matmul product
// or has another user.
coll.group @tp {size = 2 : i64, symm_mem}
// FORCE-LABEL: func.func @leave_alone
func.func @leave_alone(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>, %p: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>) {
  // FORCE-NOT: symm.
  // FORCE: return
  %g = coll.all_gather_into_tensor %a {group = @tp} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %w = coll.wait_tensor %g : tensor<8x8xf32>
  %e = compute.exp %w : tensor<8x8xf32>
  %y = compute.matmul %w, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %g2 = coll.all_gather_into_tensor %a {group = @tp} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %w2 = coll.wait_tensor %g2 : tensor<8x8xf32>
  %y2 = compute.matmul %b, %w2 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %g3 = coll.all_gather_into_tensor %a {group = @tp} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %w3 = coll.wait_tensor %g3 : tensor<8x8xf32>
  %t = compute.transpose %w3 : tensor<8x8xf32>
  %y3 = compute.matmul %t, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %q = compute.matmul %p, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %r = coll.reduce_scatter_tensor %q {reduce_op = "sum", group = @tp} : (tensor<8x8xf32>) -> tensor<4x8xf32>
  %rw = coll.wait_tensor %r : tensor<4x8xf32>
  return %e, %y, %y2, %y3, %rw, %q : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>
}
