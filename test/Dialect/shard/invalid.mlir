// RUN: commlir-opt %s --split-input-file --verify-diagnostics

// expected-error @below {{rank of grid is expected to be a positive integer}}
"shard.grid"() <{shape = array<i64>, sym_name = "g"}> : () -> ()

// -----

// expected-error @below {{dimension size -2 of a grid is expected to be non-negative or dynamic}}
"shard.grid"() <{shape = array<i64: 2, -2>, sym_name = "g"}> : () -> ()

// -----

// expected-error @below {{'shard.grid' op requires attribute 'shape'}}
"shard.grid"() <{sym_name = "g"}> : () -> ()

// -----

func.func @no_grid(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{grid @g does not reference a 'shard.grid'}}
  %0 = "shard.all_reduce"(%x) <{grid = @g, grid_axes = array<i16: 0>}> : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

"shard.grid"() <{shape = array<i64: 2, 2>, sym_name = "g"}> : () -> ()
func.func @axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{grid axis 2 is out of range for grid @g of rank 2}}
  %0 = "shard.all_reduce"(%x) <{grid = @g, grid_axes = array<i16: 2>}> : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

"shard.grid"() <{shape = array<i64: 2, 2>, sym_name = "g"}> : () -> ()
func.func @repeated(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{grid axis 1 appears more than once}}
  %0 = "shard.all_reduce"(%x) <{grid = @g, grid_axes = array<i16: 1, 1>}> : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
func.func @no_grid_attr(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'shard.all_reduce' op requires attribute 'grid'}}
  %0 = "shard.all_reduce"(%x) <{grid_axes = array<i16: 0>}> : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
func.func @reduce_shape(%x: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @below {{result shape [8] does not match the group of 2 processes on grid @g (expected [4])}}
  %0 = "shard.all_reduce"(%x) <{grid = @g, grid_axes = array<i16: 0>}> : (tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

"shard.grid"() <{shape = array<i64: 2, 3>, sym_name = "g"}> : () -> ()
func.func @gather(%x: tensor<4x2xf32>) -> tensor<4x4xf32> {
  // expected-error @below {{result shape [4, 4] does not match the group of 3 processes on grid @g (expected [4, 6])}}
  %0 = "shard.all_gather"(%x) <{gather_axis = 1 : index, grid = @g, grid_axes = array<i16: 1>}> : (tensor<4x2xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
func.func @gather_axis(%x: tensor<4x2xf32>) -> tensor<4x4xf32> {
  // expected-error @below {{'gather_axis' = 2 is out of range for a rank-2 tensor}}
  %0 = "shard.all_gather"(%x) <{gather_axis = 2 : index, grid = @g, grid_axes = array<i16: 0>}> : (tensor<4x2xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

"shard.grid"() <{shape = array<i64: 4>, sym_name = "g"}> : () -> ()
func.func @scatter(%x: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @below {{scatter dimension 0 of size 6 is not divisible by the group size 4}}
  %0 = "shard.reduce_scatter"(%x) <{grid = @g, grid_axes = array<i16: 0>, scatter_axis = 0 : index}> : (tensor<6xf32>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
func.func @slice_elem(%x: tensor<4xf32>) -> tensor<2xf16> {
  // expected-error @below {{operand and result must have the same element type, got 'tensor<4xf32>' and 'tensor<2xf16>'}}
  %0 = "shard.all_slice"(%x) <{grid = @g, grid_axes = array<i16: 0>, slice_axis = 0 : index}> : (tensor<4xf32>) -> tensor<2xf16>
  return %0 : tensor<2xf16>
}

// -----

"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
func.func @all_to_all(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error @below {{result shape [4, 6] does not match the group of 2 processes on grid @g (expected [8, 3])}}
  %0 = "shard.all_to_all"(%x) <{concat_axis = 0 : index, grid = @g, grid_axes = array<i16: 0>, split_axis = 1 : index}> : (tensor<4x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
func.func @rank(%x: tensor<4x6xf32>) -> tensor<24xf32> {
  // expected-error @below {{operand and result must have the same rank, got 'tensor<4x6xf32>' and 'tensor<24xf32>'}}
  %0 = "shard.broadcast"(%x) <{grid = @g, grid_axes = array<i16: 0>, root = array<i64: 0>}> : (tensor<4x6xf32>) -> tensor<24xf32>
  return %0 : tensor<24xf32>
}

// -----

"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
func.func @p2p(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'shard.shift' op is not registered: commlir's 'shard' dialect declares only the ops its conversions consume; use --allow-unregistered-dialect to accept it}}
  %0 = "shard.shift"(%x) <{grid = @g, grid_axes = array<i16: 0>, offset = 1 : i64, shift_axis = 0 : index}> : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
