// REQUIRES: commlir-run
// RUN: commlir-run %s --print full | FileCheck %s

// CHECK: rank 0 result 0: tensor<3xbf16> digest={{[0-9a-f]+}} sum=3.002930e-1 max_abs=1.000977e-1
// CHECK-NEXT: [0.100097656, 0.100097656, 0.100097656]
// CHECK: rank 1 result 0: tensor<3xbf16>

func.func @main() -> tensor<3xbf16> {
  %y = compute.fill {value = 1.000000e-01 : f64} : tensor<3xbf16>
  return %y : tensor<3xbf16>
}
