// The generic form MLIR prints for the `shard` ops commlir registers round-trips byte for
// byte through commlir-opt, without --allow-unregistered-dialect, and MLIR reads back what
// commlir prints.
// RUN: commlir-opt %s | FileCheck %s
// RUN: commlir-opt %s -o %t.ours.mlir
// RUN: commlir-opt %t.ours.mlir | diff %t.ours.mlir -
// (mlir-opt ends its output with a blank line, commlir-opt does not: grep drops it.)
// RUN: mlir-opt %s --mlir-print-op-generic | grep -v '^$' > %t.mlir
// RUN: commlir-opt %t.mlir --mlir-print-op-generic | diff %t.mlir -
// RUN: mlir-opt %t.ours.mlir --mlir-print-op-generic | grep -v '^$' | diff %t.mlir -

// CHECK: "shard.grid"() <{shape = array<i64: 2, 2>, sym_name = "grid0"}> : () -> ()
"shard.grid"() <{shape = array<i64: 2, 2>, sym_name = "grid0"}> : () -> ()
// CHECK: "shard.grid"() <{shape = array<i64: 4, -9223372036854775808>, sym_name = "dyn"}> : () -> ()
"shard.grid"() <{shape = array<i64: 4, -9223372036854775808>, sym_name = "dyn"}> : () -> ()
func.func @collectives(%x: tensor<4x8xf32>, %i: index) -> tensor<4x8xf32> {
  // CHECK: "shard.all_reduce"(%arg0) <{grid = @grid0, grid_axes = array<i16: 1>, reduction = #shard<partial max>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = "shard.all_reduce"(%x) <{grid = @grid0, grid_axes = array<i16: 1>, reduction = #shard<partial max>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // An all-reduce may accumulate in a wider type.
  // CHECK: "shard.all_reduce"(%{{.*}}) <{grid = @grid0, grid_axes = array<i16: 0, 1>, reduction = #shard<partial sum>}> : (tensor<4x8xf32>) -> tensor<4x8xf64>
  %w = "shard.all_reduce"(%0) <{grid = @grid0, grid_axes = array<i16: 0, 1>, reduction = #shard<partial sum>}> : (tensor<4x8xf32>) -> tensor<4x8xf64>
  // CHECK: "shard.all_gather"
  %1 = "shard.all_gather"(%0) <{gather_axis = 1 : index, grid = @grid0, grid_axes = array<i16: 0>}> : (tensor<4x8xf32>) -> tensor<4x16xf32>
  // CHECK: "shard.reduce_scatter"
  %2 = "shard.reduce_scatter"(%1) <{grid = @grid0, grid_axes = array<i16: 0>, reduction = #shard<partial min>, scatter_axis = 1 : index}> : (tensor<4x16xf32>) -> tensor<4x8xf32>
  // CHECK: "shard.all_to_all"
  %3 = "shard.all_to_all"(%2) <{concat_axis = 0 : index, grid = @grid0, grid_axes = array<i16: 1>, split_axis = 1 : index}> : (tensor<4x8xf32>) -> tensor<8x4xf32>
  // CHECK: "shard.all_slice"
  %4 = "shard.all_slice"(%3) <{grid = @grid0, grid_axes = array<i16: 1>, slice_axis = 0 : index}> : (tensor<8x4xf32>) -> tensor<4x4xf32>
  // CHECK: "shard.all_gather"
  %5 = "shard.all_gather"(%4) <{gather_axis = 1 : index, grid = @grid0, grid_axes = array<i16: 1>}> : (tensor<4x4xf32>) -> tensor<4x8xf32>
  // A dynamic root, and a group whose size is not static: nothing to check statically.
  // CHECK: "shard.broadcast"(%{{.*}}, %arg1) <{grid = @grid0, grid_axes = array<i16: 0>, root = array<i64: -9223372036854775808>}> : (tensor<4x8xf32>, index) -> tensor<4x8xf32>
  %6 = "shard.broadcast"(%5, %i) <{grid = @grid0, grid_axes = array<i16: 0>, root = array<i64: -9223372036854775808>}> : (tensor<4x8xf32>, index) -> tensor<4x8xf32>
  // CHECK: "shard.all_gather"
  %7 = "shard.all_gather"(%6) <{gather_axis = 0 : index, grid = @dyn, grid_axes = array<i16: 1>}> : (tensor<4x8xf32>) -> tensor<?x8xf32>
  return %6 : tensor<4x8xf32>
}
