//! commlir: the pass library for embedders, and the `commlir-opt` driver.
//!
//! Re-exports the IR core, the dialects and the passes. Embedders add passes with
//! [`commlir_ir::register_pass!`] (see [`ir::pass`]) and ops with
//! [`commlir_ir::register_op!`]; both register themselves when their crate is linked.

pub mod driver;

pub use commlir_dialects as dialects;
pub use commlir_ir as ir;
pub use commlir_passes as passes;
pub use driver::{opt_main, opt_main_with_args};

/// Makes sure every op, dialect and pass registration of the commlir crates is linked into the
/// final binary (registrations live in statics that nothing else references). Call it once
/// before looking anything up by name; calling it again is harmless.
pub fn register_all() {
    commlir_passes::link();
}
