// Integer kernels on the GPU against the sim (`commlir-run --backend cuda --check`, exact):
// wrapping add/sub/mul, signed and unsigned div/maximum/minimum/relu/neg, int<->int and
// int<->float casts both ways (bf16/f16 included, saturating float->int), reduce_sum,
// transpose/slice/concat on i8/i32/i64, and integer all_reduce / all_gather on 2 ranks.
// The generated inputs are small (|x| <= 16), so the edge cases are made in the program:
// i32/i16 products that wrap, bf16 * 1000 cast to i8/ui8 (saturation), NaN and inf cast to
// i32 (0 and INT_MAX), MIN / -1 for i32 and i64 (wraps to MIN), neg of MIN, negative i32
// reinterpreted as ui32 (unsigned div/max, uitofp), i64 beyond 2^53 cast to f32/bf16.
// No divisor is ever zero (the sim rejects a division by zero).
module {
  coll.group @w {size = 2 : i64}
  func.func @main(%a: tensor<64x32xi32>, %b: tensor<64x32xi32>, %c: tensor<64x32xi8>,
                  %d: tensor<16x8xi64>, %u: tensor<64x32xui8>, %f: tensor<64x32xbf16>)
      -> (tensor<32x64xi32>, tensor<64xi32>, tensor<64x32xf32>, tensor<64x32xi8>,
          tensor<8x16xi64>, tensor<32x32xi32>, tensor<128x32xi8>, tensor<64x32xui8>,
          tensor<64x32xi32>, tensor<64x32xf16>, tensor<64x32xi64>, tensor<128x32xi32>,
          tensor<64x32xi32>, tensor<64x32xi16>, tensor<64x32xi8>, tensor<64x32xui8>,
          tensor<64x32xi32>, tensor<64x32xi32>, tensor<16x8xi64>, tensor<16x8xi64>,
          tensor<64x32xui32>, tensor<64x32xf32>, tensor<16x8xf32>, tensor<16x8xbf16>,
          tensor<8xi64>, tensor<32xui8>) {
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
    // Edge cases. i32 and i16 wrap (2^28 * x, then doubled; 4096 * x * x).
    %p28 = compute.fill {value = 268435456.0 : f64} : tensor<64x32xi32>
    %w1 = compute.mul %a, %p28 : tensor<64x32xi32>
    %w2 = compute.add %w1, %w1 : tensor<64x32xi32>
    %a16 = compute.cast %a : (tensor<64x32xi32>) -> tensor<64x32xi16>
    %p12 = compute.fill {value = 4096.0 : f64} : tensor<64x32xi16>
    %h1 = compute.mul %a16, %p12 : tensor<64x32xi16>
    %h2 = compute.mul %h1, %a16 : tensor<64x32xi16>
    // bf16 * 1000 to i8 and ui8: saturates at -128/127 and 0/255, truncates toward zero.
    %fk = compute.scale %f {factor = 1000.0 : f64} : tensor<64x32xbf16>
    %s8 = compute.cast %fk : (tensor<64x32xbf16>) -> tensor<64x32xi8>
    %u8 = compute.cast %fk : (tensor<64x32xbf16>) -> tensor<64x32xui8>
    // NaN (0/0) -> 0 and +-inf (x/0) -> INT_MAX / INT_MIN.
    %z = compute.fill {value = 0.0 : f64} : tensor<64x32xf32>
    %nan = compute.div %z, %z : tensor<64x32xf32>
    %ni = compute.cast %nan : (tensor<64x32xf32>) -> tensor<64x32xi32>
    %inf = compute.div %af, %z : tensor<64x32xf32>
    %ii = compute.cast %inf : (tensor<64x32xf32>) -> tensor<64x32xi32>
    // MIN / -1 wraps to MIN (i32 in a fused chain, i64); neg MIN = MIN.
    %mn32 = compute.fill {value = -2147483648.0 : f64} : tensor<64x32xi32>
    %m1_32 = compute.fill {value = -1.0 : f64} : tensor<64x32xi32>
    %q32 = compute.div %mn32, %m1_32 : tensor<64x32xi32>
    %q32b = compute.add %q32, %ni : tensor<64x32xi32>
    %mn64 = compute.fill {value = -9223372036854775808.0 : f64} : tensor<16x8xi64>
    %m1_64 = compute.fill {value = -1.0 : f64} : tensor<16x8xi64>
    %q64 = compute.div %mn64, %m1_64 : tensor<16x8xi64>
    %q64n = compute.neg %q64 : tensor<16x8xi64>
    %q64d = compute.sub %q64n, %d : tensor<16x8xi64>
    %dd = compute.div %q64d, %d1 : tensor<16x8xi64>
    // Negative i32 as ui32: unsigned division and maximum, then uitofp.
    %ua = compute.cast %a : (tensor<64x32xi32>) -> tensor<64x32xui32>
    %u3 = compute.fill {value = 3.0 : f64} : tensor<64x32xui32>
    %uaq = compute.div %ua, %u3 : tensor<64x32xui32>
    %uam = compute.maximum %uaq, %ua : tensor<64x32xui32>
    %uaf = compute.cast %uam : (tensor<64x32xui32>) -> tensor<64x32xf32>
    // i64 beyond 2^53 to f32 and bf16 (through f64, as the sim).
    %k40 = compute.fill {value = 1099511627777.0 : f64} : tensor<16x8xi64>
    %k61 = compute.fill {value = 2305843009213693952.0 : f64} : tensor<16x8xi64>
    %bd = compute.mul %d, %k40 : tensor<16x8xi64>
    %bd2 = compute.add %bd, %k61 : tensor<16x8xi64>
    %bf = compute.cast %bd2 : (tensor<16x8xi64>) -> tensor<16x8xf32>
    %bb = compute.cast %bd2 : (tensor<16x8xi64>) -> tensor<16x8xbf16>
    // reduce_sum along a strided dimension (i64) and a wrapping ui8 sum.
    %rs0 = compute.reduce_sum %bd2 {dim = 0 : i64} : (tensor<16x8xi64>) -> tensor<8xi64>
    %us = compute.slice %u {dim = 1 : i64, start = 0 : i64, size = 32 : i64} : (tensor<64x32xui8>) -> tensor<64x32xui8>
    %ust = compute.transpose %us : (tensor<64x32xui8>) -> tensor<32x64xui8>
    %rsu = compute.reduce_sum %ust {dim = 1 : i64} : (tensor<32x64xui8>) -> tensor<32xui8>
    return %t, %rs, %af, %ci, %dt, %sl, %cc, %ur, %se, %sh, %w64, %agw,
           %w2, %h2, %s8, %u8, %q32b, %ii, %q64, %dd, %uam, %uaf, %bf, %bb, %rs0, %rsu
        : tensor<32x64xi32>, tensor<64xi32>, tensor<64x32xf32>, tensor<64x32xi8>,
          tensor<8x16xi64>, tensor<32x32xi32>, tensor<128x32xi8>, tensor<64x32xui8>,
          tensor<64x32xi32>, tensor<64x32xf16>, tensor<64x32xi64>, tensor<128x32xi32>,
          tensor<64x32xi32>, tensor<64x32xi16>, tensor<64x32xi8>, tensor<64x32xui8>,
          tensor<64x32xi32>, tensor<64x32xi32>, tensor<16x8xi64>, tensor<16x8xi64>,
          tensor<64x32xui32>, tensor<64x32xf32>, tensor<16x8xf32>, tensor<16x8xbf16>,
          tensor<8xi64>, tensor<32xui8>
  }
}
