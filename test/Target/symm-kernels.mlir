// Symmetric-memory collective kernels: the rt lowering of the symm ops, and the generated
// kernels' barrier (system-scope release/acquire CAS on the signal pads, %globaltimer
// timeout), 16-byte vector accesses and the rank-order fold; a one-shot of at most 1 MiB
// takes the LL protocol (flagged 16-byte lines pushed to every peer, no barrier).
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=RT
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=llvm-ir > %t.ll
// RUN: FileCheck %s --check-prefix=LL < %t.ll
// RUN: FileCheck %s --check-prefix=LLB < %t.ll
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=llvm-ir | FileCheck %s --check-prefix=LLP
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll | FileCheck %s --check-prefix=HOST

coll.group @tp {size = 4 : i64, symm_mem}

// RT: rt.symm_kernel @s1_one_shot_all_reduce {coll = "one_shot_all_reduce", count = 524800 : i64, dtype = "bf16", reduce_op = "avg", world = 4 : i64}
// RT: rt.symm_kernel @s3_all_gather {coll = "all_gather", count = 33 : i64, dtype = "i32", world = 4 : i64}
// RT: rt.symm_kernel @s5_reduce_scatter {coll = "reduce_scatter", count = 4096 : i64, dtype = "f32", reduce_op = "max", world = 4 : i64}
// RT-LABEL: func.func @f(
// RT: rt.symm_collective %[[P:.*]], %{{.*}} {block = 512 : i64, coll = "one_shot_all_reduce", count = 524800 : i64, dtype = "bf16", grid = 64 : i64, group = @tp, kernel = @s1_one_shot_all_reduce, offset = 0 : i64, reduce_op = "avg"}
// RT: rt.symm_collective %[[P]], %{{.*}} {block = 64 : i64, coll = "all_gather", count = 33 : i64, dtype = "i32", grid = 1 : i64, group = @tp, kernel = @s3_all_gather, offset = 0 : i64}
// 16 KiB received per rank: 1024 vectors, 2 per thread of 512 threads.
// RT: rt.symm_collective %[[P]], %{{.*}} {block = 512 : i64, coll = "reduce_scatter", count = 4096 : i64, dtype = "f32", grid = 1 : i64, group = @tp, kernel = @s5_reduce_scatter, offset = 0 : i64, reduce_op = "max"}
func.func @f(%x: tensor<524800xbf16>, %z: tensor<33xi32>, %w: tensor<16384xf32>) -> (tensor<524800xbf16>, tensor<132xi32>, tensor<4096xf32>) {
  %a = compute.neg %x : tensor<524800xbf16>
  %r = symm.one_shot_all_reduce %a {reduce_op = "avg", group = @tp} : (tensor<524800xbf16>) -> tensor<524800xbf16>
  %c = compute.neg %z : tensor<33xi32>
  %g = symm.all_gather %c {group = @tp} : (tensor<33xi32>) -> tensor<132xi32>
  %d = compute.neg %w : tensor<16384xf32>
  %s = symm.reduce_scatter %d {reduce_op = "max", group = @tp} : (tensor<16384xf32>) -> tensor<4096xf32>
  return %r, %g, %s : tensor<524800xbf16>, tensor<132xi32>, tensor<4096xf32>
}

// The parameters of the ABI: (desc, in_offset, out, site).
// LL-LABEL: define ptx_kernel void @s1_one_shot_all_reduce(ptr addrspace(1) {{.*}}, i64 {{.*}}, ptr addrspace(1) {{.*}}, i32 {{.*}})
// The fold, in rank order: rank 0's vector, + rank 1's, + rank 2's, + rank 3's, in f32,
// then / 4 and one rounding to bf16.
// LL: %[[L0:.*]] = load <8 x bfloat>, ptr addrspace(1) %[[P0:[a-z]+]], align 16
// LL: %[[E0:.*]] = fpext <8 x bfloat> %[[L0]] to <8 x float>
// LL: %[[L1:.*]] = load <8 x bfloat>, ptr addrspace(1) %{{.*}}, align 16
// LL: %[[E1:.*]] = fpext <8 x bfloat> %[[L1]] to <8 x float>
// LL: %[[S1:.*]] = fadd <8 x float> %[[E0]], %[[E1]]
// LL: %[[L2:.*]] = load <8 x bfloat>
// LL: %[[E2:.*]] = fpext <8 x bfloat> %[[L2]] to <8 x float>
// LL: %[[S2:.*]] = fadd <8 x float> %[[S1]], %[[E2]]
// LL: %[[L3:.*]] = load <8 x bfloat>
// LL: %[[E3:.*]] = fpext <8 x bfloat> %[[L3]] to <8 x float>
// LL: %[[S3:.*]] = fadd <8 x float> %[[S2]], %[[E3]]
// (/ 4 is the exact * 0.25)
// LL: fmul <8 x float> %[[S3]], splat (float 2.500000e-01)
// LL: fptrunc <8 x float> %{{.*}} to <8 x bfloat>
// LL: store <8 x bfloat> %{{.*}}, ptr addrspace(1) %{{.*}}, align 16
// LL-LABEL: define ptx_kernel void @s3_all_gather(

// LLB-LABEL: define ptx_kernel void @s1_one_shot_all_reduce(
// Start barrier: put (release) then wait (acquire), system scope (no syncscope).
// LLB: cmpxchg ptr addrspace(1) %{{.*}}, i32 0, i32 1 release monotonic
// LLB: @llvm.nvvm.read.ptx.sreg.globaltimer()
// LLB: atomicrmw xchg ptr addrspace(1) %{{.*}}, i32 %{{.*}} monotonic
// LLB: cmpxchg ptr addrspace(1) %{{.*}}, i32 1, i32 0 acquire acquire
// LLB: @llvm.nvvm.barrier.cta.red.or.aligned.all(i32 0,
// LLB-LABEL: define ptx_kernel void @s3_all_gather(

// PTX-LABEL: .entry s1_one_shot_all_reduce(
// PTX: mov.u64 {{.*}}, %globaltimer;
// PTX: atom.release.sys.global.cas.b32 {{.*}}, 0, 1;
// PTX: atom.global.exch.b32
// PTX: atom.acquire.sys.global.cas.b32 {{.*}}, 1, 0;
// PTX: bar.red.or.pred
// PTX: ld.global.v4.b32
// PTX: add.rn.f32
// PTX: {{mul|div}}.rn.f32
// PTX: cvt.rn.bf16x2.f32
// PTX: st.global.v4.b32
// PTX: atom.release.sys.global.cas.b32 {{.*}}, 0, 1;
// PTX: atom.acquire.sys.global.cas.b32 {{.*}}, 1, 0;
// PTX-LABEL: .entry s3_all_gather(
// PTX-LABEL: .entry s5_reduce_scatter(
// The sim's max: strictly greater wins, NaN propagates.
// PTX: setp.gt.f32
// PTX: ld.global.v4.b32

// The host program: the descriptor, then the kernel (4 parameters, its site is its kernel
// index) or the NCCL fallback (field 14: symm_fallback, coll 0, op avg = 4).
// HOST-LABEL: define i32 @commlir_fn_f(
// HOST: getelementptr inbounds nuw %struct.commlir_rt_api, ptr %{{.*}}, i32 0, i32 18
// HOST: %desc = load ptr
// HOST: icmp eq ptr %desc, null
// HOST: symm_kernel:
// HOST: call i32 %launch{{[0-9]*}}(ptr %{{.*}}, i32 1, i32 64, i32 512, i32 0, ptr %{{.*}}, i32 4)
// HOST: symm_nccl:
// HOST: call i32 %symm_fallback{{[0-9]*}}(ptr %{{.*}}, i32 0, i32 0, ptr %{{.*}}, i64 0, ptr %{{.*}}, i64 524800, i32 9, i32 4)

// -----
// The LL one-shot: 1 MiB exactly (the largest LL message), f32 sum on 4 ranks.
// RT: rt.symm_kernel @s7_one_shot_all_reduce {coll = "one_shot_all_reduce", count = 262144 : i64, dtype = "f32", reduce_op = "sum", world = 4 : i64}
// RT-LABEL: func.func @ll(
// 131072 lines of 8 bytes, two per thread of 512 threads.
// RT: rt.symm_collective %{{.*}}, %{{.*}} {block = 512 : i64, coll = "one_shot_all_reduce", count = 262144 : i64, dtype = "f32", grid = 64 : i64, group = @tp, kernel = @s7_one_shot_all_reduce
func.func @ll(%x: tensor<262144xf32>) -> tensor<262144xf32> {
  %a = compute.neg %x : tensor<262144xf32>
  %r = symm.one_shot_all_reduce %a {reduce_op = "sum", group = @tp} : (tensor<262144xf32>) -> tensor<262144xf32>
  return %r : tensor<262144xf32>
}
// The block's call count from the control words after the pad (4096 bytes), the push of one
// line {lo, epoch, hi, epoch} into every rank's area, the poll of every rank's line in rank
// order until both flags are the epoch, the fold, and thread 0 storing the new count.
// No barrier: no compare-and-swap and no fence anywhere in the kernel.
// LLP-LABEL: define ptx_kernel void @s7_one_shot_all_reduce(
// LLP-NOT: cmpxchg
// LLP: %[[CUR:.*]] = load volatile i32
// LLP: %[[EP:.*]] = add i32 %[[CUR]], 1
// LLP: insertelement <4 x i32> %{{.*}}, i32 %[[EP]], i64 1
// LLP: insertelement <4 x i32> %{{.*}}, i32 %[[EP]], i64 3
// LLP-COUNT-4: store volatile <4 x i32> %{{.*}}, align 16
// LLP-NOT: cmpxchg
// LLP: load volatile <4 x i32>
// LLP: icmp eq i32 %{{.*}}, %[[EP]]
// LLP: icmp eq i32 %{{.*}}, %[[EP]]
// LLP: sreg.globaltimer
// LLP: atomicrmw xchg
// LLP: bitcast i64 %{{.*}} to <2 x float>
// LLP: load volatile <4 x i32>
// LLP: %[[A1:.*]] = fadd float %{{.*}}, %{{.*}}
// LLP: load volatile <4 x i32>
// LLP: %[[A2:.*]] = fadd float %[[A1]], %{{.*}}
// LLP: load volatile <4 x i32>
// LLP: fadd float %[[A2]], %{{.*}}
// LLP: store <2 x float> %{{.*}}, align 8
// LLP: store volatile i32 %[[EP]]
// LLP-NOT: cmpxchg
// LLP: }
// PTX-LABEL: .entry s7_one_shot_all_reduce(
// PTX: st.volatile.global.v4.{{b|u}}32
// PTX: ld.volatile.global.v4.{{b|u}}32
// PTX-NOT: fence
// PTX: st.volatile.global.b32
