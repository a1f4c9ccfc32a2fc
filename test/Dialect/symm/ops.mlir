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
