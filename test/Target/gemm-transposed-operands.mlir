// A transpose that only feeds GEMMs is folded into them: cuBLAS reads its input with the
// operand transposed (transa for B = Wᵀ, transb for A = Vᵀ), and no transpose kernel or
// buffer is left. A transpose with another user keeps its kernel.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=rt | FileCheck %s

// CHECK-LABEL: func.func @linear(%arg0: memref<8x32xf32>, %arg1: memref<16x32xf32>) -> memref<8x16xf32>
// CHECK-NOT: rt.launch
// CHECK: rt.gemm %arg1, %arg0, %{{.*}} {batch = 1 : i64, dtype = "f32", k = 32 : i64, lda = 32 : i64, ldb = 32 : i64, ldc = 16 : i64, m = 16 : i64, n = 8 : i64, stride_a = 512 : i64, stride_b = 256 : i64, stride_c = 128 : i64, transa = 1 : i64, transb = 0 : i64}
// CHECK-NOT: rt.launch
func.func @linear(%x: tensor<8x32xf32>, %w: tensor<16x32xf32>) -> tensor<8x16xf32> {
  %wt = compute.permute %w {perm = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x16xf32>
  %y = compute.matmul %x, %wt : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @lhs_batched(%arg0: memref<4x32x8xbf16>, %arg1: memref<4x32x16xbf16>) -> memref<4x8x16xbf16>
// CHECK-NOT: rt.launch
// CHECK: rt.gemm %arg1, %arg0, %{{.*}} {batch = 4 : i64, dtype = "bf16", k = 32 : i64, lda = 16 : i64, ldb = 8 : i64, ldc = 16 : i64, m = 16 : i64, n = 8 : i64, stride_a = 512 : i64, stride_b = 256 : i64, stride_c = 128 : i64, transa = 0 : i64, transb = 1 : i64}
func.func @lhs_batched(%v: tensor<4x32x8xbf16>, %b: tensor<4x32x16xbf16>) -> tensor<4x8x16xbf16> {
  %a = compute.permute %v {perm = array<i64: 0, 2, 1>} : (tensor<4x32x8xbf16>) -> tensor<4x8x32xbf16>
  %y = compute.matmul %a, %b : (tensor<4x8x32xbf16>, tensor<4x32x16xbf16>) -> tensor<4x8x16xbf16>
  return %y : tensor<4x8x16xbf16>
}

// CHECK-LABEL: func.func @kept(%arg0: memref<8x32xf32>, %arg1: memref<16x32xf32>)
// CHECK: rt.launch %arg1, %{{.*}}kernel = @k{{[0-9]+}}_transpose
// CHECK: rt.gemm {{.*}}transa = 0 : i64, transb = 0 : i64}
func.func @kept(%x: tensor<8x32xf32>, %w: tensor<16x32xf32>) -> (tensor<8x16xf32>, tensor<32x16xf32>) {
  %wt = compute.transpose %w : (tensor<16x32xf32>) -> tensor<32x16xf32>
  %y = compute.matmul %x, %wt : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return %y, %wt : tensor<8x16xf32>, tensor<32x16xf32>
}
