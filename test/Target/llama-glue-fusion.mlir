// The glue of an exported Llama block fuses into few kernels (fusion.rs, kernels/rows.rs,
// kernels/fused.rs): RMSNorm (cast, x·x, mean, + eps, rsqrt, · rsqrt, cast, · weight) is ONE
// row kernel of one block per row that reads x once and stores only the normalized rows; the
// rotary embedding of the query (the heads permuted out of the projection, rotate_half's two
// slices, neg and concat, · cos + · sin) is ONE elementwise kernel that reads the GEMM's output
// through the permute's and the slices' index maps and picks the concat's operand per vector:
// no permute, slice, neg or concat kernel, and nothing but the rotated query is stored.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --emit=rt | FileCheck %s --check-prefix=RT
// RUN: commlir-translate %s --emit=llvm-ir > %t.ll
// RUN: FileCheck %s --check-prefix=LL < %t.ll
// RUN: llc -mcpu=sm_90 -mattr=+ptx80 %t.ll -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// RT-LABEL: rt.kernel @k0_cast_mul_reduce_sum_scale_reshape_fill_add_rsqrt_mul_cast_mul
// RT-NEXT: ^bb0(%arg0: tensor<1x8x64xbf16>, %arg1: tensor<64xbf16>):
// RT: compute.reduce_sum
// RT: compute.rsqrt
// RT: compute.broadcast %{{.*}} : (tensor<1x8x1xf32>) -> tensor<1x8x64xf32>
// RT: compute.broadcast %arg1 : (tensor<64xbf16>) -> tensor<1x8x64xbf16>
// RT-LABEL: rt.kernel @k1_mul_neg_concat_mul_add
// RT-NEXT: ^bb0(%arg0: tensor<1x8x2x32xbf16>, %arg1: tensor<8x32xbf16>, %arg2: tensor<8x32xbf16>):
// RT-NEXT: compute.permute %arg0
// RT: compute.slice
// RT: compute.concat
// RT-LABEL: func.func @block(
// One block of 256 threads per row: 8 rows.
// RT: rt.launch %arg4, %arg0, %[[N:[0-9]+]] {block = 256 : i64, grid = 8 : i64, kernel = @k0_cast_mul_reduce_sum_scale_reshape_fill_add_rsqrt_mul_cast_mul}
// RT-NEXT: %[[Q:[0-9]+]] = rt.alloc : memref<8x64xbf16>
// RT-NEXT: rt.gemm %arg1, %[[N]], %[[Q]]
// RT: %[[H:[0-9]+]] = rt.view %[[Q]] : (memref<8x64xbf16>) -> memref<1x8x2x32xbf16>
// RT-NEXT: %[[O:[0-9]+]] = rt.alloc : memref<1x2x8x32xbf16>
// RT-NEXT: rt.launch %[[H]], %arg2, %arg3, %[[O]] {{.*}}kernel = @k1_mul_neg_concat_mul_add}
// RT-NOT: rt.launch
// RT: return %[[O]]

// The row kernel: 16-byte vector loads of the row, a butterfly warp reduction, the partials
// through shared memory between block barriers, vector stores of the result.
// LL-LABEL: define ptx_kernel void @k0_cast_mul_reduce_sum_scale_reshape_fill_add_rsqrt_mul_cast_mul(
// LL: load <8 x bfloat>
// LL: call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %{{.*}}, i32 16, i32 31)
// LL: call void @llvm.nvvm.barrier
// LL: store <8 x bfloat>
// The rotary kernel: one variant per concat operand (16 lanes each, two vectors per head row),
// the permuted query, the slice it needs and both tables each one vector.
// LL-LABEL: define ptx_kernel void @k1_mul_neg_concat_mul_add(
// LL: load <8 x bfloat>
// LL: vmerge:
// LL-NEXT: phi <8 x bfloat>
// LL-NEXT: getelementptr
// LL-NEXT: store <8 x bfloat>

// PTX-LABEL: .entry k0_cast_mul_reduce_sum_scale_reshape_fill_add_rsqrt_mul_cast_mul(
// PTX: ld.global.v4.b32
// PTX: shfl.sync.bfly.b32
// PTX: bar.sync
// PTX: st.global.v4.b32
// PTX-LABEL: .entry k1_mul_neg_concat_mul_add(
// PTX: ld.global.v4.b32
// PTX: st.global.v4.b32
func.func @block(%w: tensor<64xbf16>, %wq: tensor<64x64xbf16>, %cos: tensor<8x32xbf16>, %sin: tensor<8x32xbf16>, %x: tensor<1x8x64xbf16>) -> tensor<1x2x8x32xbf16> {
  %x_cast = compute.cast %x : (tensor<1x8x64xbf16>) -> tensor<1x8x64xf32>
  %pow = compute.mul %x_cast, %x_cast : tensor<1x8x64xf32>
  %sum = compute.reduce_sum %pow {dim = 2 : i64} : (tensor<1x8x64xf32>) -> tensor<1x8xf32>
  %mean = compute.scale %sum {factor = 1.562500e-02 : f64} : tensor<1x8xf32>
  %mean_view = compute.reshape %mean : (tensor<1x8xf32>) -> tensor<1x8x1xf32>
  %eps = compute.fill {value = 1.0e-06 : f64} : tensor<1x8x1xf32>
  %add = compute.add %mean_view, %eps : tensor<1x8x1xf32>
  %rsqrt = compute.rsqrt %add : tensor<1x8x1xf32>
  %rsqrt_bc = compute.broadcast %rsqrt : (tensor<1x8x1xf32>) -> tensor<1x8x64xf32>
  %norm = compute.mul %x_cast, %rsqrt_bc : tensor<1x8x64xf32>
  %norm_cast = compute.cast %norm : (tensor<1x8x64xf32>) -> tensor<1x8x64xbf16>
  %w_bc = compute.broadcast %w : (tensor<64xbf16>) -> tensor<1x8x64xbf16>
  %h = compute.mul %norm_cast, %w_bc : tensor<1x8x64xbf16>
  %wqt = compute.transpose %wq : (tensor<64x64xbf16>) -> tensor<64x64xbf16>
  %hv = compute.reshape %h : (tensor<1x8x64xbf16>) -> tensor<8x64xbf16>
  %mm = compute.matmul %hv, %wqt : (tensor<8x64xbf16>, tensor<64x64xbf16>) -> tensor<8x64xbf16>
  %heads = compute.reshape %mm : (tensor<8x64xbf16>) -> tensor<1x8x2x32xbf16>
  %q = compute.permute %heads {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x32xbf16>) -> tensor<1x2x8x32xbf16>
  %cos_bc = compute.broadcast %cos : (tensor<8x32xbf16>) -> tensor<1x2x8x32xbf16>
  %qc = compute.mul %q, %cos_bc : tensor<1x2x8x32xbf16>
  %hi = compute.slice %q {dim = 3 : i64, start = 16 : i64, size = 16 : i64} : (tensor<1x2x8x32xbf16>) -> tensor<1x2x8x16xbf16>
  %neg = compute.neg %hi : tensor<1x2x8x16xbf16>
  %lo = compute.slice %q {dim = 3 : i64, start = 0 : i64, size = 16 : i64} : (tensor<1x2x8x32xbf16>) -> tensor<1x2x8x16xbf16>
  %rot = compute.concat %neg, %lo {dim = 3 : i64} : (tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>) -> tensor<1x2x8x32xbf16>
  %sin_bc = compute.broadcast %sin : (tensor<8x32xbf16>) -> tensor<1x2x8x32xbf16>
  %qs = compute.mul %rot, %sin_bc : tensor<1x2x8x32xbf16>
  %out = compute.add %qc, %qs : tensor<1x2x8x32xbf16>
  return %out : tensor<1x2x8x32xbf16>
}
