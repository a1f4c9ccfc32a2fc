// RUN: commlir-opt %s --split-input-file --coll-to-comm | FileCheck %s
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-to-comm{one-shot-threshold=0}))' | FileCheck %s --check-prefix=NOSHOT

// The tensor-parallel MLP: the producer matmul writes straight into symmetric memory and the
// small sum all-reduce becomes a blocking one-shot all-reduce; its wait disappears.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @mlp
// NOSHOT-LABEL: func.func @mlp
func.func @mlp(%x: tensor<8x1024xbf16>, %w1: tensor<1024x4096xbf16>, %w2: tensor<4096x1024xbf16>) -> tensor<8x1024xbf16> {
  %h = compute.matmul %x, %w1 : (tensor<8x1024xbf16>, tensor<1024x4096xbf16>) -> tensor<8x4096xbf16>
  %g = compute.gelu %h : tensor<8x4096xbf16>
  // CHECK: %[[O:.*]] = compute.matmul %{{.*}}, %{{.*}} : (tensor<8x4096xbf16>, tensor<4096x1024xbf16>) -> tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>
  // CHECK-NEXT: %[[Y:.*]] = symm.one_shot_all_reduce %[[O]] {group = @tp, reduce_op = "sum"} : (tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8x1024xbf16>
  // CHECK-NEXT: return %[[Y]] : tensor<8x1024xbf16>
  // NOSHOT: %[[O:.*]] = compute.matmul {{.*}} -> tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>
  // NOSHOT-NEXT: %[[W:.*]] = comm.all_reduce %[[O]] {group = @tp, reduce_op = "sum"} : (tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>) -> !comm.work
  // NOSHOT-NEXT: %[[Y:.*]] = comm.wait %[[W]], %[[O]] : (!comm.work, tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>
  // NOSHOT-NEXT: %[[C:.*]] = compute.clone %[[Y]] : (tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8x1024xbf16>
  // NOSHOT-NEXT: return %[[C]] : tensor<8x1024xbf16>
  %o = compute.matmul %g, %w2 : (tensor<8x4096xbf16>, tensor<4096x1024xbf16>) -> tensor<8x1024xbf16>
  %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<8x1024xbf16>
  %y = coll.wait_tensor %r : tensor<8x1024xbf16>
  return %y : tensor<8x1024xbf16>
}

// -----

// An argument cannot be realized in place: it is cloned into an nccl buffer (no symm_mem
// on @dp). Another reader of the producer forces a clone before an in-place all-reduce.
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @clones
func.func @clones(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK: %[[C:.*]] = compute.clone %arg0 : (tensor<4x8xf32>) -> tensor<4x8xf32, #comm.buffer<nccl, @dp>>
  // CHECK-NEXT: %[[W:.*]] = comm.all_reduce %[[C]] {cost_ns = 100 : i64, group = @dp, reduce_op = "max"}
  %r = coll.all_reduce %x {reduce_op = "max", group = @dp, cost_ns = 100 : i64} : tensor<4x8xf32>
  // CHECK: %[[E:.*]] = compute.exp %arg0 : tensor<4x8xf32>
  %e = compute.exp %x : tensor<4x8xf32>
  // CHECK-NEXT: %[[C2:.*]] = compute.clone %[[E]] : (tensor<4x8xf32>) -> tensor<4x8xf32, #comm.buffer<nccl, @dp>>
  // CHECK-NEXT: comm.all_reduce %[[C2]]
  %r2 = coll.all_reduce %e {reduce_op = "sum", group = @dp} : tensor<4x8xf32>
  // CHECK: comm.wait %[[W]], %[[C]] {cost_ns = 5 : i64}
  %y = coll.wait_tensor %r {cost_ns = 5 : i64} : tensor<4x8xf32>
  %y2 = coll.wait_tensor %r2 : tensor<4x8xf32>
  %s = compute.add %y2, %e : tensor<4x8xf32>
  return %y, %s : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Out-of-place collectives read a realized producer and write a fresh comm.alloc.
coll.group @tp {size = 2 : i64}
// CHECK-LABEL: func.func @out_of_place
func.func @out_of_place(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: %[[N:.*]] = compute.neg %arg0 : (tensor<4x8xf32>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  %n = compute.neg %x : tensor<4x8xf32>
  // CHECK-NEXT: %[[O:.*]] = comm.alloc : tensor<8x8xf32, #comm.buffer<nccl, @tp>>
  // CHECK-NEXT: %[[W:.*]] = comm.all_gather %[[N]], %[[O]] {group = @tp}
  %g = coll.all_gather_into_tensor %n {group = @tp} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  // CHECK-NEXT: %[[Y:.*]] = comm.wait %[[W]], %[[O]]
  %y = coll.wait_tensor %g : tensor<8x8xf32>
  // The waited buffer is read directly by the next out-of-place collective.
  // CHECK-NEXT: %[[O2:.*]] = comm.alloc : tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  // CHECK-NEXT: comm.reduce_scatter %[[Y]], %[[O2]] {group = @tp, reduce_op = "sum"}
  %s = coll.reduce_scatter_tensor %y {reduce_op = "sum", group = @tp} : (tensor<8x8xf32>) -> tensor<4x8xf32>
  %z = coll.wait_tensor %s : tensor<4x8xf32>
  // CHECK: comm.all_to_all
  %t = coll.all_to_all_single %z {group = @tp} : tensor<4x8xf32>
  %u = coll.wait_tensor %t : tensor<4x8xf32>
  // CHECK: comm.broadcast
  %b = coll.broadcast %u {src = 1 : i64, group = @tp} : tensor<4x8xf32>
  %v = coll.wait_tensor %b : tensor<4x8xf32>
  // CHECK: %[[SD:.*]] = comm.shard_dim_alltoall
  // CHECK-SAME: {gather_dim = 0 : i64, group = @tp, shard_dim = 1 : i64}
  %sd = coll.shard_dim_alltoall %v {gather_dim = 0 : i64, shard_dim = 1 : i64, group = @tp} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  // CHECK: compute.reshape %[[SD]]
  %re = compute.reshape %sd : (tensor<8x4xf32>) -> tensor<4x8xf32>
  return %re : tensor<4x8xf32>
}

// -----

// Coalesced collectives: one start, one wait yielding every buffer, placed at the first wait.
coll.group @tp {size = 2 : i64}
// CHECK-LABEL: func.func @coalesced
func.func @coalesced(%a: tensor<4xf32>, %b: tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  // CHECK: %[[W:.*]] = comm.all_reduce_coalesced %[[A:.*]], %[[B:.*]] {group = @tp, reduce_op = "sum"}
  %r:2 = coll.all_reduce_coalesced %a, %b {reduce_op = "sum", group = @tp} : (tensor<4xf32>, tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>)
  // CHECK-NEXT: %[[Y:.*]]:2 = comm.wait %[[W]], %[[A]], %[[B]]
  %y1 = coll.wait_tensor %r#1 : tensor<8xf32>
  %y0 = coll.wait_tensor %r#0 : tensor<4xf32>
  // CHECK-NOT: coll.wait_tensor
  return %y0, %y1 : tensor<4xf32>, tensor<8xf32>
}

// -----

// Declared comm-buffer operands (here symm.one_shot_all_reduce's `input`) written at the
// input level are realized generically: an argument is cloned into symmetric memory.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @registered
func.func @registered(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  // CHECK: %[[B:.*]] = compute.clone %arg0 : (tensor<8xbf16>) -> tensor<8xbf16, #comm.buffer<symm_mem, @tp>>
  // CHECK-NEXT: symm.one_shot_all_reduce %[[B]]
  %y = symm.one_shot_all_reduce %x {reduce_op = "sum", group = @tp} : (tensor<8xbf16>) -> tensor<8xbf16>
  return %y : tensor<8xbf16>
}
