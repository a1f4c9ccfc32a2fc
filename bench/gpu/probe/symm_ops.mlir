// Every symm collective on peer-mapped pools, several element types and reduce ops, odd
// sizes (not multiples of the 16-byte vector), slots reused by later ops of the same call,
// and a residual add after a one-shot all-reduce. `--check` against the sim: integers exact.
module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @main(%a: tensor<1000x7xbf16>, %b: tensor<64x33xf32>, %c: tensor<4096xi32>, %d: tensor<130x8xf16>, %e: tensor<8x128xf64>, %u: tensor<6x5xui8>) -> (tensor<1000x7xbf16>, tensor<64x33xf32>, tensor<4096xi32>, tensor<1000x7xbf16>, tensor<260x8xf16>, tensor<32x33xf32>, tensor<2048xi32>, tensor<8x128xf64>, tensor<6x5xui8>, tensor<64x33xf32>) {
    %a1 = compute.scale %a {factor = 0.5 : f64} : tensor<1000x7xbf16>
    %r1 = symm.one_shot_all_reduce %a1 {reduce_op = "sum", group = @tp} : tensor<1000x7xbf16>
    %y1 = compute.add %r1, %a : tensor<1000x7xbf16>
    %r2 = symm.one_shot_all_reduce %b {reduce_op = "max", group = @tp} : tensor<64x33xf32>
    %c1 = compute.add %c, %c : tensor<4096xi32>
    %r3 = symm.one_shot_all_reduce %c1 {reduce_op = "product", group = @tp} : tensor<4096xi32>
    %a2 = compute.neg %a : tensor<1000x7xbf16>
    %r4 = symm.two_shot_all_reduce %a2 {reduce_op = "avg", group = @tp} : tensor<1000x7xbf16>
    %d1 = compute.exp %d : tensor<130x8xf16>
    %r5 = symm.all_gather %d1 {group = @tp} : (tensor<130x8xf16>) -> tensor<260x8xf16>
    %b1 = compute.scale %b {factor = 3.0 : f64} : tensor<64x33xf32>
    %r6 = symm.reduce_scatter %b1 {reduce_op = "sum", group = @tp} : (tensor<64x33xf32>) -> tensor<32x33xf32>
    %c2 = compute.neg %c : tensor<4096xi32>
    %r7 = symm.reduce_scatter %c2 {reduce_op = "min", group = @tp} : (tensor<4096xi32>) -> tensor<2048xi32>
    %e1 = compute.scale %e {factor = 0.25 : f64} : tensor<8x128xf64>
    %r8 = symm.two_shot_all_reduce %e1 {reduce_op = "sum", group = @tp} : tensor<8x128xf64>
    %u1 = compute.add %u, %u : tensor<6x5xui8>
    %r9 = symm.one_shot_all_reduce %u1 {reduce_op = "avg", group = @tp} : tensor<6x5xui8>
    %b2 = compute.sub %b, %b1 : tensor<64x33xf32>
    %r10 = symm.two_shot_all_reduce %b2 {reduce_op = "min", group = @tp} : tensor<64x33xf32>
    return %y1, %r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9, %r10 : tensor<1000x7xbf16>, tensor<64x33xf32>, tensor<4096xi32>, tensor<1000x7xbf16>, tensor<260x8xf16>, tensor<32x33xf32>, tensor<2048xi32>, tensor<8x128xf64>, tensor<6x5xui8>, tensor<64x33xf32>
  }
}
