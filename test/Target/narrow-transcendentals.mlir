// Transcendentals by result type: bf16/f16 results use __commlir_expf_fast /
// __commlir_tanhf_fast (hardware ex2.approx.f32 and rcp.approx; ~2^-20 relative, far below
// half an ulp of the narrow type), f32 results the accurate FMA-only helpers (degree-7
// polynomial exp, exact division), with no approximate instruction at all.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=llvm-ir > %t.ll
// RUN: FileCheck %s --check-prefix=LL < %t.ll
// RUN: llc -mcpu=sm_90 -mattr=+ptx80 %t.ll -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// The helpers are internal and inlined by the optimizer: what remains is which intrinsics
// each kernel calls.
// LL-LABEL: define ptx_kernel void @k0_gelu(
// LL-NOT: define
// LL: call float @llvm.nvvm.ex2.approx.f32(
// LL-NOT: define
// LL: call float @llvm.nvvm.rcp.approx.ftz.f(
// LL-LABEL: define ptx_kernel void @k1_gelu(
// LL-NOT: llvm.nvvm.ex2
// LL-LABEL: define ptx_kernel void @k2_exp(
// LL-NOT: define
// LL: call float @llvm.nvvm.ex2.approx.f32(
// LL-LABEL: define ptx_kernel void @k3_exp(
// LL-NOT: llvm.nvvm.ex2
// LL-LABEL: define ptx_kernel void @k4_tanh(
// LL-NOT: define
// LL: call float @llvm.nvvm.ex2.approx.f32(

// bf16 gelu: ex2 and rcp from the hardware, no division.
// PTX-LABEL: .entry k0_gelu(
// PTX-NOT: div.rn.f32
// PTX: ex2.approx.f32
// PTX: rcp.approx.ftz.f32
// PTX-NOT: div.rn.f32
// PTX: st.global.v4.b32
// f32 gelu: the accurate tanh (exact division), no approximate instruction.
// PTX-LABEL: .entry k1_gelu(
// PTX-NOT: .approx.
// PTX: div.rn.f32
// PTX-NOT: .approx.
// f16 exp: range reduction, ex2 of the remainder, two exact power-of-two scalings.
// PTX-LABEL: .entry k2_exp(
// PTX: cvt.rni.f32.f32
// PTX: fma.rn.f32
// PTX: fma.rn.f32
// PTX: ex2.approx.f32
// PTX: shl.b32 {{.*}}, 23
// PTX: mul.rn.f32
// PTX: mul.rn.f32
// PTX-LABEL: .entry k3_exp(
// PTX-NOT: .approx.
// PTX-LABEL: .entry k4_tanh(
// PTX: ex2.approx.f32
func.func @v(%a: tensor<64x64xbf16>, %b: tensor<4x16xf32>, %c: tensor<8x8xf16>, %d: tensor<4x8xf32>, %e: tensor<3x5xbf16>) -> (tensor<64x64xbf16>, tensor<4x16xf32>, tensor<8x8xf16>, tensor<4x8xf32>, tensor<3x5xbf16>) {
  %0 = compute.gelu %a : tensor<64x64xbf16>
  %1 = compute.gelu %b : tensor<4x16xf32>
  %2 = compute.exp %c : tensor<8x8xf16>
  %3 = compute.exp %d : tensor<4x8xf32>
  %4 = compute.tanh %e : tensor<3x5xbf16>
  return %0, %1, %2, %3, %4 : tensor<64x64xbf16>, tensor<4x16xf32>, tensor<8x8xf16>, tensor<4x8xf32>, tensor<3x5xbf16>
}
