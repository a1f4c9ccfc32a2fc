//! The runtime C ABI: defined once with the `rt` dialect ([`commlir_dialects::rt::abi`]),
//! which links nothing, so the runner shares the code generator's definition without linking
//! LLVM.

pub use commlir_dialects::rt::abi::*;
