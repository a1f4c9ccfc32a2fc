// One-shot all-reduce with a fused elementwise epilogue: `comm-to-rt` gives the all-reduce's
// `rt.symm_kernel` the chain that reads its result, so one kernel reduces the peers' inputs in
// rank order, applies the chain and stores only its result (no kernel of its own for the
// chain on the peer-mapped path; the chain's kernel stays for the NCCL fallback). Fusion does
// not happen when the result has another reader (a matmul, or a second chain).
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=RT
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=llvm-ir | FileCheck %s --check-prefix=LL
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll | FileCheck %s --check-prefix=HOST

coll.group @tp {size = 2 : i64, symm_mem}
coll.group @tp4 {size = 4 : i64, symm_mem}
coll.group @dp {size = 2 : i64}

// The residual add: the chain's kernel (for the fallback) and the fused symm kernel naming it.
// RT: rt.kernel @[[ADD:k[0-9]+_add]] ({
// RT-NEXT: ^bb0(%arg0: tensor<1000xbf16>, %arg1: tensor<1000xbf16>):
// RT-NEXT: compute.add %arg0, %arg1
// RT: rt.symm_kernel @[[FUSED:s[0-9]+_one_shot_all_reduce_add]] {coll = "one_shot_all_reduce", count = 1000 : i64, dtype = "bf16", epilogue = @[[ADD]], epilogue_operand = 1 : i64, reduce_op = "sum", world = 2 : i64}
// RT-LABEL: func.func @residual(
// RT-SAME: %[[X:[a-z0-9]+]]: memref<1000xbf16>
// RT: %[[Y:.*]] = rt.alloc : memref<1000xbf16>
// RT-NEXT: rt.symm_collective %{{.*}}, %[[Y]], %[[X]] {{{.*}}coll = "one_shot_all_reduce"{{.*}}epilogue = @[[ADD]], epilogue_block = 256 : i64, epilogue_grid = 1 : i64, epilogue_operand = 1 : i64, grid = 1 : i64, group = @tp, kernel = @[[FUSED]]{{.*}}} : (!rt.pool, memref<1000xbf16>, memref<1000xbf16>) -> ()
// RT-NOT: rt.launch {{.*}}@[[ADD]]
// RT: return %[[Y]]
func.func @residual(%x: tensor<1000xbf16>, %o: tensor<1000xbf16>) -> tensor<1000xbf16> {
  %a = compute.neg %o : tensor<1000xbf16>
  %r = symm.one_shot_all_reduce %a {reduce_op = "sum", group = @tp} : tensor<1000xbf16>
  %y = compute.add %x, %r : tensor<1000xbf16>
  return %y : tensor<1000xbf16>
}

// A chain of three ops after an f32 all-reduce of 4 ranks: scale, + bias, gelu; one fused
// kernel, the reduced value is argument 0 of the chain.
// RT: rt.kernel @[[CHAIN:k[0-9]+_scale_add_gelu]] ({
// RT: rt.symm_kernel @[[F2:s[0-9]+_one_shot_all_reduce_scale_add_gelu]] {coll = "one_shot_all_reduce", count = 4096 : i64, dtype = "f32", epilogue = @[[CHAIN]], epilogue_operand = 0 : i64, reduce_op = "sum", world = 4 : i64}
// RT-LABEL: func.func @chain(
// RT-SAME: %{{[a-z0-9]+}}: memref<4096xf32>, %[[B:[a-z0-9]+]]: memref<4096xf32>
// RT: rt.symm_collective %{{.*}}, %[[Y2:.*]], %[[B]] {{{.*}}epilogue = @[[CHAIN]]{{.*}}kernel = @[[F2]]
// RT-NOT: rt.launch
// RT: return %[[Y2]]
func.func @chain(%o: tensor<4096xf32>, %b: tensor<4096xf32>) -> tensor<4096xf32> {
  %a = compute.neg %o : tensor<4096xf32>
  %r = symm.one_shot_all_reduce %a {reduce_op = "sum", group = @tp4} : tensor<4096xf32>
  %s = compute.scale %r {factor = 0.5 : f64} : tensor<4096xf32>
  %t = compute.add %s, %b : tensor<4096xf32>
  %g = compute.gelu %t : tensor<4096xf32>
  return %g : tensor<4096xf32>
}

// Fused across a gather of another group's pool (the next layer's FSDP weights) scheduled
// between the all-reduce and the add: it touches none of the chain's values.
// RT-LABEL: func.func @gather_between(
// RT: rt.symm_collective {{.*}}epilogue = @[[ADD]]
// RT: rt.nccl_all_gather
// RT-NOT: @[[ADD]]
// RT: return
func.func @gather_between(%x: tensor<1000xbf16>, %o: tensor<1000xbf16>, %w: tensor<64xbf16>) -> (tensor<1000xbf16>, tensor<128xbf16>) {
  %a = compute.neg %o : tensor<1000xbf16>
  %r = symm.one_shot_all_reduce %a {reduce_op = "sum", group = @tp} : tensor<1000xbf16>
  %g = coll.all_gather_into_tensor %w {group = @dp} : (tensor<64xbf16>) -> tensor<128xbf16>
  %gw = coll.wait_tensor %g : tensor<128xbf16>
  %y = compute.add %x, %r : tensor<1000xbf16>
  return %y, %gw : tensor<1000xbf16>, tensor<128xbf16>
}

// Not fused: the all-reduce's result is read by a matmul as well as by the add.
// RT-LABEL: func.func @matmul_reader(
// RT: rt.symm_collective %{{.*}}, %[[R:[0-9]+]] {{{[^}]*}}kernel = @s{{[0-9]+}}_one_shot_all_reduce, offset
// RT-NOT: epilogue
// RT: rt.gemm
// RT: rt.launch %[[R]], %{{.*}}kernel = @k{{[0-9]+}}_add}
func.func @matmul_reader(%o: tensor<16x16xf32>, %w: tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>) {
  %a = compute.neg %o : tensor<16x16xf32>
  %r = symm.one_shot_all_reduce %a {reduce_op = "sum", group = @tp} : tensor<16x16xf32>
  %m = compute.matmul %r, %w : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %y = compute.add %r, %o : tensor<16x16xf32>
  return %m, %y : tensor<16x16xf32>, tensor<16x16xf32>
}

// Not fused: two chains read the result (and the result is returned too).
// RT-LABEL: func.func @two_readers(
// RT: rt.symm_collective %{{.*}}, %[[R2:[0-9]+]] {{{[^}]*}}kernel = @s{{[0-9]+}}_one_shot_all_reduce, offset
// RT: rt.launch %[[R2]]
// RT: rt.launch %[[R2]]
// RT: return
func.func @two_readers(%o: tensor<256xbf16>) -> (tensor<256xbf16>, tensor<256xbf16>, tensor<256xbf16>) {
  %a = compute.neg %o : tensor<256xbf16>
  %r = symm.one_shot_all_reduce %a {reduce_op = "sum", group = @tp} : tensor<256xbf16>
  %y = compute.relu %r : tensor<256xbf16>
  %z = compute.neg %r : tensor<256xbf16>
  return %y, %z, %r : tensor<256xbf16>, tensor<256xbf16>, tensor<256xbf16>
}

// The fused kernel (an LL one-shot: 2000 bytes): the ABI's four parameters, then the chain's
// other input. No barrier: this rank's lines are pushed to both ranks, both ranks' lines
// polled, their elements added in rank order (one rounding to bf16), the residual loaded at
// the same index and added, and only the chain's result stored.
// LL-LABEL: define ptx_kernel void @s{{[0-9]+}}_one_shot_all_reduce_add(ptr addrspace(1) {{.*}}, i64 {{.*}}, ptr addrspace(1) {{.*}}, i32 {{.*}}, ptr addrspace(1) {{.*}})
// LL-NOT: cmpxchg
// LL: store volatile <4 x i32>
// LL: store volatile <4 x i32>
// LL: load volatile <4 x i32>
// LL: load volatile <4 x i32>
// LL: %[[SUM:rn[0-9]*]] = fadd bfloat %lane{{[0-9]+}}, %lane{{[0-9]+}}
// LL: %[[RES:.*]] = load bfloat, ptr addrspace(1)
// LL-NEXT: %[[Y:.*]] = fadd bfloat %rn{{[0-9]*}}, %[[RES]]
// LL: store bfloat %[[Y]], ptr addrspace(1)
// LL-NOT: cmpxchg
// LL: ret void
// The epilogue is inlined: no call and no epilogue function left.
// LL-NOT: epilogue
// The f32 chain of 4 ranks: the fold of the 4 ranks (rank 0 + rank 1, + rank 2, + rank 3),
// then scale, add and gelu, one store of the result.
// LL-LABEL: define ptx_kernel void @s{{[0-9]+}}_one_shot_all_reduce_scale_add_gelu(
// LL: %[[A1:.*]] = fadd float %[[R0:lane[0-9]*]], %[[R1:lane[0-9]+]]
// LL: %[[A2:.*]] = fadd float %[[A1]], %lane{{[0-9]+}}
// LL: %[[A3:.*]] = fadd float %[[A2]], %lane{{[0-9]+}}
// LL: %[[S:.*]] = fmul float %[[A3]], 5.000000e-01
// LL: %[[B:.*]] = fadd float {{.*}}%[[S]]
// gelu's sqrt(2/pi), as f32:
// LL: fmul float %{{.*}}, 0x3FE9884540000000
// LL: store
// LL: ret void

// PTX: .entry s{{[0-9]+}}_one_shot_all_reduce_add(
// PTX-NOT: cas.b32
// PTX: st.volatile.global.v4.{{[bu]}}32
// PTX: ld.volatile.global.v4.{{[bu]}}32
// PTX-NOT: cas.b32
// PTX: ret;

// The host program: with a descriptor, one launch of the fused kernel with five parameters;
// without, the NCCL all-reduce into a temporary, the chain's own kernel on it, a free.
// HOST-LABEL: define i32 @commlir_fn_residual(
// HOST: %kvals = alloca [5 x ptr]
// HOST: symm_kernel:
// HOST: call i32 %{{.*}}(ptr %1, i32 {{[0-9]+}}, i32 1, i32 256, i32 0, ptr %kparams, i32 5)
// HOST: symm_nccl:
// HOST: call i32 %{{.*}}(ptr %1, i64 2000, ptr %out)
// HOST: %[[T:reduced]] = load ptr, ptr %out
// HOST: call i32 %{{.*}}(ptr %1, i32 0, i32 0, ptr %{{.*}}, i64 0, ptr %[[T]], i64 1000, i32 {{[0-9]+}}, i32 0)
// HOST: call i32 %{{.*}}(ptr %1, i32 {{[0-9]+}}, i32 1, i32 256, i32 0, ptr %kparams, i32 3)
// HOST: call i32 %{{.*}}(ptr %1, ptr %[[T]])
// HOST-LABEL: define i32 @commlir_fn_chain(
