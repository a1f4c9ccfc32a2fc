// RUN: commlir-opt %s | commlir-opt | FileCheck %s
// RUN: commlir-opt %s --mlir-print-op-generic | commlir-opt | FileCheck %s

// CHECK-LABEL: func.func @compute
func.func @compute(%a: tensor<8x16xbf16>, %b: tensor<16x4xbf16>, %c: tensor<2x8x16xf32>, %d: tensor<2x16x4xf32>) -> tensor<8x4xbf16> {
  // CHECK: compute.matmul %{{.*}}, %{{.*}} : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16>
  %m = compute.matmul %a, %b : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16>
  // CHECK: compute.matmul %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  %bm = compute.matmul %c, %d : (tensor<2x8x16xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  // CHECK: compute.add %{{.*}}, %{{.*}} {cost_ns = 7 : i64} : tensor<8x4xbf16>
  %s = compute.add %m, %m {cost_ns = 7 : i64} : tensor<8x4xbf16>
  %t1 = compute.sub %s, %m : tensor<8x4xbf16>
  %t2 = compute.mul %t1, %m : tensor<8x4xbf16>
  %t3 = compute.div %t2, %m : tensor<8x4xbf16>
  %t4 = compute.maximum %t3, %m : tensor<8x4xbf16>
  %t5 = compute.minimum %t4, %m : tensor<8x4xbf16>
  // CHECK: compute.gelu %{{.*}} : tensor<8x4xbf16>
  %u0 = compute.neg %t5 : tensor<8x4xbf16>
  %u1 = compute.exp %u0 : tensor<8x4xbf16>
  %u2 = compute.relu %u1 : tensor<8x4xbf16>
  %u3 = compute.gelu %u2 : tensor<8x4xbf16>
  %u4 = compute.silu %u3 : tensor<8x4xbf16>
  %u5 = compute.tanh %u4 : tensor<8x4xbf16>
  %u6 = compute.sqrt %u5 : tensor<8x4xbf16>
  %u7 = compute.rsqrt %u6 : tensor<8x4xbf16>
  %u8 = compute.clone %u7 : tensor<8x4xbf16>
  // CHECK: compute.scale %{{.*}} {factor = 0.5 : f64} : tensor<8x4xbf16>
  %sc = compute.scale %u8 {factor = 0.5 : f64} : tensor<8x4xbf16>
  // CHECK: compute.softmax %{{.*}} {dim = 1 : i64} : tensor<8x4xbf16>
  %sm = compute.softmax %sc {dim = 1 : i64} : tensor<8x4xbf16>
  // CHECK: compute.reduce_sum %{{.*}} {dim = 0 : i64} : (tensor<8x4xbf16>) -> tensor<4xbf16>
  %rs = compute.reduce_sum %sm {dim = 0 : i64} : (tensor<8x4xbf16>) -> tensor<4xbf16>
  // CHECK: compute.transpose %{{.*}} : (tensor<8x4xbf16>) -> tensor<4x8xbf16>
  %tr = compute.transpose %sm : (tensor<8x4xbf16>) -> tensor<4x8xbf16>
  // CHECK: compute.reshape %{{.*}} : (tensor<4x8xbf16>) -> tensor<32xbf16>
  %re = compute.reshape %tr : (tensor<4x8xbf16>) -> tensor<32xbf16>
  // CHECK: compute.slice %{{.*}} {dim = 0 : i64, size = 4 : i64, start = 2 : i64} : (tensor<8x4xbf16>) -> tensor<4x4xbf16>
  %sl = compute.slice %sm {dim = 0 : i64, start = 2 : i64, size = 4 : i64} : (tensor<8x4xbf16>) -> tensor<4x4xbf16>
  // CHECK: compute.concat %{{.*}}, %{{.*}} {dim = 0 : i64} : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<8x4xbf16>
  %cc = compute.concat %sl, %sl {dim = 0 : i64} : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<8x4xbf16>
  // CHECK: compute.cast %{{.*}} : (tensor<8x4xbf16>) -> tensor<8x4xf32>
  %ca = compute.cast %cc : (tensor<8x4xbf16>) -> tensor<8x4xf32>
  // CHECK: compute.fill {value = 1.0 : f64} : tensor<8x4xbf16>
  %f = compute.fill {value = 1.0 : f64} : tensor<8x4xbf16>
  return %cc : tensor<8x4xbf16>
}
