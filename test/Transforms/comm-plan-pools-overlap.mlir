// REQUIRES: commlir-run
// RUN: not commlir-run %s --ranks 2 --entry overlap 2>&1 | FileCheck %s --check-prefix=OVERLAP
// RUN: not commlir-run %s --ranks 2 --entry in_flight 2>&1 | FileCheck %s --check-prefix=INFLIGHT
// RUN: commlir-run %s --ranks 2 --entry reuse | FileCheck %s --check-prefix=REUSE

// Hand-written plans run by the sim backend, which checks them against its own liveness.
coll.group @tp {size = 2 : i64, symm_mem}

// %b is placed on %a's bytes while %a still waits for its one-shot all-reduce: refused,
// naming the writer (the error's op) and the live buffer's producer and reader.
// OVERLAP: comm-plan-pools-overlap.mlir:[[@LINE+5]]:{{[0-9]+}}: error: 'compute.scale' op writes bytes [32, 96) of the symm_mem pool of @tp, overlapping bytes [0, 64) of the buffer produced by 'compute.scale' at {{.*}}comm-plan-pools-overlap.mlir":[[@LINE+4]]:{{[0-9]+}}, which is still live (read by 'symm.one_shot_all_reduce' at {{.*}}":[[@LINE+6]]:{{[0-9]+}}): the pool plan overlaps two live slots
// OVERLAP-NOT: rank
func.func @overlap(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %p = comm.pool {alignment = 32 : i64, group = @tp, kind = "symm_mem", size = 128 : i64} : !comm.pool
  %a = compute.scale %x {comm.slot = array<i64: 0, 64>, factor = 2.0 : f64} : (tensor<4x4xf32>) -> tensor<4x4xf32, #comm.buffer<symm_mem, @tp>>
  %b = compute.scale %x {comm.slot = array<i64: 32, 64>, factor = 3.0 : f64} : (tensor<4x4xf32>) -> tensor<4x4xf32, #comm.buffer<symm_mem, @tp>>
  %ya = symm.one_shot_all_reduce %a {reduce_op = "sum", group = @tp} : (tensor<4x4xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<4x4xf32>
  %yb = symm.one_shot_all_reduce %b {reduce_op = "sum", group = @tp} : (tensor<4x4xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<4x4xf32>
  %s = compute.add %ya, %yb : tensor<4x4xf32>
  comm.pool_release %p : !comm.pool
  return %s : tensor<4x4xf32>
}

// The all-gather's input %n is read by NCCL until the wait; %m reusing its bytes before the
// wait is a race on a GPU, and an error here although %n has no reader after the start op.
// INFLIGHT: error: 'compute.exp' op writes bytes [0, 64) of the symm_mem pool of @tp, overlapping bytes [0, 64) of the buffer produced by 'compute.neg' {{.*}}still live (read by 'comm.wait'
func.func @in_flight(%x: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %p = comm.pool {alignment = 64 : i64, group = @tp, kind = "symm_mem", size = 192 : i64} : !comm.pool
  %n = compute.neg %x {comm.slot = array<i64: 0, 64>} : (tensor<2x8xf32>) -> tensor<2x8xf32, #comm.buffer<symm_mem, @tp>>
  %o = comm.alloc {comm.slot = array<i64: 64, 128>} : tensor<4x8xf32, #comm.buffer<symm_mem, @tp>>
  %w = comm.all_gather %n, %o {group = @tp} : (tensor<2x8xf32, #comm.buffer<symm_mem, @tp>>, tensor<4x8xf32, #comm.buffer<symm_mem, @tp>>) -> !comm.work
  %m = compute.exp %x {comm.slot = array<i64: 0, 64>} : (tensor<2x8xf32>) -> tensor<2x8xf32, #comm.buffer<symm_mem, @tp>>
  %g = comm.wait %w, %o : (!comm.work, tensor<4x8xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<4x8xf32, #comm.buffer<symm_mem, @tp>>
  %y = compute.clone %g : (tensor<4x8xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<4x8xf32>
  %z = symm.one_shot_all_reduce %m {reduce_op = "sum", group = @tp} : (tensor<2x8xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<2x8xf32>
  comm.pool_release %p : !comm.pool
  return %y : tensor<4x8xf32>
}

// Reusing bytes after their last reader is fine.
// REUSE: rank 0 result 0: tensor<4x4xf32>
// REUSE: rank 1 result 0: tensor<4x4xf32>
func.func @reuse(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %p = comm.pool {alignment = 64 : i64, group = @tp, kind = "symm_mem", size = 64 : i64} : !comm.pool
  %a = compute.scale %x {comm.slot = array<i64: 0, 64>, factor = 2.0 : f64} : (tensor<4x4xf32>) -> tensor<4x4xf32, #comm.buffer<symm_mem, @tp>>
  %ya = symm.one_shot_all_reduce %a {reduce_op = "sum", group = @tp} : (tensor<4x4xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<4x4xf32>
  %b = compute.scale %ya {comm.slot = array<i64: 0, 64>, factor = 3.0 : f64} : (tensor<4x4xf32>) -> tensor<4x4xf32, #comm.buffer<symm_mem, @tp>>
  %yb = symm.one_shot_all_reduce %b {reduce_op = "sum", group = @tp} : (tensor<4x4xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<4x4xf32>
  comm.pool_release %p : !comm.pool
  return %yb : tensor<4x4xf32>
}
