//! Source locations, as MLIR models them: file:line:col, named, fused, call-site and unknown.

use crate::entity::{Attr, Ident, Loc};

/// The structure of a location.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LocKind {
    /// `loc(unknown)`.
    Unknown,
    /// `loc("file.mlir":3:5)`; line and column are 1-based.
    FileLineCol { file: Ident, line: u32, col: u32 },
    /// `loc("file.mlir":3:5 to 3:9)`; a range.
    FileRange {
        file: Ident,
        line: u32,
        col: u32,
        end_line: u32,
        end_col: u32,
    },
    /// `loc("name")` or `loc("name"(child))`.
    Name { name: Ident, child: Option<Loc> },
    /// `loc(fused[a, b])` or `loc(fused<#meta>[a, b])`.
    Fused {
        metadata: Option<Attr>,
        locs: Vec<Loc>,
    },
    /// `loc(callsite(callee at caller))`.
    CallSite { callee: Loc, caller: Loc },
    /// Any other location form (dialect locations, `distinct[...]`), verbatim inside `loc(...)`.
    Opaque(String),
}
