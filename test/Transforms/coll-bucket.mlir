// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-bucket))' | FileCheck %s
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-bucket{peak-memory-budget=1.0}))' | FileCheck %s --check-prefix=BUDGET
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-bucket{ignore-cost=true peak-memory-budget=1.0}))' | FileCheck %s --check-prefix=FORCE
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-bucket{bucket-bytes=4194304}))' | FileCheck %s --check-prefix=CAP
// RUN: not commlir-opt %s --pass-pipeline='builtin.module(func.func(coll-bucket{peak-memory-budget=-1}))' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: commlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(coll-bucket))' --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS

// BAD: error: peak-memory-budget must be a non-negative number, got -1

// FSDP's all-gathers of one layer's parameters, traced each right before its first use: the
// matmuls are short, so one launch for both saves a collective's latency. The merged op
// stages both shards into comm buffers at once, which fits under the step's peak (here a
// 16 MiB activation).
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @layer_all_gathers
func.func @layer_all_gathers(%x: tensor<8x1024xbf16>, %wa: tensor<512x1024xbf16>, %wb: tensor<512x1024xbf16>) -> tensor<8x1024xbf16> {
  // CHECK: %[[AG:.*]]:2 = coll.all_gather_into_tensor_coalesced %arg1, %arg2 {group = @dp} : (tensor<512x1024xbf16>, tensor<512x1024xbf16>) -> (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>)
  // CHECK-NEXT: %[[A:.*]] = coll.wait_tensor %[[AG]]#0
  // CHECK-NEXT: %[[B:.*]] = coll.wait_tensor %[[AG]]#1
  // CHECK-NEXT: %[[H:.*]] = compute.matmul %arg0, %[[A]]
  // CHECK-NEXT: compute.matmul %[[H]], %[[B]]
  // CHECK-NOT: coll.all_gather_into_tensor
  %act = compute.fill {value = 0.0 : f64, cost_ns = 1000 : i64} : tensor<8192x1024xbf16>
  %a = coll.all_gather_into_tensor %wa {group = @dp} : (tensor<512x1024xbf16>) -> tensor<1024x1024xbf16>
  %ya = coll.wait_tensor %a : tensor<1024x1024xbf16>
  %b = coll.all_gather_into_tensor %wb {group = @dp} : (tensor<512x1024xbf16>) -> tensor<1024x1024xbf16>
  %yb = coll.wait_tensor %b : tensor<1024x1024xbf16>
  %h = compute.matmul %x, %ya : (tensor<8x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<8x1024xbf16>
  %o = compute.matmul %h, %yb : (tensor<8x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<8x1024xbf16>
  return %o : tensor<8x1024xbf16>
}

// -----

// Gradient reduce-scatters: the merged op goes right after the last gradient exists, the
// waits where the first wait was. It holds both gradients at once, which the memory budget
// allows because the step's peak is elsewhere (here a 16 MiB activation).
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @grad_reduce_scatters
func.func @grad_reduce_scatters(%ga: tensor<2048x1024xbf16>, %gb: tensor<2048x1024xbf16>) -> (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) {
  // CHECK: compute.fill
  // CHECK-NEXT: %[[SA:.*]] = compute.scale %arg0
  // CHECK-NEXT: %[[SB:.*]] = compute.scale %arg1
  // CHECK-NEXT: %[[RS:.*]]:2 = coll.reduce_scatter_tensor_coalesced %[[SA]], %[[SB]] {group = @dp, reduce_op = "avg"}
  // CHECK-NEXT: %[[A:.*]] = coll.wait_tensor %[[RS]]#0
  // CHECK-NEXT: %[[B:.*]] = coll.wait_tensor %[[RS]]#1
  // CHECK-NEXT: return %[[A]], %[[B]]
  %act = compute.fill {value = 0.0 : f64, cost_ns = 1000 : i64} : tensor<8192x1024xbf16>
  %sa = compute.scale %ga {factor = 0.5 : f64, cost_ns = 1000 : i64} : tensor<2048x1024xbf16>
  %ra = coll.reduce_scatter_tensor %sa {group = @dp, reduce_op = "avg"} : (tensor<2048x1024xbf16>) -> tensor<1024x1024xbf16>
  %sb = compute.scale %gb {factor = 0.5 : f64, cost_ns = 1000 : i64} : tensor<2048x1024xbf16>
  %rb = coll.reduce_scatter_tensor %sb {group = @dp, reduce_op = "avg"} : (tensor<2048x1024xbf16>) -> tensor<1024x1024xbf16>
  %ya = coll.wait_tensor %ra : tensor<1024x1024xbf16>
  %yb = coll.wait_tensor %rb : tensor<1024x1024xbf16>
  return %ya, %yb : tensor<1024x1024xbf16>, tensor<1024x1024xbf16>
}

// -----

// Only collectives of one group and one reduce op merge; a bucket's members are consecutive
// among their group's collectives (the `max` all-reduce ends @tp's bucket).
coll.group @tp {size = 2 : i64}
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @groups_and_reduce_ops
func.func @groups_and_reduce_ops(%a: tensor<1024xf32>, %b: tensor<1024xf32>, %c: tensor<1024xf32>, %d: tensor<1024xf32>, %e: tensor<1024xf32>) -> (tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>) {
  // CHECK: coll.all_reduce_coalesced %arg0, %arg2 {group = @tp, reduce_op = "sum"}
  // CHECK: coll.all_reduce %arg1 {group = @dp, reduce_op = "sum"}
  // CHECK: coll.all_reduce %arg3 {group = @tp, reduce_op = "max"}
  // CHECK: coll.all_reduce %arg4 {group = @tp, reduce_op = "sum"}
  %ra = coll.all_reduce %a {reduce_op = "sum", group = @tp} : tensor<1024xf32>
  %rb = coll.all_reduce %b {reduce_op = "sum", group = @dp} : tensor<1024xf32>
  %rc = coll.all_reduce %c {reduce_op = "sum", group = @tp} : tensor<1024xf32>
  %rd = coll.all_reduce %d {reduce_op = "max", group = @tp} : tensor<1024xf32>
  %re = coll.all_reduce %e {reduce_op = "sum", group = @tp} : tensor<1024xf32>
  %ya = coll.wait_tensor %ra : tensor<1024xf32>
  %yb = coll.wait_tensor %rb : tensor<1024xf32>
  %yc = coll.wait_tensor %rc : tensor<1024xf32>
  %yd = coll.wait_tensor %rd : tensor<1024xf32>
  %ye = coll.wait_tensor %re : tensor<1024xf32>
  return %ya, %yb, %yc, %yd, %ye : tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>
}

// -----

// The second all-gather's input is computed from the first one's result: merging would put
// the merged op after the first wait, so it starts a bucket of its own (with the third).
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @late_input
func.func @late_input(%x: tensor<8x1024xbf16>, %wa: tensor<512x1024xbf16>, %wc: tensor<512x1024xbf16>) -> (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) {
  // CHECK: coll.all_gather_into_tensor %arg1
  // CHECK: coll.wait_tensor
  // CHECK: compute.slice
  // CHECK-NEXT: coll.all_gather_into_tensor_coalesced %{{.*}}, %arg2
  %a = coll.all_gather_into_tensor %wa {group = @dp} : (tensor<512x1024xbf16>) -> tensor<1024x1024xbf16>
  %ya = coll.wait_tensor %a : tensor<1024x1024xbf16>
  %p = compute.slice %ya {dim = 0 : i64, start = 0 : i64, size = 512 : i64} : (tensor<1024x1024xbf16>) -> tensor<512x1024xbf16>
  %b = coll.all_gather_into_tensor %p {group = @dp} : (tensor<512x1024xbf16>) -> tensor<1024x1024xbf16>
  %yb = coll.wait_tensor %b : tensor<1024x1024xbf16>
  %c = coll.all_gather_into_tensor %wc {group = @dp} : (tensor<512x1024xbf16>) -> tensor<1024x1024xbf16>
  %yc = coll.wait_tensor %c : tensor<1024x1024xbf16>
  %s = compute.add %yb, %yc : tensor<1024x1024xbf16>
  return %ya, %s : tensor<1024x1024xbf16>, tensor<1024x1024xbf16>
}

// -----

// Merging would gather the second layer's weight while the first one's is still live: faster,
// but above the input's peak, so only a budget lets it happen.
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @budget
// CHECK-NOT: coalesced
// BUDGET-LABEL: func.func @budget
// BUDGET: coll.all_gather_into_tensor_coalesced %arg1, %arg2
func.func @budget(%x: tensor<8x2048xbf16>, %wa: tensor<1024x2048xbf16>, %wb: tensor<1024x2048xbf16>) -> tensor<8x2048xbf16> {
  %a = coll.all_gather_into_tensor %wa {group = @dp} : (tensor<1024x2048xbf16>) -> tensor<2048x2048xbf16>
  %ya = coll.wait_tensor %a : tensor<2048x2048xbf16>
  %h = compute.matmul %x, %ya : (tensor<8x2048xbf16>, tensor<2048x2048xbf16>) -> tensor<8x2048xbf16>
  %b = coll.all_gather_into_tensor %wb {group = @dp} : (tensor<1024x2048xbf16>) -> tensor<2048x2048xbf16>
  %yb = coll.wait_tensor %b : tensor<2048x2048xbf16>
  %o = compute.matmul %h, %yb : (tensor<8x2048xbf16>, tensor<2048x2048xbf16>) -> tensor<8x2048xbf16>
  return %o : tensor<8x2048xbf16>
}

// -----

// The first reduce-scatter runs under the second gradient's computation: merging would delay
// it past that and lengthen the step, so the cost model keeps them apart (`ignore-cost`
// with a budget for the memory merges them anyway).
coll.group @dp {size = 2 : i64}
// CHECK-LABEL: func.func @hidden
// CHECK-NOT: coalesced
// FORCE-LABEL: func.func @hidden
// FORCE: coll.reduce_scatter_tensor_coalesced
func.func @hidden(%ga: tensor<2048x1024xbf16>, %gb: tensor<2048x1024xbf16>) -> (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) {
  %ra = coll.reduce_scatter_tensor %ga {group = @dp, reduce_op = "sum"} : (tensor<2048x1024xbf16>) -> tensor<1024x1024xbf16>
  %sb = compute.scale %gb {factor = 0.5 : f64, cost_ns = 500000 : i64} : tensor<2048x1024xbf16>
  %rb = coll.reduce_scatter_tensor %sb {group = @dp, reduce_op = "sum"} : (tensor<2048x1024xbf16>) -> tensor<1024x1024xbf16>
  %ya = coll.wait_tensor %ra : tensor<1024x1024xbf16>
  %yb = coll.wait_tensor %rb : tensor<1024x1024xbf16>
  return %ya, %yb : tensor<1024x1024xbf16>, tensor<1024x1024xbf16>
}

// -----

// `bucket-bytes` caps a bucket (each gathered weight moves 2 MiB per rank; the step's peak
// is a 16 MiB activation).
coll.group @dp {size = 2 : i64}
// CAP-LABEL: func.func @cap
// CAP: coll.all_gather_into_tensor_coalesced %arg0, %arg1
// CAP: coll.all_gather_into_tensor %arg2
// CHECK-LABEL: func.func @cap
// CHECK: coll.all_gather_into_tensor_coalesced %arg0, %arg1, %arg2
func.func @cap(%wa: tensor<512x1024xbf16>, %wb: tensor<512x1024xbf16>, %wc: tensor<512x1024xbf16>) -> (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) {
  %act = compute.fill {value = 0.0 : f64, cost_ns = 1000 : i64} : tensor<8192x1024xbf16>
  %a = coll.all_gather_into_tensor %wa {group = @dp} : (tensor<512x1024xbf16>) -> tensor<1024x1024xbf16>
  %b = coll.all_gather_into_tensor %wb {group = @dp} : (tensor<512x1024xbf16>) -> tensor<1024x1024xbf16>
  %c = coll.all_gather_into_tensor %wc {group = @dp} : (tensor<512x1024xbf16>) -> tensor<1024x1024xbf16>
  %ya = coll.wait_tensor %a : tensor<1024x1024xbf16>
  %yb = coll.wait_tensor %b : tensor<1024x1024xbf16>
  %yc = coll.wait_tensor %c : tensor<1024x1024xbf16>
  return %ya, %yb, %yc : tensor<1024x1024xbf16>, tensor<1024x1024xbf16>, tensor<1024x1024xbf16>
}

// -----

// TP+FSDP: in the traced order every gather is waited right away, so merging the second
// layer's into the first's saves a latency and looks faster. But `comm-overlap-schedule`
// prefetches the second gather under the first matmul, ahead of the TP all-reduce on the
// shared comm stream; merged, the first matmul would wait for both weights (the schedule
// after bucketing: 428 µs against 352). Judged on the scheduled order too, the pass keeps
// them apart.
coll.group @tp {size = 2 : i64}
coll.group @dp {size = 2 : i64, ranks = [array<i64: 0, 2>, array<i64: 1, 3>]}
// CHECK-LABEL: func.func @tp_fsdp
// CHECK-NOT: coalesced
// STATS: 1 kept-by-schedule
func.func @tp_fsdp(%x: tensor<2048x4096xbf16> {coll.replicated = @tp}, %wa: tensor<2048x4096xbf16>, %wb: tensor<2048x4096xbf16>) -> tensor<2048x4096xbf16> {
  %act = compute.fill {value = 0.0 : f64, cost_ns = 1000 : i64} : tensor<16384x4096xbf16>
  %a = coll.all_gather_into_tensor %wa {group = @dp} : (tensor<2048x4096xbf16>) -> tensor<4096x4096xbf16>
  %ya = coll.wait_tensor %a : tensor<4096x4096xbf16>
  %h = compute.matmul %x, %ya : (tensor<2048x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<2048x4096xbf16>
  %r = coll.all_reduce %h {group = @tp, reduce_op = "sum"} : tensor<2048x4096xbf16>
  %yr = coll.wait_tensor %r : tensor<2048x4096xbf16>
  %b = coll.all_gather_into_tensor %wb {group = @dp} : (tensor<2048x4096xbf16>) -> tensor<4096x4096xbf16>
  %yb = coll.wait_tensor %b : tensor<4096x4096xbf16>
  %o = compute.matmul %yr, %yb : (tensor<2048x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<2048x4096xbf16>
  return %o : tensor<2048x4096xbf16>
}
