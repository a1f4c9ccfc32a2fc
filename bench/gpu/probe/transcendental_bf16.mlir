// Accuracy probe of the narrow-type transcendental kernels (`__commlir_expf_fast`,
// `__commlir_tanhf_fast`, the softmax reciprocal) against the sim backend's host libm:
//   commlir-run transcendental_bf16.commlir --backend cuda --ranks 1 --check --check-against transcendental_bf16.mlir
// `not identical` counts the bf16 results that differ from the sim's at all.
module {
  func.func @main(%x: tensor<1048576xbf16>, %y: tensor<512x2048xbf16>) -> (tensor<1048576xbf16>, tensor<1048576xbf16>, tensor<1048576xbf16>, tensor<512x2048xbf16>) {
    %s = compute.scale %x {factor = 6.0 : f64} : tensor<1048576xbf16>
    %t = compute.tanh %s : tensor<1048576xbf16>
    %s2 = compute.scale %x {factor = 6.0 : f64} : tensor<1048576xbf16>
    %g = compute.gelu %s2 : tensor<1048576xbf16>
    %s3 = compute.scale %x {factor = 20.0 : f64} : tensor<1048576xbf16>
    %e = compute.exp %s3 : tensor<1048576xbf16>
    %ys = compute.scale %y {factor = 8.0 : f64} : tensor<512x2048xbf16>
    %sm = compute.softmax %ys {dim = 1 : i64} : tensor<512x2048xbf16>
    return %t, %g, %e, %sm : tensor<1048576xbf16>, tensor<1048576xbf16>, tensor<1048576xbf16>, tensor<512x2048xbf16>
  }
}
