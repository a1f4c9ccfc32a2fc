// comm-to-rt: a call of a function without a body cannot be compiled.
// REQUIRES: commlir-translate
// RUN: not commlir-translate %s 2>&1 | FileCheck %s

// CHECK: error: 'func.call' op comm-to-rt: calls a function declaration; the callee needs a body to be compiled
func.func private @extern(%x: tensor<4xf32>) -> tensor<4xf32>
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = func.call @extern(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
