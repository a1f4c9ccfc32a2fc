//! Pieces the tool drivers share (`commlir-opt` in the umbrella crate, `commlir-translate` in
//! codegen), the MLIR test conventions: `--split-input-file` ([`split`]) and
//! `--verify-diagnostics` ([`verify_diagnostics`]) over diagnostics detached from their
//! context ([`Diag`]).

pub mod split;
pub mod verify_diagnostics;

use crate::diag::file_line_col;
use crate::{Context, Diagnostic, Severity, SourceMgr};

/// One diagnostic, detached from its [`Context`]: severity, position, message, notes, and
/// the MLIR-shaped rendering (what the drivers print and `--verify-diagnostics` matches; the
/// umbrella crate hands it to embedders as `commlir::Diag`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diag {
    /// Error, warning, remark or note.
    pub severity: Severity,
    /// `(file, line, column)` of the location, when it has one.
    pub position: Option<(String, u32, u32)>,
    /// The message alone (`'acme.op' op requires attribute 'group'`).
    pub message: String,
    /// The full rendering: `file:line:col: error: message`, the source line and a caret
    /// (when the source text is known), then the notes.
    pub rendered: String,
    /// Attached notes (also included in [`Diag::rendered`]).
    pub notes: Vec<Diag>,
}

impl Diag {
    /// Detaches `d` from `ctx`, rendering it with the source text in `sources`.
    pub fn new(ctx: &Context, sources: &SourceMgr, d: &Diagnostic) -> Diag {
        Diag {
            severity: d.severity,
            position: file_line_col(ctx, d.loc),
            message: d.message.clone(),
            rendered: sources.render(ctx, d),
            notes: d.notes.iter().map(|n| Diag::new(ctx, sources, n)).collect(),
        }
    }

    /// Whether this is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl std::fmt::Display for Diag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.rendered)
    }
}
