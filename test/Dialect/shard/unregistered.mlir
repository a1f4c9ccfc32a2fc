// commlir registers the `shard` ops its conversions consume; the others (sharding
// annotations, point-to-point, process queries) stay upstream. They are accepted under
// --allow-unregistered-dialect, attributes and types kept as MLIR printed them, and named
// in the diagnostic otherwise.
// RUN: commlir-opt %s --allow-unregistered-dialect | FileCheck %s
// RUN: not commlir-opt %s 2>&1 | FileCheck %s --check-prefix=ERR

// CHECK: "shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
"shard.grid"() <{shape = array<i64: 2>, sym_name = "g"}> : () -> ()
func.func @annotated(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: "shard.sharding"() <{grid = @g, operandSegmentSizes = array<i32: 0, 0>, split_axes = #shard<axisarray{{\[\[}}0]]>, static_halo_sizes = array<i64>, static_sharded_dims_offsets = array<i64>}> : () -> !shard.sharding
  // ERR: unregistered.mlir:[[@LINE+1]]:3: error: 'shard.sharding' op is not registered: commlir's 'shard' dialect declares only the ops its conversions consume; use --allow-unregistered-dialect to accept it
  %s = "shard.sharding"() <{grid = @g, operandSegmentSizes = array<i32: 0, 0>, split_axes = #shard<axisarray[[0]]>, static_halo_sizes = array<i64>, static_sharded_dims_offsets = array<i64>}> : () -> !shard.sharding
  // CHECK: "shard.shard"(%arg0, %0) <{annotate_for_users}> : (tensor<4x8xf32>, !shard.sharding) -> tensor<4x8xf32>
  %0 = "shard.shard"(%x, %s) <{annotate_for_users}> : (tensor<4x8xf32>, !shard.sharding) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
