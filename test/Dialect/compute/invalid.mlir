// RUN: commlir-opt %s --split-input-file --verify-diagnostics

func.func @matmul_k(%a: tensor<8x16xf32>, %b: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{contraction dims differ: lhs has 16, rhs has 8}}
  %m = compute.matmul %a, %b : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %m : tensor<8x4xf32>
}

// -----

func.func @matmul_result(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>) -> tensor<8x8xf32> {
  // expected-error @below {{result shape must be 8x4, got 8x8}}
  %m = compute.matmul %a, %b : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x8xf32>
  return %m : tensor<8x8xf32>
}

// -----

func.func @matmul_elem(%a: tensor<8x16xf32>, %b: tensor<16x4xbf16>) -> tensor<8x4xf32> {
  // expected-error @below {{requires the same element type for both operands and the result}}
  %m = compute.matmul %a, %b : (tensor<8x16xf32>, tensor<16x4xbf16>) -> tensor<8x4xf32>
  return %m : tensor<8x4xf32>
}

// -----

func.func @add_types(%a: tensor<8x16xf32>, %b: tensor<8x16xbf16>) -> tensor<8x16xf32> {
  // expected-error @below {{requires all operands and results to have the same type, got tensor<8x16xf32> and tensor<8x16xbf16>}}
  %m = compute.add %a, %b : (tensor<8x16xf32>, tensor<8x16xbf16>) -> tensor<8x16xf32>
  return %m : tensor<8x16xf32>
}

// -----

func.func @softmax_dim(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{dim 2 is out of range for rank 2}}
  %m = compute.softmax %a {dim = 2 : i64} : tensor<8x16xf32>
  return %m : tensor<8x16xf32>
}

// -----

func.func @reshape_count(%a: tensor<8x16xf32>) -> tensor<100xf32> {
  // expected-error @below {{element count must be preserved: 128 vs 100}}
  %m = compute.reshape %a : (tensor<8x16xf32>) -> tensor<100xf32>
  return %m : tensor<100xf32>
}

// -----

func.func @slice_bounds(%a: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{slice [6, 6+4) is out of bounds for dim 0 of size 8}}
  %m = compute.slice %a {dim = 0 : i64, start = 6 : i64, size = 4 : i64} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  return %m : tensor<4x16xf32>
}

// -----

func.func @concat_dims(%a: tensor<8x16xf32>, %b: tensor<8x8xf32>) -> tensor<16x16xf32> {
  // expected-error @below {{operand #1 differs from operand #0 in dim 1 (8 vs 16)}}
  %m = compute.concat %a, %b {dim = 0 : i64} : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x16xf32>
  return %m : tensor<16x16xf32>
}

// -----

func.func @reduce_shape(%a: tensor<8x16xf32>) -> tensor<16xf32> {
  // expected-error @below {{result must be shape 8 of the input's element type, got tensor<16xf32>}}
  %m = compute.reduce_sum %a {dim = 1 : i64} : (tensor<8x16xf32>) -> tensor<16xf32>
  return %m : tensor<16xf32>
}

// -----

func.func @transpose_shape(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{result shape must be 16x8, got 8x16}}
  %m = compute.transpose %a : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %m : tensor<8x16xf32>
}

// -----

func.func @scale_attr(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{requires attribute 'factor'}}
  %m = compute.scale %a : tensor<8xf32>
  return %m : tensor<8xf32>
}

// -----

func.func @dynamic(%a: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @below {{operand #0 must be statically shaped tensor, but got tensor<?xf32>}}
  %m = compute.neg %a : tensor<?xf32>
  return %m : tensor<?xf32>
}

// -----

func.func @cast_shape(%a: tensor<8xf32>) -> tensor<4xbf16> {
  // expected-error @below {{requires the same shape, got 8 and 4}}
  %m = compute.cast %a : (tensor<8xf32>) -> tensor<4xbf16>
  return %m : tensor<4xbf16>
}
