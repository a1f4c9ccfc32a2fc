// Kernels of the model ops: sin/cos/log through the f64 helpers (FMA polynomials, no
// approximate instruction, even for a bf16 log), compare/sigmoid/select fused into one
// kernel, permute/broadcast as gathers copying bits, reduce_max folding with max.NaN, iota
// writing indices; every call inlined.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=rt | FileCheck %s --check-prefix=RT
// RUN: commlir-translate %s --emit=llvm-ir > %t.ll
// RUN: FileCheck %s --check-prefix=LL < %t.ll
// RUN: llc -mcpu=sm_90 -mattr=+ptx80 %t.ll -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// RT: rt.kernel @k0_sin_cos
// RT: rt.kernel @k1_log
// RT: rt.kernel @k2_compare_sigmoid_select
// RT: rt.kernel @k3_permute
// RT: rt.kernel @k4_broadcast
// RT: rt.kernel @k5_reduce_max
// RT: rt.kernel @k6_iota
// An iota reads nothing: its launch passes the result alone.
// RT: rt.launch %{{[0-9]+}} {block = 256 : i64, grid = 1 : i64, kernel = @k6_iota} : memref<4x8xi64>

// The helpers are inlined (the optimized module keeps only the kernels).
// LL-NOT: define internal
// LL-LABEL: define ptx_kernel void @k0_sin_cos(
// LL: call double @llvm.rint.f64(
// LL: call double @llvm.fma.f64(double %{{.*}}, double 0x3FF921FB54400000
// LL: fptrunc double {{.*}} to float
// LL-LABEL: define ptx_kernel void @k2_compare_sigmoid_select(
// LL: fcmp olt float
// LL: select i1

// PTX-LABEL: .entry k0_sin_cos(
// PTX-NOT: .approx.
// PTX: fma.rn.f64
// PTX: cvt.rn.f32.f64
// PTX-NOT: .approx.
// PTX-LABEL: .entry k1_log(
// PTX-NOT: .approx.
// PTX: fma.rn.f64
// PTX: div.rn.f64
// PTX-NOT: .approx.
// PTX-LABEL: .entry k2_compare_sigmoid_select(
// PTX: setp.lt.f32
// sigmoid's 1/(1 + e^-x): a correctly rounded reciprocal, the same value as the division.
// PTX: rcp.rn.f32
// PTX-LABEL: .entry k3_permute(
// PTX: ld.global.b32
// PTX: st.global.b32
// PTX-LABEL: .entry k5_reduce_max(
// PTX: max.NaN.f32
// PTX-LABEL: .entry k6_iota(
// PTX: st.global.b64
// PTX-NOT: call
func.func @m(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %h: tensor<4x8xbf16>, %r: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xi64>) {
  %0 = compute.sin %a : tensor<4x8xf32>
  %1 = compute.cos %0 : tensor<4x8xf32>
  %2 = compute.log %h : tensor<4x8xbf16>
  %c = compute.compare %a, %b {predicate = "lt"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %s = compute.sigmoid %b : tensor<4x8xf32>
  %3 = compute.select %c, %a, %s : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = compute.permute %a {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %5 = compute.broadcast %r : (tensor<8xf32>) -> tensor<4x8xf32>
  %6 = compute.reduce_max %b {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>
  %7 = compute.iota {dim = 1 : i64} : tensor<4x8xi64>
  return %1, %2, %3, %4, %5, %6, %7 : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xi64>
}
