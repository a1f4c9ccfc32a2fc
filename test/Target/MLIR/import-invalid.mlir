// REQUIRES: commlir-translate
// RUN: not commlir-translate --import-mlir %s 2>&1 | FileCheck %s

// Real MLIR's verifier speaks, located in the file, with the line and a caret.
// CHECK: import-invalid.mlir:[[@LINE+3]]:8: error: 'arith.addf' op operand #0 must be floating-point-like, but got 'i32'
// CHECK-NEXT: %0 = arith.addf %a, %a : i32
func.func @f(%a: i32) -> i32 {
  %0 = arith.addf %a, %a : i32
  return %0 : i32
}
