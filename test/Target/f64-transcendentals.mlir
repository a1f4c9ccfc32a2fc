// f64 exp, tanh, gelu, silu and softmax: double-precision helpers (`__commlir_exp`: fdlibm's
// ln2 split + degree-13 polynomial + ldexp; `__commlir_tanh`: an expm1 series below 0.25, else
// `1 − 2/(e^{2|x|} + 1)`), computed in f64 throughout, no approximate instruction.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=llvm-ir > %t.ll
// RUN: FileCheck %s --check-prefix=LL < %t.ll
// RUN: llc -mcpu=sm_90 -mattr=+ptx80 %t.ll -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// LL-LABEL: define ptx_kernel void @k0_gelu(
// LL-NOT: float
// LL: call double @llvm.fma.f64(
// LL: fdiv double
// LL-LABEL: define ptx_kernel void @k1_exp_silu(
// LL: call double @llvm.rint.f64(
// LL: call double @llvm.fma.f64(
// LL: call double @llvm.ldexp.f64.i32(
// LL-LABEL: define ptx_kernel void @k2_softmax(

// PTX-LABEL: .entry k0_gelu(
// PTX-NOT: .approx.
// PTX-NOT: .f32
// PTX: fma.rn.f64
// PTX: div.rn.f64
// PTX-NOT: .approx.
// PTX-LABEL: .entry k1_exp_silu(
// PTX-NOT: .approx.
// PTX: cvt.rni.f64.f64
// PTX: fma.rn.f64
// PTX-NOT: .approx.
// PTX-LABEL: .entry k2_softmax(
// PTX-NOT: .approx.
// PTX: max.f64
// PTX: fma.rn.f64
// PTX: div.rn.f64
// PTX-NOT: .approx.
func.func @d(%a: tensor<4x8xf64>, %b: tensor<4x8xf64>, %c: tensor<4x8xf64>) -> (tensor<4x8xf64>, tensor<4x8xf64>, tensor<4x8xf64>) {
  %0 = compute.gelu %a : tensor<4x8xf64>
  %1 = compute.exp %b : tensor<4x8xf64>
  %2 = compute.silu %1 : tensor<4x8xf64>
  %3 = compute.softmax %c {dim = 1 : i64} : tensor<4x8xf64>
  return %0, %2, %3 : tensor<4x8xf64>, tensor<4x8xf64>, tensor<4x8xf64>
}
