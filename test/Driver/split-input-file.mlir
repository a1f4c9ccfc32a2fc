// Each chunk is its own module; outputs are joined by the split marker, and diagnostics keep
// the line numbers of the original file.

// RUN: commlir-opt %s --split-input-file | FileCheck %s
// RUN: commlir-opt %s --split-input-file | commlir-opt --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @first
// CHECK: // -----
// CHECK-LABEL: func.func @second
// CHECK-NOT: // -----

func.func @first() {
  return
}

// -----

func.func @second() {
  return
}
