module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @mlp(%x: tensor<8x1024xbf16>, %w1: tensor<1024x4096xbf16>, %w2: tensor<4096x1024xbf16>) -> tensor<8x1024xbf16> {
    %h = compute.matmul %x, %w1 : (tensor<8x1024xbf16>, tensor<1024x4096xbf16>) -> tensor<8x4096xbf16>
    %g = compute.gelu %h : tensor<8x4096xbf16>
    %o = compute.matmul %g, %w2 : (tensor<8x4096xbf16>, tensor<4096x1024xbf16>) -> tensor<8x1024xbf16>
    %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<8x1024xbf16>
    %y = coll.wait_tensor %r : tensor<8x1024xbf16>
    return %y : tensor<8x1024xbf16>
  }
}
