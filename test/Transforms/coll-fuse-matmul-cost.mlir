// RUN: commlir-opt %s --pass-pipeline="builtin.module(func.func(coll-fuse-matmul))" | FileCheck %s

// The cost check at the shapes measured on 2×H200 (tokens×hidden×ffn; A row-sharded over the
// two ranks, B the local column or row shard, bf16): at 2048×4096×16384 the chunked pipeline
// loses to the unfused sequence and is left alone; at 8192×4096×16384 and 8192×8192×28672
// it wins and is fused. Both sides, all-gather→matmul and matmul→reduce-scatter.

module {
  coll.group @tp {size = 2 : i64, symm_mem}

  // CHECK-LABEL: func.func @ag_s
  // CHECK: coll.all_gather_into_tensor
  // CHECK: compute.matmul
  // CHECK-NOT: symm.fused_all_gather_matmul
  func.func @ag_s(%a: tensor<1024x4096xbf16>, %b: tensor<4096x8192xbf16>) -> tensor<2048x8192xbf16> {
    %g = coll.all_gather_into_tensor %a {group = @tp} : (tensor<1024x4096xbf16>) -> tensor<2048x4096xbf16>
    %y = coll.wait_tensor %g : tensor<2048x4096xbf16>
    %c = compute.matmul %y, %b : (tensor<2048x4096xbf16>, tensor<4096x8192xbf16>) -> tensor<2048x8192xbf16>
    return %c : tensor<2048x8192xbf16>
  }

  // CHECK-LABEL: func.func @rs_s
  // CHECK: compute.matmul
  // CHECK: coll.reduce_scatter_tensor
  // CHECK-NOT: symm.fused_matmul_reduce_scatter
  func.func @rs_s(%a: tensor<2048x8192xbf16>, %b: tensor<8192x4096xbf16>) -> tensor<1024x4096xbf16> {
    %p = compute.matmul %a, %b : (tensor<2048x8192xbf16>, tensor<8192x4096xbf16>) -> tensor<2048x4096xbf16>
    %r = coll.reduce_scatter_tensor %p {group = @tp, reduce_op = "sum"} : (tensor<2048x4096xbf16>) -> tensor<1024x4096xbf16>
    %y = coll.wait_tensor %r : tensor<1024x4096xbf16>
    return %y : tensor<1024x4096xbf16>
  }

  // CHECK-LABEL: func.func @ag_m
  // CHECK-NOT: coll.all_gather_into_tensor
  // CHECK: symm.fused_all_gather_matmul %{{.*}}, %{{.*}} {group = @tp} : (tensor<4096x4096xbf16>, tensor<4096x8192xbf16>) -> tensor<8192x8192xbf16>
  func.func @ag_m(%a: tensor<4096x4096xbf16>, %b: tensor<4096x8192xbf16>) -> tensor<8192x8192xbf16> {
    %g = coll.all_gather_into_tensor %a {group = @tp} : (tensor<4096x4096xbf16>) -> tensor<8192x4096xbf16>
    %y = coll.wait_tensor %g : tensor<8192x4096xbf16>
    %c = compute.matmul %y, %b : (tensor<8192x4096xbf16>, tensor<4096x8192xbf16>) -> tensor<8192x8192xbf16>
    return %c : tensor<8192x8192xbf16>
  }

  // CHECK-LABEL: func.func @rs_m
  // CHECK-NOT: coll.reduce_scatter_tensor
  // CHECK: symm.fused_matmul_reduce_scatter %{{.*}}, %{{.*}} {group = @tp, reduce_op = "sum", scatter_dim = 0 : i64} : (tensor<8192x8192xbf16>, tensor<8192x4096xbf16>) -> tensor<4096x4096xbf16>
  func.func @rs_m(%a: tensor<8192x8192xbf16>, %b: tensor<8192x4096xbf16>) -> tensor<4096x4096xbf16> {
    %p = compute.matmul %a, %b : (tensor<8192x8192xbf16>, tensor<8192x4096xbf16>) -> tensor<8192x4096xbf16>
    %r = coll.reduce_scatter_tensor %p {group = @tp, reduce_op = "sum"} : (tensor<8192x4096xbf16>) -> tensor<4096x4096xbf16>
    %y = coll.wait_tensor %r : tensor<4096x4096xbf16>
    return %y : tensor<4096x4096xbf16>
  }

  // CHECK-LABEL: func.func @ag_l
  // CHECK-NOT: coll.all_gather_into_tensor
  // CHECK: symm.fused_all_gather_matmul %{{.*}}, %{{.*}} {group = @tp} : (tensor<4096x8192xbf16>, tensor<8192x14336xbf16>) -> tensor<8192x14336xbf16>
  func.func @ag_l(%a: tensor<4096x8192xbf16>, %b: tensor<8192x14336xbf16>) -> tensor<8192x14336xbf16> {
    %g = coll.all_gather_into_tensor %a {group = @tp} : (tensor<4096x8192xbf16>) -> tensor<8192x8192xbf16>
    %y = coll.wait_tensor %g : tensor<8192x8192xbf16>
    %c = compute.matmul %y, %b : (tensor<8192x8192xbf16>, tensor<8192x14336xbf16>) -> tensor<8192x14336xbf16>
    return %c : tensor<8192x14336xbf16>
  }

  // CHECK-LABEL: func.func @rs_l
  // CHECK-NOT: coll.reduce_scatter_tensor
  // CHECK: symm.fused_matmul_reduce_scatter %{{.*}}, %{{.*}} {group = @tp, reduce_op = "sum", scatter_dim = 0 : i64} : (tensor<8192x14336xbf16>, tensor<14336x8192xbf16>) -> tensor<4096x8192xbf16>
  func.func @rs_l(%a: tensor<8192x14336xbf16>, %b: tensor<14336x8192xbf16>) -> tensor<4096x8192xbf16> {
    %p = compute.matmul %a, %b : (tensor<8192x14336xbf16>, tensor<14336x8192xbf16>) -> tensor<8192x8192xbf16>
    %r = coll.reduce_scatter_tensor %p {group = @tp, reduce_op = "sum"} : (tensor<8192x8192xbf16>) -> tensor<4096x8192xbf16>
    %y = coll.wait_tensor %r : tensor<4096x8192xbf16>
    return %y : tensor<4096x8192xbf16>
  }
}
