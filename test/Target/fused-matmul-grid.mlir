// How a fused pipeline moves its chunks. By default copy engines do (`copy_engine`): the
// kernel launches with one block only to signal, and `symm_peer_copy` moves the peer's shard.
// COMMLIR_FUSED_TRANSFER=kernel moves them with the kernel's blocks, in the symm kernels'
// launch shape (a 4 MiB shard: 512 threads, 64 blocks), and COMMLIR_FUSED_COPY_GRID caps
// that grid at compile time (the benchmarks' experiment with fewer SMs for the transfer).
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=CLONE
// RUN: env COMMLIR_FUSED_SHARD_COPY=compute commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=CE
// RUN: env COMMLIR_FUSED_TRANSFER=kernel commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=DEFAULT
// RUN: env COMMLIR_FUSED_TRANSFER=kernel COMMLIR_FUSED_COPY_GRID=4 commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=CAP
// RUN: env COMMLIR_FUSED_TRANSFER=kernel COMMLIR_FUSED_COPY_GRID=0 commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=DEFAULT
// RUN: env COMMLIR_FUSED_TRANSFER=kernel commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll | FileCheck %s --check-prefix=HOST
// RUN: env COMMLIR_FUSED_SHARD_COPY=compute commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll | FileCheck %s --check-prefix=CEHOST
// RUN: env COMMLIR_FUSED_SHARD_COPY=comm commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll | FileCheck %s --check-prefix=BESIDE

// The shard is an argument: a clone kernel copies it into the pool before the op (the
// fastest measured). With COMMLIR_FUSED_SHARD_COPY=compute the pipeline does it itself
// (`shard_source`, the argument its last operand) with `copy_on` on the compute stream; with
// =comm on the comm stream, beside the first GEMM, which then reads the argument.
// CLONE: rt.launch %arg0
// CLONE-NOT: shard_source
// CLONE: rt.symm_fused_all_gather_matmul {{.*}}copy_engine
// BESIDE-LABEL: define i32 @commlir_fn_main(
// BESIDE: call i32 %stream_wait{{[0-9]*}}(ptr %{{.*}}, i32 1, i32 0)
// BESIDE: call i32 %copy_on{{[0-9]*}}(ptr %{{.*}}, i32 1, ptr %{{.*}}, ptr %arg0, i64 4194304)
// BESIDE: call i32 %gemm{{[0-9]*}}(ptr %{{.*}}, i32 0, i32 0, i64 512, i64 2048, i64 1024, ptr %arg1, i64 512, i64 0, ptr %arg0,
// CE-NOT: rt.launch
// CE: rt.symm_fused_all_gather_matmul {{.*}}, %arg0 {{{.*}}copy_engine{{.*}}shard_source
// DEFAULT: rt.symm_fused_all_gather_matmul {{.*}}block = 512 : i64{{.*}}grid = 64 : i64
// DEFAULT-NOT: return_a
// DEFAULT-NOT: copy_engine
// CAP: rt.symm_fused_all_gather_matmul {{.*}}block = 512 : i64{{.*}}grid = 4 : i64

// The gathered tensor is not a result (no `return_a`): nobody reads its own block, so the
// first comm step is the start barrier alone (step G + 1 = 3, the kernel's fifth parameter),
// then step 1 (the peer's shard) and step 2 (the end barrier).
// HOST-LABEL: define i32 @commlir_fn_main(
// HOST: getelementptr inbounds ptr, ptr %kvals, i64 4
// HOST-NEXT: store i32 3, ptr
// HOST: call i32 %launch_on{{[0-9]*}}(ptr %{{.*}}, i32 1, i32 {{[0-9]+}}, i32 64, i32 512, i32 0, ptr %kparams, i32 5)
// HOST: getelementptr inbounds ptr, ptr %kvals, i64 4
// HOST-NEXT: store i32 1, ptr
// HOST: call i32 %launch_on{{[0-9]*}}(
// HOST: getelementptr inbounds ptr, ptr %kvals, i64 4
// HOST-NEXT: store i32 2, ptr
// HOST: call i32 %launch_on{{[0-9]*}}(

// With copy engines (and COMMLIR_FUSED_SHARD_COPY=compute): the shard's copy into the pool on
// the compute stream (copy_on, 4 MiB),
// the start barrier on one block, the copy of the peer's 4 MiB shard on
// the comm stream (one row: rows 1, 4194304 bytes, into block p of 4194304 bytes), the end
// barrier on one block; no step 1 launch.
// CEHOST-LABEL: define i32 @commlir_fn_main(
// CEHOST: call i32 %copy_on{{[0-9]*}}(ptr %{{.*}}, i32 0, ptr %{{.*}}, ptr %arg0, i64 4194304)
// CEHOST: getelementptr inbounds ptr, ptr %kvals, i64 4
// CEHOST-NEXT: store i32 3, ptr
// CEHOST: call i32 %launch_on{{[0-9]*}}(ptr %{{.*}}, i32 1, i32 {{[0-9]+}}, i32 1, i32 512, i32 0, ptr %kparams, i32 5)
// CEHOST-NOT: store i32 1, ptr
// CEHOST: call i32 %symm_peer_copy{{[0-9]*}}(ptr %{{.*}}, i32 1, ptr %{{.*}}, i32 %{{.*}}, i64 0, ptr %{{.*}}, i64 1, i64 4194304, i64 8388608)
// CEHOST: getelementptr inbounds ptr, ptr %kvals, i64 4
// CEHOST-NEXT: store i32 2, ptr
// CEHOST: call i32 %launch_on{{[0-9]*}}(ptr %{{.*}}, i32 1, i32 {{[0-9]+}}, i32 1, i32 512, i32 0, ptr %kparams, i32 5)
module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @main(%a: tensor<2048x1024xbf16>, %b: tensor<1024x512xbf16>) -> tensor<4096x512xbf16> {
    %y = symm.fused_all_gather_matmul %a, %b {group = @tp} : (tensor<2048x1024xbf16>, tensor<1024x512xbf16>) -> tensor<4096x512xbf16>
    return %y : tensor<4096x512xbf16>
  }
}
