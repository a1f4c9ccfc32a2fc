// RUN: commlir-opt %s --split-input-file --verify-diagnostics

func.func @int_exp(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @below {{'math.exp' op result #0 must be floating-point-like, but got 'tensor<4xi32>'}}
  %0 = math.exp %a : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @tanh(%a: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @below {{requires the same type for all operands and results, but operand #0 is 'tensor<4xf32>' and the result 'tensor<4xf16>'}}
  %0 = "math.tanh"(%a) <{fastmath = #arith.fastmath<none>}> : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @erf(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'math.erf' op is not registered: commlir's 'math' dialect declares only the ops its conversions consume; use --allow-unregistered-dialect to accept it}}
  %0 = "math.erf"(%a) <{fastmath = #arith.fastmath<none>}> : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
