// RUN: commlir-opt %s --split-input-file --verify-diagnostics

func.func @broadcast_rank(%a: tensor<2x3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @below {{operand rank 3 exceeds result rank 2}}
  %b = compute.broadcast %a : (tensor<2x3x4xf32>) -> tensor<3x4xf32>
  return %b : tensor<3x4xf32>
}

// -----

func.func @broadcast_dim(%a: tensor<2x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @below {{operand dim 0 (2) must be 1 or equal result dim 1 (3)}}
  %b = compute.broadcast %a : (tensor<2x4xf32>) -> tensor<2x3x4xf32>
  return %b : tensor<2x3x4xf32>
}

// -----

func.func @broadcast_elem(%a: tensor<1x4xf32>) -> tensor<3x4xbf16> {
  // expected-error @below {{requires the same element type for operand and result}}
  %b = compute.broadcast %a : (tensor<1x4xf32>) -> tensor<3x4xbf16>
  return %b : tensor<3x4xbf16>
}

// -----

func.func @permute_repeat(%a: tensor<2x3x4xf32>) -> tensor<2x2x3xf32> {
  // expected-error @below {{perm must be a permutation of [0, 3), got [0, 0, 1]}}
  %b = compute.permute %a {perm = array<i64: 0, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<2x2x3xf32>
  return %b : tensor<2x2x3xf32>
}

// -----

func.func @permute_length(%a: tensor<2x3x4xf32>) -> tensor<3x2xf32> {
  // expected-error @below {{perm must be a permutation of [0, 3), got [1, 0]}}
  %b = compute.permute %a {perm = array<i64: 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x2xf32>
  return %b : tensor<3x2xf32>
}

// -----

func.func @permute_range(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @below {{perm must be a permutation of [0, 2), got [2, -1]}}
  %b = compute.permute %a {perm = array<i64: 2, -1>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %b : tensor<3x2xf32>
}

// -----

func.func @permute_shape(%a: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @below {{result must be shape 3x2x4 of the input's element type, got tensor<2x3x4xf32>}}
  %b = compute.permute %a {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %b : tensor<2x3x4xf32>
}

// -----

func.func @permute_attr(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @below {{requires attribute 'perm'}}
  %b = compute.permute %a : tensor<2x3xf32>
  return %b : tensor<2x3xf32>
}

// -----

func.func @reduce_max_dim(%a: tensor<8x16xf32>) -> tensor<8xf32> {
  // expected-error @below {{dim 2 is out of range for rank 2}}
  %b = compute.reduce_max %a {dim = 2 : i64} : (tensor<8x16xf32>) -> tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

func.func @reduce_max_shape(%a: tensor<8x16xf32>) -> tensor<16xf32> {
  // expected-error @below {{result must be shape 8 of the input's element type, got tensor<16xf32>}}
  %b = compute.reduce_max %a {dim = 1 : i64} : (tensor<8x16xf32>) -> tensor<16xf32>
  return %b : tensor<16xf32>
}

// -----

func.func @reduce_max_empty(%a: tensor<8x0xf32>) -> tensor<8xf32> {
  // expected-error @below {{cannot reduce dim 1 of size 0}}
  %b = compute.reduce_max %a {dim = 1 : i64} : (tensor<8x0xf32>) -> tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

func.func @sin_int(%a: tensor<8xi32>) -> tensor<8xi32> {
  // expected-error @below {{expects a float element type, got i32}}
  %b = compute.sin %a : tensor<8xi32>
  return %b : tensor<8xi32>
}

// -----

func.func @log_types(%a: tensor<8xf32>) -> tensor<8xbf16> {
  // expected-error @below {{requires all operands and results to have the same type, got tensor<8xf32> and tensor<8xbf16>}}
  %b = compute.log %a : (tensor<8xf32>) -> tensor<8xbf16>
  return %b : tensor<8xbf16>
}

// -----

func.func @compare_pred(%a: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @below {{attribute 'predicate' must be one of "eq", "ne", "lt", "le", "gt", "ge"}}
  %c = compute.compare %a, %a {predicate = "ult"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %c : tensor<4xi1>
}

// -----

func.func @compare_operands(%a: tensor<4xf32>, %b: tensor<4xbf16>) -> tensor<4xi1> {
  // expected-error @below {{requires operands of the same type, got tensor<4xf32> and tensor<4xbf16>}}
  %c = compute.compare %a, %b {predicate = "eq"} : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xi1>
  return %c : tensor<4xi1>
}

// -----

func.func @compare_result(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{result must be tensor<4xi1>, got tensor<4xf32>}}
  %c = compute.compare %a, %a {predicate = "eq"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

func.func @compare_index(%a: tensor<4xcomplex<f32>>) -> tensor<4xi1> {
  // expected-error @below {{expects float or integer operands, got complex<f32>}}
  %c = compute.compare %a, %a {predicate = "eq"} : (tensor<4xcomplex<f32>>, tensor<4xcomplex<f32>>) -> tensor<4xi1>
  return %c : tensor<4xi1>
}

// -----

func.func @select_cond(%c: tensor<4xi8>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{condition must be tensor<4xi1>, got tensor<4xi8>}}
  %r = compute.select %c, %a, %a : (tensor<4xi8>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @select_cond_shape(%c: tensor<2xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{condition must be tensor<4xi1>, got tensor<2xi1>}}
  %r = compute.select %c, %a, %a : (tensor<2xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @select_values(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xbf16>) -> tensor<4xf32> {
  // expected-error @below {{requires both values and the result to have the same type, got tensor<4xf32> and tensor<4xbf16>}}
  %r = compute.select %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @iota_dim() -> tensor<4x8xi64> {
  // expected-error @below {{dim 2 is out of range for rank 2}}
  %i = compute.iota {dim = 2 : i64} : tensor<4x8xi64>
  return %i : tensor<4x8xi64>
}

// -----

func.func @iota_elem() -> tensor<4xcomplex<f32>> {
  // expected-error @below {{expects a float or integer element type, got complex<f32>}}
  %i = compute.iota {dim = 0 : i64} : tensor<4xcomplex<f32>>
  return %i : tensor<4xcomplex<f32>>
}
