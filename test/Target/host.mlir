// The host program: runtime calls through the commlir_rt_api table, in program order, with
// events between the compute and comm streams; llc accepts it for the host target.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm{one-shot-threshold=0},comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=RT
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm{one-shot-threshold=0},comm-plan-pools))' --emit=host-ll > %t.ll
// RUN: FileCheck %s --check-prefix=HOST < %t.ll
// RUN: llc -filetype=obj -relocation-model=pic %t.ll -o %t.o
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm{one-shot-threshold=0},comm-plan-pools))' --emit=artifact -o %t.commlir
// RUN: %python -c "import sys; d=open(sys.argv[1],'rb').read(); assert d[:8]==b'CMLIRART', d[:8]; print('magic ok')" %t.commlir | FileCheck %s --check-prefix=ART
// RUN: not commlir-translate %s --emit=object 2>&1 | FileCheck %s --check-prefix=NOOUT

coll.group @tp {size = 2 : i64, symm_mem}

// RT-LABEL: func.func @mlp(%arg0: memref<8x1024xbf16>, %arg1: memref<1024x4096xbf16>, %arg2: memref<4096x1024xbf16>) -> memref<8x1024xbf16>
// RT: %[[P:.*]] = rt.pool_alloc {alignment = 64 : i64, group = @tp, kind = "symm_mem", size = 16384 : i64} : !rt.pool
// RT: %[[H:.*]] = rt.alloc : memref<8x4096xbf16>
// RT: rt.gemm %arg1, %arg0, %[[H]] {batch = 1 : i64, dtype = "bf16", k = 1024 : i64, lda = 4096 : i64, ldb = 1024 : i64, ldc = 4096 : i64, m = 4096 : i64, n = 8 : i64
// RT: rt.launch %[[H]], %[[G:[0-9]+]] {block = 256 : i64, grid = 16 : i64, kernel = @k0_gelu}
// RT: rt.free %[[H]]
// RT: %[[V:.*]] = rt.pool_view %[[P]] {offset = 0 : i64}
// RT: rt.gemm %arg2, %[[G]], %[[V]]
// RT: %[[E0:.*]] = rt.event_record {stream = "compute"}
// RT: rt.stream_wait %[[E0]] {stream = "comm"}
// RT: rt.nccl_all_reduce %[[P]] {count = 8192 : i64, dtype = "bf16", group = @tp, offset = 0 : i64, reduce_op = "sum"}
// RT: %[[E1:.*]] = rt.event_record {stream = "comm"}
// RT: rt.stream_wait %[[E1]] {stream = "compute"}
// RT: rt.launch %[[V]], %[[R:[0-9]+]] {{.*}}kernel = @k1_clone
// The wait on the event after the comm stream's last work already orders the compute stream
// after all of it: no second comm -> compute pair before the release.
// RT-NOT: rt.event_record
// RT: rt.pool_free %[[P]]
// RT: return %[[R]]

// HOST: %struct.commlir_rt_api = type { i32, i32, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr }
// HOST: @commlir_abi_version = constant i32 7
// HOST: @commlir_num_kernels = constant i32 2
// HOST: @commlir_ptx = constant
// HOST-SAME: .target sm_90
// HOST: @commlir_kernel_names = constant [2 x ptr]
// HOST-LABEL: define i32 @commlir_fn_mlp(ptr %0, ptr %1, ptr %2, ptr %3)
// HOST: icmp ne i32 %{{.*}}, 7
// pool_alloc(rt, kind = symm_mem, group 0, 16384 bytes, alignment 64, &out)
// HOST: call i32 %{{.*}}(ptr %1, i32 1, i32 0, i64 16384, i64 64, ptr %out)
// gemm(..., dtype = bf16 (9), alpha = 1, beta = 0)
// HOST: call i32 %{{.*}}(ptr %1, i32 0, i32 0, i64 4096, i64 8, i64 1024, ptr %arg1, i64 4096, i64 4194304, ptr %arg0, i64 1024, i64 8192, ptr %{{.*}}, i64 4096, i64 32768, i64 1, i32 9, double 1.000000e+00, double 0.000000e+00)
// launch(rt, kernel 0, grid 16: 32768 bf16, 8 per thread, block 256, 0, params, 2)
// HOST: call i32 %{{.*}}(ptr %1, i32 0, i32 16, i32 256, i32 0, ptr %kparams, i32 2)
// event_record(compute, 0), stream_wait(comm, 0)
// HOST: call i32 %{{.*}}(ptr %1, i32 0, i32 0)
// HOST: call i32 %{{.*}}(ptr %1, i32 1, i32 0)
// all_reduce(rt, group 0, send, recv, 8192, bf16, sum)
// HOST: call i32 %{{.*}}(ptr %1, i32 0, ptr %{{.*}}, ptr %{{.*}}, i64 8192, i32 9, i32 0)
// HOST: store ptr %{{.*}}, ptr %res
// HOST: ret i32 0
// HOST-LABEL: define i32 @commlir_main(
// HOST: call i32 @commlir_fn_mlp(

// ART: magic ok
// NOOUT: binary: give an output file with -o
func.func @mlp(%x: tensor<8x1024xbf16>, %w1: tensor<1024x4096xbf16>, %w2: tensor<4096x1024xbf16>) -> tensor<8x1024xbf16> {
  %h = compute.matmul %x, %w1 : (tensor<8x1024xbf16>, tensor<1024x4096xbf16>) -> tensor<8x4096xbf16>
  %g = compute.gelu %h : tensor<8x4096xbf16>
  %o = compute.matmul %g, %w2 : (tensor<8x4096xbf16>, tensor<4096x1024xbf16>) -> tensor<8x1024xbf16>
  %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<8x1024xbf16>
  %y = coll.wait_tensor %r : tensor<8x1024xbf16>
  return %y : tensor<8x1024xbf16>
}
