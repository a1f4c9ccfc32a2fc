// RUN: commlir-opt %s --split-input-file --verify-diagnostics

coll.group @tp {size = 2 : i64}
func.func @not_a_buffer(%x: tensor<4xf32>) {
  // expected-error @below {{operand #0 must be a comm buffer (tensor with a #comm.buffer encoding), got tensor<4xf32>}}
  %w = comm.all_reduce %x {reduce_op = "sum", group = @tp} : (tensor<4xf32>) -> !comm.work
  return
}

// -----

coll.group @tp {size = 2 : i64}
coll.group @dp {size = 2 : i64}
func.func @wrong_group(%x: tensor<4xf32, #comm.buffer<nccl, @dp>>) {
  // expected-error @below {{operand #0 is a comm buffer of group @dp, but the op runs on @tp}}
  %w = comm.all_reduce %x {reduce_op = "sum", group = @tp} : (tensor<4xf32, #comm.buffer<nccl, @dp>>) -> !comm.work
  return
}

// -----

coll.group @tp {size = 2 : i64}
func.func @gather_out(%x: tensor<4xf32, #comm.buffer<nccl, @tp>>) {
  %o = comm.alloc : tensor<4xf32, #comm.buffer<nccl, @tp>>
  // expected-error @below {{output #0 must be 8 (group @tp has size 2), got 4}}
  %w = comm.all_gather %x, %o {group = @tp} : (tensor<4xf32, #comm.buffer<nccl, @tp>>, tensor<4xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  return
}

// -----

coll.group @tp {size = 2 : i64}
func.func @wait_foreign(%x: tensor<4xf32, #comm.buffer<nccl, @tp>>, %z: tensor<4xf32, #comm.buffer<nccl, @tp>>) {
  // expected-note @below {{the collective}}
  %w = comm.all_reduce %x {reduce_op = "sum", group = @tp} : (tensor<4xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  // expected-error @below {{buffer operand #1 is not a buffer of the collective it waits for}}
  %y = comm.wait %w, %z : (!comm.work, tensor<4xf32, #comm.buffer<nccl, @tp>>) -> tensor<4xf32, #comm.buffer<nccl, @tp>>
  return
}

// -----

coll.group @tp {size = 2 : i64}
func.func @alloc_plain() {
  // expected-error @below {{result must be a comm buffer, got tensor<4xf32>}}
  %o = comm.alloc : tensor<4xf32>
  return
}

// -----

coll.group @tp {size = 2 : i64}
func.func @two_waits(%x: tensor<4xf32, #comm.buffer<nccl, @tp>>) {
  // expected-error @below {{work handle must be consumed by at most one 'comm.wait'}}
  %w = comm.all_reduce %x {reduce_op = "sum", group = @tp} : (tensor<4xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %y = comm.wait %w, %x : (!comm.work, tensor<4xf32, #comm.buffer<nccl, @tp>>) -> tensor<4xf32, #comm.buffer<nccl, @tp>>
  %z = comm.wait %w, %x : (!comm.work, tensor<4xf32, #comm.buffer<nccl, @tp>>) -> tensor<4xf32, #comm.buffer<nccl, @tp>>
  return
}
