// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-overlap-schedule))' | FileCheck %s
// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-overlap-schedule{exact-region-ops=0}))' | FileCheck %s
// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-overlap-schedule))' --mlir-pass-statistics 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: not commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-overlap-schedule{peak-memory-budget=-1.0}))' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-overlap-schedule{lookahead=0}))' 2>&1 | FileCheck %s --check-prefix=LOOK

// The all-reduce (100 ns) of %n = neg %a (10 ns) is traced after the matmul and the exp
// (50 ns each), which do not need it: it starts at 110 ns and the add waits until 210 ns.
// The pass runs the neg first (longest path to the end), issues the all-reduce at 10 ns and
// waits for it after the independent compute: makespan 210 -> 110 ns, within the input's
// peak.
coll.group @tp {size = 2 : i64}
// CHECK-LABEL: func.func @f
// CHECK: compute.neg
// CHECK-NEXT: coll.all_reduce
// CHECK-NEXT: compute.matmul
// CHECK-NEXT: compute.exp
// CHECK-NEXT: coll.wait_tensor
// CHECK-NEXT: compute.add
// STATS: CommOverlapSchedule
// STATS: (S) 1 scheduled
// STATS: (S) 210 makespan-ns-before
// STATS: (S) 110 makespan-ns-after
// STATS: (S) 1 exact-proven
// BAD: peak-memory-budget must be a non-negative number
// LOOK: lookahead must be at least 1
func.func @f(%a: tensor<4xf32>, %x: tensor<2x2xf32>) -> (tensor<4xf32>, tensor<2x2xf32>) {
  %m = compute.matmul %x, %x {cost_ns = 50 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %e = compute.exp %m {cost_ns = 50 : i64} : tensor<2x2xf32>
  %n = compute.neg %a {cost_ns = 10 : i64} : tensor<4xf32>
  %r = coll.all_reduce %n {reduce_op = "sum", group = @tp, cost_ns = 100 : i64} : tensor<4xf32>
  %w = coll.wait_tensor %r : tensor<4xf32>
  %s = compute.add %w, %w {cost_ns = 0 : i64} : tensor<4xf32>
  return %s, %e : tensor<4xf32>, tensor<2x2xf32>
}
