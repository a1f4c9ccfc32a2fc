// func.call lowers to a direct call of the callee's host function; the caller owns (and
// frees) what the callee returns, so a callee's result that aliases an argument, a pool or
// another result is copied first. Events are numbered per module: the callee's never reuse
// the caller's. (Diagnostics: call-invalid.mlir.)
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm{one-shot-threshold=0},comm-plan-pools))' --emit=rt | FileCheck %s --check-prefix=RT
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm{one-shot-threshold=0},comm-plan-pools))' --emit=host-ll > %t.ll
// RUN: FileCheck %s --check-prefix=HOST < %t.ll
// RUN: llc -filetype=obj -relocation-model=pic %t.ll -o %t.o

coll.group @tp {size = 2 : i64}

// RT-LABEL: func.func private @reduce(%arg0: memref<4x8xf32>) -> (memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>)
// RT: %[[P:.*]] = rt.pool_alloc
// RT: rt.nccl_all_reduce %[[P]]
// RT: %[[Z:.*]] = rt.alloc : memref<4x8xf32>
// RT: rt.launch %{{.*}}, %[[Z]] {{.*}}kernel = @k{{[0-9]+}}_relu
// RT: rt.pool_free %[[P]]
// The argument and the second use of %z come back as copies (the caller frees all three).
// RT: %[[A:.*]] = rt.alloc
// RT: rt.launch %arg0, %[[A]] {{.*}}kernel = @[[CLONE:k[0-9]+_clone]]
// RT: %[[B:.*]] = rt.alloc
// RT: rt.launch %[[Z]], %[[B]] {{.*}}kernel = @[[CLONE]]
// RT: return %[[A]], %[[Z]], %[[B]]
func.func private @reduce(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<4x8xf32>
  %y = coll.wait_tensor %r : tensor<4x8xf32>
  %z = compute.relu %y : tensor<4x8xf32>
  return %x, %z, %z : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// RT-LABEL: func.func @main(%arg0: memref<4x8xf32>) -> memref<4x8xf32>
// RT: rt.nccl_all_reduce
// RT: %[[C:.*]]:3 = func.call @reduce(%arg0) : (memref<4x8xf32>) -> (memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>)
// Each call result is freed after its last reader; an unused one at once.
// RT-DAG: rt.free %[[C]]#0
// RT-DAG: rt.free %[[C]]#2
// RT: %[[D:.*]]:3 = func.call @reduce(%[[C]]#1)
// RT-DAG: rt.free %[[D]]#0
// RT-DAG: rt.free %[[D]]#2
// RT: rt.launch %[[C]]#1, %[[D]]#1, %{{.*}}, %[[S:[0-9]+]]
// RT-DAG: rt.free %[[C]]#1
// RT-DAG: rt.free %[[D]]#1
// RT: return %[[S]]
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = coll.all_reduce %x {reduce_op = "max", group = @tp} : tensor<4x8xf32>
  %a:3 = func.call @reduce(%x) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  %b:3 = func.call @reduce(%a#1) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  %m = coll.wait_tensor %r : tensor<4x8xf32>
  %s = compute.add %a#1, %b#1 : tensor<4x8xf32>
  %t = compute.add %s, %m : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// The callee's events (0-1) come before the caller's range (2-3); commlir_main runs the
// public @main, not the private helper defined first.
// HOST: @commlir_num_events = constant i32 4
// HOST-LABEL: define i32 @commlir_fn_reduce(
// event_record(rt, compute, 0)
// HOST: call i32 %{{.*}}(ptr %1, i32 0, i32 0)
// HOST-LABEL: define i32 @commlir_fn_main(
// event_record(rt, compute, 2): the caller's first event
// HOST: call i32 %{{.*}}(ptr %1, i32 0, i32 2)
// HOST: store ptr %arg0, ptr %carg
// HOST: store ptr null, ptr %cres
// HOST: %cst = call i32 @commlir_fn_reduce(ptr %0, ptr %1, ptr %cargs, ptr %cres)
// HOST: icmp ne i32 %cst, 0
// HOST: ret i32 %cst
// the caller's wait for its own all-reduce, after the calls: stream_wait(rt, compute, 3)
// HOST: call i32 %{{.*}}(ptr %1, i32 0, i32 3)
// HOST-LABEL: define i32 @commlir_main(
// HOST: call i32 @commlir_fn_main(
