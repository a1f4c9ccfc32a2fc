// comm-to-rt diagnostics: unplanned comm IR and unsupported element types.
// REQUIRES: commlir-translate
// RUN: not commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm))' 2>&1 | FileCheck %s --check-prefix=UNPLANNED
// RUN: not commlir-translate %s 2>&1 | FileCheck %s --check-prefix=COLL

coll.group @tp {size = 2 : i64}
// UNPLANNED: error: 'compute.clone' op comm-to-rt: comm buffer without 'comm.slot': run comm-plan-pools first
// COLL: error: 'coll.all_reduce' op comm-to-rt: run coll-to-comm first
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<4xf32>
  %y = coll.wait_tensor %r : tensor<4xf32>
  return %y : tensor<4xf32>
}
