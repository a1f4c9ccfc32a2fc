// The `arith` and `math` ops commlir registers, in MLIR's generic form: they round-trip
// byte for byte through commlir-opt, without --allow-unregistered-dialect, and MLIR reads
// back what commlir prints. (mlir-opt ends its output with a blank line: grep drops it.)
// RUN: mlir-opt %s --mlir-print-op-generic | grep -v '^$' > %t.generic.mlir
// RUN: commlir-opt %t.generic.mlir --mlir-print-op-generic | diff %t.generic.mlir -
// RUN: commlir-opt %t.generic.mlir | mlir-opt --mlir-print-op-generic | grep -v '^$' | diff %t.generic.mlir -
// RUN: commlir-opt %t.generic.mlir | FileCheck %s

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %i: tensor<4x8xi32>, %h: tensor<4x8xbf16>, %c: f32) -> tensor<4x8xf32> {
  // CHECK: "arith.addf"(%arg0, %arg1) <{fastmath = #arith.fastmath<none>}> : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = arith.addf %a, %b : tensor<4x8xf32>
  %1 = arith.subf %0, %b fastmath<fast> : tensor<4x8xf32>
  %2 = arith.mulf %1, %b : tensor<4x8xf32>
  %3 = arith.divf %2, %b : tensor<4x8xf32>
  %4 = arith.maximumf %3, %b : tensor<4x8xf32>
  %5 = arith.minimumf %4, %b : tensor<4x8xf32>
  %6 = arith.negf %5 : tensor<4x8xf32>
  %7 = arith.addi %i, %i : tensor<4x8xi32>
  %8 = arith.subi %7, %i overflow<nsw> : tensor<4x8xi32>
  %9 = arith.muli %8, %i : tensor<4x8xi32>
  %10 = arith.maxsi %9, %i : tensor<4x8xi32>
  %11 = arith.minsi %10, %i : tensor<4x8xi32>
  // CHECK: "arith.extf"(%arg3) : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %12 = arith.extf %h : tensor<4x8xbf16> to tensor<4x8xf32>
  %13 = arith.truncf %12 : tensor<4x8xf32> to tensor<4x8xbf16>
  %14 = arith.truncf %12 to_nearest_even : tensor<4x8xf32> to tensor<4x8xbf16>
  // CHECK: "arith.constant"() <{value = dense<5.000000e-01> : tensor<4x8xf32>}> : () -> tensor<4x8xf32>
  %15 = arith.constant dense<0.5> : tensor<4x8xf32>
  %17 = math.exp %6 : tensor<4x8xf32>
  %18 = math.tanh %17 fastmath<nnan> : tensor<4x8xf32>
  %19 = math.sqrt %18 : tensor<4x8xf32>
  // CHECK: "math.rsqrt"
  %20 = math.rsqrt %19 : tensor<4x8xf32>
  // Scalars too, as upstream.
  %21 = arith.addf %c, %c : f32
  return %20 : tensor<4x8xf32>
}
