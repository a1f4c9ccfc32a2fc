coll.group @tp {size = 2 : i64}
func.func @main(%x: tensor<2x4xf32>) -> (tensor<4x4xf32, #comm.buffer<nccl, @tp>>, tensor<2x4xf32, #comm.buffer<nccl, @tp>>) {
  %xb = compute.clone %x : (tensor<2x4xf32>) -> tensor<2x4xf32, #comm.buffer<nccl, @tp>>
  %o = comm.alloc : tensor<4x4xf32, #comm.buffer<nccl, @tp>>
  %wg = comm.all_gather %xb, %o {group = @tp} : (tensor<2x4xf32, #comm.buffer<nccl, @tp>>, tensor<4x4xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %ab = compute.clone %x : (tensor<2x4xf32>) -> tensor<2x4xf32, #comm.buffer<nccl, @tp>>
  %wa = comm.all_reduce %ab {reduce_op = "max", group = @tp} : (tensor<2x4xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %gy = comm.wait %wg, %o : (!comm.work, tensor<4x4xf32, #comm.buffer<nccl, @tp>>) -> tensor<4x4xf32, #comm.buffer<nccl, @tp>>
  %ay = comm.wait %wa, %ab : (!comm.work, tensor<2x4xf32, #comm.buffer<nccl, @tp>>) -> tensor<2x4xf32, #comm.buffer<nccl, @tp>>
  return %gy, %ay : tensor<4x4xf32, #comm.buffer<nccl, @tp>>, tensor<2x4xf32, #comm.buffer<nccl, @tp>>
}
