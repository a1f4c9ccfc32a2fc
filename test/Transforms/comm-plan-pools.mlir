// RUN: commlir-opt %s --split-input-file --coll-to-comm --comm-plan-pools | FileCheck %s
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-to-comm{one-shot-threshold=0},comm-plan-pools))' | FileCheck %s --check-prefix=INPLACE
// RUN: commlir-opt %s --split-input-file --coll-to-comm --comm-plan-pools --comm-plan-pools | FileCheck %s
// RUN: commlir-opt %s --split-input-file --coll-to-comm --comm-plan-pools | commlir-opt | FileCheck %s
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools{alignment=256}))' | FileCheck %s --check-prefix=ALIGN

// The example of PyTorch PR #138519: three small all-reduces on a symm_mem group and a
// fourth on the sum of their results. coll-to-comm realizes the producers a, b, c and d
// straight in symmetric memory and, as in the PR, lowers these 64-byte sums to blocking
// one-shot all-reduces whose results are ordinary tensors. a, b and c are live together
// (each until its one-shot), so the pool needs 3 x 64 = 192 bytes, its lower bound; d is
// produced after the three one-shots and reuses a's bytes (the PR's buf9 reuses buf6).
coll.group @g0 {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @seed
// CHECK-NEXT: %[[P:.*]] = comm.pool {alignment = 64 : i64, group = @g0, kind = "symm_mem", size = 192 : i64} : !comm.pool
// CHECK-NEXT: %[[A:.*]] = compute.scale %arg0 {comm.slot = array<i64: 0, 64>, factor = 1.0 : f64}
// CHECK-NEXT: %[[B:.*]] = compute.scale %arg0 {comm.slot = array<i64: 64, 64>, factor = 2.0 : f64}
// CHECK-NEXT: %[[C:.*]] = compute.scale %arg0 {comm.slot = array<i64: 128, 64>, factor = 3.0 : f64}
// CHECK-NEXT: symm.one_shot_all_reduce %[[A]]
// CHECK-NEXT: symm.one_shot_all_reduce %[[B]]
// CHECK-NEXT: symm.one_shot_all_reduce %[[C]]
// CHECK-NEXT: compute.add
// CHECK-NEXT: %[[D:.*]] = compute.add {{.*}} {comm.slot = array<i64: 0, 64>}
// CHECK-NEXT: %[[Y:.*]] = symm.one_shot_all_reduce %[[D]]
// CHECK-NEXT: comm.pool_release %[[P]] : !comm.pool
// CHECK-NEXT: return %[[Y]] : tensor<4x4xf32>
//
// Without one-shot all-reduces (one-shot-threshold=0) the all-reduces run in place on the
// buffers and comm.wait yields them as aliases: a, b and c stay live until the adds that
// read their waited aliases, and d still reuses a's bytes, since the first add is a's last
// reader and d is produced by the second. Same 192 bytes.
// INPLACE-LABEL: func.func @seed
// INPLACE-NEXT: %[[P:.*]] = comm.pool {alignment = 64 : i64, group = @g0, kind = "symm_mem", size = 192 : i64}
// INPLACE-NEXT: %[[A:.*]] = compute.scale %arg0 {comm.slot = array<i64: 0, 64>
// INPLACE-NEXT: compute.scale %arg0 {comm.slot = array<i64: 64, 64>
// INPLACE-NEXT: compute.scale %arg0 {comm.slot = array<i64: 128, 64>
// INPLACE: %[[WA:.*]] = comm.wait %{{.*}}, %[[A]]
// INPLACE: compute.add %[[WA]]
// INPLACE-NEXT: %[[D:.*]] = compute.add {{.*}} {comm.slot = array<i64: 0, 64>}
// INPLACE-NEXT: comm.all_reduce %[[D]]
// INPLACE: compute.clone
// INPLACE-NEXT: comm.pool_release %[[P]]
// INPLACE-NEXT: return
//
// ALIGN-LABEL: func.func @seed
// ALIGN: comm.pool {alignment = 256 : i64, group = @g0, kind = "symm_mem", size = 576 : i64}
// ALIGN: comm.slot = array<i64: 0, 64>
// ALIGN: comm.slot = array<i64: 256, 64>
// ALIGN: comm.slot = array<i64: 512, 64>
func.func @seed(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = compute.scale %arg0 {factor = 1.0 : f64} : tensor<4x4xf32>
  %b = compute.scale %arg0 {factor = 2.0 : f64} : tensor<4x4xf32>
  %c = compute.scale %arg0 {factor = 3.0 : f64} : tensor<4x4xf32>
  %ra = coll.all_reduce %a {reduce_op = "sum", group = @g0} : tensor<4x4xf32>
  %a1 = coll.wait_tensor %ra : tensor<4x4xf32>
  %rb = coll.all_reduce %b {reduce_op = "sum", group = @g0} : tensor<4x4xf32>
  %b1 = coll.wait_tensor %rb : tensor<4x4xf32>
  %rc = coll.all_reduce %c {reduce_op = "sum", group = @g0} : tensor<4x4xf32>
  %c1 = coll.wait_tensor %rc : tensor<4x4xf32>
  %s = compute.add %a1, %b1 : tensor<4x4xf32>
  %d = compute.add %s, %c1 : tensor<4x4xf32>
  %rd = coll.all_reduce %d {reduce_op = "sum", group = @g0} : tensor<4x4xf32>
  %d1 = coll.wait_tensor %rd : tensor<4x4xf32>
  return %d1 : tensor<4x4xf32>
}

// -----

// A started collective keeps its *input* busy until its wait: the all-gather reads %n
// asynchronously, so %m, produced after the all-gather starts but before its wait, cannot
// take %n's bytes although %n has no reader after the start op (192 bytes would race with
// NCCL; 256 is the lower bound with that rule). After the waits, the all-reduce buffer of
// @dp lives in its own pool: one pool per (kind, group).
coll.group @tp {size = 2 : i64}
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @in_flight_inputs
// CHECK-NEXT: comm.pool {alignment = 64 : i64, group = @dp, kind = "nccl", size = 128 : i64}
// CHECK-NEXT: comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 256 : i64}
// CHECK-NEXT: compute.neg %arg0 {comm.slot = array<i64: 128, 64>}
// CHECK-NEXT: comm.alloc {comm.slot = array<i64: 0, 128>}
// CHECK-NEXT: comm.all_gather
// CHECK-NEXT: compute.exp %arg0 {comm.slot = array<i64: 192, 64>}
// CHECK-NEXT: comm.all_reduce
// CHECK-NEXT: comm.wait
// CHECK: comm.wait
// CHECK: compute.exp {{.*}} {comm.slot = array<i64: 0, 128>} {{.*}} #comm.buffer<nccl, @dp>>
// CHECK: comm.pool_release
// CHECK-NEXT: comm.pool_release
// CHECK-NEXT: return
func.func @in_flight_inputs(%x: tensor<2x8xf32>) -> (tensor<4x8xf32>, tensor<2x8xf32>, tensor<4x8xf32>) {
  %n = compute.neg %x : tensor<2x8xf32>
  %g = coll.all_gather_into_tensor %n {group = @tp} : (tensor<2x8xf32>) -> tensor<4x8xf32>
  %m = compute.exp %x : tensor<2x8xf32>
  %r = coll.all_reduce %m {reduce_op = "max", group = @tp} : tensor<2x8xf32>
  %gw = coll.wait_tensor %g : tensor<4x8xf32>
  %rw = coll.wait_tensor %r : tensor<2x8xf32>
  %e = compute.exp %gw : tensor<4x8xf32>
  %r2 = coll.all_reduce %e {reduce_op = "max", group = @dp} : tensor<4x8xf32>
  %ew = coll.wait_tensor %r2 : tensor<4x8xf32>
  return %gw, %rw, %ew : tensor<4x8xf32>, tensor<2x8xf32>, tensor<4x8xf32>
}

// -----

// A function without comm buffers gets no pool.
// CHECK-LABEL: func.func @no_comm
// CHECK-NOT: comm.pool
// CHECK: return
func.func @no_comm(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = compute.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
