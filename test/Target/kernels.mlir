// Kernel generation: fused elementwise chains, reductions and data movement, as PTX for sm_90.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=RT
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=llvm-ir > %t.ll
// RUN: FileCheck %s --check-prefix=LL < %t.ll
// RUN: llc -mcpu=sm_90 -mattr=+ptx80 %t.ll -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

coll.group @tp {size = 2 : i64, symm_mem}

// RT-LABEL: rt.kernel @k0_add_silu_scale_cast
// RT: compute.add
// RT: compute.silu
// RT: compute.scale
// RT: compute.cast
// RT: rt.yield
// RT: rt.kernel @k1_reduce_sum
// RT: rt.kernel @k2_softmax
// RT: rt.kernel @k3_concat
// RT: rt.kernel @k4_slice
// RT: rt.kernel @k5_transpose
// RT: rt.kernel @k6_cast_fill_maximum_rsqrt
// RT-LABEL: func.func @k(
// RT: rt.pool_alloc {alignment = 64 : i64, group = @tp, kind = "symm_mem", size = 128 : i64}
// RT: %[[O0:.*]] = rt.alloc : memref<4x8xbf16>
// RT: rt.launch %arg0, %arg1, %[[O0]] {block = 256 : i64, grid = 1 : i64, kernel = @k0_add_silu_scale_cast}
// One block per row: 4 rows, 4 blocks.
// RT: rt.launch %arg0, %{{.*}} {block = 256 : i64, grid = 4 : i64, kernel = @k1_reduce_sum}
// RT: rt.launch %arg1, %{{.*}} {block = 256 : i64, grid = 4 : i64, kernel = @k2_softmax}
// RT: %[[V:.*]] = rt.pool_view %{{.*}} {offset = 0 : i64}
// RT: rt.launch %arg2, %[[V]] {{.*}}kernel = @k6_cast_fill_maximum_rsqrt
// RT: rt.symm_collective %{{.*}}, %{{.*}} {block = 32 : i64, coll = "one_shot_all_reduce", count = 32 : i64, dtype = "f32", grid = 1 : i64, group = @tp, kernel = @{{.*}}, offset = 0 : i64, reduce_op = "sum"}
// RT: rt.pool_free
// RT: return

// LL: target triple = "nvptx64-nvidia-cuda"
// LL: define ptx_kernel void @k0_add_silu_scale_cast(ptr addrspace(1)
// LL: define ptx_kernel void @k1_reduce_sum(

// PTX: .target sm_90
// PTX-LABEL: .entry k0_add_silu_scale_cast(
// PTX: ld.global
// PTX: add.rn.f32
// PTX: cvt.rn.bf16.f32
// PTX: st.global.b16
// The aligned path: 8 elements per thread, two 16-byte f32 vectors per argument in, one out.
// PTX: ld.global.v4.{{b32|f32}}
// PTX: ld.global.v4.{{b32|f32}}
// PTX: cvt.rn.bf16{{(x2)?}}.f32
// PTX: st.global.v4.b32
// PTX-LABEL: .entry k1_reduce_sum(
// PTX: ld.global
// PTX: shfl.sync.bfly.b32
// PTX: st.shared.b32
// PTX: bar.sync 0
// PTX: st.global.b32
// PTX-LABEL: .entry k2_softmax(
// PTX: max.NaN.f32
// PTX: shfl.sync.bfly.b32
// PTX: bar.sync 0
// PTX: div.rn.f32
// PTX-LABEL: .entry k3_concat(
// PTX-LABEL: .entry k4_slice(
// PTX-LABEL: .entry k5_transpose(
// PTX-LABEL: .entry k6_cast_fill_maximum_rsqrt(
// PTX: ld.global{{.*}}.b16
// PTX: cvt.f32.f16
// PTX: sqrt.rn.f32
// PTX: st.global.b32
// PTX: ld.global.v4.b32
// PTX: st.global.v4.{{b32|f32}}
func.func @k(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %h: tensor<4x8xf16>) -> (tensor<4x8xbf16>, tensor<4xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x3xf32>, tensor<8x4xf32>, tensor<4x8xf32>) {
  %0 = compute.add %a, %b : tensor<4x8xf32>
  %1 = compute.silu %0 : tensor<4x8xf32>
  %2 = compute.scale %1 {factor = 0.5 : f64} : tensor<4x8xf32>
  %3 = compute.cast %2 : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %4 = compute.reduce_sum %a {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>
  %5 = compute.softmax %b {dim = 1 : i64} : tensor<4x8xf32>
  %6 = compute.concat %a, %b {dim = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %7 = compute.slice %a {dim = 1 : i64, start = 2 : i64, size = 3 : i64} : (tensor<4x8xf32>) -> tensor<4x3xf32>
  %t = compute.transpose %a : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %8 = compute.cast %h : (tensor<4x8xf16>) -> tensor<4x8xf32>
  %9 = compute.fill {value = 2.0 : f64} : tensor<4x8xf32>
  %10 = compute.maximum %8, %9 : tensor<4x8xf32>
  %11 = compute.rsqrt %10 : tensor<4x8xf32>
  %r = coll.all_reduce %11 {reduce_op = "sum", group = @tp} : tensor<4x8xf32>
  %y = coll.wait_tensor %r : tensor<4x8xf32>
  return %3, %4, %5, %6, %7, %t, %y : tensor<4x8xbf16>, tensor<4xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x3xf32>, tensor<8x4xf32>, tensor<4x8xf32>
}
