// KNOWN BUG (XFAIL): the verifier checks dominance inside the regions of unregistered ops.
// MLIR does not (an unregistered op may hold a graph region), so mlir-opt accepts this file
// and commlir-opt rejects it ("operand #0 does not dominate this use"). When this test
// XPASSes, the bug is fixed: remove the XFAIL line.
//
// XFAIL: *
// RUN: commlir-opt --allow-unregistered-dialect %s | commlir-opt --allow-unregistered-dialect | FileCheck %s

// CHECK-LABEL: "my.graph"() ({
// CHECK: "my.use"(%[[LATER:.*]]) : (i32) -> ()
// CHECK: %[[LATER]] = "my.def"() : () -> i32
"my.graph"() ({
  "my.use"(%later.value_1) : (i32) -> ()
  %later.value_1 = "my.def"() : () -> i32
  "my.end"() : () -> ()
}) : () -> ()
