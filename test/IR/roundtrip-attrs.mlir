// Every attribute of the textual format (DESIGN §3), printed back in commlir's canonical
// form: dictionaries sorted by name, bare integers as i64, bare floats as f64, floats in their
// shortest exact form, unit attributes as bare keys. (That mlir-opt reads the same attributes
// back to the same values is checked in mlir-interop.mlir.)
//
// RUN: commlir-opt --allow-unregistered-dialect %s | commlir-opt --allow-unregistered-dialect | FileCheck %s
// RUN: commlir-opt --allow-unregistered-dialect %s --mlir-print-op-generic | commlir-opt --allow-unregistered-dialect | FileCheck %s

// CHECK: "my.ints"() {a = 42 : i64, b = -3 : i8, c = 0 : index, d = true, e = false, f = 18446744073709551615 : ui64, g = -9223372036854775808 : i64} : () -> ()
"my.ints"() {g = -9223372036854775808 : i64, f = 18446744073709551615 : ui64, e = false, d = true, c = 0 : index, b = -3 : i8, a = 42} : () -> ()
// CHECK: "my.floats"() {a = 1.5 : f32, b = 2.0 : f64, c = -0.5 : bf16, d = 0x7FC00000 : f32} : () -> ()
"my.floats"() {a = 1.5 : f32, b = 2.0, c = -0.5 : bf16, d = 0x7FC00000 : f32} : () -> ()
// CHECK: "my.strings"() {a = "text", b = "q\"uote\nnl", c = ""} : () -> ()
"my.strings"() {a = "text", b = "q\"uote\nnl", c = ""} : () -> ()
// CHECK: "my.unit"() {u} : () -> ()
"my.unit"() {u} : () -> ()
// CHECK: "my.containers"() {a = [1, "a", [2, []]], b = {k = 1 : i32, z = {}}, c = array<i64: 1, 2>, d = array<f32: 1.0>, e = array<i1>} : () -> ()
"my.containers"() {a = [1, "a", [2, []]], b = {z = {}, k = 1 : i32}, c = array<i64: 1, 2>, d = array<f32: 1.0>, e = array<i1>} : () -> ()
// CHECK: "my.symbols"() {a = @sym, b = @a::@b::@c, c = @"quoted name"} : () -> ()
"my.symbols"() {a = @sym, b = @a::@b::@c, c = @"quoted name"} : () -> ()
// CHECK: "my.dense"() {a = dense<1.0> : tensor<4xf32>, b = dense<{{\[}}[1, 2], [3, 4]]> : tensor<2x2xi32>, c = dense<> : tensor<0xf32>, d = dense<[true, false]> : tensor<2xi1>} : () -> ()
"my.dense"() {a = dense<1.0> : tensor<4xf32>, b = dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>, c = dense<> : tensor<0xf32>, d = dense<[true, false]> : tensor<2xi1>} : () -> ()
// CHECK: "my.types_as_attrs"() {a = i32, b = (i32, f32) -> tensor<?x8xbf16>, c = tensor<4xf32>} : () -> ()
"my.types_as_attrs"() {a = i32, b = (i32, f32) -> tensor<?x8xbf16>, c = tensor<4xf32>} : () -> ()
// CHECK: "my.dialect_attrs"() {a = #my.attr<"x">, b = #my<"y">, c = #my.attr} : () -> ()
"my.dialect_attrs"() {a = #my.attr<"x">, b = #my<"y">, c = #my.attr} : () -> ()
// Aliases are resolved; the opaque builtin forms are kept.
// CHECK: "my.aliases"() {a = [1, 2], b = {{#map|affine_map<\(d0\) -> \(d0\)>}}, t = tensor<4xf32>} : () -> ()
#list = [1, 2]
!tensor = tensor<4xf32>
"my.aliases"() {a = #list, b = affine_map<(d0) -> (d0)>, t = !tensor} : () -> ()
