// MLIR's custom form of the `arith` and `math` ops commlir registers, where it is commlir's
// uniform form (no fast-math or overflow flags, one type): what mlir-opt prints,
// commlir-opt prints back byte for byte. (Other custom forms, `arith.extf %a : T to U`,
// `shard.grid @g(shape = 2)`, are read through `commlir-translate --import-mlir`.)
// RUN: mlir-opt %s | grep -v '^$' > %t.mlir
// RUN: commlir-opt %t.mlir | diff %t.mlir -
// RUN: commlir-opt %s | FileCheck %s

// CHECK-LABEL: func.func @uniform
func.func @uniform(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %i: tensor<4x8xi32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %0 = arith.addf %arg0, %arg1 : tensor<4x8xf32>
  %0 = arith.addf %a, %b : tensor<4x8xf32>
  %1 = arith.subf %0, %b : tensor<4x8xf32>
  %2 = arith.mulf %1, %b : tensor<4x8xf32>
  %3 = arith.divf %2, %b : tensor<4x8xf32>
  %4 = arith.maximumf %3, %b : tensor<4x8xf32>
  %5 = arith.minimumf %4, %b : tensor<4x8xf32>
  // CHECK: arith.negf %{{.*}} : tensor<4x8xf32>
  %6 = arith.negf %5 : tensor<4x8xf32>
  %7 = arith.addi %i, %i : tensor<4x8xi32>
  %8 = arith.subi %7, %i : tensor<4x8xi32>
  %9 = arith.muli %8, %i : tensor<4x8xi32>
  %10 = arith.maxsi %9, %i : tensor<4x8xi32>
  %11 = arith.minsi %10, %i : tensor<4x8xi32>
  // CHECK: math.exp %{{.*}} : tensor<4x8xf32>
  %12 = math.exp %6 : tensor<4x8xf32>
  %13 = math.tanh %12 : tensor<4x8xf32>
  %14 = math.sqrt %13 : tensor<4x8xf32>
  %15 = math.rsqrt %14 : tensor<4x8xf32>
  // CHECK: math.sin %{{.*}} : tensor<4x8xf32>
  %16 = math.sin %15 : tensor<4x8xf32>
  // CHECK: math.cos %{{.*}} : tensor<4x8xf32>
  %17 = math.cos %16 : tensor<4x8xf32>
  // CHECK: math.log %{{.*}} : tensor<4x8xf32>
  %18 = math.log %17 : tensor<4x8xf32>
  return %18 : tensor<4x8xf32>
}
