//! Pieces the tool drivers share (`commlir-opt` in the umbrella crate, `commlir-translate` in
//! codegen), the MLIR test conventions: `--split-input-file` ([`split`]) and
//! `--verify-diagnostics` ([`verify_diagnostics`]) over diagnostics detached from their
//! context ([`PlainDiag`]).

pub mod split;
pub mod verify_diagnostics;

use crate::diag::file_line_col;
use crate::{Context, Diagnostic, Severity, SourceMgr};

/// A diagnostic detached from its [`Context`]: position, message, and its MLIR rendering.
#[derive(Debug, Clone)]
pub struct PlainDiag {
    pub severity: Severity,
    /// (file, line, column), if the location has one.
    pub pos: Option<(String, u32, u32)>,
    pub message: String,
    /// The full rendering (with source line, caret and notes).
    pub rendered: String,
    pub notes: Vec<PlainDiag>,
}

impl PlainDiag {
    /// Detaches `d`, rendering it against the sources of `sm`.
    pub fn new(ctx: &Context, sm: &SourceMgr, d: &Diagnostic) -> Self {
        PlainDiag {
            severity: d.severity,
            pos: file_line_col(ctx, d.loc),
            message: d.message.clone(),
            rendered: sm.render(ctx, d),
            notes: d.notes.iter().map(|n| PlainDiag::new(ctx, sm, n)).collect(),
        }
    }
}
