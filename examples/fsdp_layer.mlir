// An FSDP-style (ZeRO-3) MLP layer on a data-parallel group of 2 ranks: every rank holds
// half of each weight (dim 0 sharded); the forward pass all-gathers the full weights, the
// backward pass computes the full weight gradients and reduce-scatters them back to shards.
// (The backward pass treats gelu's derivative as 1 to stay short.)
//
//   x: 8x1024 activations, w1: 1024x4096 (shard 512x4096), w2: 4096x1024 (shard 2048x1024)
module {
  coll.group @dp {size = 2 : i64}
  func.func @fsdp_layer(%x: tensor<8x1024xbf16>, %w1_shard: tensor<512x4096xbf16>, %w2_shard: tensor<2048x1024xbf16>, %dy: tensor<8x1024xbf16>) -> (tensor<8x1024xbf16>, tensor<512x4096xbf16>, tensor<2048x1024xbf16>) {
    // Forward: gather both weights up front so that w2's gather overlaps the first matmul.
    %g1 = coll.all_gather_into_tensor %w1_shard {group = @dp} : (tensor<512x4096xbf16>) -> tensor<1024x4096xbf16>
    %g2 = coll.all_gather_into_tensor %w2_shard {group = @dp} : (tensor<2048x1024xbf16>) -> tensor<4096x1024xbf16>
    %w1 = coll.wait_tensor %g1 : tensor<1024x4096xbf16>
    %h = compute.matmul %x, %w1 : (tensor<8x1024xbf16>, tensor<1024x4096xbf16>) -> tensor<8x4096xbf16>
    %a = compute.gelu %h : tensor<8x4096xbf16>
    %w2 = coll.wait_tensor %g2 : tensor<4096x1024xbf16>
    %y = compute.matmul %a, %w2 : (tensor<8x4096xbf16>, tensor<4096x1024xbf16>) -> tensor<8x1024xbf16>

    // Backward: dW2 = a^T dy, da = dy w2^T, dW1 = x^T da.
    %at = compute.transpose %a : (tensor<8x4096xbf16>) -> tensor<4096x8xbf16>
    %dw2 = compute.matmul %at, %dy : (tensor<4096x8xbf16>, tensor<8x1024xbf16>) -> tensor<4096x1024xbf16>
    %rs2 = coll.reduce_scatter_tensor %dw2 {reduce_op = "avg", group = @dp} : (tensor<4096x1024xbf16>) -> tensor<2048x1024xbf16>
    %w2t = compute.transpose %w2 : (tensor<4096x1024xbf16>) -> tensor<1024x4096xbf16>
    %da = compute.matmul %dy, %w2t : (tensor<8x1024xbf16>, tensor<1024x4096xbf16>) -> tensor<8x4096xbf16>
    %xt = compute.transpose %x : (tensor<8x1024xbf16>) -> tensor<1024x8xbf16>
    %dw1 = compute.matmul %xt, %da : (tensor<1024x8xbf16>, tensor<8x4096xbf16>) -> tensor<1024x4096xbf16>
    %rs1 = coll.reduce_scatter_tensor %dw1 {reduce_op = "avg", group = @dp} : (tensor<1024x4096xbf16>) -> tensor<512x4096xbf16>
    %gw2 = coll.wait_tensor %rs2 : tensor<2048x1024xbf16>
    %gw1 = coll.wait_tensor %rs1 : tensor<512x4096xbf16>
    return %y, %gw1, %gw2 : tensor<8x1024xbf16>, tensor<512x4096xbf16>, tensor<2048x1024xbf16>
  }
}
