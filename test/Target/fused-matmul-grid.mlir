// How a fused all-gather-matmul pipeline moves its chunks. By default copy engines do
// (`copy_engine`) and each rank pushes its shard (`push`): the clone of the argument into a
// comm buffer is skipped, the pipeline gets a workspace pool of G shard slots, and the
// argument itself (the last operand) is pushed into the peer's slot. COMMLIR_FUSED_AG=pull
// keeps the clone and has each rank pull the peer's shard out of its pool (`symm_peer_copy`).
// COMMLIR_FUSED_TRANSFER=kernel moves the shards with the kernel's blocks, in the symm
// kernels' launch shape (a 4 MiB shard: 512 threads, 64 blocks), and COMMLIR_FUSED_COPY_GRID
// caps that grid at compile time (the benchmarks' experiment with fewer SMs for the transfer).
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=PUSH
// RUN: env COMMLIR_FUSED_AG=pull commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=PULL
// RUN: env COMMLIR_FUSED_TRANSFER=kernel commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=DEFAULT
// RUN: env COMMLIR_FUSED_TRANSFER=kernel COMMLIR_FUSED_COPY_GRID=4 commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=CAP
// RUN: env COMMLIR_FUSED_TRANSFER=kernel COMMLIR_FUSED_COPY_GRID=0 commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=DEFAULT
// RUN: env COMMLIR_FUSED_TRANSFER=kernel commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll | FileCheck %s --check-prefix=HOST
// RUN: env COMMLIR_FUSED_AG=pull commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll | FileCheck %s --check-prefix=CEHOST
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll | FileCheck %s --check-prefix=PUSHHOST

// The pushing pipeline has no gathered buffer: its operands are the workspace, the
// right-hand side, the product and the shard (its NCCL fallback gathers in the workspace).
// PUSH-NOT: rt.launch
// PUSH: %[[W:.*]] = rt.pool_alloc {alignment = 64 : i64, group = @tp, kind = "symm_mem", size = 8388608 : i64}
// PUSH-NEXT: %[[Y:.*]] = rt.alloc
// PUSH-NEXT: rt.symm_fused_all_gather_matmul %[[W]], %arg1, %[[Y]], %arg0 {{{.*}}copy_engine{{.*}}offset = 0 : i64, push}
// PUSH-NEXT: rt.pool_free %[[W]]
// PULL: rt.launch %arg0
// PULL-NOT: push
// PULL: rt.symm_fused_all_gather_matmul {{.*}}copy_engine
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

// Pulling with copy engines: the start barrier on one block, the copy of the peer's 4 MiB
// shard on the comm stream (one row: rows 1, 4194304 bytes, into block p of 4194304 bytes),
// the end barrier on one block; no step 1 launch.
// CEHOST-LABEL: define i32 @commlir_fn_main(
// CEHOST: getelementptr inbounds ptr, ptr %kvals, i64 4
// CEHOST-NEXT: store i32 3, ptr
// CEHOST: call i32 %launch_on{{[0-9]*}}(ptr %{{.*}}, i32 1, i32 {{[0-9]+}}, i32 1, i32 512, i32 0, ptr %kparams, i32 5)
// CEHOST-NOT: store i32 1, ptr
// CEHOST: call i32 %symm_peer_copy{{[0-9]*}}(ptr %{{.*}}, i32 1, ptr %{{.*}}, i32 %{{.*}}, i64 0, ptr %{{.*}}, i64 1, i64 4194304, i64 8388608)
// CEHOST: getelementptr inbounds ptr, ptr %kvals, i64 4
// CEHOST-NEXT: store i32 2, ptr
// CEHOST: call i32 %launch_on{{[0-9]*}}(ptr %{{.*}}, i32 1, i32 {{[0-9]+}}, i32 1, i32 512, i32 0, ptr %kparams, i32 5)

// Pushing: the start barrier (step 3) on one block, the argument's 4 MiB pushed into slot
// `rank` of the peer's workspace, the signals of push 1 (step G + 2 = 4); the own GEMM reads
// the argument; no end barrier (no step 2). The NCCL fallback copies the argument into slot
// `rank` of the workspace (copy_on, compute stream) and all-gathers in place from there into
// the workspace, whose slots the GEMMs then read.
// PUSHHOST-LABEL: define i32 @commlir_fn_main(
// PUSHHOST: store i32 3, ptr
// PUSHHOST: call i32 %launch_on{{[0-9]*}}(ptr %{{.*}}, i32 1, i32 {{[0-9]+}}, i32 1, i32 512, i32 0, ptr %kparams, i32 5)
// PUSHHOST: call i32 %symm_peer_put{{[0-9]*}}(ptr %{{.*}}, i32 1, ptr %[[WS:[a-z0-9]+]], i32 %{{.*}}, i64 %slot, ptr %arg0, i64 4194304)
// PUSHHOST: store i32 4, ptr
// PUSHHOST-NOT: store i32 2, ptr
// PUSHHOST: call i32 %gemm{{[0-9]*}}(ptr %{{.*}}, i32 0, i32 0, i64 512, i64 2048, i64 1024, ptr %arg1, i64 512, i64 0, ptr %arg0,
// PUSHHOST: call i32 %stream_wait{{[0-9]*}}(ptr %{{.*}}, i32 0, i32 1)
// PUSHHOST: call i32 %gemm{{[0-9]*}}(
// PUSHHOST: call i32 %copy_on{{[0-9]*}}(ptr %{{.*}}, i32 0, ptr %[[OWN:chunk[0-9]*]], ptr %arg0, i64 4194304)
// PUSHHOST: call i32 %symm_fallback{{[0-9]*}}(ptr %{{.*}}, i32 2, i32 0, ptr %[[OWN]], i64 0, ptr %[[WS]], i64 2097152, i32 9, i32 0)
module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @main(%a: tensor<2048x1024xbf16>, %b: tensor<1024x512xbf16>) -> tensor<4096x512xbf16> {
    %y = symm.fused_all_gather_matmul %a, %b {group = @tp} : (tensor<2048x1024xbf16>, tensor<1024x512xbf16>) -> tensor<4096x512xbf16>
    return %y : tensor<4096x512xbf16>
  }
}
