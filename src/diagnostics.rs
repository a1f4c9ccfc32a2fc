//! Diagnostics for embedders: the IR's [`Diagnostic`]s, rendered in MLIR's shape
//! (`file:line:col: error: message`, the source line, a caret) while the [`Context`] and the
//! source text are at hand, and detached from both so that they can be returned as an error,
//! printed, or matched on in tests.
//!
//! ```rust
//! let mut ctx = commlir::Context::new();
//! let err = commlir::parse_str(&mut ctx, "bad.mlir", "func.func @f() {\n  %x = \n}\n").unwrap_err();
//! assert!(err.has_errors());
//! // The rendering points at the offending token, as mlir-opt does.
//! assert!(err.to_string().starts_with("bad.mlir:3:1: error:"), "{err}");
//! ```

use commlir_ir::diag::file_line_col;
use commlir_ir::{Context, Diagnostic, Severity, SourceMgr};
use std::fmt;

/// One diagnostic, detached from its [`Context`]: severity, position, message, notes, and
/// the MLIR-shaped rendering.
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

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rendered)
    }
}

/// A list of diagnostics: the error type of every fallible entry point of this crate (parse,
/// verify, pipeline construction and runs). `Display` prints them all, as mlir-opt would.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics {
    /// The diagnostics, in the order they were emitted.
    pub list: Vec<Diag>,
}

impl Diagnostics {
    /// Detaches and renders `ds` (see [`Diag::new`]).
    pub fn new(ctx: &Context, sources: &SourceMgr, ds: &[Diagnostic]) -> Diagnostics {
        Diagnostics {
            list: ds.iter().map(|d| Diag::new(ctx, sources, d)).collect(),
        }
    }

    /// A single error that has no location in the IR (a pipeline-string error, an
    /// unreadable file): `rendered` is shown as is.
    pub fn message(message: impl Into<String>, rendered: impl Into<String>) -> Diagnostics {
        Diagnostics {
            list: vec![Diag {
                severity: Severity::Error,
                position: None,
                message: message.into(),
                rendered: rendered.into(),
                notes: Vec::new(),
            }],
        }
    }

    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.list.iter().any(Diag::is_error)
    }

    /// The errors only.
    pub fn errors(&self) -> impl Iterator<Item = &Diag> {
        self.list.iter().filter(|d| d.is_error())
    }

    /// Whether there is no diagnostic at all.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.list {
            f.write_str(&d.rendered)?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}
