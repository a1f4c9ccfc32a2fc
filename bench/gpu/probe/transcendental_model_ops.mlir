// Accuracy probe of the model ops' transcendental kernels (sin, cos and log through the f64
// helpers `__commlir_sin` / `__commlir_cos` / `__commlir_log`, sigmoid through the exp of its
// result type) against the sim backend's host libm, in f32 and bf16:
//   commlir-run transcendental_model_ops.commlir --backend cuda --ranks 1 --check --check-against transcendental_model_ops.mlir
// `not identical` counts the results that differ from the sim's at all (f32/bf16 sin, cos
// and log should differ only in double-rounding ties; sigmoid like exp: ~2 f32 ulp, and
// bf16 like the other ex2.approx-based ops).
module {
  func.func @main(%x: tensor<1048576xf32>) -> (tensor<1048576xf32>, tensor<1048576xf32>, tensor<1048576xf32>, tensor<1048576xf32>, tensor<1048576xbf16>, tensor<1048576xbf16>, tensor<1048576xbf16>, tensor<1048576xbf16>) {
    %a = compute.scale %x {factor = 1000.0 : f64} : tensor<1048576xf32>
    %s = compute.sin %a : tensor<1048576xf32>
    %c = compute.cos %a : tensor<1048576xf32>
    %x2 = compute.mul %x, %x : tensor<1048576xf32>
    %p = compute.scale %x2 {factor = 1000.0 : f64} : tensor<1048576xf32>
    %l = compute.log %p : tensor<1048576xf32>
    %z = compute.scale %x {factor = 12.0 : f64} : tensor<1048576xf32>
    %g = compute.sigmoid %z : tensor<1048576xf32>
    %ab = compute.cast %a : (tensor<1048576xf32>) -> tensor<1048576xbf16>
    %sb = compute.sin %ab : tensor<1048576xbf16>
    %cb = compute.cos %ab : tensor<1048576xbf16>
    %pb = compute.cast %p : (tensor<1048576xf32>) -> tensor<1048576xbf16>
    %lb = compute.log %pb : tensor<1048576xbf16>
    %zb = compute.cast %z : (tensor<1048576xf32>) -> tensor<1048576xbf16>
    %gb = compute.sigmoid %zb : tensor<1048576xbf16>
    return %s, %c, %l, %g, %sb, %cb, %lb, %gb : tensor<1048576xf32>, tensor<1048576xf32>, tensor<1048576xf32>, tensor<1048576xf32>, tensor<1048576xbf16>, tensor<1048576xbf16>, tensor<1048576xbf16>, tensor<1048576xbf16>
  }
}
