// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-global-order))' | FileCheck %s
// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-sink-waits{peak-memory-budget=1.0}))' | FileCheck %s --check-prefix=FREE
// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-global-order,comm-sink-waits{peak-memory-budget=1.0}))' | FileCheck %s --check-prefix=PINNED
// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-sink-waits))' --mlir-pass-statistics 2>&1 | FileCheck %s --check-prefix=MEM

// comm-global-order numbers the collectives in program order (`comm_order`); scheduling
// passes then keep that order across groups, not only within each group.
//
// sink-waits scores (is_wait, index). Unpinned: after the first @tp all-reduce (0,0), the
// ready ops are its wait (1,1) and the @dp all-reduce (0,3): the @dp all-reduce goes first
// and so overtakes the second @tp all-reduce, which needs the wait. That is allowed (another
// group). Pinned: the @dp all-reduce must follow the second @tp one, so the wait goes first.
// The unpinned schedule keeps three 16-byte results live at once instead of two, so at the
// default budget (0.0) it is dropped and the function keeps its order; budget 1.0 allows it.
// MEM: (S) 1 rejected-for-memory
coll.group @tp {size = 2 : i64}
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @pins
// CHECK-NEXT: coll.all_reduce {{.*}}comm_order = 0 : i64{{.*}}group = @tp
// CHECK-NEXT: coll.wait_tensor
// CHECK-NEXT: coll.all_reduce {{.*}}comm_order = 1 : i64{{.*}}group = @tp
// CHECK-NEXT: coll.all_reduce {{.*}}comm_order = 2 : i64{{.*}}group = @dp
// FREE-LABEL: func.func @pins
// FREE-NEXT: coll.all_reduce %arg0 {{.*}}group = @tp
// FREE-NEXT: coll.all_reduce %arg1 {{.*}}group = @dp
// FREE-NEXT: coll.wait_tensor
// FREE-NEXT: coll.all_reduce {{.*}}group = @tp
// PINNED-LABEL: func.func @pins
// PINNED-NEXT: coll.all_reduce %arg0 {{.*}}comm_order = 0
// PINNED-NEXT: coll.wait_tensor
// PINNED-NEXT: coll.all_reduce {{.*}}comm_order = 1
// PINNED-NEXT: coll.all_reduce %arg1 {{.*}}comm_order = 2
func.func @pins(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = coll.all_reduce %a {reduce_op = "sum", group = @tp} : tensor<4xf32>
  %1 = coll.wait_tensor %0 : tensor<4xf32>
  %2 = coll.all_reduce %1 {reduce_op = "sum", group = @tp} : tensor<4xf32>
  %3 = coll.all_reduce %b {reduce_op = "sum", group = @dp} : tensor<4xf32>
  %4 = coll.wait_tensor %2 : tensor<4xf32>
  %5 = coll.wait_tensor %3 : tensor<4xf32>
  return %4, %5 : tensor<4xf32>, tensor<4xf32>
}
