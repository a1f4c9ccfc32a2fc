// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(comm-reorder-compute-for-overlap))' | FileCheck %s

// PyTorch's test_reorder_compute_for_overlap, with cost_ns = 100 per collective, 5 per matmul
// and 1 per other compute op (`d * c * ar` and `d + ar + fr` written as two ops each, since
// nothing fuses them here):
//
//   ar = all_reduce(a); g = a @ a; c = relu(a); d = c @ c; f = d * c * ar
//   fr = all_reduce(f); e = (d + ar + fr) @ g
//
// Scores (score_0, is_wait, index): the first all-reduce has score_0 = 0; everything the
// second all-reduce needs (the first all-reduce's wait, relu, d, d*c, f) has score_0 = 1;
// g, the second wait and the adds have infinity.
//
// 1. Ready: ar (0,0,0), g (inf,0,2), relu (1,0,3). ar is scheduled; 100 ns to cover.
// 2. Overlap with ar, smallest score first among ready compute: relu (1 ns, releases d),
//    d (5 ns, releases d*c), d*c (1 ns), then g (5 ns): nothing else is ready (f needs the
//    wait), so 88 ns stay uncovered.
// 3. The wait of ar (1,1,1) is the only ready op, then f (1,0,6), then fr.
// 4. Overlap with fr: d + ar (1 ns); the rest needs fr's wait.
// 5. fr's wait, the last add, the last matmul.
coll.group @tp {size = 2 : i64}
// CHECK-LABEL: func.func @overlap
// CHECK-NEXT: coll.all_reduce %arg0
// CHECK-NEXT: compute.relu
// CHECK-NEXT: compute.matmul
// CHECK-NEXT: compute.mul
// CHECK-NEXT: compute.matmul %arg0, %arg0
// CHECK-NEXT: coll.wait_tensor
// CHECK-NEXT: compute.mul
// CHECK-NEXT: coll.all_reduce
// CHECK-NEXT: compute.add
// CHECK-NEXT: coll.wait_tensor
// CHECK-NEXT: compute.add
// CHECK-NEXT: compute.matmul
// CHECK-NEXT: return
func.func @overlap(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %ar = coll.all_reduce %a {reduce_op = "sum", group = @tp, cost_ns = 100 : i64} : tensor<4x4xf32>
  %arw = coll.wait_tensor %ar : tensor<4x4xf32>
  %g = compute.matmul %a, %a {cost_ns = 5 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %c = compute.relu %a {cost_ns = 1 : i64} : tensor<4x4xf32>
  %d = compute.matmul %c, %c {cost_ns = 5 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %dc = compute.mul %d, %c {cost_ns = 1 : i64} : tensor<4x4xf32>
  %f = compute.mul %dc, %arw {cost_ns = 1 : i64} : tensor<4x4xf32>
  %fr = coll.all_reduce %f {reduce_op = "sum", group = @tp, cost_ns = 100 : i64} : tensor<4x4xf32>
  %frw = coll.wait_tensor %fr : tensor<4x4xf32>
  %s1 = compute.add %d, %arw {cost_ns = 1 : i64} : tensor<4x4xf32>
  %s2 = compute.add %s1, %frw {cost_ns = 1 : i64} : tensor<4x4xf32>
  %e = compute.matmul %s2, %g {cost_ns = 5 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %e : tensor<4x4xf32>
}
