// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-fuse-matmul))' | FileCheck %s
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-fuse-matmul))' --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-fuse-matmul{overlap-aware=false}))' | FileCheck %s --check-prefix=SERIAL
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-fuse-matmul{ignore-cost=true}))' | FileCheck %s --check-prefix=SERIAL

// The cost check compares the fused op with the unfused sequence as an overlap scheduler
// places it: a collective that independent compute hides costs nothing, so the pipeline's
// steps make fusing lose. Costs are explicit: a 400 µs collective and a 1 ms matmul, whose
// all-gather pipeline takes 1308 µs (two chunks at 0.9 of the whole GEMM's rate, the second
// 1.24× slower beside the shard's copy, plus two 32 µs steps), 308 µs beyond the matmul (the
// reduce-scatter pipeline: 1231 µs): it beats the serial 1400 µs, not a hidden collective's
// 1000 µs.
// Only `overlap-aware=false` (serial comparison) and `ignore-cost=true` fuse every pattern.

// STATS: CollFuseMatmul
// STATS: (S) 3 fused-all-gather
// STATS: (S) 1 fused-reduce-scatter
// STATS: (S) 2 kept-by-cost
// STATS: (S) 2 kept-by-overlap

// (a) 500 µs of compute independent of the all-gather lies between it and its matmul: the
// scheduler runs it while the all-gather is in flight, the all-gather is hidden, and fusing
// would expose 308 µs. Left alone.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @ag_hidden
// SERIAL-LABEL: func.func @ag_hidden
func.func @ag_hidden(%a: tensor<512x1024xbf16>, %b: tensor<1024x2048xbf16>, %m: tensor<4096x4096xf32>) -> (tensor<1024x2048xbf16>, tensor<4096x4096xf32>) {
  // CHECK-NOT: symm.
  // CHECK: coll.all_gather_into_tensor
  // CHECK: compute.exp
  // CHECK: compute.matmul
  // SERIAL: symm.fused_all_gather_matmul
  %g = coll.all_gather_into_tensor %a {group = @tp, cost_ns = 400000} : (tensor<512x1024xbf16>) -> tensor<1024x1024xbf16>
  %w = coll.wait_tensor %g : tensor<1024x1024xbf16>
  %e = compute.exp %m {cost_ns = 500000} : tensor<4096x4096xf32>
  %c = compute.matmul %w, %b {cost_ns = 1000000} : (tensor<1024x1024xbf16>, tensor<1024x2048xbf16>) -> tensor<1024x2048xbf16>
  return %c, %e : tensor<1024x2048xbf16>, tensor<4096x4096xf32>
}

// -----

// (b) The same pattern alone in its function (the isolated micro-benchmark): nothing hides
// the all-gather, the pipeline beats the serial sequence. Fused.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @ag_alone
// SERIAL-LABEL: func.func @ag_alone
func.func @ag_alone(%a: tensor<512x1024xbf16>, %b: tensor<1024x2048xbf16>) -> tensor<1024x2048xbf16> {
  // CHECK-NOT: coll.
  // CHECK: symm.fused_all_gather_matmul %arg0, %arg1 {group = @tp}
  // SERIAL: symm.fused_all_gather_matmul
  %g = coll.all_gather_into_tensor %a {group = @tp, cost_ns = 400000} : (tensor<512x1024xbf16>) -> tensor<1024x1024xbf16>
  %w = coll.wait_tensor %g : tensor<1024x1024xbf16>
  %c = compute.matmul %w, %b {cost_ns = 1000000} : (tensor<1024x1024xbf16>, tensor<1024x2048xbf16>) -> tensor<1024x2048xbf16>
  return %c : tensor<1024x2048xbf16>
}

// -----

// Compute that depends on the gathered tensor cannot hide the all-gather (the relu and the
// second matmul), nor can compute beyond the next collective (the exp after the other
// group's all-gather, which a scheduler would have to move past it). Fused.
coll.group @tp {size = 2 : i64, symm_mem}
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @ag_dependent_or_far
// SERIAL-LABEL: func.func @ag_dependent_or_far
func.func @ag_dependent_or_far(%a: tensor<512x1024xbf16>, %b: tensor<1024x2048xbf16>, %d: tensor<64x64xf32>, %m: tensor<4096x4096xf32>) -> (tensor<1024x2048xbf16>, tensor<1024x1024xbf16>, tensor<128x64xf32>, tensor<4096x4096xf32>) {
  // CHECK: symm.fused_all_gather_matmul %arg0, %arg1 {group = @tp, return_a}
  // CHECK: coll.all_gather_into_tensor %arg2 {cost_ns = 1000 : i64, group = @dp}
  // SERIAL: symm.fused_all_gather_matmul
  %g = coll.all_gather_into_tensor %a {group = @tp, cost_ns = 400000} : (tensor<512x1024xbf16>) -> tensor<1024x1024xbf16>
  %w = coll.wait_tensor %g : tensor<1024x1024xbf16>
  %c = compute.matmul %w, %b {cost_ns = 1000000} : (tensor<1024x1024xbf16>, tensor<1024x2048xbf16>) -> tensor<1024x2048xbf16>
  %r = compute.relu %w {cost_ns = 500000} : tensor<1024x1024xbf16>
  %g2 = coll.all_gather_into_tensor %d {group = @dp, cost_ns = 1000} : (tensor<64x64xf32>) -> tensor<128x64xf32>
  %w2 = coll.wait_tensor %g2 : tensor<128x64xf32>
  %e = compute.exp %m {cost_ns = 500000} : tensor<4096x4096xf32>
  return %c, %r, %w2, %e : tensor<1024x2048xbf16>, tensor<1024x1024xbf16>, tensor<128x64xf32>, tensor<4096x4096xf32>
}

// -----

// (c) The reduce-scatter side: independent compute after the reduce-scatter (500 µs) hides
// it; left alone. The same sequence without it is fused.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @rs_hidden
// SERIAL-LABEL: func.func @rs_hidden
func.func @rs_hidden(%a: tensor<1024x2048xbf16>, %b: tensor<2048x1024xbf16>, %m: tensor<4096x4096xf32>) -> (tensor<512x1024xbf16>, tensor<4096x4096xf32>) {
  // CHECK-NOT: symm.
  // CHECK: compute.matmul
  // CHECK: coll.reduce_scatter_tensor
  // SERIAL: symm.fused_matmul_reduce_scatter
  %p = compute.matmul %a, %b {cost_ns = 1000000} : (tensor<1024x2048xbf16>, tensor<2048x1024xbf16>) -> tensor<1024x1024xbf16>
  %r = coll.reduce_scatter_tensor %p {group = @tp, reduce_op = "sum", cost_ns = 400000} : (tensor<1024x1024xbf16>) -> tensor<512x1024xbf16>
  %e = compute.exp %m {cost_ns = 500000} : tensor<4096x4096xf32>
  %y = coll.wait_tensor %r : tensor<512x1024xbf16>
  return %y, %e : tensor<512x1024xbf16>, tensor<4096x4096xf32>
}

// CHECK-LABEL: func.func @rs_alone
// SERIAL-LABEL: func.func @rs_alone
func.func @rs_alone(%a: tensor<1024x2048xbf16>, %b: tensor<2048x1024xbf16>) -> tensor<512x1024xbf16> {
  // CHECK: symm.fused_matmul_reduce_scatter %arg0, %arg1 {group = @tp, reduce_op = "sum", scatter_dim = 0 : i64}
  // SERIAL: symm.fused_matmul_reduce_scatter
  %p = compute.matmul %a, %b {cost_ns = 1000000} : (tensor<1024x2048xbf16>, tensor<2048x1024xbf16>) -> tensor<1024x1024xbf16>
  %r = coll.reduce_scatter_tensor %p {group = @tp, reduce_op = "sum", cost_ns = 400000} : (tensor<1024x1024xbf16>) -> tensor<512x1024xbf16>
  %y = coll.wait_tensor %r : tensor<512x1024xbf16>
  return %y : tensor<512x1024xbf16>
}

// -----

// A partial cover does not count: 150 µs of independent compute could hide 150 of the
// all-gather's 400 µs, under half of it. The pipeline exposes 308 µs, more than the 250 µs
// left of the collective, but less than its serial 400 µs: the serial comparison decides,
// and the pattern is fused.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @ag_partly_hidden
// SERIAL-LABEL: func.func @ag_partly_hidden
func.func @ag_partly_hidden(%a: tensor<512x1024xbf16>, %b: tensor<1024x2048xbf16>, %m: tensor<4096x4096xf32>) -> (tensor<1024x2048xbf16>, tensor<4096x4096xf32>) {
  // CHECK: symm.fused_all_gather_matmul %arg0, %arg1 {group = @tp}
  // SERIAL: symm.fused_all_gather_matmul
  %g = coll.all_gather_into_tensor %a {group = @tp, cost_ns = 400000} : (tensor<512x1024xbf16>) -> tensor<1024x1024xbf16>
  %w = coll.wait_tensor %g : tensor<1024x1024xbf16>
  %e = compute.exp %m {cost_ns = 150000} : tensor<4096x4096xf32>
  %c = compute.matmul %w, %b {cost_ns = 1000000} : (tensor<1024x1024xbf16>, tensor<1024x2048xbf16>) -> tensor<1024x2048xbf16>
  return %c, %e : tensor<1024x2048xbf16>, tensor<4096x4096xf32>
}
