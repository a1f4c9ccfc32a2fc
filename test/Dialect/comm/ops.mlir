// RUN: commlir-opt %s | commlir-opt | FileCheck %s
// RUN: commlir-opt %s --mlir-print-op-generic | commlir-opt | FileCheck %s

coll.group @tp {size = 2 : i64}
// CHECK-LABEL: func.func @comm
func.func @comm(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: %[[B:.*]] = compute.clone %arg0 : (tensor<4x8xf32>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  %b = compute.clone %x : (tensor<4x8xf32>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  // CHECK: %[[W:.*]] = comm.all_reduce %[[B]] {group = @tp, reduce_op = "sum"} : (tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %w = comm.all_reduce %b {reduce_op = "sum", group = @tp} : (tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  // CHECK: %[[Y:.*]] = comm.wait %[[W]], %[[B]] : (!comm.work, tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  %y = comm.wait %w, %b : (!comm.work, tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  // CHECK: comm.alloc : tensor<8x8xf32, #comm.buffer<nccl, @tp>>
  %o = comm.alloc : tensor<8x8xf32, #comm.buffer<nccl, @tp>>
  // CHECK: comm.all_gather
  %w2 = comm.all_gather %y, %o {group = @tp} : (tensor<4x8xf32, #comm.buffer<nccl, @tp>>, tensor<8x8xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %g = comm.wait %w2, %o : (!comm.work, tensor<8x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<8x8xf32, #comm.buffer<nccl, @tp>>
  %o2 = comm.alloc : tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  // CHECK: comm.reduce_scatter
  %w3 = comm.reduce_scatter %g, %o2 {reduce_op = "sum", group = @tp} : (tensor<8x8xf32, #comm.buffer<nccl, @tp>>, tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %s = comm.wait %w3, %o2 : (!comm.work, tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  %o3 = comm.alloc : tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  // CHECK: comm.all_to_all
  %w4 = comm.all_to_all %s, %o3 {group = @tp} : (tensor<4x8xf32, #comm.buffer<nccl, @tp>>, tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %t = comm.wait %w4, %o3 : (!comm.work, tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  // CHECK: comm.broadcast
  %w5 = comm.broadcast %t {src = 0 : i64, group = @tp} : (tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %u = comm.wait %w5, %t : (!comm.work, tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  %o4 = comm.alloc : tensor<8x4xf32, #comm.buffer<nccl, @tp>>
  // CHECK: comm.shard_dim_alltoall
  %v = comm.shard_dim_alltoall %u, %o4 {gather_dim = 0 : i64, shard_dim = 1 : i64, group = @tp} : (tensor<4x8xf32, #comm.buffer<nccl, @tp>>, tensor<8x4xf32, #comm.buffer<nccl, @tp>>) -> tensor<8x4xf32, #comm.buffer<nccl, @tp>>
  %r = compute.clone %u : (tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
