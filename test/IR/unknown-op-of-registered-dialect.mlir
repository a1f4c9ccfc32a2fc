// --allow-unregistered-dialect opens only dialects nobody registered: an op name the func
// dialect does not define is an error, as in mlir-opt.
//
// RUN: commlir-opt --allow-unregistered-dialect %s --verify-diagnostics

func.func @unknown_op() {
  // expected-error @below {{unregistered operation 'func.nope'}}
  "func.nope"() : () -> ()
  return
}
