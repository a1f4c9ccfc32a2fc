//! commlir: the pass library for embedders. Re-exports the IR core, the dialects and the
//! passes.
pub use commlir_dialects as dialects;
pub use commlir_ir as ir;
pub use commlir_passes as passes;
