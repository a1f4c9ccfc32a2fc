// `commlir.approx_tanh` on the module: bf16 tanh/gelu use the hardware tanh.approx.f32
// (llvm.tanh with afn); f32 keeps the accurate polynomial.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=llvm-ir > %t.ll
// RUN: FileCheck %s --check-prefix=LL < %t.ll
// RUN: commlir-translate %s --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: llc -mcpu=sm_90 -mattr=+ptx80 %t.ll -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// LL-LABEL: define ptx_kernel void @k0_gelu(
// LL: call afn float @llvm.tanh.f32(
// LL-LABEL: define ptx_kernel void @k1_gelu(
// LL-NOT: llvm.tanh
// LL-LABEL: define ptx_kernel void @k2_tanh(
// LL: call afn float @llvm.tanh.f32(

// PTX-LABEL: .entry k0_gelu(
// PTX: ld.global.v4.b32
// PTX: tanh.approx.f32
// PTX: st.global.v4.b32
// PTX-LABEL: .entry k1_gelu(
// PTX-NOT: tanh.approx.f32
// PTX-LABEL: .entry k2_tanh(
// PTX: tanh.approx.f32
module attributes {commlir.approx_tanh} {
  func.func @v(%a: tensor<64x64xbf16>, %b: tensor<4x16xf32>, %c: tensor<3x5xbf16>) -> (tensor<64x64xbf16>, tensor<4x16xf32>, tensor<3x5xbf16>) {
    %0 = compute.gelu %a : tensor<64x64xbf16>
    %1 = compute.gelu %b : tensor<4x16xf32>
    %2 = compute.tanh %c : tensor<3x5xbf16>
    return %0, %1, %2 : tensor<64x64xbf16>, tensor<4x16xf32>, tensor<3x5xbf16>
  }
}
