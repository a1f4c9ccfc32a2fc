// RUN: commlir-opt %s --split-input-file --verify-diagnostics

func.func @int_addf(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @below {{'arith.addf' op result #0 must be floating-point-like, but got 'tensor<4xi32>'}}
  %0 = "arith.addf"(%a, %a) <{fastmath = #arith.fastmath<none>}> : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @float_addi(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'arith.addi' op result #0 must be signless-integer-like, but got 'tensor<4xf32>'}}
  %0 = arith.addi %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @mixed(%a: tensor<4xf32>, %b: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @below {{requires the same type for all operands and results, but operand #1 is 'tensor<8xf32>' and the result 'tensor<4xf32>'}}
  %0 = "arith.mulf"(%a, %b) : (tensor<4xf32>, tensor<8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @arity(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'arith.subf' op}}
  %0 = "arith.subf"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @extf(%a: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @below {{result type 'tensor<4xbf16>' must be wider than operand type 'tensor<4xf32>'}}
  %0 = "arith.extf"(%a) : (tensor<4xf32>) -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

func.func @truncf(%a: tensor<4xf32>) -> tensor<8xbf16> {
  // expected-error @below {{requires the same shape for the operand and the result, got 'tensor<4xf32>' and 'tensor<8xbf16>'}}
  %0 = "arith.truncf"(%a) : (tensor<4xf32>) -> tensor<8xbf16>
  return %0 : tensor<8xbf16>
}

// -----

func.func @constant() -> tensor<4xf32> {
  // expected-error @below {{value type 'tensor<8xf32>' must match the result type 'tensor<4xf32>'}}
  %0 = "arith.constant"() <{value = dense<1.0> : tensor<8xf32>}> : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @constant_value() -> tensor<4xf32> {
  // expected-error @below {{'arith.constant' op requires attribute 'value'}}
  %0 = "arith.constant"() : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @cmpf(%a: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @below {{'arith.cmpf' op is not registered: commlir's 'arith' dialect declares only the ops its conversions consume; use --allow-unregistered-dialect to accept it}}
  %0 = "arith.cmpf"(%a, %a) <{predicate = 1 : i64}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}
