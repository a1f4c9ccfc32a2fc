#loc2 = loc("c.mlir":1:19)
#loc5 = loc("c.mlir":4:19)
"builtin.module"() ({
  "func.func"() <{function_type = (f32) -> f32, sym_name = "callee"}> ({
  ^bb0(%arg1: f32 loc("c.mlir":1:19)):
    "func.return"(%arg1) : (f32) -> () loc(#loc3)
  }) : () -> () loc(#loc1)
  "func.func"() <{function_type = (f32) -> f32, sym_name = "caller"}> ({
  ^bb0(%arg0: f32 loc("c.mlir":4:19)):
    %0 = "func.call"(%arg0) <{callee = @callee}> : (f32) -> f32 loc(#loc13)
    %1 = "test.fused"() : () -> f32 loc(#loc16)
    %2 = "test.fused2"() : () -> f32 loc(#loc15)
    %3 = "test.u"() : () -> f32 loc(#loc11)
    "func.return"(%0) : (f32) -> () loc(#loc12)
  }) : () -> () loc(#loc4)
}) : () -> () loc(#loc)
#loc = loc("c.mlir":0:0)
#loc1 = loc("c.mlir":1:1)
#loc3 = loc("c.mlir":2:3)
#loc4 = loc("c.mlir":4:1)
#loc6 = loc("foo")
#loc7 = loc("bar":1:2)
#loc8 = loc("a":1:2)
#loc9 = loc("c":3:4)
#loc10 = loc("a":1:2 to 3:4)
#loc11 = loc(unknown)
#loc12 = loc("c.mlir":9:3)
#loc13 = loc(callsite(#loc6 at #loc7))
#loc14 = loc("b"(#loc9))
#loc15 = loc(fused<"meta">[#loc10])
#loc16 = loc(fused[#loc8, #loc14])

