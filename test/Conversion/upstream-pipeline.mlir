// An upstream program in MLIR's own syntax goes through real MLIR once, at import; the
// imported file is then an ordinary input of commlir-opt, which knows the upstream ops that
// its conversions consume (no --allow-unregistered-dialect).
//
// RUN: commlir-translate --import-mlir %s -o %t.mlir
// RUN: commlir-opt %t.mlir --pass-pipeline='builtin.module(shard-to-coll,func.func(arith-to-compute))' | FileCheck %s
// RUN: commlir-opt %t.mlir | diff %t.mlir -
//
// The example of examples/upstream, the same way:
// RUN: commlir-translate --import-mlir %S/../../examples/upstream/shard_mlp.mlir -o %t.mlp.mlir
// RUN: commlir-opt %t.mlp.mlir --pass-pipeline='builtin.module(shard-to-coll,func.func(arith-to-compute))' | FileCheck %s --check-prefix=MLP
// RUN: commlir-opt %t.mlp.mlir --pass-pipeline='builtin.module(shard-to-coll,func.func(arith-to-compute))' | commlir-run - --ranks 2 | FileCheck %s --check-prefix=EXEC

// CHECK-LABEL: module
// CHECK-NOT: shard.
// CHECK-DAG: coll.group @g_axes_0 {ranks = {{\[}}[0, 2], [1, 3]], size = 2 : i64}
// CHECK-DAG: coll.group @g_axes_1 {size = 2 : i64}
shard.grid @g(shape = 2x2)

// CHECK-LABEL: func.func @layer
func.func @layer(%x: tensor<4x8xbf16>, %w: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: %[[E:.*]] = compute.cast %arg0 : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %e = arith.extf %x : tensor<4x8xbf16> to tensor<4x8xf32>
  // CHECK: %[[M:.*]] = compute.mul %[[E]], %arg1 : tensor<4x8xf32>
  %m = arith.mulf %e, %w fastmath<fast> : tensor<4x8xf32>
  // CHECK: %[[S:.*]] = compute.sqrt %[[M]] : tensor<4x8xf32>
  %s = math.sqrt %m : tensor<4x8xf32>
  // CHECK: %[[R:.*]] = coll.all_reduce %[[S]] {group = @g_axes_1, reduce_op = "sum"} : tensor<4x8xf32>
  // CHECK: %[[W:.*]] = coll.wait_tensor %[[R]] : tensor<4x8xf32>
  %r = shard.all_reduce %s on @g grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK: coll.broadcast %[[W]] {group = @g_axes_0, src = 1 : i64} : tensor<4x8xf32>
  %b = shard.broadcast %r on @g grid_axes = [0] root = [1] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: coll.all_slice %{{.*}} {dim = 1 : i64, group = @g_axes_0} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  %sl = shard.all_slice %b on @g grid_axes = [0] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  // CHECK: coll.all_gather_into_tensor %{{.*}} {group = @g_axes_0} : (tensor<4x4xf32>) -> tensor<8x4xf32>
  %ag = shard.all_gather %sl on @g grid_axes = [0] gather_axis = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
  // CHECK: compute.maximum
  %mx = arith.maximumf %ag, %w : tensor<4x8xf32>
  // CHECK: compute.fill {value = 2.0 : f64} : tensor<4x8xf32>
  %two = arith.constant dense<2.0> : tensor<4x8xf32>
  // CHECK: compute.div
  %d = arith.divf %mx, %two : tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// MLP: coll.group @tp_axes_0 {size = 2 : i64}
// MLP-LABEL: func.func @block
// MLP-NOT: arith.
// MLP-NOT: math.
// MLP-NOT: shard.
// MLP: compute.mul
// MLP: compute.tanh
// MLP: coll.all_reduce
// MLP: coll.reduce_scatter_tensor
// MLP: compute.exp
// MLP: coll.all_gather_into_tensor
// MLP: coll.all_to_all_single
// MLP: coll.reduce_scatter_tensor {{.*}}reduce_op = "max"
// MLP: compute.add

// EXEC: rank 0 result 0: tensor<1024x1024xf32> digest=
// EXEC: rank 1 result 0: tensor<1024x1024xf32> digest=
