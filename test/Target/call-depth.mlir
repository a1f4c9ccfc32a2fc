// comm-to-rt bounds the depth of call chains (each call is a native frame of the host
// program on the runner's rank thread): 10,000 functions in a chain compile, 10,001 do not.
// The chain is checked iteratively, so neither case recurses in the compiler.
// REQUIRES: commlir-translate
// RUN: %python %S/Inputs/call_chain.py 10000 > %t.ok.mlir
// RUN: commlir-translate %t.ok.mlir --entry f0 --emit=host-ll | FileCheck %s --check-prefix=OK
// RUN: %python %S/Inputs/call_chain.py 10001 > %t.deep.mlir
// RUN: not commlir-translate %t.deep.mlir --entry f0 2>&1 | FileCheck %s --check-prefix=DEEP

// OK: define i32 @commlir_fn_f9999(
// OK: define i32 @commlir_main(
// DEEP: error: 'func.func' op comm-to-rt: a chain of 10000 nested calls reaches this function; at most 10000 are supported
