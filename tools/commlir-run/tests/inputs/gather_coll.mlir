coll.group @tp {size = 2 : i64}
func.func @main(%x: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<2x4xf32>) {
  %g = coll.all_gather_into_tensor %x {group = @tp} : (tensor<2x4xf32>) -> tensor<4x4xf32>
  %a = coll.all_reduce %x {reduce_op = "max", group = @tp} : tensor<2x4xf32>
  %gy = coll.wait_tensor %g : tensor<4x4xf32>
  %ay = coll.wait_tensor %a : tensor<2x4xf32>
  return %gy, %ay : tensor<4x4xf32>, tensor<2x4xf32>
}
