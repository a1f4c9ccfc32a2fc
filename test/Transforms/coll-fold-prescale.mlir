// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-fold-prescale))' | FileCheck %s
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-fold-prescale))' --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: commlir-translate %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-fold-prescale,coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=RT

// STATS: (S) 3 num-folded

// Gradient pre-division as FSDP writes it: the scale by 0.5 becomes the reduce-scatter's
// prescale, and the scaled copy is gone. Down to the runtime call: NCCL's pre-multiplied sum.
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @predivide
// CHECK-NOT: compute.scale
// CHECK: %[[R:.*]] = coll.reduce_scatter_tensor %arg0 {group = @dp, prescale = 0.5 : f64, reduce_op = "avg"} : (tensor<8x16xbf16>) -> tensor<4x16xbf16>
// RT-LABEL: func.func @predivide
// RT-NOT: _scale
// RT: rt.nccl_reduce_scatter %{{[0-9]+}}, %{{[0-9]+}} {dtype = "bf16", group = @dp, prescale = 0.5 : f64, recv_count = 64 : i64
func.func @predivide(%g: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  %s = compute.scale %g {factor = 5.000000e-01 : f64} : tensor<8x16xbf16>
  %r = coll.reduce_scatter_tensor %s {reduce_op = "avg", group = @dp} : (tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %w = coll.wait_tensor %r : tensor<4x16xbf16>
  return %w : tensor<4x16xbf16>
}

// -----

// A coalesced reduce-scatter folds when all its inputs are scales by the same factor,
// negative powers of two included.
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @coalesced
// CHECK-NOT: compute.scale
// CHECK: coll.reduce_scatter_tensor_coalesced %arg0, %arg1 {group = @dp, prescale = -0.25 : f64, reduce_op = "sum"}
func.func @coalesced(%a: tensor<8x16xf32>, %b: tensor<4x4xf32>) -> (tensor<4x16xf32>, tensor<2x4xf32>) {
  %sa = compute.scale %a {factor = -2.500000e-01 : f64} : tensor<8x16xf32>
  %sb = compute.scale %b {factor = -2.500000e-01 : f64} : tensor<4x4xf32>
  %r:2 = coll.reduce_scatter_tensor_coalesced %sa, %sb {reduce_op = "sum", group = @dp} : (tensor<8x16xf32>, tensor<4x4xf32>) -> (tensor<4x16xf32>, tensor<2x4xf32>)
  %wa = coll.wait_tensor %r#0 : tensor<4x16xf32>
  %wb = coll.wait_tensor %r#1 : tensor<2x4xf32>
  return %wa, %wb : tensor<4x16xf32>, tensor<2x4xf32>
}

// -----

// Left alone: a factor that is not a power of two (the product would round), a scaled value
// read by something else too, a max reduction, coalesced inputs with different factors, and
// a reduce-scatter that already has a prescale.
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @kept
// CHECK: compute.scale %arg0 {factor = 0.3 : f64}
// CHECK: coll.reduce_scatter_tensor %{{.*}} {group = @dp, reduce_op = "sum"}
// CHECK: compute.scale %arg0 {factor = 0.5 : f64}
// CHECK: coll.reduce_scatter_tensor %{{.*}} {group = @dp, reduce_op = "sum"}
// CHECK: compute.scale %arg0 {factor = 2.0 : f64}
// CHECK: coll.reduce_scatter_tensor %{{.*}} {group = @dp, reduce_op = "max"}
// CHECK: coll.reduce_scatter_tensor_coalesced %{{.*}}, %{{.*}} {group = @dp, reduce_op = "sum"}
// CHECK: compute.scale %arg0 {factor = 4.0 : f64}
// CHECK: coll.reduce_scatter_tensor %{{.*}} {group = @dp, prescale = 2.0 : f64, reduce_op = "sum"}
func.func @kept(%a: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<8x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %s1 = compute.scale %a {factor = 3.000000e-01 : f64} : tensor<8x16xf32>
  %r1 = coll.reduce_scatter_tensor %s1 {reduce_op = "sum", group = @dp} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %w1 = coll.wait_tensor %r1 : tensor<4x16xf32>
  %s2 = compute.scale %a {factor = 5.000000e-01 : f64} : tensor<8x16xf32>
  %r2 = coll.reduce_scatter_tensor %s2 {reduce_op = "sum", group = @dp} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %w2 = coll.wait_tensor %r2 : tensor<4x16xf32>
  %s3 = compute.scale %a {factor = 2.000000e+00 : f64} : tensor<8x16xf32>
  %r3 = coll.reduce_scatter_tensor %s3 {reduce_op = "max", group = @dp} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %w3 = coll.wait_tensor %r3 : tensor<4x16xf32>
  %s4 = compute.scale %a {factor = 2.000000e+00 : f64} : tensor<8x16xf32>
  %s5 = compute.scale %a {factor = 4.000000e+00 : f64} : tensor<8x16xf32>
  %r4:2 = coll.reduce_scatter_tensor_coalesced %s4, %s5 {reduce_op = "sum", group = @dp} : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %w4 = coll.wait_tensor %r4#0 : tensor<4x16xf32>
  %w5 = coll.wait_tensor %r4#1 : tensor<4x16xf32>
  %s6 = compute.scale %a {factor = 4.000000e+00 : f64} : tensor<8x16xf32>
  %r6 = coll.reduce_scatter_tensor %s6 {reduce_op = "sum", group = @dp, prescale = 2.0 : f64} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %w6 = coll.wait_tensor %r6 : tensor<4x16xf32>
  return %w1, %w2, %s2, %w3, %w4, %w5, %w6 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<8x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}
