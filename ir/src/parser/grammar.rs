//! The pest grammar (`mlir.pest`) and the generated parser.

#![allow(missing_docs)]

use pest_derive::Parser;

/// Generated from `mlir.pest`; see the grammar file for its layout.
#[derive(Parser)]
#[grammar = "parser/mlir.pest"]
pub(crate) struct MlirParser;
