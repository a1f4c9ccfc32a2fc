// Integer tensors: ops without integer semantics in the sim backend are rejected by
// comm-to-rt, naming the op and the type.
// REQUIRES: commlir-translate
// RUN: not commlir-translate %s 2>&1 | FileCheck %s

// CHECK: error: 'compute.exp' op comm-to-rt: kernels support compute.exp on f16, bf16, f32 and f64 tensors only, not i32
func.func @e(%x: tensor<4xi32>) -> tensor<4xi32> {
  %y = compute.exp %x : tensor<4xi32>
  return %y : tensor<4xi32>
}

