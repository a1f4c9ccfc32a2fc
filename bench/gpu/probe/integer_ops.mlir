// Integer kernels on the GPU against the sim (`commlir-run --backend cuda --check`, exact):
// wrapping add/sub/mul, signed and unsigned div/maximum/minimum/relu/neg, int<->int and
// int<->float casts both ways (bf16/f16 included, saturating float->int), reduce_sum,
// transpose/slice/concat on i8/i32/i64, and integer all_reduce / all_gather on 2 ranks.
module {
  coll.group @w {size = 2 : i64}
  func.func @main(%a: tensor<64x32xi32>, %b: tensor<64x32xi32>, %c: tensor<64x32xi8>,
                  %d: tensor<16x8xi64>, %u: tensor<64x32xui8>, %f: tensor<64x32xbf16>)
      -> (tensor<32x64xi32>, tensor<64xi32>, tensor<64x32xf32>, tensor<64x32xi8>,
          tensor<8x16xi64>, tensor<32x32xi32>, tensor<128x32xi8>, tensor<64x32xui8>,
          tensor<64x32xi32>, tensor<64x32xf16>, tensor<64x32xi64>, tensor<128x32xi32>) {
    // Fused chain: wraps on overflow (x*x*x of ~2^31 values), signed max/min/relu/neg.
    %m = compute.mul %a, %b : tensor<64x32xi32>
    %m2 = compute.mul %m, %a : tensor<64x32xi32>
    %s = compute.sub %m2, %b : tensor<64x32xi32>
    %mx = compute.maximum %s, %a : tensor<64x32xi32>
    %mn = compute.minimum %mx, %b : tensor<64x32xi32>
    %n = compute.neg %mn : tensor<64x32xi32>
    %r = compute.relu %n : tensor<64x32xi32>
    %ar = coll.all_reduce %r {reduce_op = "sum", group = @w} : (tensor<64x32xi32>) -> tensor<64x32xi32>
    %arw = coll.wait_tensor %ar : tensor<64x32xi32>
    %t = compute.transpose %arw : (tensor<64x32xi32>) -> tensor<32x64xi32>
    // reduce_sum along the last (contiguous) and a strided dimension.
    %rs = compute.reduce_sum %a {dim = 1 : i64} : (tensor<64x32xi32>) -> tensor<64xi32>
    // int -> float and float -> int (saturating, truncating toward zero).
    %af = compute.cast %a : (tensor<64x32xi32>) -> tensor<64x32xf32>
    %fi = compute.cast %f : (tensor<64x32xbf16>) -> tensor<64x32xi8>
    %ci = compute.add %fi, %c : tensor<64x32xi8>
    // i64: division (truncating, MIN / -1 wraps), transpose.
    %d1 = compute.fill {value = 3.0 : f64} : tensor<16x8xi64>
    %dq = compute.div %d, %d1 : tensor<16x8xi64>
    %dt = compute.transpose %dq : (tensor<16x8xi64>) -> tensor<8x16xi64>
    // slice / concat.
    %sl = compute.slice %b {dim = 0 : i64, start = 16 : i64, size = 32 : i64} : (tensor<64x32xi32>) -> tensor<32x32xi32>
    %cc = compute.concat %ci, %c {dim = 0 : i64} : (tensor<64x32xi8>, tensor<64x32xi8>) -> tensor<128x32xi8>
    // Unsigned: div, max, relu compare unsigned.
    %u2 = compute.fill {value = 7.0 : f64} : tensor<64x32xui8>
    %uq = compute.div %u, %u2 : tensor<64x32xui8>
    %um = compute.maximum %uq, %u : tensor<64x32xui8>
    %ur = compute.relu %um : tensor<64x32xui8>
    // Sign- and zero-extension, truncation, int -> f16.
    %ue = compute.cast %ur : (tensor<64x32xui8>) -> tensor<64x32xi32>
    %ce = compute.cast %c : (tensor<64x32xi8>) -> tensor<64x32xi32>
    %se = compute.add %ue, %ce : tensor<64x32xi32>
    %sh = compute.cast %m2 : (tensor<64x32xi32>) -> tensor<64x32xf16>
    %w64 = compute.cast %m2 : (tensor<64x32xi32>) -> tensor<64x32xi64>
    %ag = coll.all_gather_into_tensor %se {group = @w} : (tensor<64x32xi32>) -> tensor<128x32xi32>
    %agw = coll.wait_tensor %ag : tensor<128x32xi32>
    return %t, %rs, %af, %ci, %dt, %sl, %cc, %ur, %se, %sh, %w64, %agw
        : tensor<32x64xi32>, tensor<64xi32>, tensor<64x32xf32>, tensor<64x32xi8>,
          tensor<8x16xi64>, tensor<32x32xi32>, tensor<128x32xi8>, tensor<64x32xui8>,
          tensor<64x32xi32>, tensor<64x32xf16>, tensor<64x32xi64>, tensor<128x32xi32>
  }
}
