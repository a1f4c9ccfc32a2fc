// RUN: commlir-opt %s --split-input-file --verify-diagnostics

coll.group @tp {size = 2 : i64}
func.func @gather_shape(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{'coll.all_gather_into_tensor' op result dim 0 must be 8 (group @tp has size 2), got 4}}
  %r = coll.all_gather_into_tensor %x {group = @tp} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = coll.wait_tensor %r : tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

coll.group @tp {size = 4 : i64}
func.func @scatter_shape(%x: tensor<6x16xf32>) -> tensor<3x16xf32> {
  // expected-error @below {{operand dim 0 must be 12 (group @tp has size 4), got 6}}
  %r = coll.reduce_scatter_tensor %x {reduce_op = "sum", group = @tp} : (tensor<6x16xf32>) -> tensor<3x16xf32>
  %y = coll.wait_tensor %r : tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @bad_reduce_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{attribute 'reduce_op' must be one of "sum", "avg", "max", "min", "product"}}
  %r = coll.all_reduce %x {reduce_op = "mean", group = @tp} : tensor<4xf32>
  %y = coll.wait_tensor %r : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @missing_group(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{group @nope does not reference a 'coll.group'}}
  %r = coll.all_reduce %x {reduce_op = "sum", group = @nope} : tensor<4xf32>
  %y = coll.wait_tensor %r : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @src_range(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{src 2 is out of range for group @tp of size 2}}
  %r = coll.broadcast %x {src = 2 : i64, group = @tp} : tensor<4xf32>
  %y = coll.wait_tensor %r : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @splits(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{output_split_sizes[0][1] = 2 must equal input_split_sizes[1][0] = 1}}
  %r = coll.all_to_all_single %x {group = @tp, input_split_sizes = [array<i64: 2, 2>, array<i64: 1, 3>], output_split_sizes = [array<i64: 2, 2>, array<i64: 2, 2>]} : tensor<4xf32>
  %y = coll.wait_tensor %r : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @split_sum(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{input_split_sizes[0] sums to 3, but dim 0 is 4}}
  %r = coll.all_to_all_single %x {group = @tp, input_split_sizes = [array<i64: 1, 2>, array<i64: 2, 2>], output_split_sizes = [array<i64: 1, 2>, array<i64: 2, 2>]} : tensor<4xf32>
  %y = coll.wait_tensor %r : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @in_flight(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{result #0 is in flight and may only be consumed by 'coll.wait_tensor'}}
  %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<4xf32>
  // expected-note @below {{used by 'compute.add' here}}
  %y = compute.add %r, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @wait_non_collective(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{operand must be the result of a non-blocking collective}}
  %y = coll.wait_tensor %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @below {{each ranks list must have 2 entries (the group size), got 3}}
coll.group @tp {size = 2 : i64, ranks = array<i64: 0, 1, 2>}

// -----

// expected-error @below {{rank 1 appears more than once in ranks}}
coll.group @tp {size = 2 : i64, ranks = [array<i64: 0, 1>, array<i64: 1, 2>]}

// -----

coll.group @tp {size = 2 : i64}
func.func @coalesced_types(%a: tensor<4xf32>, %b: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @below {{result #1 must have the type of operand #1 (tensor<8xf32>), got tensor<4xf32>}}
  %r:2 = coll.all_reduce_coalesced %a, %b {reduce_op = "sum", group = @tp} : (tensor<4xf32>, tensor<8xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %y = coll.wait_tensor %r#0 : tensor<4xf32>
  %z = coll.wait_tensor %r#1 : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @shard_dim(%x: tensor<4x16xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{result shape must be 8x8 (group @tp has size 2), got 8x16}}
  %r = coll.shard_dim_alltoall %x {gather_dim = 0 : i64, shard_dim = 1 : i64, group = @tp} : (tensor<4x16xf32>) -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// expected-note @below {{see existing symbol definition here}}
coll.group @tp {size = 2 : i64}
// expected-error @below {{redefinition of symbol named 'tp'}}
coll.group @tp {size = 4 : i64}

// -----

coll.group @tp {size = 2 : i64}
func.func @all_slice_indivisible(%x: tensor<7x16xf32>) -> tensor<3x16xf32> {
  // expected-error @below {{'coll.all_slice' op dim 0 (7) must be divisible by the size of group @tp (2)}}
  %r = coll.all_slice %x {dim = 0 : i64, group = @tp} : (tensor<7x16xf32>) -> tensor<3x16xf32>
  return %r : tensor<3x16xf32>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @all_slice_dim(%x: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{'coll.all_slice' op dim 2 is out of range for rank 2}}
  %r = coll.all_slice %x {dim = 2 : i64, group = @tp} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @all_slice_result(%x: tensor<8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @below {{'coll.all_slice' op result must have shape 4x16 and the operand's element type, got 8x8}}
  %r = coll.all_slice %x {dim = 0 : i64, group = @tp} : (tensor<8x16xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @replicated_unknown_group(
    %w: tensor<8x16xf32>,
    // expected-error @below {{'func.func' op argument #1 is replicated on @dp, which does not reference a 'coll.group'}}
    %x: tensor<8x16xf32> {coll.replicated = @dp}) -> tensor<8x16xf32> {
  return %x : tensor<8x16xf32>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @replicated_not_symbol(
    // expected-error @below {{'func.func' op argument #0: 'coll.replicated' must be a symbol reference to a 'coll.group'}}
    %x: tensor<8x16xf32> {coll.replicated = "tp"}) -> tensor<8x16xf32> {
  return %x : tensor<8x16xf32>
}

// -----

coll.group @dp {size = 2 : i64}
func.func @f(%x: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{'prescale' must be ± a power of two from 2^-14 to 2^15, got 0.3}}
  %r = coll.reduce_scatter_tensor %x {reduce_op = "sum", group = @dp, prescale = 0.3 : f64} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %w = coll.wait_tensor %r : tensor<4x16xf32>
  return %w : tensor<4x16xf32>
}

// -----

coll.group @dp {size = 2 : i64}
func.func @f(%x: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{'prescale' needs reduce_op "sum" or "avg"}}
  %r = coll.reduce_scatter_tensor %x {reduce_op = "max", group = @dp, prescale = 0.5 : f64} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %w = coll.wait_tensor %r : tensor<4x16xf32>
  return %w : tensor<4x16xf32>
}

// -----

coll.group @dp {size = 2 : i64}
func.func @f(%x: tensor<8x16xi32>) -> tensor<4x16xi32> {
  // expected-error @below {{'prescale' needs float tensors}}
  %r = coll.reduce_scatter_tensor %x {reduce_op = "sum", group = @dp, prescale = 0.5 : f64} : (tensor<8x16xi32>) -> tensor<4x16xi32>
  %w = coll.wait_tensor %r : tensor<4x16xi32>
  return %w : tensor<4x16xi32>
}
