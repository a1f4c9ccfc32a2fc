// Vectorized elementwise kernels: 16-byte vector loads and stores (8 × bf16/f16, 4 × f32) in
// the aligned path, a scalar tail when numel is not a multiple of the width. tanh/gelu keep the
// accurate polynomial unless the module opts in (vectorize-approx-tanh.mlir).
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=rt | FileCheck %s --check-prefix=RT
// RUN: commlir-translate %s --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: commlir-translate %s --emit=llvm-ir > %t.ll
// RUN: FileCheck %s --check-prefix=LL < %t.ll
// RUN: llc -mcpu=sm_90 -mattr=+ptx80 %t.ll -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// One 8-element vector per thread: 2048·8192 / 8 / 256 = 8192 blocks.
// RT: rt.launch %arg0, %{{.*}} {block = 256 : i64, grid = 8192 : i64, kernel = @k0_gelu}
// f32: 4 per thread, 64 elements → 16 threads, one block.
// RT: rt.launch %arg1, %{{.*}} {block = 256 : i64, grid = 1 : i64, kernel = @k1_gelu}
// RT: rt.launch %arg2, %{{.*}} {block = 256 : i64, grid = 1 : i64, kernel = @k2_tanh}
// RT: rt.launch %arg3, %arg4, %{{.*}} {block = 256 : i64, grid = 1 : i64, kernel = @k3_add_cast}

// LL-LABEL: define ptx_kernel void @k0_gelu(
// LL: load <8 x bfloat>, ptr addrspace(1) %{{.*}}, align 16
// LL-NOT: llvm.tanh
// LL: store <8 x bfloat> %{{.*}}, ptr addrspace(1) %{{.*}}, align 16
// LL-LABEL: define ptx_kernel void @k1_gelu(
// LL-NOT: llvm.tanh
// LL: load <4 x float>, ptr addrspace(1) %{{.*}}, align 16
// LL: store <4 x float> %{{.*}}, ptr addrspace(1) %{{.*}}, align 16
// LL-LABEL: define ptx_kernel void @k2_tanh(

// PTX-LABEL: .entry k0_gelu(
// PTX: ld.global.v4.b32
// PTX-NOT: tanh.approx.f32
// PTX: cvt.f32.bf16
// PTX: cvt.rn.bf16{{(x2)?}}.f32
// PTX: st.global.v4.b32
// PTX-LABEL: .entry k1_gelu(
// PTX-NOT: tanh.approx.f32
// PTX: ld.global.v4.{{b32|f32}}
// PTX: st.global.v4.{{b32|f32}}
// 3·5 = 15 bf16: one vector and a scalar tail of 7.
// PTX-LABEL: .entry k2_tanh(
// PTX-NOT: tanh.approx.f32
// PTX: ld.global.v4.b32
// PTX: st.global.v4.b32
// PTX: ld.global{{.*}}.b16
// PTX: st.global.b16
// f32 + f32 → bf16: width 8, so two 16-byte f32 vectors per argument, one bf16 vector out.
// PTX-LABEL: .entry k3_add_cast(
// PTX: ld.global.v4.{{b32|f32}}
// PTX: ld.global.v4.{{b32|f32}}
// PTX: add.rn.f32
// PTX: cvt.rn.bf16{{(x2)?}}.f32
// PTX: st.global.v4.b32
func.func @v(%a: tensor<2048x8192xbf16>, %b: tensor<4x16xf32>, %c: tensor<3x5xbf16>, %d: tensor<4x8xf32>, %e: tensor<4x8xf32>) -> (tensor<2048x8192xbf16>, tensor<4x16xf32>, tensor<3x5xbf16>, tensor<4x8xbf16>) {
  %0 = compute.gelu %a : tensor<2048x8192xbf16>
  %1 = compute.gelu %b : tensor<4x16xf32>
  %2 = compute.tanh %c : tensor<3x5xbf16>
  %3 = compute.add %d, %e : tensor<4x8xf32>
  %4 = compute.cast %3 : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  return %0, %1, %2, %4 : tensor<2048x8192xbf16>, tensor<4x16xf32>, tensor<3x5xbf16>, tensor<4x8xbf16>
}
