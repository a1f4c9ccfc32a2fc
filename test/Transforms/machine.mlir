// The machine description the cost model uses: the `machine` pass option (a built-in name or
// a machine file), else the module's `commlir.machine` attribute, else h200x2-nvlink. At this
// shape (a 4096x24576 by 24576x1024 matmul reduce-scattered into 2048x1024 bf16) fusing wins
// on the default machine and loses on 8xH100, whose reduce-scatter is faster (370 vs 254 GB/s
// busbw) and whose GEMMs are slower: less communication to hide, and a longer GEMM beside the
// transfer to slow down.

// RUN: commlir-opt %s --pass-pipeline="builtin.module(func.func(coll-fuse-matmul))" | FileCheck %s --check-prefix=FUSE
// RUN: commlir-opt %s --pass-pipeline="builtin.module(func.func(coll-fuse-matmul{machine=h200x2-nvlink}))" | FileCheck %s --check-prefix=FUSE
// RUN: commlir-opt %s --pass-pipeline="builtin.module(func.func(coll-fuse-matmul{machine=h100x8-nvlink}))" | FileCheck %s --check-prefix=KEEP
// RUN: commlir-opt %s --pass-pipeline="builtin.module(func.func(coll-fuse-matmul{machine=%S/Inputs/slow-gather.json}))" | FileCheck %s --check-prefix=FUSE

// The module attribute, and the option winning over it.
// RUN: sed 's/^module {/module attributes {commlir.machine = "h100x8-nvlink"} {/' %s > %t.attr.mlir
// RUN: commlir-opt %t.attr.mlir --pass-pipeline="builtin.module(func.func(coll-fuse-matmul))" | FileCheck %s --check-prefix=KEEP
// RUN: commlir-opt %t.attr.mlir --pass-pipeline="builtin.module(func.func(coll-fuse-matmul{machine=h200x2-nvlink}))" | FileCheck %s --check-prefix=FUSE

// The analyses take the same machine: --machine, else the attribute.
// RUN: commlir-opt %s --comm-report=%t.default.json -o /dev/null
// RUN: commlir-opt %s --machine=h100x8-nvlink --comm-report=%t.h100.json -o /dev/null
// RUN: commlir-opt %t.attr.mlir --comm-report=%t.attr.json -o /dev/null
// RUN: FileCheck %s --check-prefix=REPORT-H200 < %t.default.json
// RUN: FileCheck %s --check-prefix=REPORT-H100 < %t.h100.json
// RUN: FileCheck %s --check-prefix=REPORT-H100 < %t.attr.json

// Errors: an unknown name, a file with an unknown key, an attribute naming no machine.
// RUN: not commlir-opt %s --pass-pipeline="builtin.module(func.func(coll-fuse-matmul{machine=no-such}))" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not commlir-opt %s --pass-pipeline="builtin.module(func.func(coll-fuse-matmul{machine=%S/Inputs/bad-machine.json}))" 2>&1 | FileCheck %s --check-prefix=BADFILE
// RUN: not commlir-opt %s --machine=%S/Inputs/bad-machine.json --comm-report=%t.bad.json 2>&1 | FileCheck %s --check-prefix=BADFILE
// RUN: sed 's/^module {/module attributes {commlir.machine = "no-such"} {/' %s > %t.badattr.mlir
// RUN: not commlir-opt %t.badattr.mlir --pass-pipeline="builtin.module(func.func(coll-fuse-matmul))" 2>&1 | FileCheck %s --check-prefix=BADATTR
// RUN: commlir-opt --list-machines | FileCheck %s --check-prefix=LIST

// FUSE-LABEL: func.func @rs
// FUSE: symm.fused_matmul_reduce_scatter
// KEEP-LABEL: func.func @rs
// KEEP: coll.reduce_scatter_tensor
// KEEP-NOT: symm.fused_matmul_reduce_scatter

// The reduce-scatter of 8 MiB (input): 32.3 us on 2xH200, 25.0 us on 8xH100.
// REPORT-H200: "op": "coll.reduce_scatter_tensor"
// REPORT-H200: "comm_ns": 32301.68
// REPORT-H100: "op": "coll.reduce_scatter_tensor"
// REPORT-H100: "comm_ns": 25008.79

// UNKNOWN: error: unknown machine 'no-such': not a built-in (h200x2-nvlink, h100x2-nvlink, h100x8-nvlink, h200x8-nvlink, h200x4-nvlink, h100x8x4-ib400)
// BADFILE: bad-machine.json:4:3: error: unknown field `mem_bandwidth`
// BADATTR: error: commlir.machine: unknown machine 'no-such'
// LIST: h200x2-nvlink (default): 1 node(s) x 2 GPU(s)
// LIST: h100x2-nvlink: 1 node(s) x 2 GPU(s); measured by commlir-run --calibrate
// LIST: h100x8-nvlink: 1 node(s) x 8 GPU(s)
// LIST: h200x8-nvlink: 1 node(s) x 8 GPU(s)
// LIST: h100x8x4-ib400: 4 node(s) x 8 GPU(s)

module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @rs(%a: tensor<4096x24576xbf16>, %b: tensor<24576x1024xbf16>) -> tensor<2048x1024xbf16> {
    %p = compute.matmul %a, %b : (tensor<4096x24576xbf16>, tensor<24576x1024xbf16>) -> tensor<4096x1024xbf16>
    %r = coll.reduce_scatter_tensor %p {group = @tp, reduce_op = "sum"} : (tensor<4096x1024xbf16>) -> tensor<2048x1024xbf16>
    %y = coll.wait_tensor %r : tensor<2048x1024xbf16>
    return %y : tensor<2048x1024xbf16>
  }
}
