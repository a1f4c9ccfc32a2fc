// compute.attention's GPU lowering through commlir's own kernels
// (codegen/src/lower_to_rt/attention.rs; the cuDNN path is attention-cudnn.mlir).
// REQUIRES: commlir-translate
// RUN: env COMMLIR_ATTENTION=generated commlir-translate %s --emit=rt | FileCheck %s
// RUN: env COMMLIR_ATTENTION=generated commlir-translate %s --emit=ptx | FileCheck %s --check-prefix=PTX

// bf16 with query and key counts multiples of 64 and head dims of at most 128: one
// tensor-core kernel, after a transpose of the values; 64 query rows of a head per block of
// 128 threads (8 heads × 16 row blocks).
// CHECK-LABEL: func.func @flash(
// CHECK: %[[Q:.*]] = rt.view %arg0 : (memref<1x8x1024x128xbf16>) -> memref<8x1024x128xbf16>
// CHECK: %[[K:.*]] = rt.view %arg1
// CHECK: %[[V:.*]] = rt.view %arg2
// CHECK: %[[O:.*]] = rt.view
// CHECK: %[[VT:.*]] = rt.alloc : memref<8x128x1024xbf16>
// CHECK: rt.launch %[[V]], %[[VT]] {{.*}}kernel = @k{{[0-9]+}}_transpose
// CHECK: rt.launch %[[Q]], %[[K]], %[[VT]], %[[O]] {block = 128 : i64, grid = 128 : i64, kernel = @k{{[0-9]+}}_flash_attention}
// CHECK: rt.free %[[VT]]
// The kernel: tiles in shared memory, bf16 tensor-core products with f32 accumulators.
// PTX-LABEL: .entry k{{[0-9]+}}_flash_attention(
// PTX: .shared .align 16 .b8 __commlir_flash_tiles[35840];
// PTX: st.shared.v4
// PTX: bar.sync
// PTX: ld.shared.b32
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX: ex2.approx
func.func @flash(%q: tensor<1x8x1024x128xbf16>, %k: tensor<1x8x1024x128xbf16>, %v: tensor<1x8x1024x128xbf16>) -> tensor<1x8x1024x128xbf16> {
  %o = compute.attention %q, %k, %v {causal, scale = 0.08838834764831845 : f64} : tensor<1x8x1024x128xbf16>
  return %o : tensor<1x8x1024x128xbf16>
}

// Any other shape or type: per chunk of heads, q·kᵀ into f32 scores (bf16 operands, f32
// result), the softmax kernel, p·v. 8 heads of 4096 × 4100 scores take 2 heads a chunk
// (256 MiB of scores and probabilities): four rounds at byte offsets of 2 heads.
// CHECK-LABEL: func.func @chunked(
// CHECK: %[[S:.*]] = rt.alloc : memref<8192x4100xf32>
// CHECK: %[[P:.*]] = rt.alloc : memref<8192x4100xbf16>
// CHECK: rt.gemm %arg1, %arg0, %[[S]] {batch = 2 : i64, dtype = "bf16", k = 128 : i64, lda = 128 : i64, ldb = 128 : i64, ldc = 4100 : i64, m = 4100 : i64, n = 4096 : i64, out_dtype = "f32", stride_a = 524800 : i64, stride_b = 524288 : i64, stride_c = 16793600 : i64, transa = 1 : i64, transb = 0 : i64}
// CHECK: rt.launch %[[S]], %[[P]] {block = 256 : i64, grid = 8192 : i64, kernel = @k{{[0-9]+}}_attention_softmax}
// CHECK: rt.gemm %arg2, %[[P]], %{{.*}} {batch = 2 : i64, dtype = "bf16", k = 4100 : i64, lda = 128 : i64, ldb = 4100 : i64, ldc = 128 : i64, m = 128 : i64, n = 4096 : i64, stride_a = 524800 : i64, stride_b = 16793600 : i64, stride_c = 524288 : i64, transa = 0 : i64, transb = 0 : i64}
// CHECK: rt.gemm %arg1, %arg0, %[[S]] {{{.*}}offset_a = 2099200 : i64, offset_b = 2097152 : i64, out_dtype = "f32"
// CHECK: rt.gemm %arg2, %[[P]], %{{.*}} {{{.*}}offset_a = 2099200 : i64, offset_c = 2097152 : i64,
// CHECK: offset_a = 6297600 : i64, offset_b = 6291456 : i64
// CHECK: rt.free %[[S]]
// CHECK: rt.free %[[P]]
func.func @chunked(%q: tensor<1x8x4096x128xbf16>, %k: tensor<1x8x4100x128xbf16>, %v: tensor<1x8x4100x128xbf16>) -> tensor<1x8x4096x128xbf16> {
  %o = compute.attention %q, %k, %v {scale = 0.08838834764831845 : f64} : (tensor<1x8x4096x128xbf16>, tensor<1x8x4100x128xbf16>, tensor<1x8x4100x128xbf16>) -> tensor<1x8x4096x128xbf16>
  return %o : tensor<1x8x4096x128xbf16>
}

// f32: the GEMMs and the softmax kernel whatever the sizes (its values are checked on the
// host in codegen/tests/attention_host.rs).
// CHECK-LABEL: func.func @small(
// CHECK: rt.gemm {{.*}}dtype = "f32"
// CHECK-NOT: out_dtype
// CHECK: rt.launch {{.*}}kernel = @k{{[0-9]+}}_attention_softmax
func.func @small(%q: tensor<2x16x8xf32>) -> tensor<2x16x8xf32> {
  %o = compute.attention %q, %q, %q {causal, scale = 0.35355339059327373 : f64} : tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}
