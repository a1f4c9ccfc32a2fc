// The programs of examples/ parse, verify and print to a fixed point, in both forms.
//
// RUN: commlir-opt %S/../../examples/tp_mlp.mlir > %t.tp1.mlir
// RUN: commlir-opt %t.tp1.mlir > %t.tp2.mlir
// RUN: diff %t.tp1.mlir %t.tp2.mlir
// RUN: FileCheck %s --check-prefix=TP < %t.tp1.mlir
// RUN: commlir-opt %S/../../examples/fsdp_layer.mlir > %t.fsdp1.mlir
// RUN: commlir-opt %t.fsdp1.mlir > %t.fsdp2.mlir
// RUN: diff %t.fsdp1.mlir %t.fsdp2.mlir
// RUN: FileCheck %s --check-prefix=FSDP < %t.fsdp1.mlir
//
// RUN: commlir-opt %S/../../examples/llama_block.mlir > %t.llama1.mlir
// RUN: commlir-opt %t.llama1.mlir > %t.llama2.mlir
// RUN: diff %t.llama1.mlir %t.llama2.mlir
// RUN: FileCheck %s --check-prefix=LLAMA < %t.llama1.mlir
//
// The generic form is read back to the same module.
// RUN: commlir-opt %S/../../examples/fsdp_layer.mlir --mlir-print-op-generic | commlir-opt | diff %t.fsdp1.mlir -
// RUN: commlir-opt %S/../../examples/llama_block.mlir --mlir-print-op-generic | commlir-opt | diff %t.llama1.mlir -

// TP: coll.group @tp {size = 2 : i64, symm_mem}
// TP-LABEL: func.func @mlp(
// TP: compute.matmul
// TP: compute.gelu
// TP: compute.matmul
// TP: coll.all_reduce {{.*}} {group = @tp, reduce_op = "sum"} : tensor<8x1024xbf16>
// TP: coll.wait_tensor

// FSDP: coll.group @dp {size = 2 : i64}
// FSDP-LABEL: func.func @fsdp_layer(
// FSDP-COUNT-2: coll.all_gather_into_tensor
// FSDP-COUNT-2: coll.reduce_scatter_tensor

// LLAMA-LABEL: func.func @llama_block(
// LLAMA: compute.broadcast
// LLAMA: compute.permute {{.*}} {perm = array<i64: 1, 0, 2>}
// LLAMA: compute.iota {dim = 0 : i64} : tensor<8x4xf32>
// LLAMA: compute.cos
// LLAMA: compute.sin
// LLAMA: compute.compare {{.*}} {predicate = "le"}
// LLAMA: compute.select
// LLAMA: compute.sigmoid
// LLAMA: compute.reduce_max
// LLAMA: compute.log
