// The transfer kernels of a fused pipeline take the symm kernels' launch shape (a 4 MiB
// shard: 512 threads, 64 blocks); COMMLIR_FUSED_COPY_GRID caps the grid at compile time (the
// benchmarks' experiment with fewer SMs for the transfer, more for the GEMM beside it).
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=DEFAULT
// RUN: env COMMLIR_FUSED_COPY_GRID=4 commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=CAP
// RUN: env COMMLIR_FUSED_COPY_GRID=0 commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=DEFAULT

// DEFAULT: rt.symm_fused_all_gather_matmul {{.*}}block = 512 : i64{{.*}}grid = 64 : i64
// CAP: rt.symm_fused_all_gather_matmul {{.*}}block = 512 : i64{{.*}}grid = 4 : i64
module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @main(%a: tensor<2048x1024xbf16>, %b: tensor<1024x512xbf16>) -> tensor<4096x512xbf16> {
    %y = symm.fused_all_gather_matmul %a, %b {group = @tp} : (tensor<2048x1024xbf16>, tensor<1024x512xbf16>) -> tensor<4096x512xbf16>
    return %y : tensor<4096x512xbf16>
  }
}
