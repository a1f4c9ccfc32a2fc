// Attention through cuDNN (rt.attention / rt.attention_backward, the default lowering of
// f16/bf16) against the sim (`commlir-run --backend cuda --check`): grouped-query heads,
// causal and not, odd lengths, more keys than queries, f16, the forward's log-sum-exp and the
// backward on the forward's own output and statistics.
func.func @train(%q: tensor<2x4x77x64xbf16>, %k: tensor<2x2x77x64xbf16>, %v: tensor<2x2x77x64xbf16>, %do: tensor<2x4x77x64xbf16>)
    -> (tensor<2x4x77x64xbf16>, tensor<2x4x77xf32>, tensor<2x4x77x64xbf16>, tensor<2x2x77x64xbf16>, tensor<2x2x77x64xbf16>) {
  %o, %l = compute.attention %q, %k, %v {causal, scale = 0.125 : f64, with_lse} : (tensor<2x4x77x64xbf16>, tensor<2x2x77x64xbf16>, tensor<2x2x77x64xbf16>) -> (tensor<2x4x77x64xbf16>, tensor<2x4x77xf32>)
  %dq, %dk, %dv = compute.attention_backward %q, %k, %v, %o, %do, %l {causal, scale = 0.125 : f64} : (tensor<2x4x77x64xbf16>, tensor<2x2x77x64xbf16>, tensor<2x2x77x64xbf16>, tensor<2x4x77x64xbf16>, tensor<2x4x77x64xbf16>, tensor<2x4x77xf32>) -> (tensor<2x4x77x64xbf16>, tensor<2x2x77x64xbf16>, tensor<2x2x77x64xbf16>)
  return %o, %l, %dq, %dk, %dv : tensor<2x4x77x64xbf16>, tensor<2x4x77xf32>, tensor<2x4x77x64xbf16>, tensor<2x2x77x64xbf16>, tensor<2x2x77x64xbf16>
}

func.func @cross(%q: tensor<1x8x64x128xf16>, %k: tensor<1x8x192x128xf16>, %v: tensor<1x8x192x128xf16>, %do: tensor<1x8x64x128xf16>)
    -> (tensor<1x8x64x128xf16>, tensor<1x8x64x128xf16>, tensor<1x8x192x128xf16>, tensor<1x8x192x128xf16>) {
  %o, %l = compute.attention %q, %k, %v {scale = 0.08838834764831845 : f64, with_lse} : (tensor<1x8x64x128xf16>, tensor<1x8x192x128xf16>, tensor<1x8x192x128xf16>) -> (tensor<1x8x64x128xf16>, tensor<1x8x64xf32>)
  %dq, %dk, %dv = compute.attention_backward %q, %k, %v, %o, %do, %l {scale = 0.08838834764831845 : f64} : (tensor<1x8x64x128xf16>, tensor<1x8x192x128xf16>, tensor<1x8x192x128xf16>, tensor<1x8x64x128xf16>, tensor<1x8x64x128xf16>, tensor<1x8x64xf32>) -> (tensor<1x8x64x128xf16>, tensor<1x8x192x128xf16>, tensor<1x8x192x128xf16>)
  return %o, %dq, %dk, %dv : tensor<1x8x64x128xf16>, tensor<1x8x64x128xf16>, tensor<1x8x192x128xf16>, tensor<1x8x192x128xf16>
}
