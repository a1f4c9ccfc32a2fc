// The examples run on the sim backend, and lowering their collectives with coll-to-comm (and
// the demo's pipeline) does not change a single digest.
//
// REQUIRES: commlir-run
// RUN: commlir-run %S/../../examples/tp_mlp.mlir --ranks 2 > %t.before
// RUN: commlir-opt %S/../../examples/tp_mlp.mlir --pass-pipeline='builtin.module(func.func(coll-to-comm,cse,dce),symbol-dce)' | commlir-run - --ranks 2 > %t.after
// RUN: diff %t.before %t.after
// RUN: FileCheck %s < %t.before

// Every rank holds the same all-reduced output.
// CHECK: rank 0 result 0: tensor<8x1024xbf16> digest=[[D:[0-9a-f]+]]
// CHECK-NEXT: rank 1 result 0: tensor<8x1024xbf16> digest=[[D]]
