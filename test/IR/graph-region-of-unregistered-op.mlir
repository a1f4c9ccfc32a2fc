// The regions of an unregistered op may be graph regions: MLIR does not check dominance in
// them, and neither do we (a use may precede its definition).
//
// RUN: commlir-opt --allow-unregistered-dialect %s | commlir-opt --allow-unregistered-dialect | FileCheck %s

// CHECK-LABEL: "my.graph"() ({
// CHECK: "my.use"(%[[LATER:.*]]) : (i32) -> ()
// CHECK: %[[LATER]] = "my.def"() : () -> i32
"my.graph"() ({
  "my.use"(%later.value_1) : (i32) -> ()
  %later.value_1 = "my.def"() : () -> i32
  "my.end"() : () -> ()
}) : () -> ()
