// One-shot all-reduces with a fused elementwise epilogue (comm-to-rt fuses each chain into
// the all-reduce's kernel): a residual add `y = x + allreduce(o)` and a chain
// `gelu(scale(allreduce(h)) + b)`, bf16, 2 ranks, sizes with a scalar tail.
module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @main(%x: tensor<3000xbf16>, %o: tensor<3000xbf16>, %b: tensor<3000xbf16>) -> (tensor<3000xbf16>, tensor<3000xbf16>) {
    %p = compute.scale %o {factor = 0.5 : f64} : tensor<3000xbf16>
    %r = symm.one_shot_all_reduce %p {reduce_op = "sum", group = @tp} : tensor<3000xbf16>
    %y = compute.add %x, %r : tensor<3000xbf16>
    %h = compute.mul %y, %b : tensor<3000xbf16>
    %r2 = symm.one_shot_all_reduce %h {reduce_op = "sum", group = @tp} : tensor<3000xbf16>
    %s = compute.scale %r2 {factor = 0.25 : f64} : tensor<3000xbf16>
    %t = compute.add %s, %b : tensor<3000xbf16>
    %g = compute.gelu %t : tensor<3000xbf16>
    return %y, %g : tensor<3000xbf16>, tensor<3000xbf16>
  }
}
