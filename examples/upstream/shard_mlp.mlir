// An upstream MLIR SPMD program (custom syntax of `shard`, `arith`, `math`), as
// `shard-partition` leaves it: a 1-D grid of 2 devices; an elementwise block whose partial
// sums are all-reduced, a sequence-parallel reduce-scatter / all-gather pair, and an
// all-to-all. Upstream lowers this only to MPI; commlir runs it on the sim backend and on
// GPUs through NCCL:
//
//   commlir-translate --import-mlir examples/upstream/shard_mlp.mlir \
//     --pass-pipeline='builtin.module(shard-to-coll,func.func(arith-to-compute))' | commlir-run - --ranks 2
shard.grid @tp(shape = 2)

func.func @block(%x: tensor<1024x1024xf32>, %w: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %h = arith.mulf %x, %w : tensor<1024x1024xf32>
  %a = math.tanh %h : tensor<1024x1024xf32>
  %p = shard.all_reduce %a on @tp grid_axes = [0] : tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  %half = arith.constant dense<0.5> : tensor<1024x1024xf32>
  %s = arith.mulf %p, %half : tensor<1024x1024xf32>
  %rs = shard.reduce_scatter %s on @tp grid_axes = [0] scatter_axis = 0 : tensor<1024x1024xf32> -> tensor<512x1024xf32>
  %e = math.exp %rs : tensor<512x1024xf32>
  %ag = shard.all_gather %e on @tp grid_axes = [0] gather_axis = 0 : tensor<512x1024xf32> -> tensor<1024x1024xf32>
  %t = shard.all_to_all %ag on @tp grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<1024x1024xf32> -> tensor<2048x512xf32>
  %u = shard.all_gather %t on @tp grid_axes = [0] gather_axis = 1 : tensor<2048x512xf32> -> tensor<2048x1024xf32>
  %v = shard.reduce_scatter %u on @tp grid_axes = [0] reduction = max scatter_axis = 0 : tensor<2048x1024xf32> -> tensor<1024x1024xf32>
  %y = arith.addf %v, %x : tensor<1024x1024xf32>
  return %y : tensor<1024x1024xf32>
}
