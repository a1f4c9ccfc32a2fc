coll.group @tp {size = 3 : i64}
func.func @main(%x: tensor<6xf32>) -> tensor<6xf32> {
  %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<6xf32>
  %y = coll.wait_tensor %r : tensor<6xf32>
  return %y : tensor<6xf32>
}
