// func.call on the GPU against the sim (`commlir-run --backend cuda --ranks 2 --check`).
// A callee with its own pool and collectives is called twice, once while the caller's own
// all-reduce (same kind, group and size of pool) is still in flight; a callee returns an
// argument and a repeated value (copied for the caller), results go unused, and a call chain
// three deep passes buffers through. Compile with the full pipeline:
//   commlir-translate calls.mlir --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools))' --emit=artifact -o calls.commlir
module {
  coll.group @tp {size = 2 : i64}
  func.func private @block(%x: tensor<256x1024xbf16>, %w: tensor<1024x1024xbf16>)
      -> (tensor<256x1024xbf16>, tensor<256x1024xbf16>, tensor<256x1024xbf16>) {
    %h = compute.matmul %x, %w : (tensor<256x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<256x1024xbf16>
    %g = compute.gelu %h : tensor<256x1024xbf16>
    %r = coll.all_reduce %g {reduce_op = "sum", group = @tp} : tensor<256x1024xbf16>
    %y = coll.wait_tensor %r : tensor<256x1024xbf16>
    %z = func.call @inner(%y) : (tensor<256x1024xbf16>) -> tensor<256x1024xbf16>
    return %x, %z, %z : tensor<256x1024xbf16>, tensor<256x1024xbf16>, tensor<256x1024xbf16>
  }
  func.func private @inner(%x: tensor<256x1024xbf16>) -> tensor<256x1024xbf16> {
    %a = func.call @leaf(%x) : (tensor<256x1024xbf16>) -> tensor<256x1024xbf16>
    %s = compute.add %a, %x : tensor<256x1024xbf16>
    return %s : tensor<256x1024xbf16>
  }
  func.func private @leaf(%x: tensor<256x1024xbf16>) -> tensor<256x1024xbf16> {
    %g = coll.all_gather_into_tensor %x {group = @tp} : (tensor<256x1024xbf16>) -> tensor<512x1024xbf16>
    %w = coll.wait_tensor %g : tensor<512x1024xbf16>
    %rs = coll.reduce_scatter_tensor %w {reduce_op = "sum", group = @tp} : (tensor<512x1024xbf16>) -> tensor<256x1024xbf16>
    %v = coll.wait_tensor %rs : tensor<256x1024xbf16>
    %n = compute.neg %v : tensor<256x1024xbf16>
    return %n : tensor<256x1024xbf16>
  }
  func.func @main(%x: tensor<256x1024xbf16>, %w1: tensor<1024x1024xbf16>, %w2: tensor<1024x1024xbf16>)
      -> (tensor<256x1024xbf16>, tensor<256x1024xbf16>, tensor<256x1024xbf16>) {
    %m = coll.all_reduce %x {reduce_op = "max", group = @tp} : tensor<256x1024xbf16>
    %a:3 = func.call @block(%x, %w1) : (tensor<256x1024xbf16>, tensor<1024x1024xbf16>) -> (tensor<256x1024xbf16>, tensor<256x1024xbf16>, tensor<256x1024xbf16>)
    %b:3 = func.call @block(%a#1, %w2) : (tensor<256x1024xbf16>, tensor<1024x1024xbf16>) -> (tensor<256x1024xbf16>, tensor<256x1024xbf16>, tensor<256x1024xbf16>)
    %mw = coll.wait_tensor %m : tensor<256x1024xbf16>
    %s = compute.add %b#2, %mw : tensor<256x1024xbf16>
    return %s, %a#0, %b#1 : tensor<256x1024xbf16>, tensor<256x1024xbf16>, tensor<256x1024xbf16>
  }
}
