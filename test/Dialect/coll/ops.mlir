// RUN: commlir-opt %s | commlir-opt | FileCheck %s
// RUN: commlir-opt %s --mlir-print-op-generic | commlir-opt | FileCheck %s

// CHECK: coll.group @tp {size = 2 : i64, symm_mem}
// CHECK: coll.group @dp {ranks = [array<i64: 0, 2>, array<i64: 1, 3>], size = 2 : i64}
coll.group @tp {size = 2 : i64, symm_mem}
coll.group @dp {size = 2 : i64, ranks = [array<i64: 0, 2>, array<i64: 1, 3>]}

// CHECK-LABEL: func.func @all_ops
func.func @all_ops(%x: tensor<8x16xbf16>, %y: tensor<4x16xf32>) -> tensor<8x16xbf16> {
  // CHECK: %[[R:.*]] = coll.all_reduce %{{.*}} {group = @tp, reduce_op = "sum"} : tensor<8x16xbf16>
  // CHECK: coll.wait_tensor %[[R]] : tensor<8x16xbf16>
  %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<8x16xbf16>
  %a = coll.wait_tensor %r : tensor<8x16xbf16>
  // CHECK: coll.all_gather_into_tensor %{{.*}} {group = @dp} : (tensor<4x16xf32>) -> tensor<8x16xf32>
  %g = coll.all_gather_into_tensor %y {group = @dp} : (tensor<4x16xf32>) -> tensor<8x16xf32>
  %b = coll.wait_tensor %g : tensor<8x16xf32>
  // CHECK: coll.reduce_scatter_tensor %{{.*}} {group = @tp, reduce_op = "max"} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = coll.reduce_scatter_tensor %b {reduce_op = "max", group = @tp} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %c = coll.wait_tensor %s : tensor<4x16xf32>
  // CHECK: coll.all_to_all_single %{{.*}} {group = @tp, input_split_sizes = [array<i64: 1, 3>, array<i64: 3, 1>], output_split_sizes = [array<i64: 1, 3>, array<i64: 3, 1>]} : tensor<4x16xf32>
  %t = coll.all_to_all_single %c {group = @tp, input_split_sizes = [array<i64: 1, 3>, array<i64: 3, 1>], output_split_sizes = [array<i64: 1, 3>, array<i64: 3, 1>]} : tensor<4x16xf32>
  %d = coll.wait_tensor %t : tensor<4x16xf32>
  // CHECK: coll.broadcast %{{.*}} {group = @tp, src = 1 : i64} : tensor<4x16xf32>
  %u = coll.broadcast %d {src = 1 : i64, group = @tp} : tensor<4x16xf32>
  %e = coll.wait_tensor %u : tensor<4x16xf32>
  // CHECK: coll.shard_dim_alltoall %{{.*}} {gather_dim = 0 : i64, group = @tp, shard_dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<8x8xf32>
  %v = coll.shard_dim_alltoall %e {gather_dim = 0 : i64, shard_dim = 1 : i64, group = @tp} : (tensor<4x16xf32>) -> tensor<8x8xf32>
  // CHECK: %[[C:.*]]:2 = coll.all_reduce_coalesced %{{.*}}, %{{.*}} {group = @tp, reduce_op = "avg"} : (tensor<8x16xbf16>, tensor<8x8xf32>) -> (tensor<8x16xbf16>, tensor<8x8xf32>)
  // CHECK: coll.wait_tensor %[[C]]#1 : tensor<8x8xf32>
  %w:2 = coll.all_reduce_coalesced %a, %v {reduce_op = "avg", group = @tp} : (tensor<8x16xbf16>, tensor<8x8xf32>) -> (tensor<8x16xbf16>, tensor<8x8xf32>)
  %f = coll.wait_tensor %w#1 : tensor<8x8xf32>
  %h = coll.wait_tensor %w#0 : tensor<8x16xbf16>
  // CHECK: coll.all_gather_into_tensor_coalesced
  %ag:2 = coll.all_gather_into_tensor_coalesced %d, %f {group = @tp} : (tensor<4x16xf32>, tensor<8x8xf32>) -> (tensor<8x16xf32>, tensor<16x8xf32>)
  %i = coll.wait_tensor %ag#0 : tensor<8x16xf32>
  %j = coll.wait_tensor %ag#1 : tensor<16x8xf32>
  // CHECK: coll.reduce_scatter_tensor_coalesced
  %rs:2 = coll.reduce_scatter_tensor_coalesced %i, %j {reduce_op = "sum", group = @tp} : (tensor<8x16xf32>, tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<8x8xf32>)
  %k = coll.wait_tensor %rs#0 : tensor<4x16xf32>
  %l = coll.wait_tensor %rs#1 : tensor<8x8xf32>
  return %h : tensor<8x16xbf16>
}

// `coll.all_slice` (no communication) and the `coll.replicated` argument attribute.
coll.group @tp2 {size = 2 : i64}
// CHECK-LABEL: func.func @all_slice
// CHECK-SAME: (%arg0: tensor<8x16xf32> {coll.replicated = @tp2}, %arg1: tensor<4x6xbf16>)
func.func @all_slice(%x: tensor<8x16xf32> {coll.replicated = @tp2}, %y: tensor<4x6xbf16>) -> (tensor<4x16xf32>, tensor<4x3xbf16>) {
  // CHECK: coll.all_slice %arg0 {dim = 0 : i64, group = @tp2} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = coll.all_slice %x {dim = 0 : i64, group = @tp2} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK: coll.all_slice %arg1 {dim = 1 : i64, group = @tp2} : (tensor<4x6xbf16>) -> tensor<4x3xbf16>
  %b = coll.all_slice %y {dim = 1 : i64, group = @tp2} : (tensor<4x6xbf16>) -> tensor<4x3xbf16>
  return %a, %b : tensor<4x16xf32>, tensor<4x3xbf16>
}
