// RUN: commlir-opt %s --split-input-file --verify-diagnostics

func.func @matmul(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'compute.matmul' op expects rank-2 operands}}
  %x = compute.matmul %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %x : tensor<4xf32>
}

// -----

// expected-error-re @+2 {{'func.return' op has {{[0-9]+}} operands, but enclosing function (@f) returns 1}}
func.func @f(%a: i32) -> i32 {
  return
}


// -----

// A chunk without errors is fine too.
func.func @g(%a: i32) -> i32 {
  return %a : i32
}
