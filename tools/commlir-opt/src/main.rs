//! commlir-opt: the mlir-opt-like driver.
fn main() {}
