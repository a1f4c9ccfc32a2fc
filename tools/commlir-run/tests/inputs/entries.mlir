func.func @first(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = compute.neg %x : tensor<2xf32>
  return %y : tensor<2xf32>
}
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = compute.fill {value = 1.500000e+00 : f64} : tensor<2xf32>
  return %y : tensor<2xf32>
}
