// A collective waits only for the compute work it depends on: the comm stream waits for an
// event recorded right after the last kernel that writes what the collective reads, or
// reads or writes what it overwrites; kernels after that one, even when the program places
// them before the collective, run beside it.
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=rt | FileCheck %s

coll.group @dp {size = 2 : i64}

// The reduce-scatter reads the gathered weight, which the GEMMs before it only read: it
// starts as soon as the all-gather is done, beside the GEMMs.
// CHECK-LABEL: func.func @late_reduce_scatter(
// CHECK: rt.launch %arg0, %[[SHARD:[0-9]+]] {{.*}}kernel = @k0_clone
// CHECK-NEXT: %[[E:[0-9]+]] = rt.event_record {stream = "compute"}
// CHECK: rt.stream_wait %[[E]] {stream = "comm"}
// CHECK-NEXT: rt.nccl_all_gather
// CHECK: rt.gemm
// CHECK: rt.gemm
// CHECK-NOT: rt.stream_wait {{.*}}{stream = "comm"}
// CHECK: rt.nccl_reduce_scatter
func.func @late_reduce_scatter(%w: tensor<16x32xf32>, %a: tensor<8x32xf32>) -> (tensor<8x32xf32>, tensor<16x32xf32>) {
  %g = coll.all_gather_into_tensor %w {group = @dp} : (tensor<16x32xf32>) -> tensor<32x32xf32>
  %gw = coll.wait_tensor %g : tensor<32x32xf32>
  %y = compute.matmul %a, %gw : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
  %z = compute.matmul %y, %gw : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
  %s = coll.reduce_scatter_tensor %gw {group = @dp, reduce_op = "sum"} : (tensor<32x32xf32>) -> tensor<16x32xf32>
  %sw = coll.wait_tensor %s : tensor<16x32xf32>
  return %z, %sw : tensor<8x32xf32>, tensor<16x32xf32>
}

// The reduce-scatter reads the first GEMM's result: it waits for that GEMM, not for the
// second, which the program places between them.
// CHECK-LABEL: func.func @produced_then_reduced(
// CHECK: rt.gemm %arg1, %arg0, %[[Y:[0-9]+]]
// CHECK-NEXT: %[[E:[0-9]+]] = rt.event_record {stream = "compute"}
// CHECK: rt.gemm %arg0, %arg1
// CHECK-NOT: rt.event_record {stream = "compute"}
// CHECK: rt.stream_wait %[[E]] {stream = "comm"}
// CHECK-NEXT: rt.nccl_reduce_scatter
func.func @produced_then_reduced(%a: tensor<32x32xf32>, %b: tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<16x32xf32>) {
  %y = compute.matmul %a, %b : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  %z = compute.matmul %b, %a : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  %s = coll.reduce_scatter_tensor %y {group = @dp, reduce_op = "sum"} : (tensor<32x32xf32>) -> tensor<16x32xf32>
  %sw = coll.wait_tensor %s : tensor<16x32xf32>
  return %z, %sw : tensor<32x32xf32>, tensor<16x32xf32>
}
