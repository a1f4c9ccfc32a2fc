// RUN: commlir-opt %s --split-input-file --coll-to-comm | FileCheck %s
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-to-comm{symm-algo=nccl}))' | FileCheck %s --check-prefix=NCCL
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-to-comm{symm-algo=one-shot}))' | FileCheck %s --check-prefix=ONE
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-to-comm{symm-algo=two-shot}))' | FileCheck %s --check-prefix=TWO
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-to-comm{one-shot-threshold=1024}))' | FileCheck %s --check-prefix=RULE

// All-reduces on symm_mem groups: NCCL, one-shot or two-shot, chosen by the cost model
// (docs/cost-model.md), forced by symm-algo, or by the size rule of one-shot-threshold.

coll.group @tp {size = 2 : i64, symm_mem}

// 4 KiB: one-shot's latency wins. Any reduce op.
// CHECK-LABEL: func.func @small_max
// CHECK: %[[O:.*]] = compute.scale {{.*}} -> tensor<16x128xbf16, #comm.buffer<symm_mem, @tp>>
// CHECK-NEXT: %[[Y:.*]] = symm.one_shot_all_reduce %[[O]] {group = @tp, reduce_op = "max"} : (tensor<16x128xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<16x128xbf16>
// CHECK-NEXT: return %[[Y]]
// NCCL-LABEL: func.func @small_max
// NCCL: comm.all_reduce
// NCCL-NEXT: comm.wait
// ONE-LABEL: func.func @small_max
// ONE: symm.one_shot_all_reduce
// TWO-LABEL: func.func @small_max
// TWO: %[[O:.*]] = compute.scale
// TWO-NEXT: %[[Y:.*]] = symm.two_shot_all_reduce %[[O]] {group = @tp, reduce_op = "max"} : tensor<16x128xbf16, #comm.buffer<symm_mem, @tp>>
// TWO-NEXT: %[[C:.*]] = compute.clone %[[Y]] : (tensor<16x128xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<16x128xbf16>
// TWO-NEXT: return %[[C]]
// RULE-LABEL: func.func @small_max
// RULE: comm.all_reduce
func.func @small_max(%x: tensor<16x128xbf16>) -> tensor<16x128xbf16> {
  %o = compute.scale %x {factor = 2.0 : f64} : tensor<16x128xbf16>
  %r = coll.all_reduce %o {reduce_op = "max", group = @tp} : tensor<16x128xbf16>
  %y = coll.wait_tensor %r : tensor<16x128xbf16>
  return %y : tensor<16x128xbf16>
}

// 16 MiB: two-shot moves 2·(G-1)/G of the buffer instead of G-1 times it. The result is the
// buffer itself; the function result gets a copy out.
// CHECK-LABEL: func.func @large_sum
// CHECK: %[[O:.*]] = compute.scale {{.*}} -> tensor<4096x2048xbf16, #comm.buffer<symm_mem, @tp>>
// CHECK-NEXT: %[[Y:.*]] = symm.two_shot_all_reduce %[[O]] {group = @tp, reduce_op = "sum"} : tensor<4096x2048xbf16, #comm.buffer<symm_mem, @tp>>
// CHECK-NEXT: %[[C:.*]] = compute.clone %[[Y]] : (tensor<4096x2048xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<4096x2048xbf16>
// CHECK-NEXT: %[[N:.*]] = compute.neg %[[Y]] : (tensor<4096x2048xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<4096x2048xbf16>
// CHECK-NEXT: return %[[C]], %[[N]]
// ONE-LABEL: func.func @large_sum
// ONE: symm.one_shot_all_reduce
// RULE-LABEL: func.func @large_sum
// RULE: comm.all_reduce
func.func @large_sum(%x: tensor<4096x2048xbf16>) -> (tensor<4096x2048xbf16>, tensor<4096x2048xbf16>) {
  %o = compute.scale %x {factor = 2.0 : f64} : tensor<4096x2048xbf16>
  %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<4096x2048xbf16>
  %y = coll.wait_tensor %r : tensor<4096x2048xbf16>
  %n = compute.neg %y : (tensor<4096x2048xbf16>) -> tensor<4096x2048xbf16>
  return %y, %n : tensor<4096x2048xbf16>, tensor<4096x2048xbf16>
}

// The clone rule of two-shot (as for NCCL's in-place all-reduce): the producer has another
// reader after the all-reduce, so the input is copied into a fresh symm buffer that the
// two-shot may clobber; the other reader still reads the original. The cost model charges
// that copy, so by default the out-of-place one-shot, which needs none, wins at 16 MiB here.
// CHECK-LABEL: func.func @two_shot_clone
// CHECK: %[[O:.*]] = compute.scale {{.*}} -> tensor<4096x2048xbf16, #comm.buffer<symm_mem, @tp>>
// CHECK-NEXT: %[[Y:.*]] = symm.one_shot_all_reduce %[[O]]
// CHECK-NEXT: compute.add %[[Y]], %[[O]]
// TWO-LABEL: func.func @two_shot_clone
// TWO: %[[O:.*]] = compute.scale %arg0 {factor = 2.0 : f64} : tensor<4096x2048xbf16>
// TWO-NEXT: %[[B:.*]] = compute.clone %[[O]] : (tensor<4096x2048xbf16>) -> tensor<4096x2048xbf16, #comm.buffer<symm_mem, @tp>>
// TWO-NEXT: %[[Y:.*]] = symm.two_shot_all_reduce %[[B]]
// TWO-NEXT: compute.add %[[Y]], %[[O]]
// ONE-LABEL: func.func @two_shot_clone
// ONE: %[[O:.*]] = compute.scale {{.*}} -> tensor<4096x2048xbf16, #comm.buffer<symm_mem, @tp>>
// ONE-NEXT: symm.one_shot_all_reduce %[[O]]
func.func @two_shot_clone(%x: tensor<4096x2048xbf16>) -> tensor<4096x2048xbf16> {
  %o = compute.scale %x {factor = 2.0 : f64} : tensor<4096x2048xbf16>
  %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<4096x2048xbf16>
  %y = coll.wait_tensor %r : tensor<4096x2048xbf16>
  %s = compute.add %y, %o : tensor<4096x2048xbf16>
  return %s : tensor<4096x2048xbf16>
}

// i1 sum has no symm kernel (the symm ops reject it): NCCL whatever symm-algo says.
// CHECK-LABEL: func.func @bool_sum
// CHECK: comm.all_reduce
// TWO-LABEL: func.func @bool_sum
// TWO: comm.all_reduce
// ONE-LABEL: func.func @bool_sum
// ONE: comm.all_reduce
func.func @bool_sum(%x: tensor<64xi1>) -> tensor<64xi1> {
  %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<64xi1>
  %y = coll.wait_tensor %r : tensor<64xi1>
  return %y : tensor<64xi1>
}

// -----

// On one rank every path is free: the tie goes to NCCL, whose start/wait can overlap.
coll.group @solo {size = 1 : i64, symm_mem}
// CHECK-LABEL: func.func @one_rank
// CHECK: comm.all_reduce
// CHECK-NOT: symm.
func.func @one_rank(%x: tensor<16xf32>) -> tensor<16xf32> {
  %o = compute.neg %x : tensor<16xf32>
  %r = coll.all_reduce %o {reduce_op = "avg", group = @solo} : tensor<16xf32>
  %y = coll.wait_tensor %r : tensor<16xf32>
  return %y : tensor<16xf32>
}

// -----

// Input-level symm ops on plain tensors: the declared comm-buffer operand is realized; the
// in-place two-shot gets a clone when its input has another reader, and its result becomes
// the buffer.
coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @input_level
// CHECK: %[[G:.*]] = compute.gelu {{.*}} -> tensor<8x4xf32, #comm.buffer<symm_mem, @tp>>
// CHECK-NEXT: %[[AG:.*]] = symm.all_gather %[[G]] {group = @tp} : (tensor<8x4xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<16x4xf32>
// CHECK-NEXT: %[[RS:.*]] = symm.reduce_scatter %[[G]] {group = @tp, reduce_op = "sum"} : (tensor<8x4xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = compute.clone %[[G]] : tensor<8x4xf32, #comm.buffer<symm_mem, @tp>>
// CHECK-NEXT: %[[A:.*]] = symm.two_shot_all_reduce %[[B]] {group = @tp, reduce_op = "avg"} : tensor<8x4xf32, #comm.buffer<symm_mem, @tp>>
// CHECK-NEXT: compute.add %[[A]], %[[G]]
func.func @input_level(%x: tensor<8x4xf32>) -> (tensor<16x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>) {
  %g = compute.gelu %x : tensor<8x4xf32>
  %ag = symm.all_gather %g {group = @tp} : (tensor<8x4xf32>) -> tensor<16x4xf32>
  %rs = symm.reduce_scatter %g {reduce_op = "sum", group = @tp} : (tensor<8x4xf32>) -> tensor<4x4xf32>
  %a = symm.two_shot_all_reduce %g {reduce_op = "avg", group = @tp} : tensor<8x4xf32>
  %s = compute.add %a, %g : tensor<8x4xf32>
  return %ag, %rs, %s : tensor<16x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>
}
