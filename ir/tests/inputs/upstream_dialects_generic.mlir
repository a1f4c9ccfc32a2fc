#distinct = distinct[0]<"x">
#loc2 = loc("b.mlir":4:22)
#loc3 = loc("b.mlir":4:43)
#loc13 = loc("b.mlir":14:21)
#loc14 = loc("b.mlir":14:42)
#loc16 = loc("b.mlir":15:16)
#loc23 = loc("b.mlir":24:18)
#loc24 = loc("b.mlir":24:27)
#loc26 = loc("b.mlir":26:8)
#map = affine_map<(d0) -> (d0)>
#map1 = affine_map<() -> (0)>
#map2 = affine_map<() -> (100)>
#map3 = affine_map<(d0)[s0] -> (d0 + s0)>
#set = affine_set<(d0) : (d0 - 10 >= 0)>
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<4x?xf32>, tensor<*xf32>) -> tensor<4x?xf32>, sym_name = "tensors"}> ({
  ^bb0(%arg5: tensor<4x?xf32> loc("b.mlir":4:22), %arg6: tensor<*xf32> loc("b.mlir":4:43)):
    %13 = "arith.constant"() <{value = 1 : index}> : () -> index loc(#loc4)
    %14 = "tensor.dim"(%arg5, %13) : (tensor<4x?xf32>, index) -> index loc(#loc5)
    %15 = "tensor.empty"(%14) : (index) -> tensor<4x?xf32> loc(#loc6)
    %16 = "arith.constant"() <{value = dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>}> : () -> tensor<2x2xi32> loc(#loc7)
    %17 = "arith.constant"() <{value = dense<5.000000e-01> : tensor<8xbf16>}> : () -> tensor<8xbf16> loc(#loc8)
    %18 = "tensor.extract_slice"(%arg5, %14) <{operandSegmentSizes = array<i32: 1, 0, 1, 0>, static_offsets = array<i64: 0, 0>, static_sizes = array<i64: 2, -9223372036854775808>, static_strides = array<i64: 1, 1>}> : (tensor<4x?xf32>, index) -> tensor<2x?xf32> loc(#loc9)
    %19 = "tensor.cast"(%arg6) : (tensor<*xf32>) -> tensor<4x?xf32> loc(#loc10)
    "func.return"(%19) : (tensor<4x?xf32>) -> () loc(#loc11)
  }) : () -> () loc(#loc1)
  "func.func"() <{function_type = (memref<100xf32>, index) -> (), sym_name = "affine"}> ({
  ^bb0(%arg2: memref<100xf32> loc("b.mlir":14:21), %arg3: index loc("b.mlir":14:42)):
    "affine.for"() <{lowerBoundMap = #map1, operandSegmentSizes = array<i32: 0, 0, 0>, step = 1 : index, upperBoundMap = #map2}> ({
    ^bb0(%arg4: index loc("b.mlir":15:16)):
      %12 = "affine.load"(%arg2, %arg4) <{map = #map}> : (memref<100xf32>, index) -> f32 loc(#loc17)
      "affine.if"(%arg4) <{condition = #set}> ({
        "affine.store"(%12, %arg2, %arg4) <{map = #map}> : (f32, memref<100xf32>, index) -> () loc(#loc19)
        "affine.yield"() : () -> () loc(#loc18)
      }, {
      }) : (index) -> () loc(#loc18)
      "affine.yield"() : () -> () loc(#loc15)
    }) : () -> () loc(#loc15)
    %11 = "affine.apply"(%arg3, %arg3) <{map = #map3}> : (index, index) -> index loc(#loc20)
    "func.return"() : () -> () loc(#loc21)
  }) : () -> () loc(#loc12)
  "func.func"() <{function_type = (i32, i1) -> i32, sym_name = "cfg"}> ({
  ^bb0(%arg0: i32 loc("b.mlir":24:18), %arg1: i1 loc("b.mlir":24:27)):
    "cf.cond_br"(%arg1, %arg0)[^bb1, ^bb2] <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (i1, i32) -> () loc(#loc25)
  ^bb1(%0: i32 loc("b.mlir":26:8)):  // pred: ^bb0
    %1 = "arith.muli"(%0, %0) <{overflowFlags = #arith.overflow<none>}> : (i32, i32) -> i32 loc(#loc27)
    "cf.br"()[^bb2] : () -> () loc(#loc28)
  ^bb2:  // 2 preds: ^bb0, ^bb1
    %2 = "scf.if"(%arg1) ({
      "scf.yield"(%arg0) : (i32) -> () loc(#loc30)
    }, {
      %10 = "arith.subi"(%arg0, %arg0) <{overflowFlags = #arith.overflow<none>}> : (i32, i32) -> i32 loc(#loc31)
      "scf.yield"(%10) : (i32) -> () loc(#loc32)
    }) : (i1) -> i32 loc(#loc29)
    %3 = "arith.index_cast"(%2) : (i32) -> index loc(#loc33)
    %4 = "complex.constant"() <{value = [1.000000e+00 : f32, 2.000000e+00 : f32]}> : () -> complex<f32> loc(#loc34)
    %5 = "arith.constant"() <{value = dense<1.000000e+00> : vector<4xf32>}> : () -> vector<4xf32> loc(#loc35)
    %6 = "arith.constant"() <{value = 123456789012345678901234567890 : i128}> : () -> i128 loc(#loc36)
    %7 = "arith.constant"() <{value = -1 : i8}> : () -> i8 loc(#loc37)
    %8 = "arith.constant"() <{value = 1.000000e+00 : f8E4M3FN}> : () -> f8E4M3FN loc(#loc38)
    %9 = "test.x"() {d = #distinct, f = 1.500000e-03 : f32, h = 0x7FF8000000000000 : f64, s = -128 : si8, st = "\00\FF", v = 255 : ui8} : () -> tuple<i32, f32> loc(#loc39)
    "func.return"(%2) : (i32) -> () loc(#loc40)
  }) : () -> () loc(#loc22)
}) : () -> () loc(#loc)
#loc = loc("b.mlir":3:1)
#loc1 = loc("b.mlir":4:3)
#loc4 = loc("b.mlir":5:11)
#loc5 = loc("b.mlir":6:10)
#loc6 = loc("b.mlir":7:10)
#loc7 = loc("b.mlir":8:12)
#loc8 = loc("b.mlir":9:14)
#loc9 = loc("b.mlir":10:10)
#loc10 = loc("b.mlir":11:10)
#loc11 = loc("b.mlir":12:5)
#loc12 = loc("b.mlir":14:3)
#loc15 = loc("b.mlir":15:5)
#loc17 = loc("b.mlir":16:12)
#loc18 = loc("b.mlir":17:7)
#loc19 = loc("b.mlir":18:9)
#loc20 = loc("b.mlir":21:10)
#loc21 = loc("b.mlir":22:5)
#loc22 = loc("b.mlir":24:3)
#loc25 = loc("b.mlir":25:5)
#loc27 = loc("b.mlir":27:10)
#loc28 = loc("b.mlir":28:5)
#loc29 = loc("b.mlir":30:10)
#loc30 = loc("b.mlir":31:7)
#loc31 = loc("b.mlir":33:12)
#loc32 = loc("b.mlir":34:7)
#loc33 = loc("b.mlir":36:11)
#loc34 = loc("b.mlir":37:10)
#loc35 = loc("b.mlir":38:12)
#loc36 = loc("b.mlir":39:12)
#loc37 = loc("b.mlir":40:12)
#loc38 = loc("b.mlir":41:11)
#loc39 = loc("b.mlir":42:11)
#loc40 = loc("b.mlir":43:5)

