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
func.func @only_sum(%x: tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16> {
  // expected-error @below {{attribute 'reduce_op' must be one of "sum"}}
  %y = symm.one_shot_all_reduce %x {reduce_op = "max", group = @tp} : (tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16>
  return %y : tensor<8xbf16>
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
