// compute.attention parses, prints and round-trips (custom and generic forms); the unit
// attribute `causal` prints bare, and one type stands for all four when they are equal; grouped
// kv heads, the `with_lse` second result and compute.attention_backward.
// RUN: commlir-opt %s | commlir-opt | FileCheck %s
// RUN: commlir-opt %s --mlir-print-op-generic | commlir-opt | FileCheck %s

// CHECK-LABEL: func.func @heads
// CHECK: compute.attention %arg0, %arg1, %arg2 {causal, scale = 0.125 : f64} : tensor<1x4x16x64xbf16>
func.func @heads(%q: tensor<1x4x16x64xbf16>, %k: tensor<1x4x16x64xbf16>, %v: tensor<1x4x16x64xbf16>) -> tensor<1x4x16x64xbf16> {
  %o = compute.attention %q, %k, %v {causal, scale = 0.125 : f64} : (tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>) -> tensor<1x4x16x64xbf16>
  return %o : tensor<1x4x16x64xbf16>
}

// Cross attention: other key count, other value width, no mask.
// CHECK-LABEL: func.func @cross
// CHECK: compute.attention %arg0, %arg1, %arg2 {scale = 0.5 : f64} : (tensor<3x8x4xf32>, tensor<3x5x4xf32>, tensor<3x5x7xf32>) -> tensor<3x8x7xf32>
func.func @cross(%q: tensor<3x8x4xf32>, %k: tensor<3x5x4xf32>, %v: tensor<3x5x7xf32>) -> tensor<3x8x7xf32> {
  %o = compute.attention %q, %k, %v {scale = 0.5 : f64} : (tensor<3x8x4xf32>, tensor<3x5x4xf32>, tensor<3x5x7xf32>) -> tensor<3x8x7xf32>
  return %o : tensor<3x8x7xf32>
}

// Grouped-query attention: 8 query heads read 2 kv heads (4 each).
// CHECK-LABEL: func.func @gqa
// CHECK: compute.attention %arg0, %arg1, %arg2 {causal, scale = 0.125 : f64} : (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>) -> tensor<2x8x16x64xbf16>
func.func @gqa(%q: tensor<2x8x16x64xbf16>, %k: tensor<2x2x16x64xbf16>, %v: tensor<2x2x16x64xbf16>) -> tensor<2x8x16x64xbf16> {
  %o = compute.attention %q, %k, %v {causal, scale = 0.125 : f64} : (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>) -> tensor<2x8x16x64xbf16>
  return %o : tensor<2x8x16x64xbf16>
}

// With the row log-sum-exp: a second result, f32 for bf16 attention, without the last dim.
// CHECK-LABEL: func.func @with_lse
// CHECK: %[[R:[0-9]+]]:2 = compute.attention %arg0, %arg1, %arg2 {causal, scale = 0.125 : f64, with_lse} : (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>) -> (tensor<2x8x16x64xbf16>, tensor<2x8x16xf32>)
// CHECK: return %[[R]]#0, %[[R]]#1 : tensor<2x8x16x64xbf16>, tensor<2x8x16xf32>
func.func @with_lse(%q: tensor<2x8x16x64xbf16>, %k: tensor<2x2x16x64xbf16>, %v: tensor<2x2x16x64xbf16>) -> (tensor<2x8x16x64xbf16>, tensor<2x8x16xf32>) {
  %o, %lse = compute.attention %q, %k, %v {causal, scale = 0.125 : f64, with_lse} : (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>) -> (tensor<2x8x16x64xbf16>, tensor<2x8x16xf32>)
  return %o, %lse : tensor<2x8x16x64xbf16>, tensor<2x8x16xf32>
}

// f64 attention keeps its log-sum-exp in f64; rank 2 has no heads.
// CHECK-LABEL: func.func @lse_f64
// CHECK: compute.attention %arg0, %arg0, %arg0 {scale = 0.5 : f64, with_lse} : (tensor<5x4xf64>, tensor<5x4xf64>, tensor<5x4xf64>) -> (tensor<5x4xf64>, tensor<5xf64>)
func.func @lse_f64(%q: tensor<5x4xf64>) -> tensor<5xf64> {
  %o, %lse = compute.attention %q, %q, %q {scale = 0.5 : f64, with_lse} : (tensor<5x4xf64>, tensor<5x4xf64>, tensor<5x4xf64>) -> (tensor<5x4xf64>, tensor<5xf64>)
  return %lse : tensor<5xf64>
}

// The backward of a grouped-query, causal attention: dk and dv have the kv heads.
// CHECK-LABEL: func.func @backward
// CHECK: %[[F:[0-9]+]]:2 = compute.attention %arg0, %arg1, %arg2
// CHECK: %{{[0-9]+}}:3 = compute.attention_backward %arg0, %arg1, %arg2, %[[F]]#0, %arg3, %[[F]]#1 {causal, scale = 0.125 : f64} : (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x8x16x64xbf16>, tensor<2x8x16x64xbf16>, tensor<2x8x16xf32>) -> (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>)
func.func @backward(%q: tensor<2x8x16x64xbf16>, %k: tensor<2x2x16x64xbf16>, %v: tensor<2x2x16x64xbf16>, %do: tensor<2x8x16x64xbf16>) -> (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>) {
  %o, %lse = compute.attention %q, %k, %v {causal, scale = 0.125 : f64, with_lse} : (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>) -> (tensor<2x8x16x64xbf16>, tensor<2x8x16xf32>)
  %dq, %dk, %dv = compute.attention_backward %q, %k, %v, %o, %do, %lse {causal, scale = 0.125 : f64} : (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x8x16x64xbf16>, tensor<2x8x16x64xbf16>, tensor<2x8x16xf32>) -> (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>)
  return %dq, %dk, %dv : tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>
}

// Cross attention backward in f32: other key count, other value width, no mask.
// CHECK-LABEL: func.func @backward_cross
// CHECK: compute.attention_backward %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 {scale = 0.5 : f64} : (tensor<3x5x4xf32>, tensor<3x7x4xf32>, tensor<3x7x6xf32>, tensor<3x5x6xf32>, tensor<3x5x6xf32>, tensor<3x5xf32>) -> (tensor<3x5x4xf32>, tensor<3x7x4xf32>, tensor<3x7x6xf32>)
func.func @backward_cross(%q: tensor<3x5x4xf32>, %k: tensor<3x7x4xf32>, %v: tensor<3x7x6xf32>, %o: tensor<3x5x6xf32>, %do: tensor<3x5x6xf32>, %lse: tensor<3x5xf32>) -> tensor<3x7x4xf32> {
  %dq, %dk, %dv = compute.attention_backward %q, %k, %v, %o, %do, %lse {scale = 0.5 : f64} : (tensor<3x5x4xf32>, tensor<3x7x4xf32>, tensor<3x7x6xf32>, tensor<3x5x6xf32>, tensor<3x5x6xf32>, tensor<3x5xf32>) -> (tensor<3x5x4xf32>, tensor<3x7x4xf32>, tensor<3x7x6xf32>)
  return %dk : tensor<3x7x4xf32>
}
