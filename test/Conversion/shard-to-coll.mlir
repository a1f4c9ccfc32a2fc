// RUN: commlir-opt %s --allow-unregistered-dialect --split-input-file --shard-to-coll | FileCheck %s

// Upstream `shard` in generic form (what real MLIR prints, or `commlir-translate
// --import-mlir` produces from the custom form). A 2x2 grid: axis-1 groups are the rows,
// axis-0 groups the columns, as ShardToMPI splits its communicators.

// CHECK-LABEL: module
// CHECK-NOT: shard.grid
// CHECK: coll.group @grid0_axes_0 {ranks = {{\[}}[0, 2], [1, 3]], size = 2 : i64}
// CHECK-NEXT: coll.group @grid0_axes_0_1 {size = 4 : i64}
// CHECK-NEXT: coll.group @grid0_axes_1 {size = 2 : i64}
"shard.grid"() <{shape = array<i64: 2, 2>, sym_name = "grid0"}> : () -> ()
// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: %[[AR:.*]] = coll.all_reduce %arg0 {group = @grid0_axes_1, reduce_op = "sum"} : tensor<4x8xf32>
  // CHECK-NEXT: %[[W:.*]] = coll.wait_tensor %[[AR]] : tensor<4x8xf32>
  %0 = "shard.all_reduce"(%x) <{grid = @grid0, grid_axes = array<i16: 1>, reduction = #shard<partial sum>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: coll.all_gather_into_tensor %[[W]] {group = @grid0_axes_0} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %1 = "shard.all_gather"(%0) <{gather_axis = 0 : index, grid = @grid0, grid_axes = array<i16: 0>}> : (tensor<4x8xf32>) -> tensor<8x8xf32>
  // CHECK: coll.reduce_scatter_tensor %{{.*}} {group = @grid0_axes_1, reduce_op = "max"} : (tensor<8x8xf32>) -> tensor<4x8xf32>
  %2 = "shard.reduce_scatter"(%1) <{grid = @grid0, grid_axes = array<i16: 1>, reduction = #shard<partial max>, scatter_axis = 0 : index}> : (tensor<8x8xf32>) -> tensor<4x8xf32>
  // The root's key over the axes: (1) on axis 0 is rank 1 of the column.
  // CHECK: coll.broadcast %{{.*}} {group = @grid0_axes_0, src = 1 : i64} : tensor<4x8xf32>
  %3 = "shard.broadcast"(%2) <{grid = @grid0, grid_axes = array<i16: 0>, root = array<i64: 1>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: coll.all_reduce %{{.*}} {group = @grid0_axes_0_1, reduce_op = "avg"} : tensor<4x8xf32>
  %4 = "shard.all_reduce"(%3) <{grid = @grid0, grid_axes = array<i16: 0, 1>, reduction = #shard<partial average>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// Axes other than 0: the chunks move between the axis and dim 0 through slices and concats.
"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
// CHECK-LABEL: func.func @axes
func.func @axes(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // CHECK: %[[G:.*]] = coll.all_gather_into_tensor %arg0 {group = @g_axes_0} : (tensor<4x6xf32>) -> tensor<8x6xf32>
  // CHECK: %[[GW:.*]] = coll.wait_tensor %[[G]]
  // CHECK: %[[S0:.*]] = compute.slice %[[GW]] {dim = 0 : i64, size = 4 : i64, start = 0 : i64}
  // CHECK: %[[S1:.*]] = compute.slice %[[GW]] {dim = 0 : i64, size = 4 : i64, start = 4 : i64}
  // CHECK: compute.concat %[[S0]], %[[S1]] {dim = 1 : i64} : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x12xf32>
  %0 = "shard.all_gather"(%x) <{gather_axis = 1 : index, grid = @g, grid_axes = array<i16: 0>}> : (tensor<4x6xf32>) -> tensor<4x12xf32>
  // CHECK: compute.slice %{{.*}} {dim = 1 : i64, size = 6 : i64, start = 0 : i64}
  // CHECK: compute.slice %{{.*}} {dim = 1 : i64, size = 6 : i64, start = 6 : i64}
  // CHECK: compute.concat {{.*}} {dim = 0 : i64} : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  // CHECK: coll.reduce_scatter_tensor %{{.*}} {group = @g_axes_0, reduce_op = "sum"} : (tensor<8x6xf32>) -> tensor<4x6xf32>
  %1 = "shard.reduce_scatter"(%0) <{grid = @g, grid_axes = array<i16: 0>, scatter_axis = 1 : index}> : (tensor<4x12xf32>) -> tensor<4x6xf32>
  // CHECK: coll.all_to_all_single %{{.*}} {group = @g_axes_0} : tensor<8x3xf32>
  %2 = "shard.all_to_all"(%1) <{concat_axis = 0 : index, grid = @g, grid_axes = array<i16: 0>, split_axis = 1 : index}> : (tensor<4x6xf32>) -> tensor<8x3xf32>
  %3 = "shard.all_to_all"(%2) <{concat_axis = 1 : index, grid = @g, grid_axes = array<i16: 0>, split_axis = 0 : index}> : (tensor<8x3xf32>) -> tensor<4x6xf32>
  return %3 : tensor<4x6xf32>
}

// -----

// A collective over a single process is the identity; a taken name gets a suffix.
"shard.grid"() <{shape = array<i64: 1, 2>, sym_name = "g"}> : () -> ()
coll.group @g_axes_1 {size = 2 : i64}
// CHECK-LABEL: module
// CHECK: coll.group @g_axes_1_1 {size = 2 : i64}
// CHECK-NOT: coll.group @g_axes_0
// CHECK-LABEL: func.func @trivial
func.func @trivial(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NOT: coll.all_reduce %arg0
  // CHECK: %[[R:.*]] = coll.all_reduce %arg0 {group = @g_axes_1_1
  // CHECK: return
  %0 = "shard.all_reduce"(%x) <{grid = @g, grid_axes = array<i16: 0>}> : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "shard.all_reduce"(%0) <{grid = @g, grid_axes = array<i16: 1>}> : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// `all_slice` moves no data: this process's block of the axis, through `coll.all_slice`.
"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
// CHECK-LABEL: func.func @slice
func.func @slice(%x: tensor<4x6xf32>) -> tensor<4x3xf32> {
  // CHECK: %[[S:.*]] = coll.all_slice %arg0 {dim = 1 : i64, group = @g_axes_0} : (tensor<4x6xf32>) -> tensor<4x3xf32>
  // CHECK-NEXT: return %[[S]]
  %0 = "shard.all_slice"(%x) <{grid = @g, grid_axes = array<i16: 0>, slice_axis = 1 : index}> : (tensor<4x6xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
