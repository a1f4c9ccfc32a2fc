//! `--import-mlir`: any MLIR file, read by real MLIR, into commlir IR.
//!
//! MLIR parses the file with every upstream dialect registered (so upstream ops may use their
//! custom syntax) and verifies it; the module then crosses over in MLIR's generic form with
//! every location, the interchange form both sides print and read. Upstream ops arrive as
//! unregistered ops of commlir (their properties kept as properties), ready for
//! `shard-to-coll` and `arith-to-compute`; commlir's own dialects, if the file used them,
//! arrive registered and are verified by commlir afterwards.

use crate::guard;
use crate::session::{MlirDiagnostic, MlirSession};
use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::{Context, Diagnostic, OpId};

/// Reads `text` (named `source_name` in locations and diagnostics) through real MLIR into a
/// new module of `ctx`. Sets `ctx.allow_unregistered`, since upstream ops are unregistered
/// in commlir. Errors are MLIR's diagnostics (parse or verify), located in the source.
pub fn import_mlir(
    ctx: &mut Context,
    source_name: &str,
    text: &str,
) -> Result<OpId, Vec<Diagnostic>> {
    let generic = guard::check_nesting(source_name, text, guard::MAX_NESTING)
        .map_err(|d| vec![d])
        .and_then(|()| {
            guard::on_big_stack(|| {
                let session = MlirSession::new();
                let module = session.parse_file(source_name, text)?;
                session.verify(&module.as_operation())?;
                session.print_generic(&module.as_operation())
            })
        })
        .map_err(|ds: Vec<MlirDiagnostic>| {
            ds.iter().map(|d| d.to_commlir(ctx)).collect::<Vec<_>>()
        })?;
    ctx.allow_unregistered = true;
    // The generic text is ours to blame if commlir cannot read it back: name it so.
    let name = format!("<mlir generic form of {source_name}>");
    parse_source(ctx, &name, generic.as_bytes(), &ParseOptions::default()).map_err(|d| vec![d])
}
