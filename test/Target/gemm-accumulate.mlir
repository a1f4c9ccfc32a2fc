// A residual add whose product operand only it reads, onto a buffer of the function's own
// that nothing reads after the GEMM, is that GEMM with beta 1 (`accumulate`) writing into the
// buffer: no add kernel, no buffer for the product, and the sum lives on in the buffer added
// onto. An add onto an argument, onto a buffer the GEMM itself reads, or onto a value read
// again later keeps its kernel.
// RUN: commlir-translate %s --emit=rt | FileCheck %s

// CHECK-LABEL: func.func @residual(
// CHECK: rt.gemm %arg1, %arg0, %[[H:[0-9]+]] {batch
// CHECK: rt.launch %[[H]], %[[G:[0-9]+]] {{.*}}kernel = @{{k[0-9]+}}_relu
// CHECK: rt.gemm %arg2, %[[G]], %[[H]] {accumulate, batch
// CHECK-NOT: _add
// CHECK: return %[[H]]
func.func @residual(%x: tensor<64x256xf32>, %w: tensor<256x256xf32>, %v: tensor<256x256xf32>) -> tensor<64x256xf32> {
  %h = compute.matmul %x, %w : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
  %g = compute.relu %h : tensor<64x256xf32>
  %m = compute.matmul %g, %v : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
  %y = compute.add %h, %m : tensor<64x256xf32>
  return %y : tensor<64x256xf32>
}

// CHECK-LABEL: func.func @kept(
// CHECK-NOT: accumulate
// CHECK: rt.launch {{.*}}_add
// CHECK: rt.launch {{.*}}_add
// CHECK: rt.launch {{.*}}_add
// CHECK: return
func.func @kept(%x: tensor<64x256xf32>, %w: tensor<256x256xf32>) -> (tensor<64x256xf32>, tensor<64x256xf32>) {
  // Onto an argument.
  %m = compute.matmul %x, %w : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
  %y = compute.add %x, %m : tensor<64x256xf32>
  // Onto the GEMM's own operand.
  %m2 = compute.matmul %y, %w : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
  %y2 = compute.add %y, %m2 : tensor<64x256xf32>
  // Onto a value read after the GEMM (by the return).
  %m3 = compute.matmul %x, %w : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
  %y3 = compute.add %y2, %m3 : tensor<64x256xf32>
  return %y3, %y2 : tensor<64x256xf32>, tensor<64x256xf32>
}
