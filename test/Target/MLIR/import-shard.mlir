// REQUIRES: commlir-translate, commlir-run
// RUN: commlir-translate --import-mlir %s | FileCheck %s --check-prefix=IMPORT
// RUN: commlir-translate --import-mlir %s --pass-pipeline='builtin.module(shard-to-coll,func.func(arith-to-compute))' | FileCheck %s --check-prefix=COLL
// RUN: commlir-translate --import-mlir %s --pass-pipeline='builtin.module(shard-to-coll,func.func(arith-to-compute))' | commlir-run - --ranks 4 | FileCheck %s --check-prefix=SIM
// RUN: commlir-translate --import-mlir %s --pass-pipeline='builtin.module(shard-to-coll,func.func(arith-to-compute,coll-to-comm,comm-sink-waits-iterative,comm-plan-pools))' | commlir-run - --ranks 4 | FileCheck %s --check-prefix=SIM
// RUN: commlir-translate --import-mlir %s --pass-pipeline='builtin.module(shard-to-coll,func.func(arith-to-compute,coll-to-comm,comm-plan-pools))' --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: commlir-translate --import-mlir %s --mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// An upstream SPMD program in the custom syntax of `shard`, `arith` and `math`: real MLIR
// parses and verifies it, commlir converts it to groups and functional collectives, and it
// runs on 4 simulated ranks (and, compiled, on GPUs through NCCL).

shard.grid @grid0(shape = 2x2)

// IMPORT: "shard.grid"() <{shape = array<i64: 2, 2>, sym_name = "grid0"}> : () -> ()
// IMPORT-LABEL: func.func @step
// IMPORT: "arith.addf"(%arg0, %arg1) <{fastmath = #arith.fastmath<none>}>
// IMPORT: "shard.all_reduce"(%{{.*}}) <{grid = @grid0, grid_axes = array<i16: 1>, reduction = #shard<partial sum>}>

// COLL: coll.group @grid0_axes_0 {ranks = {{\[}}[0, 2], [1, 3]], size = 2 : i64}
// COLL-NEXT: coll.group @grid0_axes_1 {size = 2 : i64}
// COLL-LABEL: func.func @step
// COLL: %[[S:.*]] = compute.add %arg0, %arg1 : tensor<4x8xf32>
// COLL: %[[R:.*]] = coll.all_reduce %[[S]] {group = @grid0_axes_1, reduce_op = "sum"} : tensor<4x8xf32>
// COLL: %[[W:.*]] = coll.wait_tensor %[[R]]
// COLL: coll.all_gather_into_tensor %[[W]] {group = @grid0_axes_0} : (tensor<4x8xf32>) -> tensor<8x8xf32>
// COLL: compute.exp
// COLL-NOT: shard.
// COLL-NOT: arith.

// Four ranks; each column of the grid ends up with the same gathered sums.
// SIM: rank 0 result 0: tensor<8x8xf32> digest=[[D0:[0-9a-f]+]]
// SIM: rank 1 result 0: tensor<8x8xf32> digest=[[D1:[0-9a-f]+]]
// SIM: rank 2 result 0: tensor<8x8xf32> digest=[[D0]]
// SIM: rank 3 result 0: tensor<8x8xf32> digest=[[D1]]

// PTX: .target sm_90
// PTX: .visible .entry

// LOC: "shard.all_gather"{{.*}} loc("{{.*}}import-shard.mlir":[[@LINE+4]]:8)
func.func @step(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<8x8xf32> {
  %s = arith.addf %x, %y : tensor<4x8xf32>
  %r = shard.all_reduce %s on @grid0 grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf32>
  %g = shard.all_gather %r on @grid0 grid_axes = [0] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %e = math.exp %g : tensor<8x8xf32>
  %c = arith.constant dense<0.5> : tensor<8x8xf32>
  %m = arith.mulf %e, %c : tensor<8x8xf32>
  return %m : tensor<8x8xf32>
}
