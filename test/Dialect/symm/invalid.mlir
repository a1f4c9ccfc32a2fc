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
func.func @bad_reduce(%x: tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16> {
  // expected-error @below {{attribute 'reduce_op' must be one of "sum", "avg", "max", "min", "product"}}
  %y = symm.one_shot_all_reduce %x {reduce_op = "mean", group = @tp} : (tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16>
  return %y : tensor<8xbf16>
}
