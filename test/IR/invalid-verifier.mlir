// Errors of the generic verifier (structure, dominance, symbols, terminators), in MLIR's
// words.
//
// RUN: commlir-opt --allow-unregistered-dialect %s --split-input-file --verify-diagnostics

func.func @dominance(%a: i32) -> i32 {
  // expected-error @below {{operand #0 does not dominate this use}}
  %0 = "my.use"(%1) : (i32) -> i32
  %1 = "my.def"() : () -> i32
  return %0 : i32
}

// -----

// expected-note @below {{see existing symbol definition here}}
func.func @f() {
  return
}
// expected-error @below {{redefinition of symbol named 'f'}}
func.func @f() {
  return
}

// -----

// expected-error @below {{empty block: expect at least a terminator}}
func.func @empty() {
}

// -----

// expected-note @below {{in the region of this operation}}
func.func @no_terminator(%a: tensor<4xf32>) {
  // expected-error @below {{block with no terminator, has 'compute.neg'}}
  %b = compute.neg %a : tensor<4xf32>
}
