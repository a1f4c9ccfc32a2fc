// Interoperability with real MLIR (mlir-opt 22, --allow-unregistered-dialect): the input is
// an upstream-dialect program (func, arith, cf, scf, tensor, memref: regions, successors with
// operands, block arguments, properties, locations), turned into generic form by mlir-opt at
// test time; commlir-opt must read that and print generic IR that mlir-opt reads back to the
// same module, locations included.
//
// REQUIRES: mlir-opt
//
// mlir-opt's generic form, with and without locations, is commlir-opt's input.
// RUN: mlir-opt --allow-unregistered-dialect --mlir-print-op-generic %s > %t.gen.mlir
// RUN: mlir-opt --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo %s > %t.gen-loc.mlir
//
// 1. Our generic output is read by mlir-opt, and means the same as the original.
// RUN: commlir-opt --allow-unregistered-dialect --mlir-print-op-generic %t.gen.mlir > %t.ours.mlir
// RUN: mlir-opt --allow-unregistered-dialect %t.ours.mlir > %t.ours.norm
// RUN: mlir-opt --allow-unregistered-dialect %s > %t.ref.norm
// RUN: diff %t.ref.norm %t.ours.norm
//
// 2. The same with locations: mlir-opt generic+debuginfo -> commlir-opt -> mlir-opt gives what
//    mlir-opt gives on mlir-opt's own output.
// RUN: commlir-opt --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo %t.gen-loc.mlir > %t.ours-loc.mlir
// RUN: mlir-opt --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo %t.ours-loc.mlir > %t.ours-loc.norm
// RUN: mlir-opt --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo %t.gen-loc.mlir > %t.ref-loc.norm
// RUN: diff %t.ref-loc.norm %t.ours-loc.norm
//
// 3. Our output is a fixed point of commlir-opt.
// RUN: commlir-opt --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo %t.ours-loc.mlir > %t.ours-loc2.mlir
// RUN: diff %t.ours-loc.mlir %t.ours-loc2.mlir

func.func @arith(%a: i32, %b: i32, %f: f32) -> (i32, f32) {
  %c1 = arith.constant 1 : i32
  %0 = arith.addi %a, %b overflow<nsw> : i32
  %1 = arith.muli %0, %c1 : i32
  %2 = arith.cmpi slt, %1, %b : i32
  %3 = arith.select %2, %1, %b : i32
  %4 = arith.addf %f, %f fastmath<fast> : f32
  %5 = arith.constant 1.5 : f32
  %6 = arith.mulf %4, %5 : f32
  %big = arith.constant 9223372036854775807 : i64
  %neg = arith.constant -42 : i8
  return %3, %6 : i32, f32
}

func.func private @decl(i32) -> i32 attributes {llvm.emit_c_interface}

func.func @call(%a: i32) -> i32 {
  %0 = func.call @decl(%a) : (i32) -> i32
  %1 = "my.unregistered"(%0, %a) <{prop = [1, 2]}> {note = "kept", unit} : (i32, i32) -> i32
  "my.attrs"() {i = 42, i8 = -3 : i8, u64 = 18446744073709551615 : ui64, f = 1.5 : f32, d = 2.0, h = -0.5 : bf16, tiny = 1.0e-30 : f64, nan = 0x7FC00000 : f32, s = "q\"uote\nnl\t\\", t = true, u, l = [1, "a", [2, []]], dict = {z = {}, k = 1 : i32}, sym = @sym, nested = @a::@b, quoted = @"quoted name", arr = array<i64: 1, 2>, arrf = array<f32: 1.0, -2.5>, empty = array<i1>, dense = dense<1.0> : tensor<4xf32>, dense2 = dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>, dense3 = dense<[true, false]> : tensor<2xi1>, ty = i32, fty = (i32, f32) -> tensor<?x8xbf16>, da = #my.attr<"x">, db = #my<"y">, map = affine_map<(d0) -> (d0)>} : () -> ()
  "my.types"() : () -> (i1, i128, ui8, si32, index, f16, bf16, f64, none, tensor<f32>, tensor<*xbf16>, tensor<0x3xi8>, tensor<4x8xf32, #my.enc<"x">>, memref<8xi8, 1>, memref<*xf32>, tuple<i32, f32>, tuple<>, !my.t, !my.t<"a", 4>, !my<"b">, vector<4xf32>, complex<f32>, vector<[4]x2xf32>, () -> ())
  return %1 : i32
}

func.func @cfg(%c: i1, %a: i32) -> i32 {
  cf.cond_br %c, ^bb1(%a : i32), ^bb2
^bb1(%x: i32):
  cf.br ^bb3(%x : i32)
^bb2:
  %c0 = arith.constant 0 : i32
  cf.br ^bb3(%c0 : i32)
^bb3(%r: i32):
  return %r : i32
}

func.func @loops(%t: tensor<?xf32>, %m: memref<4x?xf32>, %n: index) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d = tensor.dim %t, %c0 : tensor<?xf32>
  %r = scf.for %i = %c0 to %d step %c1 iter_args(%acc = %t) -> (tensor<?xf32>) {
    %e = tensor.extract %acc[%i] : tensor<?xf32>
    %s = arith.addf %e, %e : f32
    %u = tensor.insert %s into %acc[%i] : tensor<?xf32>
    scf.yield %u : tensor<?xf32>
  }
  %v = memref.load %m[%c0, %n] : memref<4x?xf32>
  %cond = arith.cmpf olt, %v, %v : f32
  scf.if %cond {
    memref.store %v, %m[%c1, %n] : memref<4x?xf32>
  }
  %w = scf.while (%arg = %c0) : (index) -> index {
    %lt = arith.cmpi slt, %arg, %n : index
    scf.condition(%lt) %arg : index
  } do {
  ^bb0(%arg: index):
    %nx = arith.addi %arg, %c1 : index
    scf.yield %nx : index
  }
  %alloc = memref.alloc(%w) {alignment = 64 : i64} : memref<?xf32>
  memref.dealloc %alloc : memref<?xf32>
  %sub = memref.subview %m[0, 0] [2, 2] [1, 1] : memref<4x?xf32> to memref<2x2xf32, strided<[?, 1]>>
  %empty = tensor.empty(%n) : tensor<?x4xf32>
  %cst = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %splat = arith.constant dense<0> : tensor<2x3xi8>
  return %r : tensor<?xf32>
}
