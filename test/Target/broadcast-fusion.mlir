// Broadcasts read only by fused elementwise chains are absorbed: the chain's kernel reads the
// broadcast's operand at each element's source index (dims the broadcast adds or repeats
// contribute nothing), so no `_broadcast` kernel runs and the repeated tensor is never
// stored. In the aligned vector loop a contiguous innermost run that is a multiple of the
// vector width is one 16-byte vector load (rotary tables, norm weights), a repeated innermost
// dim one scalar load for every lane (the rsqrt column, a scalar); other shapes load per lane.
// A broadcast also read by a matmul keeps its kernel for it; the chain still reads the operand.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=rt | FileCheck %s --check-prefix=RT
// RUN: commlir-translate %s --emit=llvm-ir > %t.ll
// RUN: FileCheck %s --check-prefix=LL < %t.ll
// RUN: llc -mcpu=sm_90 -mattr=+ptx80 %t.ll -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// RMSNorm: x · rsqrt (f32 column [1,8,1] → [1,8,64]), cast, · weight (bf16 [64] → [1,8,64]).
// One kernel over the small operands, sized by 8-element vectors: 512 / 8 / 256 → 1 block.
// RT-LABEL: rt.kernel @k0_mul_cast_mul
// RT-NEXT: ^bb0(%arg0: tensor<1x8x1xf32>, %arg1: tensor<1x8x64xf32>, %arg2: tensor<64xbf16>):
// RT-NEXT: compute.broadcast %arg0 : (tensor<1x8x1xf32>) -> tensor<1x8x64xf32>
// RT: compute.broadcast %arg2 : (tensor<64xbf16>) -> tensor<1x8x64xbf16>
// Rotary: q · cos + rotated · sin, tables [8,64] → [1,4,8,64].
// RT-LABEL: rt.kernel @k1_mul_mul_add
// RT-NEXT: ^bb0(%arg0: tensor<8x64xbf16>, %arg1: tensor<1x4x8x64xbf16>, %arg2: tensor<8x64xbf16>, %arg3: tensor<1x4x8x64xbf16>):
// A scalar scale and an i1 mask [8,8] → [4,8,8] into a select.
// RT-LABEL: rt.kernel @k2_mul_select
// RT-NEXT: ^bb0(%arg0: tensor<f32>, %arg1: tensor<4x8x8xf32>, %arg2: tensor<8x8xi1>, %arg3: tensor<4x8x8xf32>):
// Read by a matmul as well: materialized once for it; the chain reads the operand.
// RT-LABEL: rt.kernel @k3_broadcast
// RT-LABEL: rt.kernel @k4_add
// RT-NEXT: ^bb0(%arg0: tensor<64xf32>, %arg1: tensor<8x64xf32>):
// RT-NOT: rt.kernel @{{.*}}broadcast
// RT-LABEL: func.func @f(
// RT: rt.launch %arg0, %arg1, %arg2, %{{.*}} {block = 256 : i64, grid = 1 : i64, kernel = @k0_mul_cast_mul}
// RT: rt.launch %arg3, %arg4, %arg5, %arg6, %{{.*}} {block = 256 : i64, grid = 1 : i64, kernel = @k1_mul_mul_add}
// RT: rt.launch %arg7, %arg8, %arg9, %arg10, %{{.*}} {{.*}}kernel = @k2_mul_select}
// RT: rt.launch %arg11, %[[B:[0-9]+]] {{.*}}kernel = @k3_broadcast}
// RT: rt.launch %arg11, %arg12, %{{.*}} {{.*}}kernel = @k4_add}
// RT: rt.gemm %arg13, %[[B]],
// RT-NOT: kernel = @{{.*}}broadcast

// The vector loop: the f32 column is one scalar load for the 8 lanes (index j / 64), the bf16
// weight one vector load (index j mod 64), as the full-size input.
// LL-LABEL: define ptx_kernel void @k0_mul_cast_mul(
// LL: load <8 x float>
// LL-NOT: load <
// LL: load float
// LL: load <8 x bfloat>
// LL: store <8 x bfloat>
// Both tables: vector loads at j mod 512.
// LL-LABEL: define ptx_kernel void @k1_mul_mul_add(
// LL-COUNT-4: load <8 x bfloat>
// LL: store <8 x bfloat>
// The scalar: one load at index 0, out of the loop; the mask one vector (16 lanes: the i1
// bytes are the narrowest type).
// LL-LABEL: define ptx_kernel void @k2_mul_select(
// LL: load float, ptr addrspace(1) %p0
// LL: load <16 x i8>
// LL: store <16 x float>
// LL-LABEL: define ptx_kernel void @k3_broadcast(

// PTX-LABEL: .entry k0_mul_cast_mul(
// PTX: ld.global.v4.b32
// PTX: ld.global.v4.b32
// PTX: ld.global.b32
// PTX: ld.global.v4.b32
// PTX: st.global.v4.b32
// PTX-LABEL: .entry k1_mul_mul_add(
// PTX-COUNT-4: ld.global.v4.b32
// PTX: st.global.v4.b32
// PTX-LABEL: .entry k4_add(
// PTX-COUNT-2: ld.global.v4.b32
// PTX: st.global.v4.b32
func.func @f(%r: tensor<1x8x1xf32>, %x: tensor<1x8x64xf32>, %w: tensor<64xbf16>,
             %cos: tensor<8x64xbf16>, %q: tensor<1x4x8x64xbf16>, %sin: tensor<8x64xbf16>, %rot: tensor<1x4x8x64xbf16>,
             %s: tensor<f32>, %a: tensor<4x8x8xf32>, %m: tensor<8x8xi1>, %n: tensor<4x8x8xf32>,
             %b: tensor<64xf32>, %y: tensor<8x64xf32>, %k: tensor<64x16xf32>)
    -> (tensor<1x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<4x8x8xf32>, tensor<8x64xf32>, tensor<8x16xf32>) {
  %rb = compute.broadcast %r : (tensor<1x8x1xf32>) -> tensor<1x8x64xf32>
  %0 = compute.mul %x, %rb : tensor<1x8x64xf32>
  %1 = compute.cast %0 : (tensor<1x8x64xf32>) -> tensor<1x8x64xbf16>
  %wb = compute.broadcast %w : (tensor<64xbf16>) -> tensor<1x8x64xbf16>
  %2 = compute.mul %1, %wb : tensor<1x8x64xbf16>
  %cb = compute.broadcast %cos : (tensor<8x64xbf16>) -> tensor<1x4x8x64xbf16>
  %3 = compute.mul %q, %cb : tensor<1x4x8x64xbf16>
  %sb = compute.broadcast %sin : (tensor<8x64xbf16>) -> tensor<1x4x8x64xbf16>
  %4 = compute.mul %rot, %sb : tensor<1x4x8x64xbf16>
  %5 = compute.add %3, %4 : tensor<1x4x8x64xbf16>
  %ssb = compute.broadcast %s : (tensor<f32>) -> tensor<4x8x8xf32>
  %6 = compute.mul %a, %ssb : tensor<4x8x8xf32>
  %mb = compute.broadcast %m : (tensor<8x8xi1>) -> tensor<4x8x8xi1>
  %7 = compute.select %mb, %6, %n : (tensor<4x8x8xi1>, tensor<4x8x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %bb = compute.broadcast %b : (tensor<64xf32>) -> tensor<8x64xf32>
  %8 = compute.add %bb, %y : tensor<8x64xf32>
  %9 = compute.matmul %bb, %k : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %2, %5, %7, %8, %9 : tensor<1x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<4x8x8xf32>, tensor<8x64xf32>, tensor<8x16xf32>
}
