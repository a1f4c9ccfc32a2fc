// RUN: commlir-opt %s --split-input-file --verify-diagnostics

func.func @elem(%q: tensor<2x8x4xbf16>, %k: tensor<2x8x4xf32>, %v: tensor<2x8x4xbf16>) -> tensor<2x8x4xbf16> {
  // expected-error @below {{requires the same element type for q, k and v}}
  %o = compute.attention %q, %k, %v {scale = 0.5 : f64} : (tensor<2x8x4xbf16>, tensor<2x8x4xf32>, tensor<2x8x4xbf16>) -> tensor<2x8x4xbf16>
  return %o : tensor<2x8x4xbf16>
}

// -----

func.func @integer(%q: tensor<2x8x4xi32>) -> tensor<2x8x4xi32> {
  // expected-error @below {{requires f16, bf16, f32 or f64 elements, got i32}}
  %o = compute.attention %q, %q, %q {scale = 0.5 : f64} : (tensor<2x8x4xi32>, tensor<2x8x4xi32>, tensor<2x8x4xi32>) -> tensor<2x8x4xi32>
  return %o : tensor<2x8x4xi32>
}

// -----

func.func @heads(%q: tensor<4x8x4xf32>, %k: tensor<3x8x4xf32>) -> tensor<4x8x4xf32> {
  // expected-error @below {{kv heads must divide query heads: q has 4, k and v have 3}}
  %o = compute.attention %q, %k, %k {scale = 0.5 : f64} : (tensor<4x8x4xf32>, tensor<3x8x4xf32>, tensor<3x8x4xf32>) -> tensor<4x8x4xf32>
  return %o : tensor<4x8x4xf32>
}

// -----

func.func @batch(%q: tensor<2x4x8x4xf32>, %k: tensor<3x2x8x4xf32>) -> tensor<2x4x8x4xf32> {
  // expected-error @below {{leading dims differ: q 2x4x8x4, k 3x2x8x4, v 3x2x8x4}}
  %o = compute.attention %q, %k, %k {scale = 0.5 : f64} : (tensor<2x4x8x4xf32>, tensor<3x2x8x4xf32>, tensor<3x2x8x4xf32>) -> tensor<2x4x8x4xf32>
  return %o : tensor<2x4x8x4xf32>
}

// -----

func.func @kv_heads(%q: tensor<2x4x8x4xf32>, %k: tensor<2x2x8x4xf32>, %v: tensor<2x4x8x4xf32>) -> tensor<2x4x8x4xf32> {
  // expected-error @below {{k and v head counts differ: k has 2, v has 4}}
  %o = compute.attention %q, %k, %v {scale = 0.5 : f64} : (tensor<2x4x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x4xf32>
  return %o : tensor<2x4x8x4xf32>
}

// -----

// No kv heads at all divide nothing.
func.func @no_kv_heads(%q: tensor<4x8x4xf32>, %k: tensor<0x8x4xf32>) -> tensor<4x8x4xf32> {
  // expected-error @below {{kv heads must divide query heads: q has 4, k and v have 0}}
  %o = compute.attention %q, %k, %k {scale = 0.5 : f64} : (tensor<4x8x4xf32>, tensor<0x8x4xf32>, tensor<0x8x4xf32>) -> tensor<4x8x4xf32>
  return %o : tensor<4x8x4xf32>
}

// -----

func.func @head_dim(%q: tensor<2x8x4xf32>, %k: tensor<2x8x6xf32>) -> tensor<2x8x6xf32> {
  // expected-error @below {{head dim differs: q has 4, k has 6}}
  %o = compute.attention %q, %k, %k {scale = 0.5 : f64} : (tensor<2x8x4xf32>, tensor<2x8x6xf32>, tensor<2x8x6xf32>) -> tensor<2x8x6xf32>
  return %o : tensor<2x8x6xf32>
}

// -----

func.func @keys(%q: tensor<2x8x4xf32>, %k: tensor<2x8x4xf32>, %v: tensor<2x9x4xf32>) -> tensor<2x8x4xf32> {
  // expected-error @below {{key count differs: k has 8, v has 9}}
  %o = compute.attention %q, %k, %v {scale = 0.5 : f64} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x9x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

func.func @result(%q: tensor<2x8x4xf32>) -> tensor<2x4x8xf32> {
  // expected-error @below {{result shape must be 2x8x4, got 2x4x8}}
  %o = compute.attention %q, %q, %q {scale = 0.5 : f64} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @rank(%q: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{expects q, k and v of one rank, at least 2}}
  %o = compute.attention %q, %q, %q {scale = 0.5 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %o : tensor<8xf32>
}

// -----

func.func @scale(%q: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  // expected-error @below {{requires a finite 'scale'}}
  %o = compute.attention %q, %q, %q {scale = 0x7FF0000000000000 : f64} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

func.func @result_elem(%q: tensor<2x8x4xbf16>) -> tensor<2x8x4xf32> {
  // expected-error @below {{requires the same element type for q, k, v and the result}}
  %o = compute.attention %q, %q, %q {scale = 0.5 : f64} : (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

func.func @lse_missing(%q: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  // expected-error @below {{with 'with_lse' expects 2 results (result, lse), got 1}}
  %o = compute.attention %q, %q, %q {scale = 0.5 : f64, with_lse} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

func.func @lse_unasked(%q: tensor<2x8x4xf32>) -> tensor<2x8xf32> {
  // expected-error @below {{has a second result (the log-sum-exp) only with 'with_lse'}}
  %o, %lse = compute.attention %q, %q, %q {scale = 0.5 : f64} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8xf32>)
  return %lse : tensor<2x8xf32>
}

// -----

func.func @lse_results(%q: tensor<2x8x4xf32>) -> tensor<2x8xf32> {
  // expected-error @below {{expected at most 2 results, but found 3}}
  %o:3 = compute.attention %q, %q, %q {scale = 0.5 : f64, with_lse} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  return %o#1 : tensor<2x8xf32>
}

// -----

func.func @lse_type(%q: tensor<2x8x4xbf16>) -> tensor<2x8xbf16> {
  // expected-error @below {{lse must be tensor<2x8xf32>, got tensor<2x8xbf16>}}
  %o, %lse = compute.attention %q, %q, %q {scale = 0.5 : f64, with_lse} : (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>) -> (tensor<2x8x4xbf16>, tensor<2x8xbf16>)
  return %lse : tensor<2x8xbf16>
}

// -----

func.func @lse_shape(%q: tensor<2x4x8x4xf64>, %k: tensor<2x2x8x4xf64>) -> tensor<2x2x8xf64> {
  // expected-error @below {{lse must be tensor<2x4x8xf64>, got tensor<2x2x8xf64>}}
  %o, %lse = compute.attention %q, %k, %k {scale = 0.5 : f64, with_lse} : (tensor<2x4x8x4xf64>, tensor<2x2x8x4xf64>, tensor<2x2x8x4xf64>) -> (tensor<2x4x8x4xf64>, tensor<2x2x8xf64>)
  return %lse : tensor<2x2x8xf64>
}

// -----

func.func @bwd_operands(%q: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  // expected-error @below {{expected 6 operands, but found 3}}
  %dq, %dk, %dv = compute.attention_backward %q, %q, %q {scale = 0.5 : f64} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>)
  return %dq : tensor<2x8x4xf32>
}

// -----

func.func @bwd_results(%q: tensor<2x8x4xf32>, %lse: tensor<2x8xf32>) -> tensor<2x8x4xf32> {
  // expected-error @below {{expected 3 results, but found 2}}
  %dq, %dk = compute.attention_backward %q, %q, %q, %q, %q, %lse {scale = 0.5 : f64} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>)
  return %dq : tensor<2x8x4xf32>
}

// -----

func.func @bwd_gqa(%q: tensor<1x6x8x4xf32>, %k: tensor<1x4x8x4xf32>, %lse: tensor<1x6x8xf32>) -> tensor<1x6x8x4xf32> {
  // expected-error @below {{kv heads must divide query heads: q has 6, k and v have 4}}
  %dq, %dk, %dv = compute.attention_backward %q, %k, %k, %q, %q, %lse {scale = 0.5 : f64} : (tensor<1x6x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x6x8x4xf32>, tensor<1x6x8x4xf32>, tensor<1x6x8xf32>) -> (tensor<1x6x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>)
  return %dq : tensor<1x6x8x4xf32>
}

// -----

func.func @bwd_out(%q: tensor<2x8x4xf32>, %v: tensor<2x8x6xf32>, %o: tensor<2x8x4xf32>, %lse: tensor<2x8xf32>) -> tensor<2x8x4xf32> {
  // expected-error @below {{out must be tensor<2x8x6xf32>, got tensor<2x8x4xf32>}}
  %dq, %dk, %dv = compute.attention_backward %q, %q, %v, %o, %o, %lse {scale = 0.5 : f64} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x6xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x6xf32>)
  return %dq : tensor<2x8x4xf32>
}

// -----

func.func @bwd_dout(%q: tensor<2x8x4xbf16>, %do: tensor<2x8x4xf32>, %lse: tensor<2x8xf32>) -> tensor<2x8x4xbf16> {
  // expected-error @below {{dout must be tensor<2x8x4xbf16>, got tensor<2x8x4xf32>}}
  %dq, %dk, %dv = compute.attention_backward %q, %q, %q, %q, %do, %lse {scale = 0.5 : f64} : (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xf32>, tensor<2x8xf32>) -> (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>)
  return %dq : tensor<2x8x4xbf16>
}

// -----

func.func @bwd_lse(%q: tensor<2x8x4xf32>, %lse: tensor<2x8x1xf32>) -> tensor<2x8x4xf32> {
  // expected-error @below {{lse must be tensor<2x8xf32>, got tensor<2x8x1xf32>}}
  %dq, %dk, %dv = compute.attention_backward %q, %q, %q, %q, %q, %lse {scale = 0.5 : f64} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x1xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>)
  return %dq : tensor<2x8x4xf32>
}

// -----

func.func @bwd_dk(%q: tensor<1x4x8x4xf32>, %k: tensor<1x2x8x4xf32>, %lse: tensor<1x4x8xf32>) -> tensor<1x4x8x4xf32> {
  // expected-error @below {{dk must have the type of k, tensor<1x2x8x4xf32>, got tensor<1x4x8x4xf32>}}
  %dq, %dk, %dv = compute.attention_backward %q, %k, %k, %q, %q, %lse {scale = 0.5 : f64} : (tensor<1x4x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8xf32>) -> (tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x2x8x4xf32>)
  return %dk : tensor<1x4x8x4xf32>
}

// -----

func.func @bwd_scale(%q: tensor<2x8x4xf32>, %lse: tensor<2x8xf32>) -> tensor<2x8x4xf32> {
  // expected-error @below {{requires a finite 'scale'}}
  %dq, %dk, %dv = compute.attention_backward %q, %q, %q, %q, %q, %lse {scale = 0x7FF8000000000000 : f64} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>)
  return %dq : tensor<2x8x4xf32>
}

// -----

func.func @bwd_scale_missing(%q: tensor<2x8x4xf32>, %lse: tensor<2x8xf32>) -> tensor<2x8x4xf32> {
  // expected-error @below {{requires attribute 'scale'}}
  %dq, %dk, %dv = compute.attention_backward %q, %q, %q, %q, %q, %lse : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>)
  return %dq : tensor<2x8x4xf32>
}
