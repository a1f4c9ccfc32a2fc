// compute.attention and compute.attention_backward lowered to cuDNN's fused attention
// (rt.attention / rt.attention_backward, codegen/src/lower_to_rt/attention.rs), the default
// of comm-to-rt for f16/bf16 with head dims multiples of 8 up to 128.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --split-input-file --emit=rt | FileCheck %s
// RUN: commlir-translate %s --split-input-file --emit=host-ll | FileCheck %s --check-prefix=HOST
// RUN: env COMMLIR_ATTENTION=generated not commlir-translate %s --split-input-file --emit=rt 2>&1 | FileCheck %s --check-prefix=GEN

// Grouped-query heads (32 query heads over 8 key/value heads), causal, with the rows'
// log-sum-exp: one call, the leading dims flattened into the batch; no kernel.
// CHECK-LABEL: func.func @gqa(
// CHECK-NOT: rt.launch
// CHECK: %[[O:.*]] = rt.alloc : memref<2x32x256x128xbf16>
// CHECK: %[[L:.*]] = rt.alloc : memref<2x32x256xf32>
// CHECK: rt.attention %arg0, %arg1, %arg2, %[[O]], %[[L]] {batch = 2 : i64, causal, dtype = "bf16", head_dim = 128 : i64, heads = 32 : i64, kv_heads = 8 : i64, kv_len = 256 : i64, q_len = 256 : i64, scale = 0.08838834764831845 : f64, v_dim = 128 : i64}
// CHECK-NOT: rt.launch
// CHECK: return %[[O]], %[[L]]
// HOST-LABEL: define {{.*}}@commlir_fn_gqa(
// The table's field 24 (attention): 7 sizes, dtype bf16 (9), causal, the scale, 5 buffers.
// HOST: %[[F:.*]] = getelementptr inbounds nuw %struct.commlir_rt_api, ptr %0, i32 0, i32 24
// HOST: %[[P:.*]] = load ptr, ptr %[[F]]
// HOST: call i32 %[[P]](ptr %1, i64 2, i64 32, i64 8, i64 256, i64 256, i64 128, i64 128, i32 9, i32 1, double 0x3FB6A09E667F3BCD, ptr %arg0, ptr %arg1, ptr %arg2, ptr %buf, ptr %buf{{[0-9]+}})
func.func @gqa(%q: tensor<2x32x256x128xbf16>, %k: tensor<2x8x256x128xbf16>, %v: tensor<2x8x256x128xbf16>) -> (tensor<2x32x256x128xbf16>, tensor<2x32x256xf32>) {
  %o, %lse = compute.attention %q, %k, %v {causal, scale = 0.08838834764831845 : f64, with_lse} : (tensor<2x32x256x128xbf16>, tensor<2x8x256x128xbf16>, tensor<2x8x256x128xbf16>) -> (tensor<2x32x256x128xbf16>, tensor<2x32x256xf32>)
  return %o, %lse : tensor<2x32x256x128xbf16>, tensor<2x32x256xf32>
}

// -----

// The backward: q, k, v, out, dout, lse in; dq, dk, dv out. An f16 forward without
// log-sum-exp passes a null pointer for it.
// CHECK-LABEL: func.func @backward(
// CHECK: %[[DQ:.*]] = rt.alloc : memref<4x77x64xf16>
// CHECK: %[[DK:.*]] = rt.alloc : memref<2x77x64xf16>
// CHECK: %[[DV:.*]] = rt.alloc : memref<2x77x64xf16>
// CHECK: rt.attention_backward %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %[[DQ]], %[[DK]], %[[DV]] {batch = 1 : i64, dtype = "f16", head_dim = 64 : i64, heads = 4 : i64, kv_heads = 2 : i64, kv_len = 77 : i64, q_len = 77 : i64, scale = 0.125 : f64, v_dim = 64 : i64}
// HOST-LABEL: define {{.*}}@commlir_fn_backward(
// HOST: getelementptr inbounds nuw %struct.commlir_rt_api, ptr %0, i32 0, i32 25
// HOST: call i32 %{{.*}}(ptr %1, i64 1, i64 4, i64 2, i64 77, i64 77, i64 64, i64 64, i32 6, i32 0, double 1.250000e-01, ptr %arg0, ptr %arg1, ptr %arg2, ptr %arg3, ptr %arg4, ptr %arg5, ptr %buf, ptr %buf{{[0-9]+}}, ptr %buf{{[0-9]+}})
func.func @backward(%q: tensor<4x77x64xf16>, %k: tensor<2x77x64xf16>, %v: tensor<2x77x64xf16>, %o: tensor<4x77x64xf16>, %do: tensor<4x77x64xf16>, %lse: tensor<4x77xf32>) -> (tensor<4x77x64xf16>, tensor<2x77x64xf16>, tensor<2x77x64xf16>) {
  %dq, %dk, %dv = compute.attention_backward %q, %k, %v, %o, %do, %lse {scale = 0.125 : f64} : (tensor<4x77x64xf16>, tensor<2x77x64xf16>, tensor<2x77x64xf16>, tensor<4x77x64xf16>, tensor<4x77x64xf16>, tensor<4x77xf32>) -> (tensor<4x77x64xf16>, tensor<2x77x64xf16>, tensor<2x77x64xf16>)
  return %dq, %dk, %dv : tensor<4x77x64xf16>, tensor<2x77x64xf16>, tensor<2x77x64xf16>
}

// -----

// A plain forward: no log-sum-exp buffer; the host program passes a null pointer for it.
// CHECK-LABEL: func.func @plain(
// CHECK: rt.attention %arg0, %arg0, %arg0, %0 {batch = 1 : i64, dtype = "bf16"
// HOST-LABEL: define {{.*}}@commlir_fn_plain(
// HOST: double 1.250000e-01, ptr %arg0, ptr %arg0, ptr %arg0, ptr %buf, ptr null)
// comm-to-rt{attention=generated} refuses what only cuDNN lowers.
// GEN: attention-cudnn.mlir:24:3: error: 'compute.attention' op comm-to-rt: grouped-query attention and attention with_lse lower only to cuDNN
// GEN: attention-cudnn.mlir:41:3: error: 'compute.attention_backward' op comm-to-rt: attention_backward lowers only to cuDNN
func.func @plain(%q: tensor<2x64x64xbf16>) -> tensor<2x64x64xbf16> {
  %o = compute.attention %q, %q, %q {scale = 0.125 : f64} : tensor<2x64x64xbf16>
  return %o : tensor<2x64x64xbf16>
}
