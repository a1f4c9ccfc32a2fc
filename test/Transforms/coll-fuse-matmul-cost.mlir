// RUN: commlir-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(coll-fuse-matmul))" | FileCheck %s

// The cost check at the shapes of the fused-op benchmark (tokens×hidden×ffn; A row-sharded
// over the two ranks, B the local column or row shard, bf16), as measured for commlir's own
// pipelines with copy engines moving the chunks (docs/benchmarks.md, *GPU: async tensor
// parallelism*): at 2048×4096×16384, 8192×4096×16384 and 8192×8192×28672 both pipelines beat
// the unfused sequence and are fused. A product too small to hide its transfer (64 tokens,
// hidden 256) is left alone.

module {
  coll.group @tp {size = 2 : i64, symm_mem}

  // CHECK-LABEL: func.func @ag_tiny
  // CHECK: coll.all_gather_into_tensor
  // CHECK: compute.matmul
  // CHECK-NOT: symm.fused_all_gather_matmul
  func.func @ag_tiny(%a: tensor<32x256xbf16>, %b: tensor<256x512xbf16>) -> tensor<64x512xbf16> {
    %g = coll.all_gather_into_tensor %a {group = @tp} : (tensor<32x256xbf16>) -> tensor<64x256xbf16>
    %y = coll.wait_tensor %g : tensor<64x256xbf16>
    %c = compute.matmul %y, %b : (tensor<64x256xbf16>, tensor<256x512xbf16>) -> tensor<64x512xbf16>
    return %c : tensor<64x512xbf16>
  }

  // CHECK-LABEL: func.func @rs_tiny
  // CHECK: compute.matmul
  // CHECK: coll.reduce_scatter_tensor
  // CHECK-NOT: symm.fused_matmul_reduce_scatter
  func.func @rs_tiny(%a: tensor<64x512xbf16>, %b: tensor<512x256xbf16>) -> tensor<32x256xbf16> {
    %p = compute.matmul %a, %b : (tensor<64x512xbf16>, tensor<512x256xbf16>) -> tensor<64x256xbf16>
    %r = coll.reduce_scatter_tensor %p {group = @tp, reduce_op = "sum"} : (tensor<64x256xbf16>) -> tensor<32x256xbf16>
    %y = coll.wait_tensor %r : tensor<32x256xbf16>
    return %y : tensor<32x256xbf16>
  }

  // CHECK-LABEL: func.func @ag_s
  // CHECK-NOT: coll.all_gather_into_tensor
  // CHECK: symm.fused_all_gather_matmul %{{.*}}, %{{.*}} {group = @tp}
  func.func @ag_s(%a: tensor<1024x4096xbf16>, %b: tensor<4096x8192xbf16>) -> tensor<2048x8192xbf16> {
    %g = coll.all_gather_into_tensor %a {group = @tp} : (tensor<1024x4096xbf16>) -> tensor<2048x4096xbf16>
    %y = coll.wait_tensor %g : tensor<2048x4096xbf16>
    %c = compute.matmul %y, %b : (tensor<2048x4096xbf16>, tensor<4096x8192xbf16>) -> tensor<2048x8192xbf16>
    return %c : tensor<2048x8192xbf16>
  }

  // CHECK-LABEL: func.func @rs_s
  // CHECK-NOT: coll.reduce_scatter_tensor
  // CHECK: symm.fused_matmul_reduce_scatter %{{.*}}, %{{.*}} {group = @tp, reduce_op = "sum", scatter_dim = 0 : i64}
  func.func @rs_s(%a: tensor<2048x8192xbf16>, %b: tensor<8192x4096xbf16>) -> tensor<1024x4096xbf16> {
    %p = compute.matmul %a, %b : (tensor<2048x8192xbf16>, tensor<8192x4096xbf16>) -> tensor<2048x4096xbf16>
    %r = coll.reduce_scatter_tensor %p {group = @tp, reduce_op = "sum"} : (tensor<2048x4096xbf16>) -> tensor<1024x4096xbf16>
    %y = coll.wait_tensor %r : tensor<1024x4096xbf16>
    return %y : tensor<1024x4096xbf16>
  }

  // CHECK-LABEL: func.func @ag_m
  // CHECK-NOT: coll.all_gather_into_tensor
  // CHECK: symm.fused_all_gather_matmul %{{.*}}, %{{.*}} {group = @tp}
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
  // CHECK: symm.fused_all_gather_matmul %{{.*}}, %{{.*}} {group = @tp}
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

// -----

// The Llama sequence-parallel block as exported from PyTorch (dim 4096, 32 heads, MLP 11008,
// seq 4096, batch 1, TP 2): the all-gather reaches q, k and v through reshapes, and w2's
// product reaches the reduce-scatter through a reshape and the split/cat of the sequence.
// Both pipelines win on 2×H200 and are fused through the views.
module {
  coll.group @tp {size = 2 : i64, symm_mem}

  // CHECK-LABEL: func.func @ag_llama_sp
  // CHECK-NOT: coll.all_gather_into_tensor
  // CHECK: symm.fused_all_gather_matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {group = @tp} : (tensor<2048x4096xbf16>, tensor<4096x2048xbf16>, tensor<4096x2048xbf16>, tensor<4096x2048xbf16>) -> (tensor<4096x2048xbf16>, tensor<4096x2048xbf16>, tensor<4096x2048xbf16>)
  func.func @ag_llama_sp(%x: tensor<1x2048x4096xbf16>, %wq: tensor<4096x2048xbf16>, %wk: tensor<4096x2048xbf16>, %wv: tensor<4096x2048xbf16>) -> (tensor<4096x2048xbf16>, tensor<4096x2048xbf16>, tensor<4096x2048xbf16>) {
    %g = coll.all_gather_into_tensor %x {group = @tp} : (tensor<1x2048x4096xbf16>) -> tensor<2x2048x4096xbf16>
    %w = coll.wait_tensor %g : tensor<2x2048x4096xbf16>
    %v = compute.reshape %w : (tensor<2x2048x4096xbf16>) -> tensor<1x4096x4096xbf16>
    %v1 = compute.reshape %v : (tensor<1x4096x4096xbf16>) -> tensor<4096x4096xbf16>
    %q = compute.matmul %v1, %wq : (tensor<4096x4096xbf16>, tensor<4096x2048xbf16>) -> tensor<4096x2048xbf16>
    %v2 = compute.reshape %v : (tensor<1x4096x4096xbf16>) -> tensor<4096x4096xbf16>
    %k = compute.matmul %v2, %wk : (tensor<4096x4096xbf16>, tensor<4096x2048xbf16>) -> tensor<4096x2048xbf16>
    %v3 = compute.reshape %v : (tensor<1x4096x4096xbf16>) -> tensor<4096x4096xbf16>
    %vv = compute.matmul %v3, %wv : (tensor<4096x4096xbf16>, tensor<4096x2048xbf16>) -> tensor<4096x2048xbf16>
    return %q, %k, %vv : tensor<4096x2048xbf16>, tensor<4096x2048xbf16>, tensor<4096x2048xbf16>
  }

  // CHECK-LABEL: func.func @rs_llama_sp
  // CHECK-NOT: coll.reduce_scatter_tensor
  // CHECK: %[[F:.*]] = symm.fused_matmul_reduce_scatter %{{.*}}, %{{.*}} {group = @tp, reduce_op = "sum", scatter_dim = 0 : i64} : (tensor<4096x5504xbf16>, tensor<5504x4096xbf16>) -> tensor<2048x4096xbf16>
  // CHECK-NEXT: compute.reshape %[[F]] : (tensor<2048x4096xbf16>) -> tensor<1x2048x4096xbf16>
  func.func @rs_llama_sp(%h: tensor<4096x5504xbf16>, %w2: tensor<5504x4096xbf16>) -> tensor<1x2048x4096xbf16> {
    %p = compute.matmul %h, %w2 : (tensor<4096x5504xbf16>, tensor<5504x4096xbf16>) -> tensor<4096x4096xbf16>
    %r = compute.reshape %p : (tensor<4096x4096xbf16>) -> tensor<1x4096x4096xbf16>
    %s0 = compute.slice %r {dim = 1 : i64, start = 0 : i64, size = 2048 : i64} : (tensor<1x4096x4096xbf16>) -> tensor<1x2048x4096xbf16>
    %s1 = compute.slice %r {dim = 1 : i64, start = 2048 : i64, size = 2048 : i64} : (tensor<1x4096x4096xbf16>) -> tensor<1x2048x4096xbf16>
    %c = compute.concat %s0, %s1 {dim = 0 : i64} : (tensor<1x2048x4096xbf16>, tensor<1x2048x4096xbf16>) -> tensor<2x2048x4096xbf16>
    %rs = coll.reduce_scatter_tensor %c {reduce_op = "sum", group = @tp} : (tensor<2x2048x4096xbf16>) -> tensor<1x2048x4096xbf16>
    %y = coll.wait_tensor %rs : tensor<1x2048x4096xbf16>
    return %y : tensor<1x2048x4096xbf16>
  }
}
