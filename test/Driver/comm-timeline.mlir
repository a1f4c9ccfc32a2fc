// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(coll-to-comm{one-shot-threshold=0}))' --comm-timeline=%t.json -o /dev/null
// RUN: FileCheck %s < %t.json
// RUN: commlir-opt %s --pass-pipeline='builtin.module(func.func(coll-to-comm{one-shot-threshold=0}))' --comm-timeline=%t.svg -o /dev/null
// RUN: FileCheck %s --check-prefix=SVG < %t.svg
// RUN: not commlir-opt %s --comm-timeline=%t.txt 2>&1 | FileCheck %s --check-prefix=ERR

// The simulated schedule as Chrome trace events: one process per rank of @tp, a compute, a
// comm and an exposed-comm thread each; the all-reduce (100 ns) overlaps the independent
// matmul (60 ns), so 40 ns of it are exposed at the wait; memory as a counter.

coll.group @tp {size = 2 : i64}
func.func @overlap(%x: tensor<256xf32>, %a: tensor<4x4xf32>) -> (tensor<256xf32>, tensor<4x4xf32>) {
  %r = coll.all_reduce %x {reduce_op = "sum", group = @tp, cost_ns = 100} : tensor<256xf32>
  %m = compute.matmul %a, %a {cost_ns = 60} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %w = coll.wait_tensor %r : tensor<256xf32>
  return %w, %m : tensor<256xf32>, tensor<4x4xf32>
}

// CHECK: {"traceEvents": [
// CHECK: {"name":"process_name","ph":"M","ts":0.0,"pid":1,"tid":0,"args":{"name":"@overlap rank 0 (simulated)"}}
// CHECK: {"name":"thread_name","ph":"M","ts":0.0,"pid":1,"tid":1,"args":{"name":"compute"}}
// CHECK: {"name":"thread_name","ph":"M","ts":0.0,"pid":1,"tid":2,"args":{"name":"comm"}}
// CHECK: {"name":"thread_name","ph":"M","ts":0.0,"pid":1,"tid":3,"args":{"name":"exposed comm"}}
// CHECK: {"name":"comm.all_reduce @tp 1 KiB","cat":"comm","ph":"X","ts":[[START:[0-9.]+]],"dur":0.1,"pid":1,"tid":2,"args":{"bytes":1024,"exposed_ns":0.0,"group":"tp","index":{{[0-9]+}},"op":"comm.all_reduce"}}
// CHECK: {"name":"compute.matmul","cat":"compute","ph":"X","ts":[[START]],"dur":0.06,"pid":1,"tid":1,
// CHECK: {"name":"comm.all_reduce @tp 1 KiB","cat":"exposed","ph":"X",{{.*}}"dur":0.04,"pid":1,"tid":3,"cname":"terrible","args":{"exposed_ns":40.0}}
// CHECK: {"name":"memory","ph":"C",{{.*}}"pid":1,"tid":0,"args":{"bytes":{{[0-9]+}}}}
// CHECK: "pid":2,
// CHECK-NOT: "pid":3,
// CHECK: ],
// CHECK-NEXT: "displayTimeUnit": "ns"}

// SVG: <svg xmlns="http://www.w3.org/2000/svg" width="960"
// SVG: @overlap (simulated): makespan {{.*}}, exposed comm 40 ns
// SVG: rank 0 compute
// SVG: <title>exposed: comm.all_reduce @tp 1 KiB (40 ns)</title>
// SVG: rank 1 comm
// SVG: <polyline points=
// SVG: </svg>

// ERR: commlir-opt: error: --comm-timeline: cannot tell the format of '{{.*}}.txt': expected a file ending in .json (Chrome trace events) or .svg
