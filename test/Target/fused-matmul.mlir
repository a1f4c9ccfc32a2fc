// The fused collective-matmul ops lowered to chunked pipelines: the rt form (the call op, its
// rt.symm_fused_kernel, the reduce-scatter's workspace pool), the kernels' PTX (system-scope
// release/acquire signals, %globaltimer) and the host program (descriptor query, group rank,
// comm-stream launches and events, cuBLAS GEMMs, the NCCL fallback).
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=RT
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll > %t.ll
// RUN: FileCheck %s --check-prefix=HOST < %t.ll
// RUN: llc -filetype=obj -relocation-model=pic %t.ll -o %t.o

module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @main(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>, %c: tensor<16x8xbf16>, %x: tensor<2x3x16xbf16>, %h: tensor<16x16xbf16>, %w: tensor<16x24xbf16>) -> (tensor<16x16xbf16>, tensor<16x32xbf16>, tensor<16x8xbf16>, tensor<2x6x8xbf16>, tensor<8x24xbf16>) {
    %a1 = compute.scale %a {factor = 0.5 : f64} : tensor<8x16xbf16>
    %ag, %y, %z = symm.fused_all_gather_matmul %a1, %b, %c {group = @tp, return_a} : (tensor<8x16xbf16>, tensor<16x32xbf16>, tensor<16x8xbf16>) -> (tensor<16x16xbf16>, tensor<16x32xbf16>, tensor<16x8xbf16>)
    %x1 = compute.neg %x : tensor<2x3x16xbf16>
    %g0, %g = symm.fused_all_gather_matmul %x1, %c {group = @tp, gather_dim = 1 : i64, return_a} : (tensor<2x3x16xbf16>, tensor<16x8xbf16>) -> (tensor<2x6x16xbf16>, tensor<2x6x8xbf16>)
    %r = symm.fused_matmul_reduce_scatter %h, %w {reduce_op = "avg", group = @tp} : (tensor<16x16xbf16>, tensor<16x24xbf16>) -> tensor<8x24xbf16>
    return %ag, %y, %z, %g, %r : tensor<16x16xbf16>, tensor<16x32xbf16>, tensor<16x8xbf16>, tensor<2x6x8xbf16>, tensor<8x24xbf16>
  }
}

// RT: rt.symm_fused_kernel @[[AG:s[0-9]+_fused_all_gather_matmul]] {dtype = "bf16", kind = "all_gather_matmul", outer = 1 : i64, seg = 128 : i64, world = 2 : i64}
// RT: rt.kernel @[[UNPACK:k[0-9]+_unpack_chunks]]
// RT: rt.unpack_chunks %{{.*}} {dim = 1 : i64} : (tensor<2x2x3x16xbf16>) -> tensor<2x6x16xbf16>
// RT: rt.symm_fused_kernel @[[AG3:s[0-9]+_fused_all_gather_matmul]] {dtype = "bf16", kind = "all_gather_matmul", outer = 2 : i64, seg = 48 : i64, world = 2 : i64}
// RT: rt.symm_fused_kernel @[[RS:s[0-9]+_fused_matmul_reduce_scatter]] {dtype = "bf16", kind = "matmul_reduce_scatter", outer = 1 : i64, reduce_op = "avg", seg = 192 : i64, world = 2 : i64}
// RT-LABEL: func.func @main
// RT: %[[POOL:.*]] = rt.pool_alloc {{.*}}kind = "symm_mem"
// RT: %[[GA:.*]] = rt.alloc : memref<16x16xbf16>
// RT: rt.symm_fused_all_gather_matmul %[[POOL]], %[[GA]], %[[GA]], %arg1, %arg2, %{{.*}}, %{{.*}} {batch = 1 : i64, {{.*}}kernel = @[[AG]], m = 8 : i64, ns = array<i64: 32, 8>, offset = 0 : i64, return_a}
// RT: %[[STAGE:.*]] = rt.alloc : memref<2x2x3x16xbf16>
// RT: rt.symm_fused_all_gather_matmul %[[POOL]], %{{.*}}, %[[STAGE]], %arg2, %{{.*}} {batch = 2 : i64, {{.*}}kernel = @[[AG3]], m = 3 : i64, ns = array<i64: 8>, offset = {{[0-9]+}} : i64, return_a, unpack = @[[UNPACK]]}
// RT: %[[WS:.*]] = rt.pool_alloc {alignment = 64 : i64, group = @tp, kind = "symm_mem", size = 1536 : i64}
// RT-NEXT: rt.symm_fused_matmul_reduce_scatter %[[WS]], %arg4, %arg5, %{{.*}} {a_step = 128 : i64, a_stride = 256 : i64, b_step = 0 : i64, batch = 1 : i64, {{.*}}chunk = 192 : i64, {{.*}}kernel = @[[RS]], ldb = 24 : i64, m = 8 : i64, n = 24 : i64, offset = 0 : i64, reduce_op = "avg"}
// RT-NEXT: rt.pool_free %[[WS]]

// PTX: .visible .entry s{{[0-9]+}}_fused_all_gather_matmul(
// PTX: mov.u64 {{.*}}%globaltimer
// PTX: atom.release.sys.global.cas.b32
// PTX: atom.acquire.sys.global.cas.b32
// PTX: .visible .entry s{{[0-9]+}}_fused_matmul_reduce_scatter(
// PTX: .param .u32 s{{[0-9]+}}_fused_matmul_reduce_scatter_param_4

// The peer-mapped pipeline: group rank (API field 18), comm-stream launches (field 17) and
// events, GEMMs; the fallback's symm_fallback (field 13).
// HOST-LABEL: define {{.*}} @commlir_fn_main(
// HOST: fused_pipeline:
// HOST-NEXT: %group_rank = getelementptr inbounds nuw %struct.commlir_rt_api, ptr %{{.*}}, i32 0, i32 20
// HOST: fused_nccl:
// HOST-NEXT: %symm_fallback = getelementptr inbounds nuw %struct.commlir_rt_api, ptr %{{.*}}, i32 0, i32 15
// HOST: %event_record = getelementptr inbounds nuw %struct.commlir_rt_api, ptr %{{.*}}, i32 0, i32 16
// HOST: %stream_wait = getelementptr inbounds nuw %struct.commlir_rt_api, ptr %{{.*}}, i32 0, i32 17
// HOST: %launch_on = getelementptr inbounds nuw %struct.commlir_rt_api, ptr %{{.*}}, i32 0, i32 19
// HOST: %gemm{{.*}} = getelementptr inbounds nuw %struct.commlir_rt_api, ptr %{{.*}}, i32 0, i32 7
