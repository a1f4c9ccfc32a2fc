// Ops of unknown dialects need --allow-unregistered-dialect, as in mlir-opt.
//
// RUN: commlir-opt %s --verify-diagnostics
// RUN: commlir-opt %s --allow-unregistered-dialect | FileCheck %s

// CHECK: "my.op"() : () -> ()
// expected-error @below {{unregistered dialect}}
"my.op"() : () -> ()
