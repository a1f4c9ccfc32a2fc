// Every type of the textual format (DESIGN §3), printed back as MLIR prints it; the forms the
// IR does not model (strided layouts, affine maps, vectors, …) are kept as opaque text.
//
// RUN: commlir-opt --allow-unregistered-dialect %s | commlir-opt --allow-unregistered-dialect | FileCheck %s
// RUN: commlir-opt --allow-unregistered-dialect %s --mlir-print-op-generic | commlir-opt --allow-unregistered-dialect | FileCheck %s

// CHECK: "my.ints"() : () -> (i1, i8, i16, i32, i64, index, ui8, si32, i128)
%0:9 = "my.ints"() : () -> (i1, i8, i16, i32, i64, index, ui8, si32, i128)
// CHECK: "my.floats"() : () -> (f16, bf16, f32, f64, none)
%1:5 = "my.floats"() : () -> (f16, bf16, f32, f64, none)
// CHECK: "my.tensors"() : () -> (tensor<4x8xf32>, tensor<?x8xf32>, tensor<f32>, tensor<*xbf16>, tensor<0x3xi8>, tensor<4x8xf32, #my.enc<"x">>)
%2:6 = "my.tensors"() : () -> (tensor<4x8xf32>, tensor<?x8xf32>, tensor<f32>, tensor<*xbf16>, tensor<0x3xi8>, tensor<4x8xf32, #my.enc<"x">>)
// CHECK: "my.memrefs"() : () -> (memref<4x?xf32>, memref<f32>, memref<4xf32, strided<[1], offset: ?>>, memref<8xi8, 1>, memref<*xf32>)
%3:5 = "my.memrefs"() : () -> (memref<4x?xf32>, memref<f32>, memref<4xf32, strided<[1], offset: ?>>, memref<8xi8, 1>, memref<*xf32>)
// CHECK: "my.functions"() : () -> ((i32, f32) -> tensor<?x8xbf16>, () -> (), (i32) -> (i32, i32), tuple<i32, f32>, tuple<>)
%4:5 = "my.functions"() : () -> ((i32, f32) -> tensor<?x8xbf16>, () -> (), (i32) -> (i32, i32), tuple<i32, f32>, tuple<>)
// CHECK: "my.dialect_types"() : () -> (!my.t, !my.t<"a", 4>, !my<"b">, !my.nested<tensor<4xf32>, [1, 2]>)
%5:4 = "my.dialect_types"() : () -> (!my.t, !my.t<"a", 4>, !my<"b">, !my.nested<tensor<4xf32>, [1, 2]>)
// CHECK: "my.opaque"() : () -> (vector<4xf32>, complex<f32>, vector<[4]x2xf32>)
%6:3 = "my.opaque"() : () -> (vector<4xf32>, complex<f32>, vector<[4]x2xf32>)
