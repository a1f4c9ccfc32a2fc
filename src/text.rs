//! The textual format from code: parse a string or a file into a verified module, print a
//! module in the custom or the generic form, parse a single type or attribute.
//!
//! These functions work on a [`Context`] the caller owns; [`Module`](crate::Module) bundles
//! the context, the module and its source text for callers who want one value to pass around.
//!
//! ```rust
//! let mut ctx = commlir::Context::new();
//! let text = r#"
//! coll.group @tp {size = 2 : i64}
//! func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
//!   %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<4xf32>
//!   %y = coll.wait_tensor %r : tensor<4xf32>
//!   return %y : tensor<4xf32>
//! }
//! "#;
//! let module = commlir::parse_str(&mut ctx, "f.mlir", text)?;
//! let custom = commlir::print(&ctx, module);
//! assert!(custom.contains("%0 = coll.all_reduce %arg0 {group = @tp, reduce_op = \"sum\"} : tensor<4xf32>"));
//! // The generic form is what a real `mlir-opt --allow-unregistered-dialect` reads back.
//! let generic = commlir::print_generic(&ctx, module);
//! assert!(generic.contains("\"coll.all_reduce\"(%arg0)"));
//! // Printing is a fixed point of parse-then-print.
//! let mut ctx2 = commlir::Context::new();
//! let again = commlir::parse_str(&mut ctx2, "f2.mlir", &custom)?;
//! assert_eq!(commlir::print(&ctx2, again), custom);
//! # Ok::<(), commlir::Diagnostics>(())
//! ```

use crate::diagnostics::Diagnostics;
use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::printer::{print_op, PrintOptions};
use commlir_ir::{Attr, Context, OpId, SourceFile, SourceMgr, Type};
use std::path::Path;

/// Parses `text` (named `name` in locations and diagnostics) into a `builtin.module` and
/// verifies it. A file without a top-level `module` gets an implicit one, as in MLIR.
///
/// Calls [`register_all`](crate::register_all) first, so every commlir dialect is known.
pub fn parse_str(ctx: &mut Context, name: &str, text: &str) -> Result<OpId, Diagnostics> {
    let mut sources = SourceMgr::default();
    sources.add(SourceFile::new(name, text));
    parse_with_sources(ctx, name, text.as_bytes(), &sources)
}

/// Reads the file at `path` and parses it like [`parse_str`]; the path as given names the
/// file in locations and diagnostics.
pub fn parse_file(ctx: &mut Context, path: impl AsRef<Path>) -> Result<OpId, Diagnostics> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| {
        let msg = format!("could not open input file '{name}': {e}");
        Diagnostics::message(msg.clone(), format!("error: {msg}\n"))
    })?;
    let mut sources = SourceMgr::default();
    sources.add(SourceFile::new(
        name.clone(),
        String::from_utf8_lossy(&bytes).into_owned(),
    ));
    parse_with_sources(ctx, &name, &bytes, &sources)
}

/// The body of [`parse_str`] and [`parse_file`]: parse, then verify, rendering diagnostics
/// against `sources`.
pub(crate) fn parse_with_sources(
    ctx: &mut Context,
    name: &str,
    bytes: &[u8],
    sources: &SourceMgr,
) -> Result<OpId, Diagnostics> {
    crate::register_all();
    let module = parse_source(ctx, name, bytes, &ParseOptions::default())
        .map_err(|d| Diagnostics::new(ctx, sources, &[d]))?;
    commlir_ir::verify::verify(ctx, module).map_err(|ds| Diagnostics::new(ctx, sources, &ds))?;
    Ok(module)
}

/// Verifies `op` (usually a module) and everything nested in it; the diagnostics are
/// rendered without source lines (use [`Module::verify`](crate::Module::verify) to get them).
pub fn verify(ctx: &Context, op: OpId) -> Result<(), Diagnostics> {
    commlir_ir::verify::verify(ctx, op)
        .map_err(|ds| Diagnostics::new(ctx, &SourceMgr::default(), &ds))
}

/// Prints `op` (usually a module) in the custom form, the default way commlir prints.
pub fn print(ctx: &Context, op: OpId) -> String {
    print_op(ctx, op, &PrintOptions::default())
}

/// Prints `op` in MLIR's generic form (`--mlir-print-op-generic`).
pub fn print_generic(ctx: &Context, op: OpId) -> String {
    print_op(
        ctx,
        op,
        &PrintOptions {
            generic: true,
            ..PrintOptions::default()
        },
    )
}

/// Prints `op` with explicit options (generic form, `loc(...)` debug info).
pub fn print_with(ctx: &Context, op: OpId, options: &PrintOptions) -> String {
    print_op(ctx, op, options)
}

/// Parses one type in MLIR syntax (`tensor<8x16xbf16>`, `(i32) -> f32`, ...): the easy way
/// to get the [`Type`] of a value you are about to build.
///
/// ```rust
/// let mut ctx = commlir::Context::new();
/// let t = commlir::parse_type(&mut ctx, "tensor<8x16xbf16>")?;
/// assert_eq!(commlir::ir::printer::type_to_string(&ctx, t), "tensor<8x16xbf16>");
/// # Ok::<(), commlir::Diagnostics>(())
/// ```
pub fn parse_type(ctx: &mut Context, text: &str) -> Result<Type, Diagnostics> {
    commlir_ir::parser::parse_type(ctx, text).map_err(|d| string_error(ctx, text, d))
}

/// Parses one attribute in MLIR syntax (`42 : i64`, `"sum"`, `@tp`, `{k = v}`, ...).
pub fn parse_attr(ctx: &mut Context, text: &str) -> Result<Attr, Diagnostics> {
    commlir_ir::parser::parse_attr(ctx, text).map_err(|d| string_error(ctx, text, d))
}

fn string_error(ctx: &Context, text: &str, d: commlir_ir::Diagnostic) -> Diagnostics {
    // The IR parser names a string it parses "<string>".
    let mut sources = SourceMgr::default();
    sources.add(SourceFile::new("<string>", text));
    Diagnostics::new(ctx, &sources, &[d])
}
