// The small valid file whose every prefix tools/commlir-opt/tests/robustness.rs feeds to
// commlir-opt (a prefix may parse or not, but must never crash). It round-trips itself.
//
// RUN: commlir-opt --allow-unregistered-dialect %s | commlir-opt --allow-unregistered-dialect | FileCheck %s

// CHECK: coll.group @tp
coll.group @tp {size = 2 : i64, symm_mem}
#alias = [1, "two", 3.0 : f32]
!t = tensor<2x4xf32>
// CHECK-LABEL: func.func @f
func.func @f(%x: !t, %c: i1) -> !t {
  %r = coll.all_reduce %x {reduce_op = "sum", group = @tp, cost_ns = 7 : i64} : !t loc("a.py":1:2)
  %y = coll.wait_tensor %r : !t
  %0:2 = "my.op"(%y) <{p = #alias}> ({
  ^bb0(%a: f32):
    "my.yield"(%a) : (f32) -> ()
  }) {s = "str\n", d = dense<[1, 2]> : tensor<2xi8>} : (!t) -> (!t, i32)
  "my.br"(%0#0)[^bb1] : (!t) -> ()
^bb1(%z: !t):
  return %z : !t
}
