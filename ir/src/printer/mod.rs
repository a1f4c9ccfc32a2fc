//! The printer: the MLIR textual format, in the custom (default) and generic forms.
//!
//! - [`print_op`] prints an op (usually a module) and everything nested in it; the generic
//!   form is what `mlir-opt --allow-unregistered-dialect` reads back, the custom form is the
//!   uniform `dialect.op` syntax plus MLIR's own syntax for `module`, `func.func`, `return`
//!   and `func.call`.
//! - [`type_to_string`], [`attr_to_string`] and [`loc_body`] print one type, attribute or
//!   location (used by diagnostics).
//!
//! Printing is deterministic and a fixed point of parse-then-print. It never recurses on the
//! IR's nesting, so arbitrarily deep IR, types and attributes cannot overflow the stack.
//!
//! Layout: `literals` (escaping, numbers), `terms` (types, attributes, locations), `names`
//! (SSA numbering), `ops` (operations, regions and blocks).

mod literals;
mod names;
mod ops;
mod terms;

pub use ops::MAX_INDENT_LEVELS;

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
    // A top-level op is usually a whole program: size the buffer for every op in the context
    // (about 160 bytes each in either form), so that tens of megabytes of text are not
    // copied and faulted in again at every doubling. Pages never written cost nothing.
    let mut out = if ctx.op_parent(op).is_none() {
        String::with_capacity(ctx.num_op_slots().saturating_mul(160))
    } else {
        String::new()
    };
    print_op_into(ctx, op, opts, &mut out);
    out
}

/// Like [`print_op`], appending to `out` (lets callers reuse one buffer).
pub fn print_op_into(ctx: &Context, op: OpId, opts: &PrintOptions, out: &mut String) {
    ops::OpPrinter::new(ctx, opts, op, out).print(op);
}

/// The text inside `loc(...)` for a location.
pub fn loc_body(ctx: &Context, l: Loc) -> String {
    let mut out = String::new();
    terms::TermPrinter::new(ctx).loc_body(&mut out, l);
    out
}

/// A type in MLIR syntax.
pub fn type_to_string(ctx: &Context, t: Type) -> String {
    let mut out = String::new();
    terms::TermPrinter::new(ctx).ty(&mut out, t);
    out
}

/// An attribute in MLIR syntax.
pub fn attr_to_string(ctx: &Context, a: Attr) -> String {
    let mut out = String::new();
    terms::TermPrinter::new(ctx).attr(&mut out, a);
    out
}
