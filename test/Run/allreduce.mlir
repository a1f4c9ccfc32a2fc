// REQUIRES: commlir-run
// RUN: commlir-run %s --ranks 2 | FileCheck %s
// RUN: commlir-run %s --ranks 4 | FileCheck %s --check-prefix=FOUR

// Every rank of a group holds the same all-reduced tensor, so the lines agree after the rank.
// CHECK: rank 0 result 0: tensor<4x8xbf16> digest=[[D:[0-9a-f]+]] sum=[[S:[^ ]+]] max_abs=[[M:[^ ]+]]
// CHECK-NEXT: rank 1 result 0: tensor<4x8xbf16> digest=[[D]] sum=[[S]] max_abs=[[M]]
// CHECK-NOT: rank 2

// With 4 ranks, @tp is the family [0, 1], [2, 3].
// FOUR: rank 0 result 0: tensor<4x8xbf16> digest=[[A:[0-9a-f]+]]
// FOUR-NEXT: rank 1 result 0: tensor<4x8xbf16> digest=[[A]]
// FOUR-NEXT: rank 2 result 0: tensor<4x8xbf16> digest=[[B:[0-9a-f]+]]
// FOUR-NEXT: rank 3 result 0: tensor<4x8xbf16> digest=[[B]]

coll.group @tp {size = 2 : i64}
func.func @main(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<4x8xbf16>
  %y = coll.wait_tensor %r : tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}
