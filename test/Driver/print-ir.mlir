// IR dumps around passes go to stderr; --mlir-print-ir-after-change skips passes that did not
// change anything.

// RUN: commlir-opt %s -o /dev/null --mlir-print-ir-after-all --mlir-print-ir-after-change --test-count-ops --cse 2>&1 | FileCheck %s
// CHECK-NOT: IR Dump After TestCountOps
// CSE is op-agnostic, so as a flag it runs on (and dumps) the module.
// CHECK: // -----// IR Dump After CSE (cse) //----- //
// CHECK-NEXT: module {
// CHECK-NEXT: func.func @f
// CHECK-NOT: compute.neg

// RUN: commlir-opt %s -o /dev/null --mlir-print-ir-before=cse --pass-pipeline='builtin.module(func.func(cse))' 2>&1 | FileCheck %s --check-prefix=BEFORE
// BEFORE: // -----// IR Dump Before CSE (cse) //----- //
// BEFORE-NEXT: func.func @f

// RUN: commlir-opt %s -o /dev/null --mlir-print-ir-before=cse --mlir-print-ir-module-scope --pass-pipeline='builtin.module(func.func(cse))' 2>&1 | FileCheck %s --check-prefix=SCOPE
// SCOPE: // -----// IR Dump Before CSE (cse) //----- //
// SCOPE-NEXT: module

// RUN: commlir-opt %s -o /dev/null --mlir-pass-statistics --mlir-timing --cse 2>&1 | FileCheck %s --check-prefix=REPORTS
// REPORTS: ... Pass statistics report ...
// REPORTS: CSE
// REPORTS-NEXT: (S) 1 num-cse'd - Number of operations CSE'd
// REPORTS-NEXT: (S) 1 num-dce'd - Number of operations DCE'd
// REPORTS: ... Execution time report ...
// REPORTS: Total Execution Time: {{[0-9.]+}} seconds
// REPORTS: ----Wall Time----  ----Name----
// REPORTS: Parser
// REPORTS: CSE
// REPORTS: Output
// REPORTS: Rest
// REPORTS: Total

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %n = compute.neg %a : tensor<4xf32>
  %x = compute.add %a, %a : tensor<4xf32>
  %y = compute.add %a, %a : tensor<4xf32>
  %z = compute.mul %x, %y : tensor<4xf32>
  return %z : tensor<4xf32>
}
