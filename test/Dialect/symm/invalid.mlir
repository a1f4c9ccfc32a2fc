// RUN: commlir-opt %s --split-input-file --verify-diagnostics

coll.group @tp {size = 2 : i64, symm_mem}
func.func @not_symm(%x: tensor<8xbf16, #comm.buffer<nccl, @tp>>) -> tensor<8xbf16> {
  // expected-error @below {{operand 'input' must be a #comm.buffer<symm_mem, @tp> tensor, got tensor<8xbf16, #comm.buffer<nccl, @tp>>}}
  %y = symm.one_shot_all_reduce %x {reduce_op = "sum", group = @tp} : (tensor<8xbf16, #comm.buffer<nccl, @tp>>) -> tensor<8xbf16>
  return %y : tensor<8xbf16>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @no_symm_group(%x: tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16> {
  // expected-error @below {{group @tp does not enable symmetric memory}}
  %y = symm.one_shot_all_reduce %x {reduce_op = "sum", group = @tp} : (tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16>
  return %y : tensor<8xbf16>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @unknown_reduce(%x: tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16> {
  // expected-error @below {{attribute 'reduce_op' must be one of "sum", "avg", "max", "min", "product"}}
  %y = symm.one_shot_all_reduce %x {reduce_op = "xor", group = @tp} : (tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16>
  return %y : tensor<8xbf16>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @i1_sum(%x: tensor<8xi1>) -> tensor<8xi1> {
  // expected-error @below {{reduce_op "sum" is not supported on i1 (use "max" for a logical or, "min" for a logical and)}}
  %y = symm.one_shot_all_reduce %x {reduce_op = "sum", group = @tp} : (tensor<8xi1>) -> tensor<8xi1>
  return %y : tensor<8xi1>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @i1_avg_two_shot(%x: tensor<8xi1>) -> tensor<8xi1> {
  // expected-error @below {{reduce_op "avg" is not supported on i1}}
  %y = symm.two_shot_all_reduce %x {reduce_op = "avg", group = @tp} : tensor<8xi1>
  return %y : tensor<8xi1>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @i1_max_ok(%x: tensor<8xi1>) -> tensor<8xi1> {
  %y = symm.reduce_scatter %x {reduce_op = "max", group = @tp} : (tensor<8xi1>) -> tensor<4xi1>
  %z = symm.two_shot_all_reduce %x {reduce_op = "min", group = @tp} : tensor<8xi1>
  return %z : tensor<8xi1>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @two_shot_fresh_result(%x: tensor<8xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<8xf32> {
  // expected-error @below {{result must have the input's type tensor<8xf32, #comm.buffer<symm_mem, @tp>> (it is the input's storage), got tensor<8xf32>}}
  %y = symm.two_shot_all_reduce %x {reduce_op = "sum", group = @tp} : (tensor<8xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @two_shot_no_symm_group(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{group @tp does not enable symmetric memory}}
  %y = symm.two_shot_all_reduce %x {reduce_op = "sum", group = @tp} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @two_shot_missing_reduce(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{requires attribute 'reduce_op'}}
  %y = symm.two_shot_all_reduce %x {group = @tp} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @all_gather_dim(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{result dim 0 must be 8 (group @tp has size 2), got 4}}
  %y = symm.all_gather %x {group = @tp} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @all_gather_elem(%x: tensor<4x16xf32>) -> tensor<8x16xbf16> {
  // expected-error @below {{result #0 must have the element type of operand #0}}
  %y = symm.all_gather %x {group = @tp} : (tensor<4x16xf32>) -> tensor<8x16xbf16>
  return %y : tensor<8x16xbf16>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @all_gather_nccl_buffer(%x: tensor<4xf32, #comm.buffer<nccl, @tp>>) -> tensor<8xf32> {
  // expected-error @below {{operand 'input' must be a #comm.buffer<symm_mem, @tp> tensor, got tensor<4xf32, #comm.buffer<nccl, @tp>>}}
  %y = symm.all_gather %x {group = @tp} : (tensor<4xf32, #comm.buffer<nccl, @tp>>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

coll.group @tp {size = 4 : i64, symm_mem}
func.func @reduce_scatter_dim(%x: tensor<8x2xf32>) -> tensor<4x2xf32> {
  // expected-error @below {{operand dim 0 must be 16 (group @tp has size 4), got 8}}
  %y = symm.reduce_scatter %x {reduce_op = "sum", group = @tp} : (tensor<8x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @reduce_scatter_trailing(%x: tensor<8x2xf32>) -> tensor<4x3xf32> {
  // expected-error @below {{result #0 must match operand #0 beyond dim 0: 4x3 vs 8x2}}
  %y = symm.reduce_scatter %x {reduce_op = "sum", group = @tp} : (tensor<8x2xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @reduce_scatter_group(%x: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @below {{group @nope does not reference a 'coll.group'}}
  %y = symm.reduce_scatter %x {reduce_op = "sum", group = @nope} : (tensor<8xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @scalar_gather(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @below {{operand #0 and result #0 must have the same rank of at least 1}}
  %y = symm.all_gather %x {group = @tp} : (tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

coll.group @tp {size = 2 : i64}
func.func @fused_ag_no_symm(%a: tensor<4x16xbf16>, %b: tensor<16x8xbf16>) -> tensor<8x8xbf16> {
  // expected-error @below {{group @tp does not enable symmetric memory}}
  %y = symm.fused_all_gather_matmul %a, %b {group = @tp} : (tensor<4x16xbf16>, tensor<16x8xbf16>) -> tensor<8x8xbf16>
  return %y : tensor<8x8xbf16>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @fused_ag_wrong_rows(%a: tensor<4x16xbf16>, %b: tensor<16x8xbf16>) -> tensor<4x8xbf16> {
  // expected-error @below {{result #0 must have shape 8x8 and the element type of 'a', got 4x8}}
  %y = symm.fused_all_gather_matmul %a, %b {group = @tp} : (tensor<4x16xbf16>, tensor<16x8xbf16>) -> tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @fused_ag_contraction(%a: tensor<4x16xbf16>, %b: tensor<12x8xbf16>) -> tensor<8x8xbf16> {
  // expected-error @below {{contraction dims differ: 'a' has 16, operand #1 has 12}}
  %y = symm.fused_all_gather_matmul %a, %b {group = @tp} : (tensor<4x16xbf16>, tensor<12x8xbf16>) -> tensor<8x8xbf16>
  return %y : tensor<8x8xbf16>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @fused_ag_gather_k(%a: tensor<4x16xbf16>, %b: tensor<16x8xbf16>) -> tensor<8x8xbf16> {
  // expected-error @below {{gather_dim must be in [0, 1) (a dimension other than the contraction dimension), got 1}}
  %y = symm.fused_all_gather_matmul %a, %b {gather_dim = 1 : i64, group = @tp} : (tensor<4x16xbf16>, tensor<16x8xbf16>) -> tensor<8x8xbf16>
  return %y : tensor<8x8xbf16>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @fused_ag_return_a_count(%a: tensor<4x16xbf16>, %b: tensor<16x8xbf16>) -> tensor<8x8xbf16> {
  // expected-error @below {{expects 2 results (the gathered 'a', then one per 'b'), got 1}}
  %y = symm.fused_all_gather_matmul %a, %b {group = @tp, return_a} : (tensor<4x16xbf16>, tensor<16x8xbf16>) -> tensor<8x8xbf16>
  return %y : tensor<8x8xbf16>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @fused_rs_indivisible(%a: tensor<7x32xbf16>, %b: tensor<32x16xbf16>) -> tensor<3x16xbf16> {
  // expected-error @below {{dim 0 of the product (7) must be divisible by the group size (2)}}
  %y = symm.fused_matmul_reduce_scatter %a, %b {reduce_op = "sum", scatter_dim = 0 : i64, group = @tp} : (tensor<7x32xbf16>, tensor<32x16xbf16>) -> tensor<3x16xbf16>
  return %y : tensor<3x16xbf16>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @fused_rs_max(%a: tensor<8x32xbf16>, %b: tensor<32x16xbf16>) -> tensor<4x16xbf16> {
  // expected-error @below {{attribute 'reduce_op' must be one of "sum", "avg"}}
  %y = symm.fused_matmul_reduce_scatter %a, %b {reduce_op = "max", scatter_dim = 0 : i64, group = @tp} : (tensor<8x32xbf16>, tensor<32x16xbf16>) -> tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @fused_rs_wrong_result(%a: tensor<8x32xbf16>, %b: tensor<32x16xbf16>) -> tensor<8x16xbf16> {
  // expected-error @below {{result #0 must have shape 4x16 and the element type of 'a', got 8x16}}
  %y = symm.fused_matmul_reduce_scatter %a, %b {reduce_op = "sum", scatter_dim = 0 : i64, group = @tp} : (tensor<8x32xbf16>, tensor<32x16xbf16>) -> tensor<8x16xbf16>
  return %y : tensor<8x16xbf16>
}
