// The values of the compute ops Llama blocks need (broadcast, permute, reduce_max, sin, cos,
// sigmoid, log, compare, select, iota) on the sim backend, built from iota so that every
// expected number follows from the op's definition: index math of broadcast and permute on
// rank-3 and rank-4 shapes, NaN propagation, bf16 rounding of every result, integer wrapping
// and unsigned comparison.
//
// REQUIRES: commlir-run
// RUN: commlir-run %s --ranks 1 --entry broadcast_permute --print full | FileCheck %s --check-prefix=BP
// RUN: commlir-run %s --ranks 1 --entry reduce_unary --print full | FileCheck %s --check-prefix=RU
// RUN: commlir-run %s --ranks 1 --entry masks --print full | FileCheck %s --check-prefix=MK
// RUN: commlir-run %s --ranks 1 --entry iotas --print full | FileCheck %s --check-prefix=IO

// a[0, i, 0, k] = 10i + k, broadcast over dims 0 and 2: each (b, i) holds [10i, 10i+1] twice.
// BP: rank 0 result 0: tensor<2x3x2x2xf32>
// BP-NEXT: [0.0, 1.0, 0.0, 1.0, 10.0, 11.0, 10.0, 11.0, 20.0, 21.0, 20.0, 21.0, 0.0, 1.0, 0.0, 1.0, 10.0, 11.0, 10.0, 11.0, 20.0, 21.0, 20.0, 21.0]
// A rank-1 i32 tensor broadcast to 2x3 (a new leading dim).
// BP: rank 0 result 1: tensor<2x3xi32>
// BP-NEXT: [0, 1, 2, 0, 1, 2]
// x[i, j, k, l] = 1000i + 100j + 10k + l (2x3x2x2), perm [3, 1, 0, 2]: result (a, b, c, d)
// is x[c, b, d, a] = 1000c + 100b + 10d + a.
// BP: rank 0 result 2: tensor<2x3x2x2xi32>
// BP-NEXT: [0, 10, 1000, 1010, 100, 110, 1100, 1110, 200, 210, 1200, 1210, 1, 11, 1001, 1011, 101, 111, 1101, 1111, 201, 211, 1201, 1211]
// y[i, j, k] = 100i + 10j + k as bf16 (2x2x3), perm [2, 0, 1]: (a, b, c) is y[b, c, a].
// BP: rank 0 result 3: tensor<3x2x2xbf16>
// BP-NEXT: [0.0, 10.0, 100.0, 110.0, 1.0, 11.0, 101.0, 111.0, 2.0, 12.0, 102.0, 112.0]
// An i1 mask broadcast along a middle dim (4 → 2x3x4 needs no repeat of dim 0).
// BP: rank 0 result 4: tensor<2x3x4xi1>
// BP-NEXT: [1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0]
func.func @broadcast_permute() -> (tensor<2x3x2x2xf32>, tensor<2x3xi32>, tensor<2x3x2x2xi32>, tensor<3x2x2xbf16>, tensor<2x3x4xi1>) {
  %i = compute.iota {dim = 1 : i64} : tensor<1x3x1x2xf32>
  %k = compute.iota {dim = 3 : i64} : tensor<1x3x1x2xf32>
  %i10 = compute.scale %i {factor = 10.0 : f64} : tensor<1x3x1x2xf32>
  %a = compute.add %i10, %k : tensor<1x3x1x2xf32>
  %r0 = compute.broadcast %a : (tensor<1x3x1x2xf32>) -> tensor<2x3x2x2xf32>

  %v = compute.iota {dim = 0 : i64} : tensor<3xi32>
  %r1 = compute.broadcast %v : (tensor<3xi32>) -> tensor<2x3xi32>

  %x0 = compute.iota {dim = 0 : i64} : tensor<2x3x2x2xi32>
  %x1 = compute.iota {dim = 1 : i64} : tensor<2x3x2x2xi32>
  %x2 = compute.iota {dim = 2 : i64} : tensor<2x3x2x2xi32>
  %x3 = compute.iota {dim = 3 : i64} : tensor<2x3x2x2xi32>
  %c1000 = compute.fill {value = 1000.0 : f64} : tensor<2x3x2x2xi32>
  %c100 = compute.fill {value = 100.0 : f64} : tensor<2x3x2x2xi32>
  %c10 = compute.fill {value = 10.0 : f64} : tensor<2x3x2x2xi32>
  %t0 = compute.mul %x0, %c1000 : tensor<2x3x2x2xi32>
  %t1 = compute.mul %x1, %c100 : tensor<2x3x2x2xi32>
  %t2 = compute.mul %x2, %c10 : tensor<2x3x2x2xi32>
  %s0 = compute.add %t0, %t1 : tensor<2x3x2x2xi32>
  %s1 = compute.add %s0, %t2 : tensor<2x3x2x2xi32>
  %x = compute.add %s1, %x3 : tensor<2x3x2x2xi32>
  %r2 = compute.permute %x {perm = array<i64: 3, 1, 0, 2>} : (tensor<2x3x2x2xi32>) -> tensor<2x3x2x2xi32>

  // y[i, j, k] = 100i + 10j + k: exact in bf16 up to 112 (8 significant bits).
  %y0 = compute.iota {dim = 0 : i64} : tensor<2x2x3xbf16>
  %y1 = compute.iota {dim = 1 : i64} : tensor<2x2x3xbf16>
  %y2 = compute.iota {dim = 2 : i64} : tensor<2x2x3xbf16>
  %y0s = compute.scale %y0 {factor = 100.0 : f64} : tensor<2x2x3xbf16>
  %y1s = compute.scale %y1 {factor = 10.0 : f64} : tensor<2x2x3xbf16>
  %ya = compute.add %y0s, %y1s : tensor<2x2x3xbf16>
  %y = compute.add %ya, %y2 : tensor<2x2x3xbf16>
  %r3 = compute.permute %y {perm = array<i64: 2, 0, 1>} : (tensor<2x2x3xbf16>) -> tensor<3x2x2xbf16>

  %m0 = compute.iota {dim = 0 : i64} : tensor<4xi32>
  %two = compute.fill {value = 2.0 : f64} : tensor<4xi32>
  %m1 = compute.div %m0, %two : tensor<4xi32>
  %m2 = compute.mul %m1, %two : tensor<4xi32>
  %even = compute.compare %m0, %m2 {predicate = "eq"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  %r4 = compute.broadcast %even : (tensor<4xi1>) -> tensor<2x3x4xi1>
  return %r0, %r1, %r2, %r3, %r4 : tensor<2x3x2x2xf32>, tensor<2x3xi32>, tensor<2x3x2x2xi32>, tensor<3x2x2xbf16>, tensor<2x3x4xi1>
}

// reduce_max of t[i, j] = (j - 2)·(i + 1) (4x5): rows keep their last (largest) entry; over
// dim 0 a column's largest is the last row's when positive, the first row's when negative.
// Row 3 of the f32 copy has a NaN (log of -1), which wins its lane in either dim.
// RU: rank 0 result 0: tensor<4xf32>
// RU-NEXT: [2.0, 4.0, 6.0, NaN]
// RU: rank 0 result 1: tensor<5xf32>
// RU-NEXT: [-2.0, -1.0, NaN, NaN, NaN]
// The same in i8, and in ui8 (wrapped: -1 is 255, the largest of row 0; -2 is 254).
// RU: rank 0 result 2: tensor<4xi8>
// RU-NEXT: [2, 4, 6, 8]
// RU: rank 0 result 3: tensor<4xui8>
// RU-NEXT: [255, 254, 253, 252]
// sin, cos, sigmoid, log of [0, 1, 2, 3] in f32 (libm values rounded to f32) and in bf16
// (those rounded again to 8 significant bits); log(0) = -inf. sigmoid is 1/(1 + e^-x) in f32
// for f32, as defined (one ulp below the correctly rounded 0.8807971 at 2).
// RU: rank 0 result 4: tensor<4xf32>
// RU-NEXT: [0.0, 0.84147096, 0.9092974, 0.14112]
// RU: rank 0 result 5: tensor<4xf32>
// RU-NEXT: [1.0, 0.5403023, -0.41614684, -0.9899925]
// RU: rank 0 result 6: tensor<4xf32>
// RU-NEXT: [0.5, 0.7310586, 0.880797, 0.95257413]
// RU: rank 0 result 7: tensor<4xf32>
// RU-NEXT: [-inf, 0.0, 0.6931472, 1.0986123]
// RU: rank 0 result 8: tensor<4xbf16>
// RU-NEXT: [0.0, 0.83984375, 0.91015625, 0.14160156]
// RU: rank 0 result 9: tensor<4xbf16>
// RU-NEXT: [1.0, 0.5390625, -0.41601563, -0.98828125]
// RU: rank 0 result 10: tensor<4xbf16>
// RU-NEXT: [0.5, 0.73046875, 0.87890625, 0.953125]
// RU: rank 0 result 11: tensor<4xbf16>
// RU-NEXT: [-inf, 0.0, 0.69140625, 1.1015625]
func.func @reduce_unary() -> (tensor<4xf32>, tensor<5xf32>, tensor<4xi8>, tensor<4xui8>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>) {
  %i = compute.iota {dim = 0 : i64} : tensor<4x5xi8>
  %j = compute.iota {dim = 1 : i64} : tensor<4x5xi8>
  %one = compute.fill {value = 1.0 : f64} : tensor<4x5xi8>
  %two = compute.fill {value = 2.0 : f64} : tensor<4x5xi8>
  %i1 = compute.add %i, %one : tensor<4x5xi8>
  %j2 = compute.sub %j, %two : tensor<4x5xi8>
  %t = compute.mul %j2, %i1 : tensor<4x5xi8>
  %tf = compute.cast %t : (tensor<4x5xi8>) -> tensor<4x5xf32>
  // NaN at [3, 2..4]: log(-1) where the mask says so.
  %rows = compute.iota {dim = 0 : i64} : tensor<4x5xf32>
  %cols = compute.iota {dim = 1 : i64} : tensor<4x5xf32>
  %three = compute.fill {value = 3.0 : f64} : tensor<4x5xf32>
  %last = compute.compare %rows, %three {predicate = "eq"} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xi1>
  %twof = compute.fill {value = 2.0 : f64} : tensor<4x5xf32>
  %right = compute.compare %cols, %twof {predicate = "ge"} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xi1>
  %both = compute.select %last, %right, %last : (tensor<4x5xi1>, tensor<4x5xi1>, tensor<4x5xi1>) -> tensor<4x5xi1>
  %m1 = compute.fill {value = -1.0 : f64} : tensor<4x5xf32>
  %nan = compute.log %m1 : tensor<4x5xf32>
  %tn = compute.select %both, %nan, %tf : (tensor<4x5xi1>, tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %r0 = compute.reduce_max %tn {dim = 1 : i64} : (tensor<4x5xf32>) -> tensor<4xf32>
  %r1 = compute.reduce_max %tn {dim = 0 : i64} : (tensor<4x5xf32>) -> tensor<5xf32>
  %r2 = compute.reduce_max %t {dim = 1 : i64} : (tensor<4x5xi8>) -> tensor<4xi8>
  %tu = compute.cast %t : (tensor<4x5xi8>) -> tensor<4x5xui8>
  %r3 = compute.reduce_max %tu {dim = 1 : i64} : (tensor<4x5xui8>) -> tensor<4xui8>

  %x = compute.iota {dim = 0 : i64} : tensor<4xf32>
  %r4 = compute.sin %x : tensor<4xf32>
  %r5 = compute.cos %x : tensor<4xf32>
  %r6 = compute.sigmoid %x : tensor<4xf32>
  %r7 = compute.log %x : tensor<4xf32>
  %xb = compute.iota {dim = 0 : i64} : tensor<4xbf16>
  %r8 = compute.sin %xb : tensor<4xbf16>
  %r9 = compute.cos %xb : tensor<4xbf16>
  %r10 = compute.sigmoid %xb : tensor<4xbf16>
  %r11 = compute.log %xb : tensor<4xbf16>
  return %r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9, %r10, %r11 : tensor<4xf32>, tensor<5xf32>, tensor<4xi8>, tensor<4xui8>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>
}

// compare of [0, 1, 2, NaN] with 1 under each predicate (NaN: only "ne" holds); signed i8
// [-2, -1, 0, 1] < 0 and the same bits as ui8 [254, 255, 0, 1] < 1.
// MK: rank 0 result 0: tensor<6x4xi1>
// MK-NEXT: [0, 1, 0, 0, 1, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0]
// MK: rank 0 result 1: tensor<4xi1>
// MK-NEXT: [1, 1, 0, 0]
// MK: rank 0 result 2: tensor<4xi1>
// MK-NEXT: [0, 0, 1, 0]
// A causal mask (key <= query) selecting bf16 scores (q + k/4) or -inf; an i1 select of
// (key >= query) inside the mask and the (false) mask outside: the diagonal.
// MK: rank 0 result 3: tensor<3x3xbf16>
// MK-NEXT: [0.0, -inf, -inf, 1.0, 1.25, -inf, 2.0, 2.25, 2.5]
// MK: rank 0 result 4: tensor<3x3xi1>
// MK-NEXT: [1, 0, 0, 0, 1, 0, 0, 0, 1]
func.func @masks() -> (tensor<6x4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<3x3xbf16>, tensor<3x3xi1>) {
  %x = compute.iota {dim = 0 : i64} : tensor<4xf32>
  %three = compute.fill {value = 3.0 : f64} : tensor<4xf32>
  %is3 = compute.compare %x, %three {predicate = "eq"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %neg = compute.fill {value = -1.0 : f64} : tensor<4xf32>
  %nan = compute.log %neg : tensor<4xf32>
  %a = compute.select %is3, %nan, %x : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = compute.fill {value = 1.0 : f64} : tensor<4xf32>
  %eq = compute.compare %a, %b {predicate = "eq"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %ne = compute.compare %a, %b {predicate = "ne"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %lt = compute.compare %a, %b {predicate = "lt"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %le = compute.compare %a, %b {predicate = "le"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %gt = compute.compare %a, %b {predicate = "gt"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %ge = compute.compare %a, %b {predicate = "ge"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %all = compute.concat %eq, %ne, %lt, %le, %gt, %ge {dim = 0 : i64} : (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) -> tensor<24xi1>
  %r0 = compute.reshape %all : (tensor<24xi1>) -> tensor<6x4xi1>

  %n = compute.iota {dim = 0 : i64} : tensor<4xi8>
  %two = compute.fill {value = 2.0 : f64} : tensor<4xi8>
  %s = compute.sub %n, %two : tensor<4xi8>
  %zero = compute.fill {value = 0.0 : f64} : tensor<4xi8>
  %r1 = compute.compare %s, %zero {predicate = "lt"} : (tensor<4xi8>, tensor<4xi8>) -> tensor<4xi1>
  %u = compute.cast %s : (tensor<4xi8>) -> tensor<4xui8>
  %one = compute.fill {value = 1.0 : f64} : tensor<4xui8>
  %r2 = compute.compare %u, %one {predicate = "lt"} : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xi1>

  %q = compute.iota {dim = 0 : i64} : tensor<3x3xbf16>
  %k = compute.iota {dim = 1 : i64} : tensor<3x3xbf16>
  %causal = compute.compare %k, %q {predicate = "le"} : (tensor<3x3xbf16>, tensor<3x3xbf16>) -> tensor<3x3xi1>
  %k4 = compute.scale %k {factor = 0.25 : f64} : tensor<3x3xbf16>
  %sc = compute.add %q, %k4 : tensor<3x3xbf16>
  %ninf = compute.fill {value = 0xFFF0000000000000 : f64} : tensor<3x3xbf16>
  %r3 = compute.select %causal, %sc, %ninf : (tensor<3x3xi1>, tensor<3x3xbf16>, tensor<3x3xbf16>) -> tensor<3x3xbf16>
  %upper = compute.compare %k, %q {predicate = "ge"} : (tensor<3x3xbf16>, tensor<3x3xbf16>) -> tensor<3x3xi1>
  %r4 = compute.select %causal, %upper, %causal : (tensor<3x3xi1>, tensor<3x3xi1>, tensor<3x3xi1>) -> tensor<3x3xi1>
  return %r0, %r1, %r2, %r3, %r4 : tensor<6x4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<3x3xbf16>, tensor<3x3xi1>
}

// iota converts each index like a cast from f64: bf16 rounds 257 to 256 and 259 to 260 (ties
// to even), i8 wraps 128 to -128, i1 keeps the low bit; f64 and i64 count exactly.
// IO: rank 0 result 0: tensor<6xbf16>
// IO-NEXT: [255.0, 256.0, 256.0, 258.0, 260.0, 260.0]
// IO: rank 0 result 1: tensor<4xi8>
// IO-NEXT: [126, 127, -128, -127]
// IO: rank 0 result 2: tensor<2x3xi1>
// IO-NEXT: [0, 1, 0, 0, 1, 0]
// IO: rank 0 result 3: tensor<2x2x2xf64>
// IO-NEXT: [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
// IO: rank 0 result 4: tensor<2x3xi64>
// IO-NEXT: [0, 0, 0, 1, 1, 1]
func.func @iotas() -> (tensor<6xbf16>, tensor<4xi8>, tensor<2x3xi1>, tensor<2x2x2xf64>, tensor<2x3xi64>) {
  %b = compute.iota {dim = 1 : i64} : tensor<1x300xbf16>
  %b1 = compute.slice %b {dim = 1 : i64, start = 255 : i64, size = 6 : i64} : (tensor<1x300xbf16>) -> tensor<1x6xbf16>
  %r0 = compute.reshape %b1 : (tensor<1x6xbf16>) -> tensor<6xbf16>
  %i = compute.iota {dim = 0 : i64} : tensor<300xi8>
  %r1 = compute.slice %i {dim = 0 : i64, start = 126 : i64, size = 4 : i64} : (tensor<300xi8>) -> tensor<4xi8>
  %r2 = compute.iota {dim = 1 : i64} : tensor<2x3xi1>
  %r3 = compute.iota {dim = 1 : i64} : tensor<2x2x2xf64>
  %r4 = compute.iota {dim = 0 : i64} : tensor<2x3xi64>
  return %r0, %r1, %r2, %r3, %r4 : tensor<6xbf16>, tensor<4xi8>, tensor<2x3xi1>, tensor<2x2x2xf64>, tensor<2x3xi64>
}
