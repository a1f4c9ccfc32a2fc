//! The MLIR textual format parser (pest).
//!
//! STUB: the real parser replaces this file (same public signatures).

use crate::context::Context;
use crate::diag::Diagnostic;
use crate::entity::OpId;

/// Default limit on bracket/region nesting depth; deeper input is rejected with a diagnostic
/// instead of risking the stack.
pub const DEFAULT_MAX_NESTING: usize = 1000;

/// Parser options.
#[derive(Clone, Debug)]
pub struct ParseOptions {
    /// Maximum nesting depth of regions, types and attributes.
    pub max_nesting: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions { max_nesting: DEFAULT_MAX_NESTING }
    }
}

/// Parses a whole file into a `builtin.module` (an implicit one when the file has none at
/// top level). `file_name` is used for the locations of parsed ops. On error, returns the
/// first diagnostic (file:line:col of the offending token).
pub fn parse_source(
    ctx: &mut Context,
    file_name: &str,
    bytes: &[u8],
    opts: &ParseOptions,
) -> Result<OpId, Diagnostic> {
    let _ = (file_name, bytes, opts);
    Err(Diagnostic::error(ctx.unknown_loc(), "parser not implemented yet"))
}
