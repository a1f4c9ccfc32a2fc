coll.group @tp {size = 2 : i64, ranks = [0, 1]}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<4xf32>
  %y = coll.wait_tensor %r : tensor<4xf32>
  return %y : tensor<4xf32>
}
