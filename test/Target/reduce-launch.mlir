// Launch shapes of standalone reductions (codegen/src/lower_to_rt.rs, `lane_walker`).
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=rt | FileCheck %s

// A column sum over 4096 rows (a norm's weight gradient): 4096 lanes would be 16 blocks of
// 256 threads; a warp a block spreads them over 128 blocks. A row sum keeps one block per row.
// CHECK-LABEL: func.func @columns(
// CHECK: rt.launch %arg0, %{{.*}} {block = 32 : i64, grid = 128 : i64, kernel = @k{{[0-9]+}}_reduce_sum}
// CHECK: rt.launch %arg0, %{{.*}} {block = 256 : i64, grid = 4096 : i64, kernel = @k{{[0-9]+}}_reduce_sum}
// Many lanes: the usual 256-thread blocks.
// CHECK: rt.launch %arg1, %{{.*}} {block = 256 : i64, grid = 1024 : i64, kernel = @k{{[0-9]+}}_reduce_sum}
func.func @columns(%g: tensor<4096x4096xf32>, %h: tensor<8x262144xf32>) -> (tensor<4096xf32>, tensor<4096xf32>, tensor<262144xf32>) {
  %c = compute.reduce_sum %g {dim = 0 : i64} : (tensor<4096x4096xf32>) -> tensor<4096xf32>
  %r = compute.reduce_sum %g {dim = 1 : i64} : (tensor<4096x4096xf32>) -> tensor<4096xf32>
  %w = compute.reduce_sum %h {dim = 0 : i64} : (tensor<8x262144xf32>) -> tensor<262144xf32>
  return %c, %r, %w : tensor<4096xf32>, tensor<4096xf32>, tensor<262144xf32>
}
