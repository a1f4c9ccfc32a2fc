// RUN: commlir-opt %s --split-input-file --comm-plan-pools --verify-diagnostics

// Comm buffers never escape: their pool is released before the function returns.
// (coll-to-comm copies results out of comm buffers, so this only happens in hand-written IR.)
coll.group @tp {size = 2 : i64}
func.func @escapes(%x: tensor<4xf32>) -> tensor<4xf32, #comm.buffer<nccl, @tp>> {
  // expected-note @below {{the buffer is produced here}}
  %b = compute.clone %x : (tensor<4xf32>) -> tensor<4xf32, #comm.buffer<nccl, @tp>>
  // expected-error @below {{returns a comm buffer: comm buffers must not escape the function}}
  return %b : tensor<4xf32, #comm.buffer<nccl, @tp>>
}
