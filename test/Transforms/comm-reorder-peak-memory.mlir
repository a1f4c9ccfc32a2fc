// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comm-reorder-peak-memory{verify-memory=true}))' | FileCheck %s
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comm-reorder-peak-memory{remarks=true}))' 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comm-reorder-peak-memory{peak-memory-budget=1.0}))' | FileCheck %s --check-prefix=BUDGET
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(comm-reorder-peak-memory{use-runtime-estimates=true}))' | FileCheck %s --check-prefix=RT

// Three all-reduces waited in reverse order; cost_ns = 100 per collective, 5 per matmul,
// 1 per other op. Collectives are taken left to right; the op before the group is the
// candidate.
//
// %r1: its input relu joins the group (data dependency, not a matmul); the matmul %m moves
//      after it (1 move); the start of the block stops it. Overlap 4 -> 9 ns.
// %r2: neg joins; tanh and the matmul move after it (2 moves); %r1 stops it (collective
//      ordering). Overlap 2 -> 8 ns.
// %r3: exp joins; sub, tanh, matmul move after it (3 moves); %r2 stops it. Overlap 0 -> 7 ns.
// Nothing here raises peak memory (every op makes one 64-byte tensor and the moved ones are
// still live at the waits), so no move is refused.
coll.group @tp {size = 2 : i64}
// REMARK: remark: moves=1 grouped=1 comm=100.0ns exposed 96.0ns -> 91.0ns, limited by none
// REMARK: remark: moves=2 grouped=1 comm=100.0ns exposed 98.0ns -> 92.0ns, limited by collective ordering at 'coll.all_reduce'
// REMARK: remark: moves=3 grouped=1 comm=100.0ns exposed 100.0ns -> 93.0ns, limited by collective ordering at 'coll.all_reduce'
// CHECK-LABEL: func.func @three
// CHECK-NEXT: compute.relu
// CHECK-NEXT: coll.all_reduce
// CHECK-NEXT: compute.neg
// CHECK-NEXT: coll.all_reduce
// CHECK-NEXT: compute.exp
// CHECK-NEXT: coll.all_reduce
// CHECK-NEXT: compute.matmul
// CHECK-NEXT: compute.tanh
// CHECK-NEXT: compute.sub
// CHECK-NEXT: coll.wait_tensor
// CHECK-NEXT: coll.wait_tensor
// CHECK-NEXT: coll.wait_tensor
// With runtime estimates the matmul is a candidate like any other, and no collective gets
// near 100 ns of overlap, so the order is the same.
// RT-LABEL: func.func @three
// RT-NEXT: compute.relu
// RT-NEXT: coll.all_reduce
// RT-NEXT: compute.neg
// RT-NEXT: coll.all_reduce
// RT-NEXT: compute.exp
// RT-NEXT: coll.all_reduce
// RT-NEXT: compute.matmul
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

// -----

// The peak-memory budget. %big (16 KiB) dies at the reduce_sum; peak = 16384 + 256 = 16640.
// Moving the reduce_sum after [relu, all_reduce] would keep %big alive while they allocate
// 2 x 64 bytes: 16768 > 16640, refused at budget 0. With budget 1.0 the reduce_sum moves,
// and so does the fill after it (16384 + 128 + 256 = 16768 <= 33280).
coll.group @tp {size = 2 : i64}
// REMARK: remark: moves=0 grouped=1 {{.*}}limited by peak memory at 'compute.reduce_sum'
// CHECK-LABEL: func.func @budget
// CHECK-NEXT: compute.fill
// CHECK-NEXT: compute.reduce_sum
// CHECK-NEXT: compute.relu
// CHECK-NEXT: coll.all_reduce
// BUDGET-LABEL: func.func @budget
// BUDGET-NEXT: compute.relu
// BUDGET-NEXT: coll.all_reduce
// BUDGET-NEXT: compute.fill
// BUDGET-NEXT: compute.reduce_sum
func.func @budget(%a: tensor<4x4xf32>) -> (tensor<64xf32>, tensor<4x4xf32>) {
  %big = compute.fill {value = 1.0 : f64} : tensor<64x64xf32>
  %s = compute.reduce_sum %big {dim = 0 : i64} : (tensor<64x64xf32>) -> tensor<64xf32>
  %x = compute.relu %a : tensor<4x4xf32>
  %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<4x4xf32>
  %w = coll.wait_tensor %r : tensor<4x4xf32>
  return %s, %w : tensor<64xf32>, tensor<4x4xf32>
}
