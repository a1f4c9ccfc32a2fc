// i1 (bool) kernels and collectives on the GPU against the sim (`commlir-run --backend cuda
// --ranks 2 --check`, exact): an i1 is one byte holding 0 or 1 (as torch.bool) whatever its
// spelling (i1, si1, ui1), read unsigned (true is 1, not -1), with the sim's wrapping
// semantics: add/sub = xor, mul = and, maximum = or, minimum = and, neg/relu = identity,
// reduce_sum = parity; float -> i1 truncates toward zero and saturates to [0, 1] (NaN -> 0),
// int -> i1 keeps the low bit, i1 -> int zero-extends, i1 -> float is 0.0 / 1.0. The
// collectives move bytes (NCCL u8): max (or), min (and) and product (and) all-reduces, a max
// reduce-scatter, all_gather, all_to_all and broadcast. (A sum or avg reduction of i1 is
// rejected by comm-to-rt: NCCL cannot reproduce the sim's xor.) The generated inputs are
// 0/1 for i1, small integers (|x| <= 8) and floats in [-1, 1), so the float edges are made
// in the program: x * 3 in [-3, 3) straddles 1, NaN (0/0) and +-inf (x/0).
module {
  coll.group @w {size = 2 : i64}
  func.func @main(%p: tensor<64x32xi1>, %q: tensor<64x32xi1>, %r: tensor<64x32xi1>,
                  %u: tensor<64x32xui1>,
                  %x: tensor<64x32xf32>, %h: tensor<64x32xbf16>, %c: tensor<64x32xi8>,
                  %z: tensor<64x32xi32>, %d: tensor<16x8xi64>, %s: tensor<33x7xsi1>)
      -> (tensor<64x32xi8>, tensor<64x32xi1>, tensor<64x32xi1>, tensor<64x32xi1>,
          tensor<64x32xi1>, tensor<64x32xi1>, tensor<64x32xi1>, tensor<64x32xi1>,
          tensor<16x8xi1>, tensor<64x32xi8>, tensor<64x32xf32>, tensor<64x32xbf16>,
          tensor<64x32xui64>, tensor<64x32xui1>, tensor<64x32xi1>, tensor<64xi1>,
          tensor<32xi1>, tensor<32x64xi1>, tensor<32x32xi1>, tensor<128x32xi1>,
          tensor<64x32xi1>, tensor<64x32xi1>, tensor<64x32xi1>, tensor<32x32xi1>,
          tensor<128x32xi1>, tensor<64x32xi1>, tensor<64x32xi1>, tensor<33x7xsi1>,
          tensor<7xsi1>, tensor<64x32xf64>) {
    // A full adder: carry = majority(p, q, r) = (p xor q) and r or (p and q), sum = p xor q
    // xor r (add/sub = xor, mul/minimum = and, maximum = or; neg and relu are identities).
    %x1 = compute.add %p, %q : tensor<64x32xi1>
    %a1 = compute.mul %x1, %r : tensor<64x32xi1>
    %pq = compute.minimum %p, %q : tensor<64x32xi1>
    %cy = compute.maximum %a1, %pq : tensor<64x32xi1>
    %n1 = compute.neg %cy : tensor<64x32xi1>
    %m1 = compute.relu %n1 : tensor<64x32xi1>
    %s1 = compute.sub %x1, %r : tensor<64x32xi1>
    // 2 carry + sum - (p + q + r) in i8: all zero (i1 -> int zero-extends).
    %c8 = compute.cast %m1 : (tensor<64x32xi1>) -> tensor<64x32xi8>
    %s8 = compute.cast %s1 : (tensor<64x32xi1>) -> tensor<64x32xi8>
    %two = compute.fill {value = 2.0 : f64} : tensor<64x32xi8>
    %c2 = compute.mul %c8, %two : tensor<64x32xi8>
    %fa = compute.add %c2, %s8 : tensor<64x32xi8>
    %p8 = compute.cast %p : (tensor<64x32xi1>) -> tensor<64x32xi8>
    %q8 = compute.cast %q : (tensor<64x32xi1>) -> tensor<64x32xi8>
    %r8 = compute.cast %r : (tensor<64x32xi1>) -> tensor<64x32xi8>
    %pq8 = compute.add %p8, %q8 : tensor<64x32xi8>
    %pqr8 = compute.add %pq8, %r8 : tensor<64x32xi8>
    %chk = compute.sub %fa, %pqr8 : tensor<64x32xi8>
    // Division by max(q, 1) = 1 (the sim rejects a division by zero).
    %one = compute.fill {value = 1.0 : f64} : tensor<64x32xi1>
    %dv = compute.maximum %q, %one : tensor<64x32xi1>
    %qt = compute.div %p, %dv : tensor<64x32xi1>
    // float -> i1: 1 exactly where x * 3 >= 1 (f32 and bf16), NaN -> 0, +inf -> 1, -inf -> 0.
    %x3 = compute.scale %x {factor = 3.0 : f64} : tensor<64x32xf32>
    %fb = compute.cast %x3 : (tensor<64x32xf32>) -> tensor<64x32xi1>
    %h3 = compute.scale %h {factor = 3.0 : f64} : tensor<64x32xbf16>
    %hb = compute.cast %h3 : (tensor<64x32xbf16>) -> tensor<64x32xi1>
    %zf = compute.fill {value = 0.0 : f64} : tensor<64x32xf32>
    %nan = compute.div %zf, %zf : tensor<64x32xf32>
    %nb = compute.cast %nan : (tensor<64x32xf32>) -> tensor<64x32xi1>
    %inf = compute.div %x, %zf : tensor<64x32xf32>
    %ib = compute.cast %inf : (tensor<64x32xf32>) -> tensor<64x32xi1>
    %fin = compute.maximum %nb, %ib : tensor<64x32xi1>
    // int -> i1 keeps the low bit (negative i8, wrapped i32, i64).
    %cb = compute.cast %c : (tensor<64x32xi8>) -> tensor<64x32xi1>
    %k = compute.fill {value = 1073741825.0 : f64} : tensor<64x32xi32>
    %zk = compute.mul %z, %k : tensor<64x32xi32>
    %zb = compute.cast %zk : (tensor<64x32xi32>) -> tensor<64x32xi1>
    %db = compute.cast %d : (tensor<16x8xi64>) -> tensor<16x8xi1>
    // i1 -> int zero-extends (neg then gives -1), i1 -> float is 0.0 / 1.0 (a mask).
    %pi8 = compute.cast %p : (tensor<64x32xi1>) -> tensor<64x32xi8>
    %pn = compute.neg %pi8 : tensor<64x32xi8>
    %pc = compute.add %pn, %c : tensor<64x32xi8>
    %pf = compute.cast %q : (tensor<64x32xi1>) -> tensor<64x32xf32>
    %mx = compute.mul %x, %pf : tensor<64x32xf32>
    %ub = compute.cast %u : (tensor<64x32xui1>) -> tensor<64x32xbf16>
    %uh = compute.add %ub, %h : tensor<64x32xbf16>
    %u64 = compute.cast %u : (tensor<64x32xui1>) -> tensor<64x32xui64>
    // Between spellings, and fills (0.5 -> 0, 1.5 -> 1, -3 -> 0, 1e30 -> 1).
    %pu = compute.cast %p : (tensor<64x32xi1>) -> tensor<64x32xui1>
    %uu = compute.add %pu, %u : tensor<64x32xui1>
    %f05 = compute.fill {value = 0.5 : f64} : tensor<64x32xi1>
    %f15 = compute.fill {value = 1.5 : f64} : tensor<64x32xi1>
    %fm3 = compute.fill {value = -3.0 : f64} : tensor<64x32xi1>
    %fbig = compute.fill {value = 1.0e30 : f64} : tensor<64x32xi1>
    %g1 = compute.add %p, %f05 : tensor<64x32xi1>
    %g2 = compute.sub %g1, %f15 : tensor<64x32xi1>
    %g3 = compute.maximum %g2, %fm3 : tensor<64x32xi1>
    %g4 = compute.minimum %g3, %fbig : tensor<64x32xi1>
    // reduce_sum: parity along the contiguous and a strided dimension.
    %rs1 = compute.reduce_sum %p {dim = 1 : i64} : (tensor<64x32xi1>) -> tensor<64xi1>
    %rs0 = compute.reduce_sum %q {dim = 0 : i64} : (tensor<64x32xi1>) -> tensor<32xi1>
    // Data movement: transpose, slice, concat, clone of an odd size (scalar tail).
    %t = compute.transpose %m1 : (tensor<64x32xi1>) -> tensor<32x64xi1>
    %sl = compute.slice %s1 {dim = 0 : i64, start = 16 : i64, size = 32 : i64} : (tensor<64x32xi1>) -> tensor<32x32xi1>
    %cc = compute.concat %fb, %hb {dim = 0 : i64} : (tensor<64x32xi1>, tensor<64x32xi1>) -> tensor<128x32xi1>
    %sc = compute.clone %s : tensor<33x7xsi1>
    %srs = compute.reduce_sum %s {dim = 0 : i64} : (tensor<33x7xsi1>) -> tensor<7xsi1>
    // i1 -> f64 through a chain.
    %fd = compute.cast %s1 : (tensor<64x32xi1>) -> tensor<64x32xf64>
    // Collectives on the bytes: or / and / and all-reduces, a max reduce-scatter,
    // all_gather, all_to_all and broadcast.
    %ar = coll.all_reduce %s1 {reduce_op = "max", group = @w} : (tensor<64x32xi1>) -> tensor<64x32xi1>
    %arw = coll.wait_tensor %ar : tensor<64x32xi1>
    %an = coll.all_reduce %m1 {reduce_op = "min", group = @w} : (tensor<64x32xi1>) -> tensor<64x32xi1>
    %anw = coll.wait_tensor %an : tensor<64x32xi1>
    %ap = coll.all_reduce %cb {reduce_op = "product", group = @w} : (tensor<64x32xi1>) -> tensor<64x32xi1>
    %apw = coll.wait_tensor %ap : tensor<64x32xi1>
    %rsc = coll.reduce_scatter_tensor %zb {reduce_op = "max", group = @w} : (tensor<64x32xi1>) -> tensor<32x32xi1>
    %rscw = coll.wait_tensor %rsc : tensor<32x32xi1>
    %ag = coll.all_gather_into_tensor %fin {group = @w} : (tensor<64x32xi1>) -> tensor<128x32xi1>
    %agw = coll.wait_tensor %ag : tensor<128x32xi1>
    %a2a = coll.all_to_all_single %uu {group = @w} : tensor<64x32xui1>
    %a2aw = coll.wait_tensor %a2a : tensor<64x32xui1>
    %a2ai = compute.cast %a2aw : (tensor<64x32xui1>) -> tensor<64x32xi1>
    %bc = coll.broadcast %g4 {src = 1 : i64, group = @w} : tensor<64x32xi1>
    %bcw = coll.wait_tensor %bc : tensor<64x32xi1>
    return %chk, %s1, %qt, %fb, %hb, %fin, %cb, %zb, %db, %pc, %mx, %uh, %u64, %uu, %g4,
           %rs1, %rs0, %t, %sl, %cc, %arw, %anw, %apw, %rscw, %agw, %a2ai, %bcw, %sc, %srs, %fd
        : tensor<64x32xi8>, tensor<64x32xi1>, tensor<64x32xi1>, tensor<64x32xi1>,
          tensor<64x32xi1>, tensor<64x32xi1>, tensor<64x32xi1>, tensor<64x32xi1>,
          tensor<16x8xi1>, tensor<64x32xi8>, tensor<64x32xf32>, tensor<64x32xbf16>,
          tensor<64x32xui64>, tensor<64x32xui1>, tensor<64x32xi1>, tensor<64xi1>,
          tensor<32xi1>, tensor<32x64xi1>, tensor<32x32xi1>, tensor<128x32xi1>,
          tensor<64x32xi1>, tensor<64x32xi1>, tensor<64x32xi1>, tensor<32x32xi1>,
          tensor<128x32xi1>, tensor<64x32xi1>, tensor<64x32xi1>, tensor<33x7xsi1>,
          tensor<7xsi1>, tensor<64x32xf64>
  }
}
