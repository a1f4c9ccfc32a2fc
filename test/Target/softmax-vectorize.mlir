// Block-per-row softmax / reduce_sum with 16-byte vectors (8 × bf16/f16, 4 × f32) when the
// row length is a multiple of the vector width and the buffers are 16-byte aligned (a runtime
// test; otherwise the scalar row loop). A softmax row that fits in 8 vectors per thread at
// 256 threads stays in registers: one ld.global.v4 per vector, max and exp-sum block
// reductions, one st.global.v4 per vector. An odd row width keeps the scalar kernel.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=rt | FileCheck %s --check-prefix=RT
// RUN: commlir-translate %s --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: commlir-translate %s --emit=llvm-ir > %t.ll
// RUN: FileCheck %s --check-prefix=LL < %t.ll
// RUN: llc -mcpu=sm_90 -mattr=+ptx80 %t.ll -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// One block of 256 threads per row: 2048 bf16 = 256 vectors, one per thread.
// RT: rt.launch %arg0, %{{.*}} {block = 256 : i64, grid = 2048 : i64, kernel = @k0_softmax}
// RT: rt.launch %arg1, %{{.*}} {block = 256 : i64, grid = 4 : i64, kernel = @k1_softmax}
// RT: rt.launch %arg2, %{{.*}} {block = 256 : i64, grid = 16 : i64, kernel = @k2_softmax}
// RT: rt.launch %arg3, %{{.*}} {block = 256 : i64, grid = 8 : i64, kernel = @k3_reduce_sum}

// LL-LABEL: define ptx_kernel void @k0_softmax(
// LL: store <8 x bfloat> %{{.*}}, ptr addrspace(1) %{{.*}}, align 16
// LL-LABEL: define ptx_kernel void @k1_softmax(
// LL-NOT: store <
// LL-LABEL: define ptx_kernel void @k2_softmax(
// LL: store <4 x float> %{{.*}}, ptr addrspace(1) %{{.*}}, align 16
// LL-LABEL: define ptx_kernel void @k3_reduce_sum(

// The scalar fallback (unaligned buffers), then the register path: one vector in, the max
// reduction, the sum reduction, one vector out; then the streaming vector path (a block too
// small for the registers).
// PTX-LABEL: .entry k0_softmax(
// PTX: ld.global.b16
// PTX: st.global.b16
// PTX: ld.global.v4.b32
// PTX: cvt.f32.bf16
// PTX: max.NaN.f32
// PTX: shfl.sync.bfly.b32
// PTX: bar.sync 0
// A bf16 row: exp through the hardware ex2 (range-reduced), one correctly rounded reciprocal
// of the sum per row, then a multiply per element instead of a division.
// PTX: ex2.approx.f32
// PTX: add.rn.f32
// PTX: shfl.sync.bfly.b32
// PTX: bar.sync 0
// PTX: rcp.rn.f32
// PTX-NOT: div.rn.f32
// PTX: mul.rn.f32
// PTX-NOT: div.rn.f32
// PTX: cvt.rn.bf16x2.f32
// PTX: st.global.v4.b32
// PTX: ld.global.v4.b32
// PTX: st.global.v4.b32
// 6 bf16 per row: not a multiple of 8, scalar only.
// PTX-LABEL: .entry k1_softmax(
// PTX-NOT: .v4.
// PTX: st.global.b16
// PTX-NOT: .v4.
// f32 rows of 64: 16 vectors of 4; an f32 result keeps the accurate exp (no ex2.approx) and
// the exact division.
// PTX-LABEL: .entry k2_softmax(
// PTX-NOT: ex2.approx
// PTX: ld.global.v4.{{b32|f32}}
// PTX-NOT: ex2.approx
// PTX: div.rn.f32
// PTX-NOT: ex2.approx
// PTX: st.global.v4.{{b32|f32}}
// reduce_sum: vector loads, one scalar store per row.
// PTX-LABEL: .entry k3_reduce_sum(
// PTX: ld.global.v4.b32
// PTX: shfl.sync.bfly.b32
// PTX: st.global.b16
func.func @s(%a: tensor<2048x2048xbf16>, %b: tensor<4x6xbf16>, %c: tensor<16x64xf32>, %d: tensor<8x2048xbf16>) -> (tensor<2048x2048xbf16>, tensor<4x6xbf16>, tensor<16x64xf32>, tensor<8xbf16>) {
  %0 = compute.softmax %a {dim = 1 : i64} : tensor<2048x2048xbf16>
  %1 = compute.softmax %b {dim = 1 : i64} : tensor<4x6xbf16>
  %2 = compute.softmax %c {dim = 1 : i64} : tensor<16x64xf32>
  %3 = compute.reduce_sum %d {dim = 1 : i64} : (tensor<8x2048xbf16>) -> tensor<8xbf16>
  return %0, %1, %2, %3 : tensor<2048x2048xbf16>, tensor<4x6xbf16>, tensor<16x64xf32>, tensor<8xbf16>
}
