//! commlir-ir: the IR core of commlir.
//!
//! - [`Context`]: arenas of ops, blocks, regions and values, interned types, attributes,
//!   identifiers and locations; O(1) layout edits and use lists.
//! - [`opdef`]: declarative, self-registering op definitions (traits, constraints, verifier,
//!   interfaces such as cost and comm-buffer operands).
//! - [`parser`] / [`printer`]: the MLIR textual format, generic and custom forms.
//! - [`verify`]: the generic verifier plus each op's own.
//! - [`pass`]: the pass manager, registry and pipeline strings.
//! - [`driver`]: what the tool drivers share (`--split-input-file`, `--verify-diagnostics`).

pub mod attrs;
pub mod builder;
pub mod builtin;
pub mod context;
pub mod diag;
pub mod driver;
pub mod entity;
pub mod intern;
pub mod location;
pub mod opdef;
pub mod parser;
pub mod pass;
pub mod printer;
pub mod trace_events;
pub mod types;
pub mod verify;

pub use attrs::{AttrKind, DenseElem, FloatValue, IntValue};
pub use builder::{Builder, InsertPoint};
pub use context::{Context, OpState, Use, ValueDef, PREFETCH_DISTANCE};
pub use diag::{Diagnostic, Severity, SourceFile, SourceMgr};
pub use entity::{Attr, BlockId, Ident, Loc, OpId, RegionId, Type, Value};
pub use location::LocKind;
pub use opdef::{
    ArgDef, Arity, AttrConstraint, AttrDef, CommBufferKind, CommBufferOperand, OpDef, Registry,
    Syntax, Trait, TypeConstraint,
};
pub use types::{FloatKind, Signedness, TypeKind, DYNAMIC};

#[doc(hidden)]
pub use inventory;
