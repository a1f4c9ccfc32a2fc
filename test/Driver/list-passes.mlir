// RUN: commlir-opt --list-passes | FileCheck %s
// RUN: commlir-opt --show-dialects | FileCheck %s --check-prefix=DIALECTS
// RUN: commlir-opt --help | FileCheck %s --check-prefix=HELP

// CHECK: Available passes:
// CHECK: --cse {{ *}}- Eliminate common sub-expressions
// CHECK: --symbol-dce {{ *}}- Eliminate dead symbols
// CHECK: --test-options {{ *}}- Record the pass options
// CHECK-NEXT: --flag {{ *}}- A boolean option (default: false)
// CHECK-NEXT: --count=<long> {{ *}}- An integer option (default: 0)

// DIALECTS: Available Dialects: arith, builtin, coll, comm, compute, func, math, rt, shard, symm{{$}}

// HELP: --split-input-file
// HELP: --verify-diagnostics
// HELP: Passes:
// HELP: --test-options[=<OPTIONS>]
// HELP-NEXT: Record the pass options
// HELP-NEXT: flag=<bool> - A boolean option (default: false)
