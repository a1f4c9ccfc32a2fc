// RUN: commlir-opt %s --split-input-file --verify-diagnostics

func.func @elem(%q: tensor<2x8x4xbf16>, %k: tensor<2x8x4xf32>, %v: tensor<2x8x4xbf16>) -> tensor<2x8x4xbf16> {
  // expected-error @below {{requires the same element type for q, k, v and the result}}
  %o = compute.attention %q, %k, %v {scale = 0.5 : f64} : (tensor<2x8x4xbf16>, tensor<2x8x4xf32>, tensor<2x8x4xbf16>) -> tensor<2x8x4xbf16>
  return %o : tensor<2x8x4xbf16>
}

// -----

func.func @integer(%q: tensor<2x8x4xi32>) -> tensor<2x8x4xi32> {
  // expected-error @below {{requires a floating-point element type}}
  %o = compute.attention %q, %q, %q {scale = 0.5 : f64} : (tensor<2x8x4xi32>, tensor<2x8x4xi32>, tensor<2x8x4xi32>) -> tensor<2x8x4xi32>
  return %o : tensor<2x8x4xi32>
}

// -----

func.func @heads(%q: tensor<4x8x4xf32>, %k: tensor<2x8x4xf32>) -> tensor<4x8x4xf32> {
  // expected-error @below {{leading dims differ: q 4x8x4, k 2x8x4, v 2x8x4}}
  %o = compute.attention %q, %k, %k {scale = 0.5 : f64} : (tensor<4x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<4x8x4xf32>
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
