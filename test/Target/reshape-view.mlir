// A reshape moves no element: one whose input the function allocated becomes an `rt.view`
// of that buffer (no kernel, no allocation), and the allocation is freed after the last
// reader of the buffer or any of its views. A reshape of an argument, or one that is
// returned, keeps its copy (the caller owns arguments and what it is returned).
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=rt | FileCheck %s

// CHECK-LABEL: func.func @view(
// CHECK: kernel = @k0_exp
// CHECK-NEXT: %[[S:.*]] = rt.alloc : memref<4x8xf32>
// CHECK-NEXT: rt.launch %{{.*}}, %[[S]] {{.*}}kernel = @k1_softmax
// CHECK-NEXT: %[[V:.*]] = rt.view %[[S]] : (memref<4x8xf32>) -> memref<2x16xf32>
// CHECK: rt.gemm %arg1, %[[S]],
// CHECK: %[[R:.*]] = rt.alloc : memref<2x2x8xf32>
// CHECK-NEXT: rt.launch %[[S]], %[[R]] {{.*}}kernel = @k2_reshape
// The transpose of the view is read through its index map by the add's kernel.
// CHECK-NEXT: %[[T:.*]] = rt.alloc : memref<4x8xf32>
// CHECK-NEXT: rt.launch %[[V]], %{{.*}}, %[[T]] {{.*}}kernel = @k3_reshape_add
// CHECK-NEXT: rt.free %[[S]] : memref<4x8xf32>
// CHECK: return %[[R]],

// CHECK-LABEL: func.func @argument(
// CHECK: rt.launch %arg0, %{{.*}}kernel = @k5_reshape
// CHECK: %[[S2:.*]] = rt.alloc : memref<32xf32>
// CHECK: %[[V2:.*]] = rt.view %[[S2]] : (memref<32xf32>) -> memref<4x8xf32>
// CHECK-NEXT: %[[T2:.*]] = rt.alloc : memref<8x4xf32>
// CHECK-NEXT: rt.launch %[[V2]], %[[T2]]
// CHECK-NEXT: rt.free %[[S2]] : memref<32xf32>

func.func @view(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> (tensor<2x2x8xf32>, tensor<4x16xf32>) {
  %e = compute.exp %x : tensor<4x8xf32>
  %s = compute.softmax %e {dim = 1 : i64} : tensor<4x8xf32>
  %r = compute.reshape %s : (tensor<4x8xf32>) -> tensor<32xf32>
  %r2 = compute.reshape %r : (tensor<32xf32>) -> tensor<2x16xf32>
  %t = compute.transpose %r2 : (tensor<2x16xf32>) -> tensor<16x2xf32>
  %m = compute.matmul %s, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %ret = compute.reshape %s : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
  %u = compute.reshape %t : (tensor<16x2xf32>) -> tensor<4x8xf32>
  %n = compute.add %u, %e : tensor<4x8xf32>
  %m2 = compute.matmul %n, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %sum = compute.add %m, %m2 : tensor<4x16xf32>
  return %ret, %sum : tensor<2x2x8xf32>, tensor<4x16xf32>
}

func.func @argument(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %r = compute.reshape %x : (tensor<4x8xf32>) -> tensor<32xf32>
  %s = compute.softmax %r {dim = 0 : i64} : tensor<32xf32>
  %t = compute.reshape %s : (tensor<32xf32>) -> tensor<4x8xf32>
  %u = compute.transpose %t : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %u : tensor<8x4xf32>
}
