// Unexpected diagnostics and unmatched expectations are errors, reported in MLIR's words.

// RUN: not commlir-opt %s --verify-diagnostics 2>&1 | FileCheck %s

// CHECK: verify-diagnostics-mismatch.mlir:[[#@LINE+2]]:3: error: unexpected error: 'func.return' op has 0 operands
func.func @bad(%a: i32) -> i32 {
  return
}

// CHECK: verify-diagnostics-mismatch.mlir:[[#@LINE+1]]:4: error: expected error "this is never emitted" was not produced
// expected-error @below {{this is never emitted}}
func.func @ok() {
  return
}
