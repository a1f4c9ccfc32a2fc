// RUN: commlir-opt %s | commlir-opt | FileCheck %s

coll.group @tp {size = 2 : i64, symm_mem}
// CHECK-LABEL: func.func @one_shot
func.func @one_shot(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %b = compute.clone %x : (tensor<8xbf16>) -> tensor<8xbf16, #comm.buffer<symm_mem, @tp>>
  // CHECK: symm.one_shot_all_reduce %{{.*}} {group = @tp, reduce_op = "sum"} : (tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16>
  %y = symm.one_shot_all_reduce %b {reduce_op = "sum", group = @tp} : (tensor<8xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8xbf16>
  return %y : tensor<8xbf16>
}
