// RUN: commlir-opt %s | commlir-opt | FileCheck %s

coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @one_shot
func.func @one_shot(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %b = compute.clone %x : (tensor<8xbf16>) -> tensor<8xbf16, #comm.buffer<symm_mem, @tp>>
  // CHECK: symm.one_shot_all_reduce %{{.*}} {group = @tp, reduce_op = "sum"} : (tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16>
  %y = symm.one_shot_all_reduce %b {reduce_op = "sum", group = @tp} : (tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16>
  return %y : tensor<8xbf16>
}

// Every reduction of coll.all_reduce; plain tensors at the input level.
// CHECK-LABEL: func.func @one_shot_reduce_ops
func.func @one_shot_reduce_ops(%x: tensor<8xi32>) -> tensor<8xi32> {
  // CHECK: symm.one_shot_all_reduce %{{.*}} {group = @tp, reduce_op = "avg"} : tensor<8xi32>
  // CHECK: symm.one_shot_all_reduce %{{.*}} {group = @tp, reduce_op = "max"} : tensor<8xi32>
  // CHECK: symm.one_shot_all_reduce %{{.*}} {group = @tp, reduce_op = "min"} : tensor<8xi32>
  // CHECK: symm.one_shot_all_reduce %{{.*}} {group = @tp, reduce_op = "product"} : tensor<8xi32>
  %a = symm.one_shot_all_reduce %x {reduce_op = "avg", group = @tp} : tensor<8xi32>
  %b = symm.one_shot_all_reduce %a {reduce_op = "max", group = @tp} : tensor<8xi32>
  %c = symm.one_shot_all_reduce %b {reduce_op = "min", group = @tp} : tensor<8xi32>
  %d = symm.one_shot_all_reduce %c {reduce_op = "product", group = @tp} : tensor<8xi32>
  return %d : tensor<8xi32>
}

// CHECK-LABEL: func.func @two_shot
func.func @two_shot(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  // CHECK: %[[B:.*]] = compute.clone
  %b = compute.clone %x : (tensor<8xbf16>) -> tensor<8xbf16, #comm.buffer<symm_mem, @tp>>
  // CHECK-NEXT: %[[R:.*]] = symm.two_shot_all_reduce %[[B]] {group = @tp, reduce_op = "sum"} : tensor<8xbf16, #comm.buffer<symm_mem, @tp>>
  %r = symm.two_shot_all_reduce %b {reduce_op = "sum", group = @tp} : tensor<8xbf16, #comm.buffer<symm_mem, @tp>>
  // CHECK-NEXT: compute.clone %[[R]]
  %y = compute.clone %r : (tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16>
  return %y : tensor<8xbf16>
}

// CHECK-LABEL: func.func @two_shot_plain
func.func @two_shot_plain(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: symm.two_shot_all_reduce %{{.*}} {group = @tp, reduce_op = "max"} : tensor<8xf32>
  %r = symm.two_shot_all_reduce %x {reduce_op = "max", group = @tp} : tensor<8xf32>
  return %r : tensor<8xf32>
}

// CHECK-LABEL: func.func @all_gather
func.func @all_gather(%x: tensor<4x16xf32, #comm.buffer<symm_mem, @tp>>, %p: tensor<3xi8>) -> (tensor<8x16xf32>, tensor<6xi8>) {
  // CHECK: symm.all_gather %{{.*}} {group = @tp} : (tensor<4x16xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<8x16xf32>
  %y = symm.all_gather %x {group = @tp} : (tensor<4x16xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<8x16xf32>
  // CHECK: symm.all_gather %{{.*}} {group = @tp} : (tensor<3xi8>) -> tensor<6xi8>
  %q = symm.all_gather %p {group = @tp} : (tensor<3xi8>) -> tensor<6xi8>
  return %y, %q : tensor<8x16xf32>, tensor<6xi8>
}

// CHECK-LABEL: func.func @reduce_scatter
func.func @reduce_scatter(%x: tensor<8x16xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<4x16xf32> {
  // CHECK: symm.reduce_scatter %{{.*}} {group = @tp, reduce_op = "avg"} : (tensor<8x16xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<4x16xf32>
  %y = symm.reduce_scatter %x {reduce_op = "avg", group = @tp} : (tensor<8x16xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// The fused collective-matmuls accept plain tensors at the input level (`coll-to-comm`
// realizes their operands as symm_mem comm buffers).

// CHECK-LABEL: func.func @fused_all_gather_matmul
func.func @fused_all_gather_matmul(%a: tensor<4x16xbf16>, %b: tensor<16x8xbf16>) -> tensor<8x8xbf16> {
  // CHECK: symm.fused_all_gather_matmul %arg0, %arg1 {group = @tp} : (tensor<4x16xbf16>, tensor<16x8xbf16>) -> tensor<8x8xbf16>
  %y = symm.fused_all_gather_matmul %a, %b {group = @tp} : (tensor<4x16xbf16>, tensor<16x8xbf16>) -> tensor<8x8xbf16>
  return %y : tensor<8x8xbf16>
}

// Several B matrices, the gathered A returned first.
// CHECK-LABEL: func.func @fused_all_gather_matmul_return_a
func.func @fused_all_gather_matmul_return_a(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>, %c: tensor<16x12xf32>) -> (tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x12xf32>) {
  // CHECK: %{{.*}}:3 = symm.fused_all_gather_matmul %arg0, %arg1, %arg2 {group = @tp, return_a} : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<16x12xf32>) -> (tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x12xf32>)
  %g, %y, %z = symm.fused_all_gather_matmul %a, %b, %c {group = @tp, return_a} : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<16x12xf32>) -> (tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x12xf32>)
  return %g, %y, %z : tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x12xf32>
}

// A batched A gathered along dim 1 (not the contraction dim).
// CHECK-LABEL: func.func @fused_all_gather_matmul_dim1
func.func @fused_all_gather_matmul_dim1(%a: tensor<2x4x16xbf16>, %b: tensor<16x8xbf16>) -> tensor<2x8x8xbf16> {
  // CHECK: symm.fused_all_gather_matmul %arg0, %arg1 {gather_dim = 1 : i64, group = @tp} : (tensor<2x4x16xbf16>, tensor<16x8xbf16>) -> tensor<2x8x8xbf16>
  %y = symm.fused_all_gather_matmul %a, %b {gather_dim = 1 : i64, group = @tp} : (tensor<2x4x16xbf16>, tensor<16x8xbf16>) -> tensor<2x8x8xbf16>
  return %y : tensor<2x8x8xbf16>
}

// CHECK-LABEL: func.func @fused_matmul_reduce_scatter
func.func @fused_matmul_reduce_scatter(%a: tensor<8x32xbf16>, %b: tensor<32x16xbf16>) -> tensor<4x16xbf16> {
  // CHECK: symm.fused_matmul_reduce_scatter %arg0, %arg1 {group = @tp, reduce_op = "sum", scatter_dim = 0 : i64} : (tensor<8x32xbf16>, tensor<32x16xbf16>) -> tensor<4x16xbf16>
  %y = symm.fused_matmul_reduce_scatter %a, %b {reduce_op = "sum", scatter_dim = 0 : i64, group = @tp} : (tensor<8x32xbf16>, tensor<32x16xbf16>) -> tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}

// Averaged, scattered along dim 1 of the product.
// CHECK-LABEL: func.func @fused_matmul_reduce_scatter_avg_dim1
func.func @fused_matmul_reduce_scatter_avg_dim1(%a: tensor<2x8x32xf32>, %b: tensor<32x16xf32>) -> tensor<2x4x16xf32> {
  // CHECK: symm.fused_matmul_reduce_scatter %arg0, %arg1 {group = @tp, reduce_op = "avg", scatter_dim = 1 : i64} : (tensor<2x8x32xf32>, tensor<32x16xf32>) -> tensor<2x4x16xf32>
  %y = symm.fused_matmul_reduce_scatter %a, %b {reduce_op = "avg", scatter_dim = 1 : i64, group = @tp} : (tensor<2x8x32xf32>, tensor<32x16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}
