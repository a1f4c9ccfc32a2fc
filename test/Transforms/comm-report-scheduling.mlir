// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(coll-to-comm{one-shot-threshold=0},comm-reorder-peak-memory{annotate=true}))' --comm-report=%t.json -o /dev/null
// RUN: FileCheck %s < %t.json

// Per-collective scheduling statistics land in the report: the all-reduce moves up past the
// independent matmul (1 move), dragging its producer along (grouped), up to the block start;
// the matmul (50 ns) now hides half of its 100 ns.

// CHECK: "collectives": [
// CHECK: "op": "comm.all_reduce"
// CHECK: "scheduling": {
// CHECK-NEXT: "comm-reorder-peak-memory": {
// CHECK-DAG: "moves": 1
// CHECK-DAG: "limit": "none"
// CHECK-DAG: "grouped": 1
// CHECK-DAG: "exposed_before_ns": 100
// CHECK-DAG: "exposed_after_ns": 50
coll.group @tp {size = 2 : i64}
func.func @f(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %m = compute.matmul %w, %w {cost_ns = 50 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %g = compute.neg %x : tensor<64x64xf32>
  %r = coll.all_reduce %g {reduce_op = "sum", group = @tp, cost_ns = 100 : i64} : tensor<64x64xf32>
  %y = coll.wait_tensor %r : tensor<64x64xf32>
  return %y, %m : tensor<64x64xf32>, tensor<64x64xf32>
}
