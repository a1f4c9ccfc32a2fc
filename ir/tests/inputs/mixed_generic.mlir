#loc2 = loc("a.mlir":3:16)
#loc3 = loc("argb")
#loc8 = loc("a.mlir":8:8)
#loc16 = loc("a.mlir":16:18)
#loc17 = loc("a.mlir":16:53)
#map = affine_map<(d0, d1) -> (d1, d0)>
"builtin.module"() <{sym_name = "m"}> ({
  "func.func"() <{arg_attrs = [{foo.arg}, {}], function_type = (i32, f32) -> (i32, f32), res_attrs = [{}, {x.y = 1 : i64}], sym_name = "f"}> ({
  ^bb0(%arg0: i32 loc("a.mlir":3:16), %arg1: f32 loc("argb")):
    %0 = "arith.constant"() <{value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>}> : () -> tensor<2xf32> loc(#loc4)
    %1 = "arith.constant"() <{value = 0x7FC00000 : f32}> : () -> f32 loc(#loc5)
    %2 = "arith.addi"(%arg0, %arg0) <{overflowFlags = #arith.overflow<none>}> : (i32, i32) -> i32 loc(#loc6)
    "cf.br"(%2)[^bb1] : (i32) -> () loc(#loc7)
  ^bb1(%3: i32 loc("a.mlir":8:8)):  // 2 preds: ^bb0, ^bb1
    %4 = "arith.cmpi"(%3, %arg0) <{predicate = 2 : i64}> : (i32, i32) -> i1 loc(#loc9)
    "cf.cond_br"(%4, %3)[^bb1, ^bb2] <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (i1, i32) -> () loc(#loc10)
  ^bb2:  // pred: ^bb1
    %5 = "memref.alloc"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> memref<4x8xf32, #map, 1> loc(#loc11)
    %6 = "memref.alloc"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> memref<4x8xf32, strided<[8, 1]>> loc(#loc12)
    %7 = "arith.constant"() <{value = 0 : index}> : () -> index loc(#loc13)
    %8 = "arith.constant"() <{value = 10 : index}> : () -> index loc(#loc14)
    %9 = "scf.for"(%7, %8, %8, %arg0) ({
    ^bb0(%arg2: index loc("a.mlir":16:18), %arg3: i32 loc("a.mlir":16:53)):
      %11 = "arith.addi"(%arg3, %arg3) <{overflowFlags = #arith.overflow<none>}> : (i32, i32) -> i32 loc(#loc18)
      "scf.yield"(%11) : (i32) -> () loc(#loc19)
    }) : (index, index, index, i32) -> i32 loc(#loc15)
    %10 = "test.foo"() {arr = array<i64: 1, 2>, h = 16 : i32, neg = -3 : i8, s = "a\0A\22b\\", sym = @a::@b, ty = tensor<*xf32>, u} : () -> vector<4xf32> loc(#loc20)
    "func.return"(%9, %arg1) : (i32, f32) -> () loc(#loc21)
  }) : () -> () loc(#loc1)
  "func.func"() <{function_type = (i32) -> i32, sym_name = "decl", sym_visibility = "private"}> ({
  }) : () -> () loc(#loc22)
}) {foo.bar = "x"} : () -> () loc(#loc)
#loc = loc("a.mlir":2:1)
#loc1 = loc("a.mlir":3:3)
#loc4 = loc("a.mlir":4:10)
#loc5 = loc("a.mlir":5:10)
#loc6 = loc("a.mlir":6:10)
#loc7 = loc("a.mlir":7:5)
#loc9 = loc("a.mlir":9:13)
#loc10 = loc("a.mlir":10:5)
#loc11 = loc("a.mlir":12:10)
#loc12 = loc("a.mlir":13:10)
#loc13 = loc("a.mlir":14:11)
#loc14 = loc("a.mlir":15:11)
#loc15 = loc("a.mlir":16:10)
#loc18 = loc("a.mlir":17:12)
#loc19 = loc("a.mlir":18:7)
#loc20 = loc("a.mlir":20:10)
#loc21 = loc("a.mlir":21:5)
#loc22 = loc("a.mlir":23:3)

