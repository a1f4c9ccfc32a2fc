// REQUIRES: commlir-run
// Profile feedback: `commlir-run --profile` writes each op's time (the sim backend: the cost
// model's), keyed by function, kind, index within the kind and location; `comm-apply-profile`
// sets `cost_ns` from it, and the report then uses those times.

// RUN: commlir-run %s --profile=%t.json > /dev/null
// RUN: FileCheck %s --check-prefix=PROFILE < %t.json
// PROFILE: "source": "modelled: the cost model of h200x2-nvlink"
// PROFILE: "kind": "matmul",
// PROFILE-NEXT: "index": 0,
// PROFILE-NEXT: "loc": "profile.mlir:[[@LINE+35]]:5",
// PROFILE-NEXT: "what": "compute.matmul",
// PROFILE-NEXT: "ns": 2082.24
// PROFILE: "kind": "all_reduce",
// PROFILE: "ns": 8238.4

// RUN: commlir-opt %s --pass-pipeline="builtin.module(comm-apply-profile{file=%t.json})" | FileCheck %s --check-prefix=APPLY
// Each applied time is marked `cost_measured`: measured where the op ran, it already holds
// the slowdown of whatever overlapped it, which the timeline does not apply again.
// APPLY: compute.matmul {{.*}}{cost_measured, cost_ns = 2082 : i64}
// APPLY: compute.gelu {{.*}}{cost_measured, cost_ns = 2031 : i64}
// APPLY: coll.all_reduce {{.*}}{cost_measured, cost_ns = 8238 : i64, group = @tp, reduce_op = "sum"}

// A profile of the lowered program (after coll-to-comm, without locations: matched by kind
// and index) applies to the input too.
// RUN: commlir-opt %s --pass-pipeline="builtin.module(func.func(coll-to-comm))" | commlir-run - --profile=%t.lowered.json > /dev/null
// RUN: commlir-opt %s --pass-pipeline="builtin.module(comm-apply-profile{file=%t.lowered.json})" | FileCheck %s --check-prefix=APPLY

// A measured time changes the report: an all-reduce measured at 50 us.
// RUN: sed 's/"ns": 8238.4/"ns": 50000.0/' %t.json > %t.slow.json
// RUN: commlir-opt %s --pass-pipeline="builtin.module(comm-apply-profile{file=%t.slow.json})" --comm-report=%t.report.json -o /dev/null
// RUN: FileCheck %s --check-prefix=REPORT < %t.report.json
// REPORT: "op": "coll.all_reduce"
// REPORT: "comm_ns": 50000.0

// Entries that match no op are warnings; a missing file is an error.
// RUN: sed 's/"func": "main"/"func": "gone"/' %t.json > %t.gone.json
// RUN: commlir-opt %s --pass-pipeline="builtin.module(comm-apply-profile{file=%t.gone.json})" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GONE
// GONE: warning: profile entry matmul #0 of @gone at profile.mlir:{{[0-9]+}}:5 matches no op
// RUN: not commlir-opt %s --pass-pipeline="builtin.module(comm-apply-profile{file=%t.none.json})" 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: error: cannot read the profile '{{.*}}none.json'

module {
  coll.group @tp {size = 2 : i64}
  func.func @main(%x: tensor<64x128xf32>, %w: tensor<128x256xf32>) -> tensor<64x256xf32> {
    %h = compute.matmul %x, %w : (tensor<64x128xf32>, tensor<128x256xf32>) -> tensor<64x256xf32>
    %g = compute.gelu %h : tensor<64x256xf32>
    %r = coll.all_reduce %g {reduce_op = "sum", group = @tp} : tensor<64x256xf32>
    %y = coll.wait_tensor %r : tensor<64x256xf32>
    return %y : tensor<64x256xf32>
  }
}
