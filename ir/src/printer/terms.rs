//! Printing of types, attributes and locations.
//!
//! These structures nest (a tensor of tuples of tuples, arrays of arrays, call-site chains
//! from deep inlining), and IR built in code can nest them arbitrarily deep, so the printer
//! never recurses: it runs an explicit work stack of [`Item`]s. A node writes its prefix
//! straight away and pushes what follows it (children, separators, closing brackets) in
//! reverse order.
//!
//! Types and attributes are interned, and the same few (`tensor<...>`, `@tp`) appear on most
//! ops, so the text of each type and attribute printed at the top level is cached by id for
//! the lifetime of one [`TermPrinter`] (one print call), from its second printing on: many
//! attributes (slot ranges, costs) appear once, and copying their text into the cache would
//! be wasted. Nested sub-terms are not cached: caching every level of a deep chain would copy
//! its text once per level.

use super::literals::{push_float, push_i128, push_key, push_quoted, push_symbol, push_u64};
use crate::attrs::{AttrKind, DenseElem, FloatValue, IntValue};
use crate::context::Context;
use crate::entity::{Attr, Ident, Loc, Type};
use crate::location::LocKind;
use crate::types::{FloatKind, Signedness, TypeKind, DYNAMIC};

/// One pending piece of output.
#[derive(Clone, Copy)]
enum Item<'c> {
    Text(&'c str),
    Type(Type),
    Attr(Attr),
    /// An array element: like `Attr`, but `i64` integers and finite `f64` floats drop their
    /// type, as MLIR prints them (a bare literal reads back as exactly that type).
    Elem(Attr),
    /// A location's body (the text inside `loc(...)`).
    Loc(Loc),
    /// A dictionary key (bare or quoted).
    Key(Ident),
    /// A `@symbol` reference component.
    Symbol(Ident),
    /// The elements of a dense array attribute (literals only, so they never nest).
    DenseElems(Attr),
}

/// What the cache knows of one type or attribute id.
#[derive(Clone, Default)]
enum Cached {
    #[default]
    Unseen,
    /// Printed once, not kept.
    Seen,
    Text(Box<str>),
}

/// Prints types, attributes and locations, with per-id caches of top-level text.
pub(crate) struct TermPrinter<'c> {
    ctx: &'c Context,
    stack: Vec<Item<'c>>,
    type_cache: Vec<Cached>,
    attr_cache: Vec<Cached>,
    scratch: String,
}

impl<'c> TermPrinter<'c> {
    pub(crate) fn new(ctx: &'c Context) -> Self {
        TermPrinter {
            ctx,
            stack: Vec::new(),
            type_cache: Vec::new(),
            attr_cache: Vec::new(),
            scratch: String::new(),
        }
    }

    /// Appends a type.
    pub(crate) fn ty(&mut self, out: &mut String, t: Type) {
        if let Some(Cached::Text(s)) = self.type_cache.get(t.index()) {
            out.push_str(s);
            return;
        }
        let start = out.len();
        self.run(out, Item::Type(t));
        cache_insert(&mut self.type_cache, t.index(), &out[start..]);
    }

    /// Appends an attribute value.
    pub(crate) fn attr(&mut self, out: &mut String, a: Attr) {
        if let Some(Cached::Text(s)) = self.attr_cache.get(a.index()) {
            out.push_str(s);
            return;
        }
        let start = out.len();
        self.run(out, Item::Attr(a));
        cache_insert(&mut self.attr_cache, a.index(), &out[start..]);
    }

    /// Appends the body of a location (without the surrounding `loc(...)`).
    pub(crate) fn loc_body(&mut self, out: &mut String, l: Loc) {
        self.run(out, Item::Loc(l));
    }

    /// Appends ` loc(...)`.
    pub(crate) fn trailing_loc(&mut self, out: &mut String, l: Loc) {
        out.push_str(" loc(");
        self.loc_body(out, l);
        out.push(')');
    }

    /// Appends `(T, ...) -> R` with MLIR's rules for the result list.
    pub(crate) fn function_type(
        &mut self,
        out: &mut String,
        inputs: impl Iterator<Item = Type>,
        results: impl ExactSizeIterator<Item = Type> + Clone,
    ) {
        out.push('(');
        for (i, t) in inputs.enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            self.ty(out, t);
        }
        out.push_str(") -> ");
        let paren = results.len() != 1 || results.clone().any(|t| self.is_function_type(t));
        if paren {
            out.push('(');
        }
        for (i, t) in results.enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            self.ty(out, t);
        }
        if paren {
            out.push(')');
        }
    }

    /// A result list is bare only when it is one type that is not itself a function type
    /// (whose own `->` would make the text ambiguous).
    pub(crate) fn results_need_parens(&self, results: &[Type]) -> bool {
        results.len() != 1 || self.is_function_type(results[0])
    }

    pub(crate) fn is_function_type(&self, t: Type) -> bool {
        matches!(self.ctx.type_kind(t), TypeKind::Function { .. })
    }

    /// Drains the work stack starting from `root`.
    fn run(&mut self, out: &mut String, root: Item<'c>) {
        debug_assert!(self.stack.is_empty());
        self.stack.push(root);
        while let Some(item) = self.stack.pop() {
            match item {
                Item::Text(s) => out.push_str(s),
                Item::Type(t) => self.step_type(out, t),
                Item::Attr(a) => self.step_attr(out, a),
                Item::Elem(a) => self.step_elem(out, a),
                Item::Loc(l) => self.step_loc(out, l),
                Item::Key(k) => push_key(out, self.ctx.ident_str(k)),
                Item::Symbol(s) => push_symbol(out, self.ctx.ident_str(s)),
                Item::DenseElems(a) => self.dense_elems(out, a),
            }
        }
    }

    /// Pushes `items` so that they come out in order, separated by `sep`.
    fn push_list(&mut self, items: impl DoubleEndedIterator<Item = Item<'c>>, sep: &'c str) {
        let mut first = true;
        for it in items.rev() {
            if !first {
                self.stack.push(Item::Text(sep));
            }
            first = false;
            self.stack.push(it);
        }
    }

    fn step_type(&mut self, out: &mut String, t: Type) {
        let ctx = self.ctx;
        match ctx.type_kind(t) {
            TypeKind::Integer { width, signedness } => {
                out.push_str(match signedness {
                    Signedness::Signless => "i",
                    Signedness::Signed => "si",
                    Signedness::Unsigned => "ui",
                });
                push_u64(out, *width as u64);
            }
            TypeKind::Index => out.push_str("index"),
            TypeKind::None => out.push_str("none"),
            TypeKind::Float(k) => out.push_str(float_kind_name(ctx, *k)),
            TypeKind::Tensor {
                shape,
                elem,
                encoding,
            } => {
                out.push_str("tensor<");
                push_dims(out, shape);
                self.stack.push(Item::Text(">"));
                if let Some(enc) = encoding {
                    self.stack.push(Item::Attr(*enc));
                    self.stack.push(Item::Text(", "));
                }
                self.stack.push(Item::Type(*elem));
            }
            TypeKind::UnrankedTensor { elem } => {
                out.push_str("tensor<*x");
                self.stack.push(Item::Text(">"));
                self.stack.push(Item::Type(*elem));
            }
            TypeKind::MemRef { shape, elem, rest } => {
                out.push_str("memref<");
                push_dims(out, shape);
                self.stack.push(Item::Text(">"));
                if let Some(rest) = rest {
                    let rest = rest.trim();
                    // Accept the layout text with or without its leading comma.
                    let rest = rest.strip_prefix(',').map(str::trim_start).unwrap_or(rest);
                    if !rest.is_empty() {
                        self.stack.push(Item::Text(rest));
                        self.stack.push(Item::Text(", "));
                    }
                }
                self.stack.push(Item::Type(*elem));
            }
            TypeKind::Function { inputs, results } => {
                out.push('(');
                let paren = self.results_need_parens(results);
                if paren {
                    self.stack.push(Item::Text(")"));
                }
                self.push_list(results.iter().map(|t| Item::Type(*t)), ", ");
                self.stack
                    .push(Item::Text(if paren { ") -> (" } else { ") -> " }));
                self.push_list(inputs.iter().map(|t| Item::Type(*t)), ", ");
            }
            TypeKind::Tuple(elems) => {
                out.push_str("tuple<");
                self.stack.push(Item::Text(">"));
                self.push_list(elems.iter().map(|t| Item::Type(*t)), ", ");
            }
            TypeKind::Dialect { text, .. } => {
                out.push('!');
                out.push_str(text);
            }
            TypeKind::Opaque(text) => out.push_str(text),
        }
    }

    fn step_attr(&mut self, out: &mut String, a: Attr) {
        let ctx = self.ctx;
        match ctx.attr_kind(a) {
            AttrKind::Unit => out.push_str("unit"),
            AttrKind::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            AttrKind::Integer { value, ty } => {
                // MLIR spells i1 integers as booleans, without a type.
                if is_i1(ctx, *ty) {
                    let truthy = !matches!(value, IntValue::Small(0));
                    out.push_str(if truthy { "true" } else { "false" });
                    return;
                }
                push_int(out, value);
                out.push_str(" : ");
                self.stack.push(Item::Type(*ty));
            }
            AttrKind::Float { value, ty } => {
                match value {
                    FloatValue::Hex(h) => out.push_str(h),
                    FloatValue::Bits(b) => {
                        let kind = float_kind(ctx, *ty);
                        push_float(out, f64::from_bits(*b), kind, &mut self.scratch);
                    }
                }
                out.push_str(" : ");
                self.stack.push(Item::Type(*ty));
            }
            AttrKind::String(bytes) => push_quoted(out, bytes),
            AttrKind::Type(t) => self.stack.push(Item::Type(*t)),
            AttrKind::Array(items) => {
                out.push('[');
                self.stack.push(Item::Text("]"));
                self.push_list(items.iter().map(|a| Item::Elem(*a)), ", ");
            }
            AttrKind::Dict(entries) => {
                out.push('{');
                self.stack.push(Item::Text("}"));
                let mut first = true;
                for (k, v) in entries.iter().rev() {
                    if !first {
                        self.stack.push(Item::Text(", "));
                    }
                    first = false;
                    // A unit value is spelled by the bare key alone.
                    if !matches!(ctx.attr_kind(*v), AttrKind::Unit) {
                        self.stack.push(Item::Attr(*v));
                        self.stack.push(Item::Text(" = "));
                    }
                    self.stack.push(Item::Key(*k));
                }
            }
            AttrKind::SymbolRef { root, nested } => {
                push_symbol(out, ctx.ident_str(*root));
                for n in nested.iter().rev() {
                    self.stack.push(Item::Symbol(*n));
                    self.stack.push(Item::Text("::"));
                }
            }
            AttrKind::DenseArray { elem, values } => {
                out.push_str("array<");
                self.stack.push(Item::Text(">"));
                if !values.is_empty() {
                    self.stack.push(Item::DenseElems(a));
                    self.stack.push(Item::Text(": "));
                }
                self.stack.push(Item::Type(*elem));
            }
            AttrKind::Dense { body, ty } => {
                out.push_str("dense<");
                out.push_str(body);
                out.push_str("> : ");
                self.stack.push(Item::Type(*ty));
            }
            AttrKind::Dialect { text, .. } => {
                out.push('#');
                out.push_str(text);
            }
            AttrKind::Location(l) => {
                out.push_str("loc(");
                self.stack.push(Item::Text(")"));
                self.stack.push(Item::Loc(*l));
            }
            AttrKind::Opaque(text) => out.push_str(text),
        }
    }

    fn step_elem(&mut self, out: &mut String, a: Attr) {
        let ctx = self.ctx;
        match ctx.attr_kind(a) {
            AttrKind::Integer { value, ty } if is_signless(ctx, *ty, 64) => push_int(out, value),
            AttrKind::Float {
                value: FloatValue::Bits(b),
                ty,
            } if float_kind(ctx, *ty) == FloatKind::F64
                && matches!(ctx.type_kind(*ty), TypeKind::Float(_))
                && f64::from_bits(*b).is_finite() =>
            {
                push_float(out, f64::from_bits(*b), FloatKind::F64, &mut self.scratch)
            }
            _ => self.step_attr(out, a),
        }
    }

    fn dense_elems(&mut self, out: &mut String, a: Attr) {
        let ctx = self.ctx;
        let AttrKind::DenseArray { elem, values } = ctx.attr_kind(a) else {
            return;
        };
        let bool_elems = is_i1(ctx, *elem);
        let kind = float_kind(ctx, *elem);
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            match v {
                DenseElem::Int(iv) if bool_elems => {
                    let truthy = !matches!(iv, IntValue::Small(0));
                    out.push_str(if truthy { "true" } else { "false" });
                }
                DenseElem::Int(iv) => push_int(out, iv),
                DenseElem::Float(FloatValue::Hex(h)) => out.push_str(h),
                DenseElem::Float(FloatValue::Bits(b)) => {
                    push_float(out, f64::from_bits(*b), kind, &mut self.scratch)
                }
            }
        }
    }

    fn step_loc(&mut self, out: &mut String, l: Loc) {
        let ctx = self.ctx;
        match ctx.loc_kind(l) {
            LocKind::Unknown => out.push_str("unknown"),
            LocKind::FileLineCol { file, line, col } => {
                push_file_pos(out, ctx.ident_str(*file), *line, *col);
            }
            LocKind::FileRange {
                file,
                line,
                col,
                end_line,
                end_col,
            } => {
                push_file_pos(out, ctx.ident_str(*file), *line, *col);
                // MLIR's spellings: a point, `to :C` on one line, `to L:C` across lines.
                if end_line != line {
                    out.push_str(" to ");
                    push_u64(out, *end_line as u64);
                    out.push(':');
                    push_u64(out, *end_col as u64);
                } else if end_col != col {
                    out.push_str(" to :");
                    push_u64(out, *end_col as u64);
                }
            }
            LocKind::Name { name, child } => {
                push_quoted(out, ctx.ident_str(*name).as_bytes());
                // An unknown child is not printed, as in MLIR.
                if let Some(c) = child {
                    if !matches!(ctx.loc_kind(*c), LocKind::Unknown) {
                        out.push('(');
                        self.stack.push(Item::Text(")"));
                        self.stack.push(Item::Loc(*c));
                    }
                }
            }
            LocKind::Fused { metadata, locs } => {
                out.push_str("fused");
                self.stack.push(Item::Text("]"));
                self.push_list(locs.iter().map(|l| Item::Loc(*l)), ", ");
                self.stack.push(Item::Text("["));
                if let Some(m) = metadata {
                    self.stack.push(Item::Text(">"));
                    self.stack.push(Item::Attr(*m));
                    self.stack.push(Item::Text("<"));
                }
            }
            LocKind::CallSite { callee, caller } => {
                out.push_str("callsite(");
                self.stack.push(Item::Text(")"));
                self.stack.push(Item::Loc(*caller));
                self.stack.push(Item::Text(" at "));
                self.stack.push(Item::Loc(*callee));
            }
            LocKind::Opaque(text) => out.push_str(text),
        }
    }
}

/// Records that id `i` was printed as `text`: the second time, the text is kept.
fn cache_insert(cache: &mut Vec<Cached>, i: usize, text: &str) {
    if cache.len() <= i {
        cache.resize(i + 1, Cached::Unseen);
    }
    cache[i] = match cache[i] {
        Cached::Unseen => Cached::Seen,
        _ => Cached::Text(text.into()),
    };
}

fn push_dims(out: &mut String, shape: &[i64]) {
    for d in shape {
        if *d == DYNAMIC {
            out.push('?');
        } else {
            push_i128(out, *d as i128);
        }
        out.push('x');
    }
}

fn push_file_pos(out: &mut String, file: &str, line: u32, col: u32) {
    push_quoted(out, file.as_bytes());
    out.push(':');
    push_u64(out, line as u64);
    out.push(':');
    push_u64(out, col as u64);
}

fn push_int(out: &mut String, v: &IntValue) {
    match v {
        IntValue::Small(i) => push_i128(out, *i),
        IntValue::Big(text) => out.push_str(text),
    }
}

fn is_i1(ctx: &Context, t: Type) -> bool {
    is_signless(ctx, t, 1)
}

fn is_signless(ctx: &Context, t: Type, bits: u32) -> bool {
    matches!(ctx.type_kind(t), TypeKind::Integer { width, signedness: Signedness::Signless } if *width == bits)
}

/// The float format of `t`; f64 when `t` is not a float type (the value is then printed
/// with full precision, which is always exact).
fn float_kind(ctx: &Context, t: Type) -> FloatKind {
    match ctx.type_kind(t) {
        TypeKind::Float(k) => *k,
        _ => FloatKind::F64,
    }
}

fn float_kind_name(ctx: &Context, k: FloatKind) -> &str {
    match k {
        FloatKind::F16 => "f16",
        FloatKind::BF16 => "bf16",
        FloatKind::F32 => "f32",
        FloatKind::F64 => "f64",
        FloatKind::F80 => "f80",
        FloatKind::F128 => "f128",
        FloatKind::TF32 => "tf32",
        FloatKind::Other(name) => ctx.ident_str(name),
    }
}
