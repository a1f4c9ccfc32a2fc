// The generic form of unregistered ops: operands, multiple results, properties, attributes,
// regions with block arguments, successors with operands. Custom printing, generic printing,
// and each output read back, to a fixed point.
//
// RUN: commlir-opt --allow-unregistered-dialect %s | commlir-opt --allow-unregistered-dialect | FileCheck %s
// RUN: commlir-opt --allow-unregistered-dialect %s --mlir-print-op-generic | commlir-opt --allow-unregistered-dialect | FileCheck %s
// RUN: commlir-opt --allow-unregistered-dialect %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: commlir-opt --allow-unregistered-dialect %s --mlir-print-op-generic --mlir-print-debuginfo > %t.1.mlir
// RUN: commlir-opt --allow-unregistered-dialect %t.1.mlir --mlir-print-op-generic --mlir-print-debuginfo > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: commlir-opt --allow-unregistered-dialect %s > %t.3.mlir
// RUN: commlir-opt --allow-unregistered-dialect %t.3.mlir > %t.4.mlir
// RUN: diff %t.3.mlir %t.4.mlir

// CHECK-LABEL: func.func @generic
// CHECK-SAME: (%[[A0:.*]]: i32, %[[A1:.*]]: tensor<4xf32>) -> i32
// GENERIC-LABEL: "func.func"() <{function_type = (i32, tensor<4xf32>) -> i32, sym_name = "generic"}> ({
// GENERIC-NEXT: ^bb0(%{{.*}}: i32, %{{.*}}: tensor<4xf32>):
func.func @generic(%arg0: i32, %arg1: tensor<4xf32>) -> i32 {
  // CHECK: %[[R:.*]]:2 = "my.two_results"(%[[A0]]) <{prop = 1 : i64}> {attr = "x"} : (i32) -> (i32, f32)
  %0:2 = "my.two_results"(%arg0) <{prop = 1 : i64}> {attr = "x"} : (i32) -> (i32, f32)
  // CHECK: %[[REG:.*]] = "my.region"(%[[R]]#0) ({
  // CHECK-NEXT: ^bb0(%[[X:.*]]: i32, %{{.*}}: f32):
  // CHECK-NEXT: "my.yield"(%[[X]]) : (i32) -> ()
  // CHECK-NEXT: }, {
  // CHECK-NEXT: "my.yield"(%[[A0]]) : (i32) -> ()
  // CHECK-NEXT: }) : (i32) -> i32
  %1 = "my.region"(%0#0) ({
  ^bb0(%x: i32, %y: f32):
    "my.yield"(%x) : (i32) -> ()
  }, {
    "my.yield"(%arg0) : (i32) -> ()
  }) : (i32) -> i32
  // An empty region and a region of one empty block.
  // CHECK: "my.empty_regions"() ({
  // CHECK-NEXT: }, {
  // CHECK-NEXT: ^bb0:
  // CHECK-NEXT: }) : () -> ()
  "my.empty_regions"() ({
  }, {
  ^bb0:
  }) : () -> ()
  // CHECK: "my.no_operands"() : () -> ()
  "my.no_operands"() : () -> ()
  // CHECK: "my.br"(%[[REG]])[^[[BB1:bb[0-9]+]]] : (i32) -> ()
  "my.br"(%1)[^bb1] : (i32) -> ()
// CHECK: ^[[BB1]](%[[Z:.*]]: i32):
^bb1(%z: i32):
  // CHECK: "my.cond_br"(%[[Z]], %[[Z]])[^[[BB1]], ^[[BB2:bb[0-9]+]]] : (i32, i32) -> ()
  "my.cond_br"(%z, %z)[^bb1, ^bb2] : (i32, i32) -> ()
// CHECK: ^[[BB2]]:
^bb2:
  // CHECK: return %[[Z]] : i32
  // GENERIC: "func.return"(%{{.*}}) : (i32) -> ()
  return %z : i32
}
