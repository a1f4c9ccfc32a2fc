// RUN: commlir-opt %s | commlir-opt | FileCheck %s
// RUN: commlir-opt %s --mlir-print-op-generic | commlir-opt | FileCheck %s

// A planned function: the pool at entry, a slot on every comm-buffer producer, the release
// before the return.
coll.group @tp {size = 2 : i64}
// CHECK-LABEL: func.func @planned
func.func @planned(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: %[[P:.*]] = comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 128 : i64} : !comm.pool
  %p = comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 128 : i64} : !comm.pool
  // CHECK: compute.clone %arg0 {comm.slot = array<i64: 0, 128>} : (tensor<4x8xf32>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  %b = compute.clone %x {comm.slot = array<i64: 0, 128>} : (tensor<4x8xf32>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  %w = comm.all_reduce %b {reduce_op = "sum", group = @tp} : (tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %y = comm.wait %w, %b : (!comm.work, tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  %c = compute.clone %y : (tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<4x8xf32>
  // CHECK: comm.pool_release %[[P]] : !comm.pool
  comm.pool_release %p : !comm.pool
  return %c : tensor<4x8xf32>
}
