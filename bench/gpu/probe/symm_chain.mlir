// Back-to-back symm all-reduces on one pool, each input produced from the previous result:
// slots are reused call after call and op after op, so a missing end barrier would let a
// rank overwrite a slot a peer still reads. Large enough for several blocks per kernel.
module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @main(%x: tensor<512x1024xbf16>) -> tensor<512x1024xbf16> {
    %s0 = compute.scale %x {factor = 0.5 : f64} : tensor<512x1024xbf16>
    %r0 = symm.one_shot_all_reduce %s0 {reduce_op = "sum", group = @tp} : tensor<512x1024xbf16>
    %s1 = compute.scale %r0 {factor = 0.5 : f64} : tensor<512x1024xbf16>
    %r1 = symm.two_shot_all_reduce %s1 {reduce_op = "sum", group = @tp} : tensor<512x1024xbf16>
    %s2 = compute.scale %r1 {factor = 0.5 : f64} : tensor<512x1024xbf16>
    %r2 = symm.one_shot_all_reduce %s2 {reduce_op = "avg", group = @tp} : tensor<512x1024xbf16>
    %s3 = compute.add %r2, %x : tensor<512x1024xbf16>
    %r3 = symm.two_shot_all_reduce %s3 {reduce_op = "max", group = @tp} : tensor<512x1024xbf16>
    %s4 = compute.scale %r3 {factor = 0.5 : f64} : tensor<512x1024xbf16>
    %g = symm.reduce_scatter %s4 {reduce_op = "sum", group = @tp} : (tensor<512x1024xbf16>) -> tensor<256x1024xbf16>
    %h = compute.scale %g {factor = 2.0 : f64} : tensor<256x1024xbf16>
    %y = symm.all_gather %h {group = @tp} : (tensor<256x1024xbf16>) -> tensor<512x1024xbf16>
    return %y : tensor<512x1024xbf16>
  }
}
