// RUN: commlir-opt %s | commlir-opt | FileCheck %s
// RUN: commlir-opt %s --mlir-print-op-generic | commlir-opt | FileCheck %s

// CHECK-LABEL: func.func @broadcast_permute
func.func @broadcast_permute(%a: tensor<1x4xf32>, %b: tensor<4xi1>, %c: tensor<2x3x4xbf16>) -> tensor<3x2x4xbf16> {
  // CHECK: compute.broadcast %{{.*}} : (tensor<1x4xf32>) -> tensor<3x4xf32>
  %0 = compute.broadcast %a : (tensor<1x4xf32>) -> tensor<3x4xf32>
  // CHECK: compute.broadcast %{{.*}} : (tensor<4xi1>) -> tensor<2x3x4xi1>
  %1 = compute.broadcast %b : (tensor<4xi1>) -> tensor<2x3x4xi1>
  // CHECK: compute.broadcast %{{.*}} {cost_ns = 3 : i64} : tensor<3x4xf32>
  %2 = compute.broadcast %0 {cost_ns = 3 : i64} : tensor<3x4xf32>
  // CHECK: compute.permute %{{.*}} {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xbf16>) -> tensor<3x2x4xbf16>
  %3 = compute.permute %c {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xbf16>) -> tensor<3x2x4xbf16>
  return %3 : tensor<3x2x4xbf16>
}

// CHECK-LABEL: func.func @reduce_unary
func.func @reduce_unary(%a: tensor<8x16xf32>, %i: tensor<8x16xi32>, %h: tensor<8x16xbf16>) -> tensor<8xf32> {
  // CHECK: compute.reduce_max %{{.*}} {dim = 1 : i64} : (tensor<8x16xf32>) -> tensor<8xf32>
  %0 = compute.reduce_max %a {dim = 1 : i64} : (tensor<8x16xf32>) -> tensor<8xf32>
  // CHECK: compute.reduce_max %{{.*}} {dim = 0 : i64} : (tensor<8x16xi32>) -> tensor<16xi32>
  %1 = compute.reduce_max %i {dim = 0 : i64} : (tensor<8x16xi32>) -> tensor<16xi32>
  // CHECK: compute.sin %{{.*}} : tensor<8x16xbf16>
  %2 = compute.sin %h : tensor<8x16xbf16>
  // CHECK: compute.cos %{{.*}} : tensor<8x16xbf16>
  %3 = compute.cos %2 : tensor<8x16xbf16>
  // CHECK: compute.sigmoid %{{.*}} : tensor<8x16xf32>
  %4 = compute.sigmoid %a : tensor<8x16xf32>
  // CHECK: compute.log %{{.*}} : tensor<8x16xf32>
  %5 = compute.log %4 : tensor<8x16xf32>
  return %0 : tensor<8xf32>
}

// CHECK-LABEL: func.func @mask
func.func @mask(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %u: tensor<4x8xui8>) -> tensor<4x8xf32> {
  // CHECK: compute.compare %{{.*}}, %{{.*}} {predicate = "lt"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %c = compute.compare %a, %b {predicate = "lt"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  // CHECK: compute.compare %{{.*}}, %{{.*}} {predicate = "ge"} : (tensor<4x8xui8>, tensor<4x8xui8>) -> tensor<4x8xi1>
  %d = compute.compare %u, %u {predicate = "ge"} : (tensor<4x8xui8>, tensor<4x8xui8>) -> tensor<4x8xi1>
  // CHECK: compute.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = compute.select %c, %a, %b : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // All types equal: the short form.
  // CHECK: compute.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xi1>
  %s = compute.select %c, %c, %d : (tensor<4x8xi1>, tensor<4x8xi1>, tensor<4x8xi1>) -> tensor<4x8xi1>
  // CHECK: compute.iota {dim = 1 : i64} : tensor<4x8xi64>
  %i = compute.iota {dim = 1 : i64} : tensor<4x8xi64>
  // CHECK: compute.iota {dim = 0 : i64} : tensor<4x8xbf16>
  %j = compute.iota {dim = 0 : i64} : tensor<4x8xbf16>
  return %r : tensor<4x8xf32>
}
