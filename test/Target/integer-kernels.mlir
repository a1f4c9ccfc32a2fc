// Integer kernels: wrapping arithmetic at the element's width (no nsw/nuw), signed vs
// unsigned compares and division (division by zero yields 0, MIN / -1 wraps), saturating
// float -> int casts, int -> float through f64 (the sim's `as f64`), wrapping reduce_sum, and
// data movement by element size (16-byte vector paths for i8 / i32 too).
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=llvm-ir > %t.ll
// RUN: FileCheck %s --check-prefix=LL < %t.ll
// RUN: llc -mcpu=sm_90 -mattr=+ptx80 %t.ll -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// LL-LABEL: define ptx_kernel void @k0_add_mul_maximum(
// LL: load i32, {{.*}} align 16
// LL: add i32
// LL: mul i32
// LL: @llvm.smax.i32(
// LL: store <4 x i32>
// LL-LABEL: define ptx_kernel void @k1_maximum_div(
// LL: @llvm.umax.i8(
// LL: udiv i8
// LL-LABEL: define ptx_kernel void @k2_div(
// LL: icmp eq i64 %{{.*}}, -1
// LL: sdiv i64
// LL-LABEL: define ptx_kernel void @k3_cast(
// LL: sitofp i64 %{{.*}} to double
// LL: fptrunc double %{{.*}} to float
// LL-LABEL: define ptx_kernel void @k4_cast(
// LL: call i32 @llvm.fptosi.sat.i32.f32(
// LL-LABEL: define ptx_kernel void @k5_cast(
// LL: call i8 @llvm.fptoui.sat.i8.f32(
// LL-LABEL: define ptx_kernel void @k6_cast(
// LL: uitofp i8 %{{.*}} to bfloat
// LL-LABEL: define ptx_kernel void @k7_cast(
// LL: sext i8 %{{.*}} to i64
// LL-LABEL: define ptx_kernel void @k8_reduce_sum(
// LL: add i32
// LL-LABEL: define ptx_kernel void @k9_transpose(
// LL: load i8
// LL-LABEL: define ptx_kernel void @k10_slice(
// LL: load i64
// LL-LABEL: define ptx_kernel void @k11_concat(
// LL: load i32
// LL-LABEL: define ptx_kernel void @k12_clone(
// LL: load <4 x i32>{{.*}} align 16

// PTX-LABEL: .entry k0_add_mul_maximum(
// PTX: ld.global.v4.b32
// PTX: max.s32
// PTX-LABEL: .entry k1_maximum_div(
// PTX: div.u16
// PTX-LABEL: .entry k2_div(
// PTX: div.s64
// PTX-LABEL: .entry k4_cast(
// PTX: cvt.rzi.s32.f32
// PTX-LABEL: .entry k8_reduce_sum(
// PTX: add.s32

module {
  func.func @f(%a: tensor<64xi32>, %b: tensor<64xi32>, %u: tensor<64xui8>, %v: tensor<64xui8>,
               %d: tensor<8xi64>, %e: tensor<8xi64>, %x: tensor<64xf32>, %c: tensor<64xi8>,
               %m: tensor<4x16xi32>, %t: tensor<8x8xi8>)
      -> (tensor<64xi32>, tensor<64xui8>, tensor<8xi64>, tensor<8xf32>, tensor<64xi32>,
          tensor<64xui8>, tensor<64xbf16>, tensor<64xi64>, tensor<4xi32>, tensor<8x8xi8>,
          tensor<4xi64>, tensor<8x16xi32>, tensor<64xi32>) {
    %0 = compute.add %a, %b : tensor<64xi32>
    %1 = compute.mul %0, %a : tensor<64xi32>
    %2 = compute.maximum %1, %b : tensor<64xi32>
    %3 = compute.maximum %u, %v : tensor<64xui8>
    %4 = compute.div %3, %v : tensor<64xui8>
    %5 = compute.div %d, %e : tensor<8xi64>
    %6 = compute.cast %d : (tensor<8xi64>) -> tensor<8xf32>
    %7 = compute.cast %x : (tensor<64xf32>) -> tensor<64xi32>
    %8 = compute.cast %x : (tensor<64xf32>) -> tensor<64xui8>
    %9 = compute.cast %u : (tensor<64xui8>) -> tensor<64xbf16>
    %10 = compute.cast %c : (tensor<64xi8>) -> tensor<64xi64>
    %11 = compute.reduce_sum %m {dim = 1 : i64} : (tensor<4x16xi32>) -> tensor<4xi32>
    %12 = compute.transpose %t : (tensor<8x8xi8>) -> tensor<8x8xi8>
    %13 = compute.slice %d {dim = 0 : i64, start = 2 : i64, size = 4 : i64} : (tensor<8xi64>) -> tensor<4xi64>
    %14 = compute.concat %m, %m {dim = 0 : i64} : (tensor<4x16xi32>, tensor<4x16xi32>) -> tensor<8x16xi32>
    %15 = compute.clone %a : tensor<64xi32>
    return %2, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15
        : tensor<64xi32>, tensor<64xui8>, tensor<8xi64>, tensor<8xf32>, tensor<64xi32>,
          tensor<64xui8>, tensor<64xbf16>, tensor<64xi64>, tensor<4xi32>, tensor<8x8xi8>,
          tensor<4xi64>, tensor<8x16xi32>, tensor<64xi32>
  }
}
