// Accuracy probe of the f32 transcendental kernels (`__commlir_expf`,
// `__commlir_tanhf`, the softmax division) against the sim backend's host libm:
//   commlir-run transcendental_f32.commlir --backend cuda --ranks 1 --check --check-against transcendental_f32.mlir
// `not identical` counts the f32 results that differ from the sim's at all.
module {
  func.func @main(%x: tensor<1048576xf32>, %y: tensor<512x2048xf32>) -> (tensor<1048576xf32>, tensor<1048576xf32>, tensor<1048576xf32>, tensor<512x2048xf32>) {
    %s = compute.scale %x {factor = 6.0 : f64} : tensor<1048576xf32>
    %t = compute.tanh %s : tensor<1048576xf32>
    %s2 = compute.scale %x {factor = 6.0 : f64} : tensor<1048576xf32>
    %g = compute.gelu %s2 : tensor<1048576xf32>
    %s3 = compute.scale %x {factor = 20.0 : f64} : tensor<1048576xf32>
    %e = compute.exp %s3 : tensor<1048576xf32>
    %ys = compute.scale %y {factor = 8.0 : f64} : tensor<512x2048xf32>
    %sm = compute.softmax %ys {dim = 1 : i64} : tensor<512x2048xf32>
    return %t, %g, %e, %sm : tensor<1048576xf32>, tensor<1048576xf32>, tensor<1048576xf32>, tensor<512x2048xf32>
  }
}
