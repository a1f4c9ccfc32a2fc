// Two ranks' matmul-reduce-scatter with large chunks accumulates: each chunk is computed in
// two row blocks (`parts = 2`), a copy engine pulls each block of the peer's partial for this
// rank straight into the result, and this rank's own GEMMs add onto it (gemm with beta = 1),
// so no reduction kernel follows the last GEMM. Chunks of fewer than 2 x 2^23 elements keep
// the final reduction (a half-wave GEMM would lose more than the reduction costs), and so
// does COMMLIR_FUSED_PARTS=1; COMMLIR_FUSED_PARTS=4 asks for four blocks.
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=RT
// RUN: env COMMLIR_FUSED_PARTS=1 commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=ONE
// RUN: env COMMLIR_FUSED_PARTS=4 commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=FOUR
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll | FileCheck %s --check-prefix=HOST

// The workspace holds the two partial chunks only (2 x 4096x4096 bf16); without
// accumulation it has two receive slots too.
// RT-LABEL: func.func @big(
// RT: rt.pool_alloc {{.*}}size = 67108864 : i64
// RT: rt.symm_fused_matmul_reduce_scatter {{.*}}copy_engine{{.*}}parts = 2 : i64
// RT-LABEL: func.func @small(
// RT: rt.pool_alloc {{.*}}size = 33554432 : i64
// RT-NOT: parts
// RT: return
// ONE-NOT: parts
// FOUR: parts = 4 : i64
// FOUR: parts = 4 : i64

// The peer's chunk in two blocks of 2048 rows (each followed by the signal step G + 1 = 3 and
// the pull of 16 MiB into the result), the end barrier alone (step 2G = 4), then the own
// blocks accumulated (alpha = beta = 1).
// HOST-LABEL: define i32 @commlir_fn_big(
// HOST: call i32 %gemm{{[0-9]*}}(ptr %{{.*}}, i32 0, i32 0, i64 4096, i64 2048, i64 8192,
// HOST: store i32 3, ptr
// HOST: call i32 %symm_peer_copy{{[0-9]*}}(ptr %{{.*}}, i32 1, ptr %{{.*}}, i32 %{{.*}}, i64 %{{.*}}, ptr %{{.*}}, i64 1, i64 16777216, i64 16777216)
// HOST: call i32 %gemm{{[0-9]*}}(ptr %{{.*}}, i32 0, i32 0, i64 4096, i64 2048, i64 8192,
// HOST: store i32 3, ptr
// HOST: call i32 %symm_peer_copy{{[0-9]*}}(
// HOST: store i32 4, ptr
// HOST: call i32 %launch_on{{[0-9]*}}(ptr %{{.*}}, i32 1, i32 {{[0-9]+}}, i32 1,
// HOST: call i32 %gemm{{[0-9]*}}(ptr %{{.*}}, i32 0, i32 0, i64 4096, i64 2048, i64 8192, {{.*}}, double 1.000000e+00, double 1.000000e+00)
// HOST: call i32 %gemm{{[0-9]*}}(ptr %{{.*}}, i32 0, i32 0, i64 4096, i64 2048, i64 8192, {{.*}}, double 1.000000e+00, double 1.000000e+00)
// HOST-LABEL: define i32 @commlir_fn_small(
// HOST-NOT: double 1.000000e+00, double 1.000000e+00
// HOST: ret i32
module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @big(%a: tensor<8192x8192xbf16>, %b: tensor<8192x4096xbf16>) -> tensor<4096x4096xbf16> {
    %y = symm.fused_matmul_reduce_scatter %a, %b {group = @tp, reduce_op = "sum"} : (tensor<8192x8192xbf16>, tensor<8192x4096xbf16>) -> tensor<4096x4096xbf16>
    return %y : tensor<4096x4096xbf16>
  }
  func.func @small(%a: tensor<2048x8192xbf16>, %b: tensor<8192x4096xbf16>) -> tensor<1024x4096xbf16> {
    %y = symm.fused_matmul_reduce_scatter %a, %b {group = @tp, reduce_op = "sum"} : (tensor<2048x8192xbf16>, tensor<8192x4096xbf16>) -> tensor<1024x4096xbf16>
    return %y : tensor<1024x4096xbf16>
  }
}
