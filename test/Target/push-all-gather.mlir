// An async all-gather on a symm_mem group may push through copy engines
// (COMMLIR_PUSH_ALL_GATHER=1): `rt.nccl_all_gather` names the signal kernel as its
// `push_kernel`, sends an argument's shard from the argument itself (no clone into the pool),
// and the host program branches on the pool's descriptor: peer-mapped, a local copy of the
// own block, the barrier (step G + 1) and per peer a `symm_peer_put` and its signals (step
// G + 1 + s), all on the comm stream; otherwise `ncclAllGather`.
// Not pushed: a plain group, a group that also has a blocking symm collective (its signals
// come from the compute stream), and anything without the knob.
// RUN: env COMMLIR_PUSH_ALL_GATHER=1 commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=RT
// RUN: env COMMLIR_PUSH_ALL_GATHER=1 commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll | FileCheck %s --check-prefix=HOST
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=OFF

coll.group @dp {size = 2 : i64, symm_mem}
coll.group @tp {size = 2 : i64, symm_mem}
coll.group @plain {size = 2 : i64}

// RT: rt.symm_fused_kernel @[[SIG:s[0-9]+_fused_all_gather_matmul]] {dtype = "bf16", kind = "all_gather_matmul", outer = 1 : i64, seg = 1 : i64, world = 2 : i64}
// RT-LABEL: func.func @weights(
// RT-SAME: %[[W:[a-z0-9]+]]: memref<16x32xbf16>
// RT-NOT: rt.launch
// RT: rt.nccl_all_gather %[[W]], %{{[0-9]+}} {dtype = "bf16", group = @dp, push_kernel = @[[SIG]], recv_offset = {{[0-9]+}} : i64, send_count = 512 : i64, send_offset = 0 : i64} : (memref<16x32xbf16>, !rt.pool) -> ()
// OFF-LABEL: func.func @weights(
// OFF: rt.launch
// OFF: rt.nccl_all_gather
// OFF-NOT: push_kernel
// HOST-LABEL: define {{.*}} @commlir_fn_weights(
// HOST: call {{.*}} %symm_pool_desc
// HOST: fused_nccl:
// HOST: call {{.*}} %all_gather{{[0-9]*}}(ptr %{{[0-9]+}}, i32 0, ptr %arg0,
// HOST: own_block:
// HOST: call {{.*}} %copy_on{{[0-9]*}}(ptr %{{[0-9]+}}, i32 1,
// HOST: own_done:
// HOST: call {{.*}} %launch_on{{[0-9]*}}(ptr %{{[0-9]+}}, i32 1,
// HOST: call {{.*}} %symm_peer_put{{[0-9]*}}(ptr %{{[0-9]+}}, i32 1, ptr %buf, i32 %peer32, i64 %dst, ptr %arg0, i64 1024)
// HOST: call {{.*}} %launch_on{{[0-9]*}}(ptr %{{[0-9]+}}, i32 1,
func.func @weights(%w: tensor<16x32xbf16>) -> tensor<32x32xbf16> {
  %g = coll.all_gather_into_tensor %w {group = @dp} : (tensor<16x32xbf16>) -> tensor<32x32xbf16>
  %r = coll.wait_tensor %g : tensor<32x32xbf16>
  return %r : tensor<32x32xbf16>
}

// RT-LABEL: func.func @plain_group(
// RT: rt.nccl_all_gather
// RT-NOT: push_kernel
// RT: return
func.func @plain_group(%w: tensor<16x32xbf16>) -> tensor<32x32xbf16> {
  %g = coll.all_gather_into_tensor %w {group = @plain} : (tensor<16x32xbf16>) -> tensor<32x32xbf16>
  %r = coll.wait_tensor %g : tensor<32x32xbf16>
  return %r : tensor<32x32xbf16>
}

// RT-LABEL: func.func @beside_blocking_symm(
// RT: rt.nccl_all_gather
// RT-NOT: push_kernel
// RT: return
func.func @beside_blocking_symm(%w: tensor<16x32xbf16>, %x: tensor<8x32xbf16>) -> (tensor<32x32xbf16>, tensor<8x32xbf16>) {
  %g = coll.all_gather_into_tensor %w {group = @tp} : (tensor<16x32xbf16>) -> tensor<32x32xbf16>
  %s = symm.one_shot_all_reduce %x {reduce_op = "sum", group = @tp} : (tensor<8x32xbf16>) -> tensor<8x32xbf16>
  %r = coll.wait_tensor %g : tensor<32x32xbf16>
  return %r, %s : tensor<32x32xbf16>, tensor<8x32xbf16>
}
