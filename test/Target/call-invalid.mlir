// comm-to-rt: calls it cannot compile. The IR has no control flow, so a recursive call could
// never return; a callee needs a body.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --split-input-file --verify-diagnostics

func.func @even(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{comm-to-rt: recursive call: without control flow the recursion could never end}}
  %y = func.call @odd(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @odd(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = func.call @even(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @self(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{comm-to-rt: recursive call}}
  %y = func.call @self(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func private @extern(%x: tensor<4xf32>) -> tensor<4xf32>
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{comm-to-rt: calls a function declaration; the callee needs a body to be compiled}}
  %y = func.call @extern(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
