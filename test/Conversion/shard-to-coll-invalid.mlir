// RUN: commlir-opt %s --allow-unregistered-dialect --split-input-file --shard-to-coll --verify-diagnostics

"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
func.func @bitwise(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @below {{reduction 'bitwise_or' has no functional-collective equivalent}}
  %0 = "shard.all_reduce"(%x) <{grid = @g, grid_axes = array<i16: 0>, reduction = #shard<partial bitwise_or>}> : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
func.func @p2p(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'shard.shift' is not supported by shard-to-coll}}
  %0 = "shard.shift"(%x) <{grid = @g, grid_axes = array<i16: 0>, offset = 1 : i64, shift_axis = 0 : index}> : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @below {{grid @g must have a static, non-empty shape to map to groups}}
"shard.grid"() <{shape = array<i64: 2, -9223372036854775808>, sym_name = "g"}> : () -> ()

// -----

"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
func.func @axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{grid axis 1 is out of range for grid @g of rank 1}}
  %0 = "shard.all_reduce"(%x) <{grid = @g, grid_axes = array<i16: 1>}> : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

"shard.grid"() <{shape = array<i64: 4>, sym_name = "g"}> : () -> ()
func.func @indivisible(%x: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @below {{scatter dimension 0 of size 6 is not divisible by the group size 4}}
  %0 = "shard.reduce_scatter"(%x) <{grid = @g, grid_axes = array<i16: 0>, scatter_axis = 0 : index}> : (tensor<6xf32>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
func.func @dynamic(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @below {{operand must be a statically shaped tensor}}
  %0 = "shard.all_reduce"(%x) <{grid = @g, grid_axes = array<i16: 0>}> : (tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
