module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @mlp(%x: tensor<4x16xbf16>, %w1: tensor<16x32xbf16>, %w2: tensor<32x16xbf16>) -> tensor<4x16xbf16> {
    %h = compute.matmul %x, %w1 : (tensor<4x16xbf16>, tensor<16x32xbf16>) -> tensor<4x32xbf16>
    %g = compute.gelu %h : tensor<4x32xbf16>
    %o = compute.matmul %g, %w2 : (tensor<4x32xbf16>, tensor<32x16xbf16>) -> tensor<4x16xbf16>
    %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<4x16xbf16>
    %y = coll.wait_tensor %r : tensor<4x16xbf16>
    return %y : tensor<4x16xbf16>
  }
}
