// RUN: commlir-opt %s --allow-unregistered-dialect --arith-to-compute | FileCheck %s

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %i: tensor<4xi32>, %s: f32) -> (tensor<4x8xbf16>, tensor<4xi32>, f32) {
  // CHECK: %[[ADD:.*]] = compute.add %arg0, %arg1 : tensor<4x8xf32>
  %0 = "arith.addf"(%a, %b) <{fastmath = #arith.fastmath<none>}> : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[MUL:.*]] = compute.mul %[[ADD]], %arg1 : tensor<4x8xf32>
  %1 = "arith.mulf"(%0, %b) <{fastmath = #arith.fastmath<fast>}> : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[C:.*]] = compute.fill {value = 0.5 : f64} : tensor<4x8xf32>
  %c = "arith.constant"() <{value = dense<5.000000e-01> : tensor<4x8xf32>}> : () -> tensor<4x8xf32>
  // CHECK: %[[MAX:.*]] = compute.maximum %[[MUL]], %[[C]] : tensor<4x8xf32>
  %2 = "arith.maximumf"(%1, %c) <{fastmath = #arith.fastmath<none>}> : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // maxnumf ignores NaNs; compute.maximum propagates them: left alone.
  // CHECK: "arith.maxnumf"
  %3 = "arith.maxnumf"(%2, %c) <{fastmath = #arith.fastmath<none>}> : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[T:.*]] = compute.tanh %{{.*}} : tensor<4x8xf32>
  %4 = "math.tanh"(%3) <{fastmath = #arith.fastmath<none>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[SIN:.*]] = compute.sin %[[T]] : tensor<4x8xf32>
  %s0 = "math.sin"(%4) <{fastmath = #arith.fastmath<none>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[COS:.*]] = compute.cos %[[SIN]] : tensor<4x8xf32>
  %s1 = "math.cos"(%s0) <{fastmath = #arith.fastmath<none>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: compute.log %[[COS]] : tensor<4x8xf32>
  %s2 = "math.log"(%s1) <{fastmath = #arith.fastmath<none>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: compute.neg %[[T]] : tensor<4x8xf32>
  %5 = "arith.negf"(%4) <{fastmath = #arith.fastmath<none>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: compute.cast %{{.*}} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %6 = "arith.truncf"(%5) : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  // CHECK: compute.sub %arg2, %arg2 : tensor<4xi32>
  %7 = "arith.subi"(%i, %i) <{overflowFlags = #arith.overflow<none>}> : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  // Scalars and non-splat constants stay.
  // CHECK: "arith.addf"(%arg3, %arg3)
  %8 = "arith.addf"(%s, %s) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
  // CHECK: "arith.constant"() <{value = dense<[1, 2, 3, 4]> : tensor<4xi32>}>
  %9 = "arith.constant"() <{value = dense<[1, 2, 3, 4]> : tensor<4xi32>}> : () -> tensor<4xi32>
  %10 = "arith.addi"(%7, %9) <{overflowFlags = #arith.overflow<none>}> : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %6, %10, %8 : tensor<4x8xbf16>, tensor<4xi32>, f32
}
