// REQUIRES: commlir-run
// RUN: commlir-opt %s --coll-to-comm -o %t.lowered.mlir
// RUN: commlir-opt %t.lowered.mlir --comm-plan-pools -o %t.planned.mlir
// RUN: commlir-run %t.lowered.mlir --ranks 2 > %t.before
// RUN: commlir-run %t.planned.mlir --ranks 2 > %t.after
// RUN: diff %t.before %t.after
// RUN: FileCheck %s --input-file %t.after
// RUN: commlir-run %t.lowered.mlir --ranks 4 > %t.before4
// RUN: commlir-run %t.planned.mlir --ranks 4 | diff %t.before4 -

// The seed example runs on the sim backend with every comm buffer in its slot of the one
// 192-byte pool (d's slot reusing a's bytes): the same lines as before planning.
// CHECK: rank 0 result 0: tensor<4x4xf32> digest=[[D:[0-9a-f]+]]
// CHECK-NEXT: rank 1 result 0: tensor<4x4xf32> digest=[[D]]
coll.group @g0 {size = 2 : i64, symm_mem}
func.func @seed(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = compute.scale %arg0 {factor = 1.0 : f64} : tensor<4x4xf32>
  %b = compute.scale %arg0 {factor = 2.0 : f64} : tensor<4x4xf32>
  %c = compute.scale %arg0 {factor = 3.0 : f64} : tensor<4x4xf32>
  %ra = coll.all_reduce %a {reduce_op = "sum", group = @g0} : tensor<4x4xf32>
  %a1 = coll.wait_tensor %ra : tensor<4x4xf32>
  %rb = coll.all_reduce %b {reduce_op = "sum", group = @g0} : tensor<4x4xf32>
  %b1 = coll.wait_tensor %rb : tensor<4x4xf32>
  %rc = coll.all_reduce %c {reduce_op = "sum", group = @g0} : tensor<4x4xf32>
  %c1 = coll.wait_tensor %rc : tensor<4x4xf32>
  %s = compute.add %a1, %b1 : tensor<4x4xf32>
  %d = compute.add %s, %c1 : tensor<4x4xf32>
  %rd = coll.all_reduce %d {reduce_op = "sum", group = @g0} : tensor<4x4xf32>
  %d1 = coll.wait_tensor %rd : tensor<4x4xf32>
  return %d1 : tensor<4x4xf32>
}
