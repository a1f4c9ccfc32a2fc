//! Declarative op definitions and the global registry they register themselves into.
//!
//! Every op is declared once, as a `static OpDef`, and registered with [`register_op!`]
//! (built on `inventory`, so definitions in any linked crate, including an embedder's, are
//! found without a central list). The definition drives everything generic: the verifier
//! (arity, type and attribute constraints, traits), the printer/parser syntax choice, the
//! generated reference docs, and the interfaces later passes query (memory effects, cost,
//! comm-buffer operands).

use crate::context::Context;
use crate::diag::Diagnostic;
use crate::entity::OpId;
use rustc_hash::FxHashMap;
use std::sync::OnceLock;

/// How many values an operand/result slot takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    One,
    Optional,
    Variadic,
}

/// A type constraint on an operand or result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeConstraint {
    Any,
    AnyTensor,
    /// A ranked tensor with a statically known shape.
    StaticTensor,
    AnyInteger,
    AnyFloat,
    Index,
    /// A ranked tensor of float elements.
    FloatTensor,
}

impl TypeConstraint {
    /// A short human description used in diagnostics and docs.
    pub fn describe(self) -> &'static str {
        match self {
            TypeConstraint::Any => "any type",
            TypeConstraint::AnyTensor => "tensor",
            TypeConstraint::StaticTensor => "statically shaped tensor",
            TypeConstraint::AnyInteger => "integer",
            TypeConstraint::AnyFloat => "float",
            TypeConstraint::Index => "index",
            TypeConstraint::FloatTensor => "tensor of floats",
        }
    }
}

/// One operand or result slot.
#[derive(Clone, Copy, Debug)]
pub struct ArgDef {
    pub name: &'static str,
    pub arity: Arity,
    pub ty: TypeConstraint,
    pub description: &'static str,
}

impl ArgDef {
    /// A single value of the given constraint.
    pub const fn one(name: &'static str, ty: TypeConstraint) -> Self {
        ArgDef {
            name,
            arity: Arity::One,
            ty,
            description: "",
        }
    }
    /// Zero or more values of the given constraint.
    pub const fn variadic(name: &'static str, ty: TypeConstraint) -> Self {
        ArgDef {
            name,
            arity: Arity::Variadic,
            ty,
            description: "",
        }
    }
    /// Zero or one value of the given constraint.
    pub const fn optional(name: &'static str, ty: TypeConstraint) -> Self {
        ArgDef {
            name,
            arity: Arity::Optional,
            ty,
            description: "",
        }
    }
}

/// A constraint on an attribute's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrConstraint {
    Any,
    /// An integer attribute (any width).
    Integer,
    /// A float attribute (an integer literal is accepted too).
    Float,
    String,
    /// One of the listed strings.
    StrEnum(&'static [&'static str]),
    Bool,
    Unit,
    SymbolRef,
    /// A flat symbol name (`sym_name`), stored as a string.
    SymbolName,
    Type,
    Array,
    /// `array<i64: ...>` or an array of integers.
    I64Array,
    Dict,
}

impl AttrConstraint {
    /// A short human description used in diagnostics and docs.
    pub fn describe(self) -> String {
        match self {
            AttrConstraint::Any => "any attribute".into(),
            AttrConstraint::Integer => "integer".into(),
            AttrConstraint::Float => "float".into(),
            AttrConstraint::String => "string".into(),
            AttrConstraint::StrEnum(v) => {
                let q: Vec<String> = v.iter().map(|s| format!("\"{s}\"")).collect();
                format!("one of {}", q.join(", "))
            }
            AttrConstraint::Bool => "bool".into(),
            AttrConstraint::Unit => "unit".into(),
            AttrConstraint::SymbolRef => "symbol reference".into(),
            AttrConstraint::SymbolName => "symbol name".into(),
            AttrConstraint::Type => "type".into(),
            AttrConstraint::Array => "array".into(),
            AttrConstraint::I64Array => "array of i64".into(),
            AttrConstraint::Dict => "dictionary".into(),
        }
    }
}

/// One declared attribute.
#[derive(Clone, Copy, Debug)]
pub struct AttrDef {
    pub name: &'static str,
    pub constraint: AttrConstraint,
    pub optional: bool,
    pub description: &'static str,
}

impl AttrDef {
    /// A required attribute.
    pub const fn required(name: &'static str, constraint: AttrConstraint) -> Self {
        AttrDef {
            name,
            constraint,
            optional: false,
            description: "",
        }
    }
    /// An optional attribute.
    pub const fn optional(name: &'static str, constraint: AttrConstraint) -> Self {
        AttrDef {
            name,
            constraint,
            optional: true,
            description: "",
        }
    }
    /// Adds a description (for the docs).
    pub const fn doc(mut self, d: &'static str) -> Self {
        self.description = d;
        self
    }
}

/// Op traits: structural properties the generic verifier checks and passes query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trait {
    /// No side effects; may be freely moved or erased when unused.
    Pure,
    /// Must be the last op of its block.
    Terminator,
    /// Its regions see no values defined outside.
    IsolatedFromAbove,
    /// Its single region's block holds a symbol table.
    SymbolTable,
    /// Defines a symbol through `sym_name`.
    Symbol,
    /// Its region's blocks need no terminator.
    NoTerminator,
    /// Each region has at most one block.
    SingleBlock,
    /// Returns control to the parent op.
    ReturnLike,
    /// All operands and results share one type.
    SameOperandsAndResultType,
    /// All operands and results share one element type.
    SameOperandsAndResultElementType,
    /// Issues communication with the other ranks of a group.
    Collective,
    /// Completes an asynchronous collective.
    Wait,
    /// Reads memory it does not own.
    MemRead,
    /// Writes memory it does not own (e.g. an in-place collective on its operand).
    MemWrite,
    /// Allocates a new buffer for each result.
    MemAlloc,
    /// Must sit directly in an op with the given name.
    HasParent(&'static str),
    /// The op blocks until it completes (no separate wait).
    Blocking,
    /// The op's `verify` hook reads the order of other ops (e.g. which op ends a block), so
    /// its verdict may change when a pass only permutes ops; the order-only verification
    /// after such a pass ([`verify_order`](crate::verify::verify_order)) runs the op's full
    /// verifier rather than trusting the earlier one.
    OrderSensitiveVerifier,
}

/// Syntax an op is printed and parsed in. Most ops use the uniform custom form; a few
/// structural ops have MLIR's bespoke syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    Uniform,
    Module,
    Func,
    Return,
    Call,
    /// An upstream MLIR op whose own custom syntax commlir does not parse. It prints in the
    /// uniform custom form only where that form is MLIR's too (no attributes, one type for
    /// every operand and result: `arith.addf %a, %b : tensor<4xf32>`), and in the generic
    /// form otherwise, so what commlir prints real MLIR reads back, and both of MLIR's forms
    /// round-trip byte for byte.
    Upstream,
}

/// Verifier hook: returns an error diagnostic (see [`Context::op_error`]).
pub type VerifyFn = fn(&Context, OpId) -> Result<(), Diagnostic>;
/// Cost hook: estimated runtime in nanoseconds, when the op can estimate it.
pub type CostFn = fn(&Context, OpId) -> Option<f64>;

/// Kind of comm buffer an operand must be realized as (PR #173513's argument registration).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommBufferKind {
    Nccl,
    SymmMem,
}

/// A declared comm-buffer operand: operand `operand` must live in a buffer of `kind`,
/// allocated for the group named by attribute `group_attr`.
#[derive(Clone, Copy, Debug)]
pub struct CommBufferOperand {
    pub operand: &'static str,
    pub kind: CommBufferKind,
    pub group_attr: &'static str,
}

/// The declaration of one op.
#[derive(Debug)]
pub struct OpDef {
    pub name: &'static str,
    pub summary: &'static str,
    pub description: &'static str,
    pub operands: &'static [ArgDef],
    pub results: &'static [ArgDef],
    pub attributes: &'static [AttrDef],
    /// Number of regions the op has (`None`: any number).
    pub regions: Option<usize>,
    pub traits: &'static [Trait],
    pub syntax: Syntax,
    pub verify: Option<VerifyFn>,
    pub cost: Option<CostFn>,
    pub comm_buffer_operands: &'static [CommBufferOperand],
    /// Example in the custom form, for the generated docs.
    pub example: &'static str,
}

impl OpDef {
    /// A definition with every field empty; use with struct update syntax.
    pub const EMPTY: OpDef = OpDef {
        name: "",
        summary: "",
        description: "",
        operands: &[],
        results: &[],
        attributes: &[],
        regions: Some(0),
        traits: &[],
        syntax: Syntax::Uniform,
        verify: None,
        cost: None,
        comm_buffer_operands: &[],
        example: "",
    };

    /// Whether the op has trait `t`.
    pub fn has_trait(&self, t: Trait) -> bool {
        self.traits.contains(&t)
    }

    /// The dialect prefix of the op name.
    pub fn dialect(&self) -> &'static str {
        self.name
            .split_once('.')
            .map(|(d, _)| d)
            .unwrap_or(self.name)
    }

    /// Looks an attribute declaration up by name.
    pub fn attr(&self, name: &str) -> Option<&AttrDef> {
        self.attributes.iter().find(|a| a.name == name)
    }
}

/// A registration record collected by `inventory`.
pub struct OpRegistration(pub &'static OpDef);
inventory::collect!(OpRegistration);

/// A dialect description, registered like ops (for `--show-dialects` and the docs).
pub struct DialectDef {
    pub name: &'static str,
    pub summary: &'static str,
    pub description: &'static str,
}
/// A dialect registration record.
pub struct DialectRegistration(pub &'static DialectDef);
inventory::collect!(DialectRegistration);

/// Marks a registered dialect as *partial*: commlir models only some of its ops (an upstream
/// dialect of which only the ops a conversion consumes are declared). Its other ops are
/// accepted under `--allow-unregistered-dialect`, like the ops of a dialect nobody
/// registered, and reported with a diagnostic that says so otherwise.
pub struct PartialDialect(pub &'static str);
inventory::collect!(PartialDialect);

/// Declares an op definition and registers it globally.
///
/// ```ignore
/// commlir_ir::register_op!(MY_OP = OpDef { name: "my.op", ..OpDef::EMPTY });
/// ```
#[macro_export]
macro_rules! register_op {
    ($(#[$m:meta])* $vis:vis $id:ident = $def:expr) => {
        $(#[$m])*
        $vis static $id: $crate::opdef::OpDef = $def;
        $crate::inventory::submit! { $crate::opdef::OpRegistration(&$id) }
    };
}

/// Declares a dialect description and registers it globally.
#[macro_export]
macro_rules! register_dialect {
    ($(#[$m:meta])* $vis:vis $id:ident = $def:expr) => {
        $(#[$m])*
        $vis static $id: $crate::opdef::DialectDef = $def;
        $crate::inventory::submit! { $crate::opdef::DialectRegistration(&$id) }
    };
}

/// Declares a registered dialect partial (see [`PartialDialect`]).
#[macro_export]
macro_rules! register_partial_dialect {
    ($name:literal) => {
        $crate::inventory::submit! { $crate::opdef::PartialDialect($name) }
    };
}

/// The set of op definitions known to a context.
#[derive(Default, Debug)]
pub struct Registry {
    ops: FxHashMap<&'static str, &'static OpDef>,
    dialects: FxHashMap<&'static str, (&'static str, &'static str)>,
    partial: Vec<&'static str>,
}

impl Registry {
    /// A registry holding every op and dialect registered with `inventory` in this binary.
    pub fn global() -> &'static Registry {
        static GLOBAL: OnceLock<Registry> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let mut r = Registry::default();
            for d in inventory::iter::<DialectRegistration> {
                r.dialects.insert(d.0.name, (d.0.summary, d.0.description));
            }
            for op in inventory::iter::<OpRegistration> {
                r.insert(op.0);
            }
            for d in inventory::iter::<PartialDialect> {
                r.partial.push(d.0);
            }
            r
        })
    }

    /// Adds a definition (a later definition of the same name replaces an earlier one).
    pub fn insert(&mut self, def: &'static OpDef) {
        self.ops.insert(def.name, def);
        self.dialects.entry(def.dialect()).or_insert(("", ""));
    }

    /// The definition of `name`, if registered.
    pub fn get(&self, name: &str) -> Option<&'static OpDef> {
        self.ops.get(name).copied()
    }

    /// Whether a dialect of this name has registered ops or a description.
    pub fn has_dialect(&self, name: &str) -> bool {
        self.dialects.contains_key(name)
    }

    /// Whether the dialect is registered but partial: ops of it that are not declared are
    /// accepted under `--allow-unregistered-dialect`.
    pub fn is_partial(&self, name: &str) -> bool {
        self.partial.contains(&name)
    }

    /// All definitions, sorted by name (deterministic for docs and listings).
    pub fn ops(&self) -> Vec<&'static OpDef> {
        let mut v: Vec<_> = self.ops.values().copied().collect();
        v.sort_by_key(|d| d.name);
        v
    }

    /// Dialect names with their summary and description, sorted by name.
    pub fn dialects(&self) -> Vec<(&'static str, &'static str, &'static str)> {
        let mut v: Vec<_> = self
            .dialects
            .iter()
            .map(|(n, (s, d))| (*n, *s, *d))
            .collect();
        v.sort();
        v
    }
}
