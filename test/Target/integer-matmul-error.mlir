// Integer matmul: no cuBLAS integer GEMM path, rejected by comm-to-rt naming the type.
// REQUIRES: commlir-translate
// RUN: not commlir-translate %s 2>&1 | FileCheck %s

// CHECK: error: 'compute.matmul' op comm-to-rt: kernels support compute.matmul on f16, bf16, f32 and f64 tensors only, not i32
func.func @m(%x: tensor<4x4xi32>) -> tensor<4x4xi32> {
  %y = compute.matmul %x, %x : (tensor<4x4xi32>, tensor<4x4xi32>) -> tensor<4x4xi32>
  return %y : tensor<4x4xi32>
}
