// compute.attention parses, prints and round-trips (custom and generic forms); the unit
// attribute `causal` prints bare, and one type stands for all four when they are equal.
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
