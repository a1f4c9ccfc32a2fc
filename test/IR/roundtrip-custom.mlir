// The structural ops in MLIR's custom syntax (module, func.func, return, call), the uniform
// custom form of registered ops, locations and file metadata.
//
// RUN: commlir-opt %s | commlir-opt | FileCheck %s
// RUN: commlir-opt %s --mlir-print-op-generic | commlir-opt | FileCheck %s
// RUN: commlir-opt %s --mlir-print-debuginfo | commlir-opt --mlir-print-debuginfo | FileCheck %s --check-prefix=LOC
// RUN: commlir-opt %s > %t.1.mlir
// RUN: commlir-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir

{-# file metadata, skipped #-}

// CHECK: module @named attributes {my.flag, my.n = 3 : i64} {
module @named attributes {my.n = 3 : i64, my.flag} {
  // CHECK-NEXT: coll.group @tp {size = 2 : i64, symm_mem}
  coll.group @tp {size = 2 : i64, symm_mem}
  // CHECK-NEXT: func.func private @decl(tensor<4xf32>) -> tensor<4xf32>
  func.func private @decl(tensor<4xf32>) -> tensor<4xf32>
  // CHECK-LABEL: func.func @caller(
  // CHECK-SAME: %[[X:.*]]: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  // LOC-LABEL: func.func @caller(
  // LOC-SAME: loc("{{.*}}roundtrip-custom.mlir":[[@LINE+1]]:
  func.func @caller(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    // CHECK-NEXT: %[[C:.*]] = {{(func\.)?}}call @decl(%[[X]]) : (tensor<4xf32>) -> tensor<4xf32>
    // LOC: call @decl({{.*}} loc("{{.*}}roundtrip-custom.mlir":[[@LINE+1]]:5)
    %c = func.call @decl(%x) : (tensor<4xf32>) -> tensor<4xf32>
    // CHECK-NEXT: %[[R:.*]] = coll.all_reduce %[[C]] {group = @tp, reduce_op = "sum"} : tensor<4xf32>
    // LOC: coll.all_reduce {{.*}} loc("here.py":7:3)
    %r = coll.all_reduce %c {reduce_op = "sum", group = @tp} : tensor<4xf32> loc("here.py":7:3)
    // CHECK-NEXT: %[[W:.*]] = coll.wait_tensor %[[R]] : tensor<4xf32>
    %w = coll.wait_tensor %r : tensor<4xf32>
    // CHECK-NEXT: %[[S:.*]] = compute.scale %[[W]] {cost_ns = 5 : i64, factor = {{0.5|5.000000e-01}} : f64} : tensor<4xf32>
    %s = compute.scale %w {factor = 0.5 : f64, cost_ns = 5 : i64} : tensor<4xf32>
    // CHECK-NEXT: return %[[S]], %[[W]] : tensor<4xf32>, tensor<4xf32>
    func.return %s, %w : tensor<4xf32>, tensor<4xf32>
  }
}

// A file without a module gets an implicit one; `builtin.module` is the same op.
// RUN: echo 'func.func @f() { return }' | commlir-opt | FileCheck %s --check-prefix=IMPLICIT
// IMPLICIT: module {
// IMPLICIT-NEXT: func.func @f() {
// IMPLICIT-NEXT: return
// RUN: echo 'builtin.module { }' | commlir-opt | FileCheck %s --check-prefix=BUILTIN
// BUILTIN: module {
