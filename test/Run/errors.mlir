// REQUIRES: commlir-run
// RUN: not commlir-run %s --ranks 4 2>&1 | FileCheck %s

// CHECK: errors.mlir:[[@LINE+3]]:{{[0-9]+}}: error: 'coll.all_reduce' op is executed by rank 2, which is not a member of group @tp
coll.group @tp {size = 2 : i64, ranks = [0, 1]}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<4xf32>
  %y = coll.wait_tensor %r : tensor<4xf32>
  return %y : tensor<4xf32>
}
