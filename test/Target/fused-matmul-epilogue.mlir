// A matmul-reduce-scatter whose result only an elementwise chain reads (the residual add of a
// sequence-parallel block) applies the chain in its final reduction: the pipeline's kernel
// names the chain's `rt.kernel` as its `epilogue`, takes the chain's other inputs after its
// five parameters and stores the chain's result, so the reduced chunk is never stored and the
// chain has no launch of its own (the NCCL fallback still launches it). The result may be a
// comm buffer (the next all-gather-matmul's shard) when nothing between the two touches the
// pools of the chain's values.
// Not fused: an op in between that reads a slot the chain's result will share, a second
// reader, and the accumulating pipeline of large chunks (no final reduction).
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=RT
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=llvm-ir | FileCheck %s --check-prefix=LL
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll | FileCheck %s --check-prefix=HOST
// RUN: env COMMLIR_FUSED_PARTS=1 commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=ONE

coll.group @tp {size = 2 : i64, symm_mem}

// RT: rt.kernel @[[ADD:k[0-9]+_add]] ({
// RT: rt.symm_fused_kernel @[[RS:s[0-9]+_fused_matmul_reduce_scatter]] {dtype = "bf16", epilogue = @[[ADD]], epilogue_operand = 1 : i64, kind = "matmul_reduce_scatter"
// RT-LABEL: func.func @residual(
// RT-SAME: %{{[a-z0-9]+}}: memref<64x32xbf16>, %{{[a-z0-9]+}}: memref<32x16xbf16>, %[[X:[a-z0-9]+]]: memref<32x16xbf16>
// RT: %[[Y:[0-9]+]] = rt.alloc : memref<32x16xbf16>
// RT: rt.symm_fused_matmul_reduce_scatter %{{.*}}, %{{.*}}, %{{.*}}, %[[Y]], %[[X]] {{{.*}}epilogue = @[[ADD]], epilogue_block = 256 : i64, epilogue_grid = 1 : i64, epilogue_operand = 1 : i64{{.*}}kernel = @[[RS]]
// RT-NOT: rt.launch
// RT: return %[[Y]]
// LL: define ptx_kernel void @{{s[0-9]+}}_fused_matmul_reduce_scatter(ptr addrspace(1) {{.*}}%0, i64 %1, ptr addrspace(1) %2, i32 %3, i32 %4, ptr addrspace(1) %5)
// HOST-LABEL: define i32 @commlir_fn_residual(
// HOST: call i32 %launch_on{{[0-9]*}}(ptr %{{.*}}, i32 1, i32 {{[0-9]+}}, i32 1, i32 {{[0-9]+}}, i32 0, ptr %kparams, i32 6)
func.func @residual(%h: tensor<64x32xbf16>, %w: tensor<32x16xbf16>, %x: tensor<32x16xbf16>) -> tensor<32x16xbf16> {
  %r = symm.fused_matmul_reduce_scatter %h, %w {reduce_op = "sum", group = @tp} : (tensor<64x32xbf16>, tensor<32x16xbf16>) -> tensor<32x16xbf16>
  %y = compute.add %x, %r : tensor<32x16xbf16>
  return %y : tensor<32x16xbf16>
}

// The chain's result is the all-gather-matmul's shard, in a pool slot: the pipeline writes
// it there.
// RT-LABEL: func.func @slot(
// RT: %[[V:[0-9]+]] = rt.pool_view %{{.*}} {offset = 0 : i64}
// RT: rt.symm_fused_matmul_reduce_scatter %{{.*}}, %{{.*}}, %{{.*}}, %[[V]], %{{.*}} {{{.*}}epilogue = @[[ADD]]
// RT-NOT: rt.launch
// RT: rt.symm_fused_all_gather_matmul {{.*}}, %[[V]] {
func.func @slot(%h: tensor<64x32xbf16>, %w: tensor<32x16xbf16>, %x: tensor<32x16xbf16>, %b: tensor<16x8xbf16>) -> tensor<64x8xbf16> {
  %r = symm.fused_matmul_reduce_scatter %h, %w {reduce_op = "sum", group = @tp} : (tensor<64x32xbf16>, tensor<32x16xbf16>) -> tensor<32x16xbf16>
  %y = compute.add %x, %r : tensor<32x16xbf16>
  %q = symm.fused_all_gather_matmul %y, %b {group = @tp} : (tensor<32x16xbf16>, tensor<16x8xbf16>) -> tensor<64x8xbf16>
  return %q : tensor<64x8xbf16>
}

// The residual is this rank's rows of a replicated input: the slice is a view of the
// argument (`rt.rank_view`, no kernel), hoisted to the top, so the add still fuses.
// RT-LABEL: func.func @sliced_residual(
// RT-NEXT: %[[S:[0-9]+]] = rt.rank_view %arg2 {group = @tp, stride = 1024 : i64}
// RT: rt.symm_fused_matmul_reduce_scatter %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[S]] {{{.*}}epilogue = @[[ADD]]
// RT-NOT: rt.launch
// RT: return
func.func @sliced_residual(%h: tensor<64x32xbf16>, %w: tensor<32x16xbf16>, %x: tensor<64x16xbf16> {coll.replicated = @tp}) -> tensor<32x16xbf16> {
  %r = symm.fused_matmul_reduce_scatter %h, %w {reduce_op = "sum", group = @tp} : (tensor<64x32xbf16>, tensor<32x16xbf16>) -> tensor<32x16xbf16>
  %s = coll.all_slice %x {dim = 0 : i64, group = @tp} : (tensor<64x16xbf16>) -> tensor<32x16xbf16>
  %y = compute.add %s, %r : tensor<32x16xbf16>
  return %y : tensor<32x16xbf16>
}

// The right-hand side is a comm buffer too, but of another pool (the FSDP-gathered weight in
// @dp's NCCL pool): it cannot share the bytes of the add's slot in @tp's pool, so the add
// still fuses.
// RT-LABEL: func.func @other_pool(
// RT: rt.launch {{.*}}@k{{[0-9]+}}_clone
// RT: rt.symm_fused_matmul_reduce_scatter {{.*}}epilogue = @[[ADD]]
// RT-NOT: rt.launch
// RT: return
coll.group @dp {size = 2 : i64}
func.func @other_pool(%h: tensor<64x32xbf16>, %w: tensor<16x16xbf16>, %x: tensor<32x16xbf16>, %b: tensor<16x8xbf16>) -> tensor<64x8xbf16> {
  %g = coll.all_gather_into_tensor %w {group = @dp} : (tensor<16x16xbf16>) -> tensor<32x16xbf16>
  %gw = coll.wait_tensor %g : tensor<32x16xbf16>
  %r = symm.fused_matmul_reduce_scatter %h, %gw {reduce_op = "sum", group = @tp} : (tensor<64x32xbf16>, tensor<32x16xbf16>) -> tensor<32x16xbf16>
  %y = compute.add %x, %r : tensor<32x16xbf16>
  %q = symm.fused_all_gather_matmul %y, %b {group = @tp} : (tensor<32x16xbf16>, tensor<16x8xbf16>) -> tensor<64x8xbf16>
  return %q : tensor<64x8xbf16>
}

// Not fused: between them an all-gather-matmul reads %c from the slot that the plan gives
// the add's result after it (both at offset 0): written at the reduce-scatter, the add would
// clobber %c before the gather read it.
// RT-LABEL: func.func @between(
// RT: rt.launch {{.*}}@k{{[0-9]+}}_neg
// RT: rt.symm_fused_matmul_reduce_scatter {{[^{]*}}{{{[^}]*}}kernel = @s{{[0-9]+}}_fused_matmul_reduce_scatter, ldb
// RT-NOT: epilogue
// RT: rt.symm_fused_all_gather_matmul
// RT: rt.launch {{.*}}@[[ADD]]
func.func @between(%h: tensor<64x32xbf16>, %w: tensor<32x16xbf16>, %x: tensor<32x16xbf16>, %b: tensor<16x8xbf16>, %u: tensor<32x16xbf16>) -> (tensor<64x8xbf16>, tensor<64x8xbf16>) {
  %c = compute.neg %u : tensor<32x16xbf16>
  %r = symm.fused_matmul_reduce_scatter %h, %w {reduce_op = "sum", group = @tp} : (tensor<64x32xbf16>, tensor<32x16xbf16>) -> tensor<32x16xbf16>
  %pa, %p = symm.fused_all_gather_matmul %c, %b {group = @tp, return_a} : (tensor<32x16xbf16>, tensor<16x8xbf16>) -> (tensor<64x16xbf16>, tensor<64x8xbf16>)
  %y = compute.add %x, %r : tensor<32x16xbf16>
  %q = symm.fused_all_gather_matmul %y, %b {group = @tp} : (tensor<32x16xbf16>, tensor<16x8xbf16>) -> tensor<64x8xbf16>
  return %q, %p : tensor<64x8xbf16>, tensor<64x8xbf16>
}

// Fused: an op between that touches no pool (a plain neg) is no hazard.
// RT-LABEL: func.func @plain_between(
// RT: rt.symm_fused_matmul_reduce_scatter {{.*}}epilogue = @[[ADD]]
// RT: rt.launch {{.*}}@k{{[0-9]+}}_neg
// RT-NOT: rt.launch
// RT: return
func.func @plain_between(%h: tensor<64x32xbf16>, %w: tensor<32x16xbf16>, %x: tensor<32x16xbf16>, %b: tensor<16x8xbf16>) -> (tensor<64x8xbf16>, tensor<64x32xbf16>) {
  %r = symm.fused_matmul_reduce_scatter %h, %w {reduce_op = "sum", group = @tp} : (tensor<64x32xbf16>, tensor<32x16xbf16>) -> tensor<32x16xbf16>
  %n = compute.neg %h : tensor<64x32xbf16>
  %y = compute.add %x, %r : tensor<32x16xbf16>
  %q = symm.fused_all_gather_matmul %y, %b {group = @tp} : (tensor<32x16xbf16>, tensor<16x8xbf16>) -> tensor<64x8xbf16>
  return %q, %n : tensor<64x8xbf16>, tensor<64x32xbf16>
}

// Not fused: the result is returned as well.
// RT-LABEL: func.func @two_readers(
// RT-NOT: epilogue
// RT: rt.launch {{.*}}@[[ADD]]
func.func @two_readers(%h: tensor<64x32xbf16>, %w: tensor<32x16xbf16>, %x: tensor<32x16xbf16>) -> (tensor<32x16xbf16>, tensor<32x16xbf16>) {
  %r = symm.fused_matmul_reduce_scatter %h, %w {reduce_op = "sum", group = @tp} : (tensor<64x32xbf16>, tensor<32x16xbf16>) -> tensor<32x16xbf16>
  %y = compute.add %x, %r : tensor<32x16xbf16>
  return %y, %r : tensor<32x16xbf16>, tensor<32x16xbf16>
}

// Not fused: large chunks accumulate in row blocks, with no reduction to hold the chain;
// with COMMLIR_FUSED_PARTS=1 they reduce after the last GEMM, and the add fuses.
// RT-LABEL: func.func @accumulating(
// RT: rt.symm_fused_matmul_reduce_scatter {{.*}}parts = 2 : i64
// RT: rt.launch {{.*}}kernel = @k{{[0-9]+}}_add}
// ONE-LABEL: func.func @accumulating(
// ONE: rt.symm_fused_matmul_reduce_scatter {{.*}}epilogue = @k{{[0-9]+}}_add
// ONE-NOT: rt.launch
// ONE: return
func.func @accumulating(%h: tensor<8192x8192xbf16>, %w: tensor<8192x4096xbf16>, %x: tensor<4096x4096xbf16>) -> tensor<4096x4096xbf16> {
  %r = symm.fused_matmul_reduce_scatter %h, %w {reduce_op = "sum", group = @tp} : (tensor<8192x8192xbf16>, tensor<8192x4096xbf16>) -> tensor<4096x4096xbf16>
  %y = compute.add %x, %r : tensor<4096x4096xbf16>
  return %y : tensor<4096x4096xbf16>
}
