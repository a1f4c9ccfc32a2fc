// Accuracy probe of the f64 transcendental kernels (`__commlir_exp`,
// `__commlir_tanh`, the f64 softmax) against the sim backend's host libm:
//   commlir-run transcendental_f64.commlir --backend cuda --ranks 1 --check --check-against transcendental_f64.mlir
// `not identical` counts the f64 results that differ from the sim's at all.
module {
  func.func @main(%x: tensor<1048576xf64>, %y: tensor<512x2048xf64>) -> (tensor<1048576xf64>, tensor<1048576xf64>, tensor<1048576xf64>, tensor<512x2048xf64>) {
    %s = compute.scale %x {factor = 6.0 : f64} : tensor<1048576xf64>
    %t = compute.tanh %s : tensor<1048576xf64>
    %s2 = compute.scale %x {factor = 6.0 : f64} : tensor<1048576xf64>
    %g = compute.gelu %s2 : tensor<1048576xf64>
    %s3 = compute.scale %x {factor = 20.0 : f64} : tensor<1048576xf64>
    %e = compute.exp %s3 : tensor<1048576xf64>
    %ys = compute.scale %y {factor = 8.0 : f64} : tensor<512x2048xf64>
    %sm = compute.softmax %ys {dim = 1 : i64} : tensor<512x2048xf64>
    return %t, %g, %e, %sm : tensor<1048576xf64>, tensor<1048576xf64>, tensor<1048576xf64>, tensor<512x2048xf64>
  }
}
