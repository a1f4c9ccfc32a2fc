// i1 kernels (any spelling: i1, si1, ui1): one byte per element holding 0 or 1, loaded with
// `!range [0, 2)` and computed as LLVM i1, read unsigned (true is 1): add/sub are xor, mul
// and minimum are and, maximum is or, so the fused chain below (maximum((a + b) * a, b) =
// a | b) is one `or` of 16-byte vectors. Casts: float -> i1 is `x >= 1` (truncation toward
// zero saturated to [0, 1], NaN -> 0), int -> i1 keeps the low bit (`and` 1, four lanes per
// `and.b32`), i1 -> int zero-extends (`zext nneg` of the byte), i1 -> float is 0.0 / 1.0;
// reduce_sum is the parity (xor); data movement copies bytes.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=llvm-ir > %t.ll
// RUN: FileCheck %s --check-prefix=LL < %t.ll
// RUN: llc -mcpu=sm_90 -mattr=+ptx80 %t.ll -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// LL-LABEL: define ptx_kernel void @k0_add_mul_maximum(
// LL: load <16 x i8>, {{.*}} align 16, !range ![[R:[0-9]+]]
// LL: load <16 x i8>, {{.*}} align 16, !range ![[R]]
// LL: or <16 x i8>
// LL: store <16 x i8>
// LL: load i8, {{.*}} !range ![[R]]
// LL-LABEL: define ptx_kernel void @k1_cast(
// LL: fcmp oge <16 x float> %{{.*}}, splat (float 1.000000e+00)
// LL: zext <16 x i1> %{{.*}} to <16 x i8>
// LL-LABEL: define ptx_kernel void @k2_cast(
// LL: icmp ne i8 %{{.*}}, 0
// LL: uitofp i1 %{{.*}} to float
// LL-LABEL: define ptx_kernel void @k3_cast(
// LL: and <{{[0-9]+}} x i8> %{{.*}}, splat (i8 1)
// LL-LABEL: define ptx_kernel void @k4_cast(
// LL: zext nneg i8 %{{.*}} to i32
// LL-LABEL: define ptx_kernel void @k5_reduce_sum(
// LL: xor i1
// LL-LABEL: define ptx_kernel void @k6_transpose(
// LL: load i8
// LL-LABEL: define ptx_kernel void @k7_clone(
// LL: load <4 x i32>{{.*}} align 16
// LL: ![[R]] = !{i8 0, i8 2}

// PTX-LABEL: .entry k0_add_mul_maximum(
// PTX: ld.global.b8
// PTX: ld.global.v4.b32
// PTX: ld.global.v4.b32
// PTX-NEXT: or.b32
// PTX-NEXT: or.b32
// PTX-NEXT: or.b32
// PTX-NEXT: or.b32
// PTX: st.global.v4.b32
// PTX-LABEL: .entry k1_cast(
// PTX: setp.ge.f32 {{.*}}, 0f3F800000;
// PTX-LABEL: .entry k3_cast(
// PTX: ld.global.v4.b32
// PTX: and.b32 {{.*}}, 16843009;
// PTX-NEXT: and.b32 {{.*}}, 16843009;
// PTX-NEXT: and.b32 {{.*}}, 16843009;
// PTX-NEXT: and.b32 {{.*}}, 16843009;
// PTX: st.global.v4.b32
// PTX-LABEL: .entry k5_reduce_sum(
// PTX: xor.pred
// PTX-LABEL: .entry k7_clone(
// PTX: ld.global.v4.b32

module {
  func.func @f(%a: tensor<64xi1>, %b: tensor<64xi1>, %x: tensor<64xf32>, %c: tensor<64xi8>,
               %m: tensor<4x16xui1>, %t: tensor<8x8xsi1>)
      -> (tensor<64xi1>, tensor<64xi1>, tensor<64xf32>, tensor<64xi1>, tensor<64xi32>,
          tensor<4xui1>, tensor<8x8xsi1>, tensor<64xi1>) {
    %0 = compute.add %a, %b : tensor<64xi1>
    %1 = compute.mul %0, %a : tensor<64xi1>
    %2 = compute.maximum %1, %b : tensor<64xi1>
    %3 = compute.cast %x : (tensor<64xf32>) -> tensor<64xi1>
    %4 = compute.cast %a : (tensor<64xi1>) -> tensor<64xf32>
    %5 = compute.cast %c : (tensor<64xi8>) -> tensor<64xi1>
    %6 = compute.cast %b : (tensor<64xi1>) -> tensor<64xi32>
    %7 = compute.reduce_sum %m {dim = 1 : i64} : (tensor<4x16xui1>) -> tensor<4xui1>
    %8 = compute.transpose %t : (tensor<8x8xsi1>) -> tensor<8x8xsi1>
    %9 = compute.clone %a : tensor<64xi1>
    return %2, %3, %4, %5, %6, %7, %8, %9
        : tensor<64xi1>, tensor<64xi1>, tensor<64xf32>, tensor<64xi1>, tensor<64xi32>,
          tensor<4xui1>, tensor<8x8xsi1>, tensor<64xi1>
  }
}
