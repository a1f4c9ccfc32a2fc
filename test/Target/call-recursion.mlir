// comm-to-rt: a recursive call (through two functions) is an error: the IR has no control flow, so
// the recursion could never end.
// REQUIRES: commlir-translate
// RUN: not commlir-translate %s 2>&1 | FileCheck %s

// CHECK: error: 'func.call' op comm-to-rt: recursive call: without control flow the recursion could never end
func.func @even(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = func.call @odd(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @odd(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = func.call @even(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
