// The Llama block of examples/llama_block.mlir (RMSNorm with broadcast, rotary embedding
// with iota/sin/cos/slice/neg/concat, causal attention with iota/compare/select, heads by
// permute, softmax, SwiGLU with sigmoid, log-sum-exp with reduce_max/log) on the sim backend
// at 2 ranks: the causal mask leaves row i of every head's probabilities zero after column
// i (row 0 is exactly [1, 0, …]), the 32 probability rows sum to 32, and a pass
// pipeline that keeps the ops does not change a digest.
//
// REQUIRES: commlir-run
// RUN: commlir-run %S/../../examples/llama_block.mlir --ranks 2 --print full > %t.full
// RUN: FileCheck %s < %t.full
// RUN: commlir-run %S/../../examples/llama_block.mlir --ranks 2 > %t.before
// RUN: commlir-opt %S/../../examples/llama_block.mlir --pass-pipeline='builtin.module(func.func(coll-sequence-parallel,cse,dce),symbol-dce)' | commlir-run - --ranks 2 > %t.after
// RUN: diff %t.before %t.after

// CHECK: rank 0 result 0: tensor<8x32xf32> digest={{[0-9a-f]+}}
// CHECK: rank 0 result 1: tensor<4x8x8xf32> digest={{[0-9a-f]+}} sum=3.200000e1 max_abs=1.000000e0
// CHECK-NEXT: [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, {{[-+.e0-9]+}}, {{[-+.e0-9]+}}, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, {{[-+.e0-9]+}}, {{[-+.e0-9]+}}, {{[-+.e0-9]+}}, 0.0, 0.0, 0.0, 0.0, 0.0,
// CHECK: rank 0 result 2: tensor<8xf32> digest={{[0-9a-f]+}}
// CHECK: rank 1 result 1: tensor<4x8x8xf32> digest={{[0-9a-f]+}} sum=3.200000e1 max_abs=1.000000e0
// CHECK-NEXT: [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, {{[-+.e0-9]+}}, {{[-+.e0-9]+}}, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,

// coll-sequence-parallel on the model ops (test/Transforms) keeps every digest.
// RUN: commlir-run %S/../Transforms/coll-sequence-parallel-model-ops.mlir --ranks 2 > %t.sp.before
// RUN: commlir-opt %S/../Transforms/coll-sequence-parallel-model-ops.mlir --pass-pipeline='builtin.module(func.func(coll-sequence-parallel))' > %t.sp.mlir
// RUN: FileCheck %s --check-prefix=SP < %t.sp.mlir
// RUN: commlir-run %t.sp.mlir --ranks 2 > %t.sp.after
// RUN: diff %t.sp.before %t.sp.after
// SP: coll.reduce_scatter_tensor
