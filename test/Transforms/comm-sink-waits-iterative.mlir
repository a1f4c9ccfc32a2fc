// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-sink-waits-iterative{verify-memory=true}))' | FileCheck %s
// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-sink-waits-iterative{remarks=true}))' 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-sink-waits-iterative))' --mlir-pass-statistics 2>&1 | FileCheck %s --check-prefix=STATS

// Three all-reduces waited in reverse order (%w3, %w2, %w1); cost_ns = 100 per collective,
// 5 per matmul, 1 per other op. Waits are taken right to left; the op after the group is
// the candidate.
//
// %w1: the adds s, t, o depend on it in a chain and join its group; the return (fixed) stops
//      it: 3 grouped, no move.
// %w2: %w1 is independent of it and moves before it (1 move); then s, t, o join; return.
// %w3: %w1 and %w2 move before it, then s = w1 + w2 (3 moves); t and o join; return.
//      Its all-reduce gains the 1 ns of s: 100 -> 99 ns exposed.
coll.group @tp {size = 2 : i64}
// REMARK: remark: moves=0 grouped=3 comm=100.0ns exposed 96.0ns -> 96.0ns, limited by fixed op at 'func.return'
// REMARK: remark: moves=1 grouped=3 comm=100.0ns exposed 98.0ns -> 98.0ns, limited by fixed op at 'func.return'
// REMARK: remark: moves=3 grouped=2 comm=100.0ns exposed 100.0ns -> 99.0ns, limited by fixed op at 'func.return'
// CHECK-LABEL: func.func @three
// CHECK: compute.exp
// CHECK-NEXT: coll.all_reduce
// CHECK-NEXT: %[[W1:.*]] = coll.wait_tensor
// CHECK-NEXT: %[[W2:.*]] = coll.wait_tensor
// CHECK-NEXT: compute.add %[[W1]], %[[W2]]
// CHECK-NEXT: coll.wait_tensor
// CHECK-NEXT: compute.add
// CHECK-NEXT: compute.add
// CHECK-NEXT: return
// STATS: CommSinkWaitsIterative
// STATS: (S) 3 processed
// STATS: (S) 4 moves
// STATS: (S) 8 grouped
// STATS: (S) 3 limited-by-fixed
func.func @three(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %m = compute.matmul %a, %a {cost_ns = 5 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %x1 = compute.relu %a {cost_ns = 1 : i64} : tensor<4x4xf32>
  %r1 = coll.all_reduce %x1 {reduce_op = "sum", group = @tp, cost_ns = 100 : i64} : tensor<4x4xf32>
  %y = compute.tanh %m {cost_ns = 1 : i64} : tensor<4x4xf32>
  %x2 = compute.neg %a {cost_ns = 1 : i64} : tensor<4x4xf32>
  %r2 = coll.all_reduce %x2 {reduce_op = "sum", group = @tp, cost_ns = 100 : i64} : tensor<4x4xf32>
  %z = compute.sub %y, %a {cost_ns = 1 : i64} : tensor<4x4xf32>
  %x3 = compute.exp %a {cost_ns = 1 : i64} : tensor<4x4xf32>
  %r3 = coll.all_reduce %x3 {reduce_op = "sum", group = @tp, cost_ns = 100 : i64} : tensor<4x4xf32>
  %w3 = coll.wait_tensor %r3 : tensor<4x4xf32>
  %w2 = coll.wait_tensor %r2 : tensor<4x4xf32>
  %w1 = coll.wait_tensor %r1 : tensor<4x4xf32>
  %s = compute.add %w1, %w2 {cost_ns = 1 : i64} : tensor<4x4xf32>
  %t = compute.add %s, %w3 {cost_ns = 1 : i64} : tensor<4x4xf32>
  %o = compute.add %t, %z {cost_ns = 1 : i64} : tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}
