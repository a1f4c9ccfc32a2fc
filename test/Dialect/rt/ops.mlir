// RUN: commlir-opt %s | commlir-opt | FileCheck %s
// RUN: commlir-opt %s --mlir-print-op-generic | commlir-opt | FileCheck %s

coll.group @tp {size = 2 : i64, symm_mem}
// CHECK: rt.kernel @k0
rt.kernel @k0 ({
^bb0(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>):
  %0 = compute.add %a, %b : tensor<4x4xf32>
  %1 = compute.gelu %0 : tensor<4x4xf32>
  // CHECK: rt.yield
  rt.yield %1 : tensor<4x4xf32>
})
// CHECK-LABEL: func.func @f
func.func @f(%x: memref<4x4xf32>, %w: memref<4x4xf32>) -> memref<4x4xf32> {
  // CHECK: rt.pool_alloc
  %p = rt.pool_alloc {alignment = 64 : i64, group = @tp, kind = "nccl", size = 128 : i64} : !rt.pool
  // CHECK: rt.pool_view
  %v = rt.pool_view %p {offset = 64 : i64} : (!rt.pool) -> memref<4x4xf32>
  // CHECK: rt.launch %{{.*}}, %{{.*}}, %{{.*}} {block = 256 : i64, grid = 1 : i64, kernel = @k0}
  rt.launch %x, %x, %v {block = 256 : i64, grid = 1 : i64, kernel = @k0} : memref<4x4xf32>
  // CHECK: rt.event_record {stream = "compute"}
  %e0 = rt.event_record {stream = "compute"} : !rt.event
  rt.stream_wait %e0 {stream = "comm"} : !rt.event
  // CHECK: rt.nccl_all_reduce
  rt.nccl_all_reduce %p {count = 16 : i64, dtype = "f32", group = @tp, offset = 64 : i64, reduce_op = "sum"} : !rt.pool
  %e1 = rt.event_record {stream = "comm"} : !rt.event
  // CHECK: rt.stream_wait
  rt.stream_wait %e1 {stream = "compute"} : !rt.event
  %o = rt.alloc : memref<4x4xf32>
  // CHECK: rt.gemm
  rt.gemm %w, %v, %o {batch = 1 : i64, dtype = "f32", k = 4 : i64, lda = 4 : i64, ldb = 4 : i64, ldc = 4 : i64, m = 4 : i64, n = 4 : i64, stride_a = 0 : i64, stride_b = 0 : i64, stride_c = 0 : i64, transa = 0 : i64, transb = 0 : i64} : memref<4x4xf32>
  %e2 = rt.event_record {stream = "comm"} : !rt.event
  rt.stream_wait %e2 {stream = "compute"} : !rt.event
  // CHECK: rt.pool_free
  rt.pool_free %p : !rt.pool
  return %o : memref<4x4xf32>
}
