// KNOWN BUG (XFAIL): an op name that a registered dialect does not define is accepted under
// --allow-unregistered-dialect; mlir-opt rejects it ("unregistered operation 'func.nope'
// found in dialect ('func') that does not allow unknown operations"), and so does the message
// in ir/src/verify.rs, which is never reached for it. When this test XPASSes, the bug is
// fixed: remove the XFAIL line and move the case to invalid-verifier.mlir.
//
// XFAIL: *
// RUN: commlir-opt --allow-unregistered-dialect %s --verify-diagnostics

func.func @unknown_op() {
  // expected-error @below {{unregistered operation 'func.nope'}}
  "func.nope"() : () -> ()
  return
}
