// Pass pipeline syntax errors are reported with MLIR's buffer name, the column and a caret,
// before the input is read.

// RUN: not commlir-opt %s --pass-pipeline='builtin.module(func.func(cse2))' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: MLIR Textual PassPipeline Parser:1:26: error: 'cse2' does not refer to a registered pass or pass pipeline
// UNKNOWN-NEXT: builtin.module(func.func(cse2))
// UNKNOWN-NEXT: {{^                         \^$}}

// RUN: not commlir-opt %s --pass-pipeline='cse' 2>&1 | FileCheck %s --check-prefix=ANCHOR
// ANCHOR: 1:1: error: expected pass pipeline to be wrapped with the anchor operation type, e.g. 'builtin.module(...)'

// RUN: not commlir-opt %s --pass-pipeline='builtin.module(cse dce)' 2>&1 | FileCheck %s --check-prefix=COMMA
// COMMA: 1:20: error: expected ',' or ')' in pass pipeline

// RUN: not commlir-opt %s --pass-pipeline='builtin.module(test-options{count=x})' 2>&1 | FileCheck %s --check-prefix=VALUE
// VALUE: 1:29: error: pass 'test-options': invalid value for option 'count': 'x' is not an integer

// RUN: not commlir-opt %s --test-options='nope=1' 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: 1:16: error: pass 'test-options': no such option 'nope'
// FLAG-NEXT: --test-options=nope=1

// RUN: not commlir-opt %s --pass-pipeline='builtin.module(cse)' --dce 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: error: '--pass-pipeline' option can't be used with individual pass options
