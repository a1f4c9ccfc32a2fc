//! The runtime C ABI: defined once with the `rt` dialect ([`commlir_dialects::rt::abi`]);
//! the code generator uses its constants and field order to emit the host program's calls.

pub use commlir_dialects::rt::abi::*;
