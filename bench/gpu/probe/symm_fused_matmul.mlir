// The fused collective-matmul ops as chunked pipelines on peer-mapped pools, bf16, 2 ranks:
// all-gather-matmul (256×512 shards, two right-hand sides of 512×1024 and 512×256, the
// gathered A returned), a gather along dim 1 of a 3-D shard, matmul-reduce-scatter along
// dim 0 (sum, avg) and along dim 1 of a 3-D product, and a reduce-scatter result used by later
// compute. `--check` against the sim.
module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @main(%a: tensor<256x512xbf16>, %b1: tensor<512x1024xbf16>, %b2: tensor<512x256xbf16>, %x: tensor<4x64x128xbf16>, %w: tensor<128x256xbf16>, %h: tensor<512x1024xbf16>, %v: tensor<1024x512xbf16>) -> (tensor<512x512xbf16>, tensor<512x1024xbf16>, tensor<512x256xbf16>, tensor<4x128x256xbf16>, tensor<256x512xbf16>, tensor<256x512xbf16>, tensor<4x32x256xbf16>) {
    %a1 = compute.scale %a {factor = 0.5 : f64} : tensor<256x512xbf16>
    %ag, %y1, %y2 = symm.fused_all_gather_matmul %a1, %b1, %b2 {group = @tp, return_a} : (tensor<256x512xbf16>, tensor<512x1024xbf16>, tensor<512x256xbf16>) -> (tensor<512x512xbf16>, tensor<512x1024xbf16>, tensor<512x256xbf16>)
    %x1 = compute.neg %x : tensor<4x64x128xbf16>
    %z = symm.fused_all_gather_matmul %x1, %w {group = @tp, gather_dim = 1 : i64} : (tensor<4x64x128xbf16>, tensor<128x256xbf16>) -> tensor<4x128x256xbf16>
    %r1 = symm.fused_matmul_reduce_scatter %h, %v {reduce_op = "sum", scatter_dim = 0 : i64, group = @tp} : (tensor<512x1024xbf16>, tensor<1024x512xbf16>) -> tensor<256x512xbf16>
    %r2 = symm.fused_matmul_reduce_scatter %y1, %v {reduce_op = "avg", group = @tp} : (tensor<512x1024xbf16>, tensor<1024x512xbf16>) -> tensor<256x512xbf16>
    %r3 = symm.fused_matmul_reduce_scatter %x1, %w {reduce_op = "sum", scatter_dim = 1 : i64, group = @tp} : (tensor<4x64x128xbf16>, tensor<128x256xbf16>) -> tensor<4x32x256xbf16>
    %o = compute.add %r1, %a : tensor<256x512xbf16>
    return %ag, %y1, %y2, %z, %o, %r2, %r3 : tensor<512x512xbf16>, tensor<512x1024xbf16>, tensor<512x256xbf16>, tensor<4x128x256xbf16>, tensor<256x512xbf16>, tensor<256x512xbf16>, tensor<4x32x256xbf16>
  }
}
