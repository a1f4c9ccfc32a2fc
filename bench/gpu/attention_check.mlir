// compute.attention on the GPU against the sim (`commlir-run --backend cuda --check`): every
// path of its lowering. bf16 with 300 keys (not a whole number of vectors: the scalar
// softmax), f32 without mask, f16 with rows in registers, bf16 rows of 9000 keys (streamed
// three times), and 3 heads of 6000×6000 scores, more than one chunk's scores
// (codegen/src/lower_to_rt/attention.rs: three GEMM–softmax–GEMM rounds at byte offsets);
// none of these bf16 shapes suits the tensor-core kernel, which @flash checks.
func.func @attention(%q0: tensor<2x4x300x64xbf16>, %k0: tensor<2x4x300x64xbf16>, %v0: tensor<2x4x300x64xbf16>,
                     %q1: tensor<1x2x256x32xf32>, %k1: tensor<1x2x200x32xf32>, %v1: tensor<1x2x200x48xf32>,
                     %q2: tensor<1x8x1024x128xf16>, %k2: tensor<1x8x1024x128xf16>, %v2: tensor<1x8x1024x128xf16>,
                     %q3: tensor<1x1x64x16xbf16>, %k3: tensor<1x1x9000x16xbf16>, %v3: tensor<1x1x9000x16xbf16>,
                     %q4: tensor<1x3x6000x8xbf16>, %k4: tensor<1x3x6000x8xbf16>, %v4: tensor<1x3x6000x8xbf16>)
    -> (tensor<2x4x300x64xbf16>, tensor<1x2x256x48xf32>, tensor<1x8x1024x128xf16>, tensor<1x1x64x16xbf16>, tensor<1x3x6000x8xbf16>) {
  %o0 = compute.attention %q0, %k0, %v0 {causal, scale = 0.125 : f64} : tensor<2x4x300x64xbf16>
  %o1 = compute.attention %q1, %k1, %v1 {scale = 0.17677669529663687 : f64} : (tensor<1x2x256x32xf32>, tensor<1x2x200x32xf32>, tensor<1x2x200x48xf32>) -> tensor<1x2x256x48xf32>
  %o2 = compute.attention %q2, %k2, %v2 {causal, scale = 0.08838834764831845 : f64} : tensor<1x8x1024x128xf16>
  %o3 = compute.attention %q3, %k3, %v3 {scale = 0.25 : f64} : (tensor<1x1x64x16xbf16>, tensor<1x1x9000x16xbf16>, tensor<1x1x9000x16xbf16>) -> tensor<1x1x64x16xbf16>
  %o4 = compute.attention %q4, %k4, %v4 {causal, scale = 0.35355339059327373 : f64} : tensor<1x3x6000x8xbf16>
  return %o0, %o1, %o2, %o3, %o4 : tensor<2x4x300x64xbf16>, tensor<1x2x256x48xf32>, tensor<1x8x1024x128xf16>, tensor<1x1x64x16xbf16>, tensor<1x3x6000x8xbf16>
}

// The bf16 shapes the tensor-core kernel takes (rt.flash_attention: query and key counts
// multiples of 64, head dim a multiple of 16, value width of 8, both at most 128): causal and
// not, head dims 64 and 128, cross attention with more keys than queries and another value
// width, and several work items per block's grid-stride loop (8 heads × 16 row blocks).
func.func @flash(%q0: tensor<2x4x256x64xbf16>, %k0: tensor<2x4x256x64xbf16>, %v0: tensor<2x4x256x64xbf16>,
                 %q1: tensor<1x2x128x128xbf16>, %k1: tensor<1x2x192x128xbf16>, %v1: tensor<1x2x192x40xbf16>,
                 %q2: tensor<1x8x1024x128xbf16>, %k2: tensor<1x8x1024x128xbf16>, %v2: tensor<1x8x1024x128xbf16>)
    -> (tensor<2x4x256x64xbf16>, tensor<2x4x256x64xbf16>, tensor<1x2x128x40xbf16>, tensor<1x8x1024x128xbf16>) {
  %o0 = compute.attention %q0, %k0, %v0 {causal, scale = 0.125 : f64} : tensor<2x4x256x64xbf16>
  %o1 = compute.attention %q0, %k0, %v0 {scale = 0.2 : f64} : tensor<2x4x256x64xbf16>
  %o2 = compute.attention %q1, %k1, %v1 {scale = 0.08838834764831845 : f64} : (tensor<1x2x128x128xbf16>, tensor<1x2x192x128xbf16>, tensor<1x2x192x40xbf16>) -> tensor<1x2x128x40xbf16>
  %o3 = compute.attention %q2, %k2, %v2 {causal, scale = 0.08838834764831845 : f64} : tensor<1x8x1024x128xbf16>
  return %o0, %o1, %o2, %o3 : tensor<2x4x256x64xbf16>, tensor<2x4x256x64xbf16>, tensor<1x2x128x40xbf16>, tensor<1x8x1024x128xbf16>
}
