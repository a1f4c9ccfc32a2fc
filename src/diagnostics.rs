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

use commlir_ir::{Context, Diagnostic, Severity, SourceMgr};
use std::fmt;

pub use commlir_ir::driver::Diag;

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
