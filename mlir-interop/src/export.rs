//! `--export-mlir`: commlir IR as MLIR that real MLIR parses and verifies.
//!
//! The module is printed in the generic form with its locations, parsed by real MLIR (every
//! upstream dialect registered; commlir's dialects, which MLIR does not know, stay in the
//! generic form as unregistered ops), verified by MLIR's verifier, and printed by MLIR, so
//! that upstream ops come out in their custom syntax. Whatever this returns, `mlir-opt`
//! reads.

use crate::guard;
use crate::session::MlirSession;
use commlir_ir::printer::{print_op, PrintOptions};
use commlir_ir::{Context, Diagnostic, OpId};

/// How to write the MLIR.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExportOptions {
    /// Print locations (`loc(...)`), as `--mlir-print-debuginfo` does.
    pub debug_info: bool,
    /// Print every op in the generic form (upstream ops too).
    pub generic: bool,
}

/// Writes `module` as MLIR text that real MLIR has parsed and verified. Errors are MLIR's
/// diagnostics, located where commlir's locations point.
pub fn export_mlir(
    ctx: &mut Context,
    module: OpId,
    opts: ExportOptions,
) -> Result<String, Vec<Diagnostic>> {
    let text = print_op(
        ctx,
        module,
        &PrintOptions {
            generic: true,
            debug_info: true,
        },
    );
    let result = guard::check_nesting("<commlir export>", &text, guard::MAX_NESTING)
        .map_err(|d| vec![d])
        .and_then(|()| {
            guard::on_big_stack(|| {
                let session = MlirSession::new();
                let op = session.parse_op("<commlir export>", &text)?;
                session.verify(&op)?;
                session.print(&op, opts.generic, opts.debug_info)
            })
        });
    result.map_err(|ds| ds.iter().map(|d| d.to_commlir(ctx)).collect())
}
