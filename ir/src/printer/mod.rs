//! The printer: custom (default) and generic forms.
//!
//! STUB: the real printer replaces this file (same public signatures).

use crate::context::Context;
use crate::entity::{Attr, Loc, OpId, Type};

/// Printer options (mlir-opt's `--mlir-print-op-generic` and `--mlir-print-debuginfo`).
#[derive(Clone, Debug, Default)]
pub struct PrintOptions {
    /// Print every op in the generic form.
    pub generic: bool,
    /// Print `loc(...)` on ops and block arguments.
    pub debug_info: bool,
}

/// Prints `op` (usually a module) and everything nested in it, with a trailing newline.
pub fn print_op(ctx: &Context, op: OpId, opts: &PrintOptions) -> String {
    let _ = (ctx, op, opts);
    String::new()
}

/// The text inside `loc(...)` for a location.
pub fn loc_body(_ctx: &Context, _l: Loc) -> String {
    String::new()
}
/// A type in MLIR syntax.
pub fn type_to_string(_ctx: &Context, _t: Type) -> String {
    String::new()
}
/// An attribute in MLIR syntax.
pub fn attr_to_string(_ctx: &Context, _a: Attr) -> String {
    String::new()
}
