//! Building types, attributes and locations from the parse tree.
//!
//! Types arrive as single atomic tokens; a type's text is parsed into structure (with the
//! `type_tree` rule) only the first time it is seen and then served from a cache keyed by the
//! source text, because the same few types repeat on every op of a large program.

use super::build::{Builder, PResult};
use super::grammar::Rule;
use super::lex::{is_hex_literal, parse_int_literal, unescape};
use crate::attrs::{AttrKind, DenseElem, FloatValue, IntValue};
use crate::entity::{Attr, Ident, Loc, Type};
use crate::location::LocKind;
use crate::types::{FloatKind, Signedness, TypeKind, DYNAMIC};
use pest::iterators::Pair;

/// MLIR's limit on integer type widths.
const MAX_INT_WIDTH: u32 = 16_777_215;

/// The small-float spellings MLIR knows (kept by name as [`FloatKind::Other`]).
const SMALL_FLOATS: &[&str] = &[
    "f4E2M1FN",
    "f6E2M3FN",
    "f6E3M2FN",
    "f8E3M4",
    "f8E4M3",
    "f8E4M3B11FNUZ",
    "f8E4M3FN",
    "f8E4M3FNUZ",
    "f8E5M2",
    "f8E5M2FNUZ",
    "f8E8M0FNU",
];

/// Whether a rule is one of the location forms (the children of `loc(...)`).
pub(super) fn is_loc_rule(r: Rule) -> bool {
    matches!(
        r,
        Rule::loc_unknown
            | Rule::loc_callsite
            | Rule::loc_fused
            | Rule::loc_file
            | Rule::loc_name
            | Rule::loc_alias
    )
}

impl<'a> Builder<'a, '_> {
    // ----- literals ---------------------------------------------------------------------------

    /// The bytes of a string token.
    pub(super) fn string_bytes(&mut self, p: &Pair<'a, Rule>) -> PResult<Vec<u8>> {
        self.string_bytes_of(p.as_str())
    }

    fn string_bytes_of(&mut self, text: &'a str) -> PResult<Vec<u8>> {
        match unescape(text) {
            Ok(b) => Ok(b.into_owned()),
            Err(at) => {
                let pos = self.off_str(text) + at;
                Err(self.err(pos, "unknown escape in string literal"))
            }
        }
    }

    /// A string token interned as an identifier (op names, keys, file names).
    pub(super) fn string_ident(&mut self, p: &Pair<'a, Rule>) -> PResult<Ident> {
        self.string_ident_of(p.as_str())
    }

    /// A string literal token's text (with its quotes) interned as an identifier.
    pub(super) fn string_ident_of(&mut self, text: &'a str) -> PResult<Ident> {
        if !text.contains('\\') {
            return Ok(self.ctx.ident(&text[1..text.len() - 1]));
        }
        let b = self.string_bytes_of(text)?;
        Ok(self.ctx.ident(&String::from_utf8_lossy(&b)))
    }

    /// The name of a `@symbol` token (quoted names unescaped).
    pub(super) fn symbol_name(&mut self, p: &Pair<'a, Rule>) -> PResult<String> {
        self.symbol_name_of(p.as_str())
    }

    /// The name of a `@symbol` token's text (quoted names unescaped).
    pub(super) fn symbol_name_of(&mut self, text: &'a str) -> PResult<String> {
        let text = &text[1..];
        if text.starts_with('"') {
            let b = self.string_bytes_of(text)?;
            Ok(String::from_utf8_lossy(&b).into_owned())
        } else {
            Ok(text.to_string())
        }
    }

    // ----- types ------------------------------------------------------------------------------

    /// The type of a `type` token, through the text cache.
    pub(super) fn type_token(&mut self, p: Pair<'a, Rule>) -> PResult<Type> {
        self.type_of_token_text(p.as_str())
    }

    /// The type written as the `type` token `text` (a slice of the source), through the text
    /// cache.
    pub(super) fn type_of_token_text(&mut self, text: &'a str) -> PResult<Type> {
        if let Some(&t) = self.type_cache.get(text) {
            return Ok(t);
        }
        let t = self.type_from_text(text)?;
        self.type_cache.insert(text, t);
        self.type_text.entry(t).or_insert(text);
        Ok(t)
    }

    /// Parses a type's text (a slice of the source) into structure.
    pub(super) fn type_from_text(&mut self, text: &'a str) -> PResult<Type> {
        if let Some(t) = self.function_type_by_parts(text) {
            return Ok(t);
        }
        let tree = self.sub_parse(Rule::type_tree, text)?;
        let body = tree.into_inner().find(|p| p.as_rule() != Rule::EOI);
        match body {
            Some(b) => self.build_type(b),
            None => {
                let pos = self.off_str(text);
                Err(self.err(pos, "expected type"))
            }
        }
    }

    /// A plain function type `(T, ...) -> R` or `(T, ...) -> (R, ...)` built from its element
    /// types, each parsed once per distinct text: a function signature with tens of thousands
    /// of arguments (a large program's `function_type`) would otherwise go through the grammar
    /// as one huge string, twice (as an attribute, then as a type). `None` for anything else,
    /// and for anything not valid (the grammar then parses it and reports the error as it
    /// always has); comments and strings are left to the grammar too.
    fn function_type_by_parts(&mut self, text: &'a str) -> Option<Type> {
        if !text.starts_with('(') || text.contains(['"', '/']) {
            return None;
        }
        let close = matching_close(text, 0)?;
        let inputs = split_top_level(&text[1..close])?;
        let rest = text[close + 1..].trim_start_matches(TYPE_WS);
        let rest = rest.strip_prefix("->")?.trim_matches(TYPE_WS);
        let results = if rest.starts_with('(') {
            if matching_close(rest, 0)? != rest.len() - 1 {
                return None;
            }
            split_top_level(&rest[1..rest.len() - 1])?
        } else if rest.is_empty() || rest.contains("->") || rest.contains(['(', ')']) {
            return None;
        } else {
            vec![rest]
        };
        let mut seen: rustc_hash::FxHashMap<&'a str, Type> = rustc_hash::FxHashMap::default();
        let mut build = |b: &mut Self, parts: Vec<&'a str>| -> Option<Vec<Type>> {
            parts
                .into_iter()
                .map(|part| match seen.get(part) {
                    Some(&t) => Some(t),
                    None => {
                        // Not through the type cache: the grammar path records no text for
                        // the elements of a function type either.
                        let t = b
                            .type_cache
                            .get(part)
                            .copied()
                            .or_else(|| b.type_from_text(part).ok())?;
                        seen.insert(part, t);
                        Some(t)
                    }
                })
                .collect()
        };
        let inputs = build(self, inputs)?;
        let results = build(self, results)?;
        Some(self.ctx.ty(TypeKind::Function { inputs, results }))
    }

    /// Runs the grammar on a slice of the source, mapping errors to source positions.
    pub(super) fn sub_parse(&mut self, rule: Rule, text: &'a str) -> PResult<Pair<'a, Rule>> {
        match super::run_pest(rule, text) {
            Ok(mut pairs) => match pairs.next() {
                Some(p) => Ok(p),
                None => {
                    let pos = self.off_str(text);
                    Err(self.err(pos, "expected type"))
                }
            },
            Err(e) => {
                let pos = self.off_str(text) + e.pos;
                Err(self.err(pos, e.message))
            }
        }
    }

    fn build_type(&mut self, p: Pair<'a, Rule>) -> PResult<Type> {
        let pos = self.off(&p);
        let text = p.as_str();
        let kind = match p.as_rule() {
            Rule::int_type => {
                let (signedness, digits) = if let Some(d) = text.strip_prefix("si") {
                    (Signedness::Signed, d)
                } else if let Some(d) = text.strip_prefix("ui") {
                    (Signedness::Unsigned, d)
                } else {
                    (Signedness::Signless, &text[1..])
                };
                match digits.parse::<u32>() {
                    Ok(width) if width <= MAX_INT_WIDTH => TypeKind::Integer { width, signedness },
                    _ => return Err(self.err(pos, "integer bitwidth is limited to 16777215 bits")),
                }
            }
            Rule::float_type => TypeKind::Float(match text {
                "f16" => FloatKind::F16,
                "bf16" => FloatKind::BF16,
                "f32" => FloatKind::F32,
                "f64" => FloatKind::F64,
                "f80" => FloatKind::F80,
                "f128" => FloatKind::F128,
                "tf32" => FloatKind::TF32,
                _ if SMALL_FLOATS.contains(&text) => FloatKind::Other(self.ctx.ident(text)),
                _ => return Err(self.err(pos, format!("unknown float type '{text}'"))),
            }),
            Rule::index_type => TypeKind::Index,
            Rule::none_type => TypeKind::None,
            Rule::tensor_type | Rule::memref_type => {
                let is_tensor = p.as_rule() == Rule::tensor_type;
                let mut it = p.into_inner();
                let first = self.child(&mut it)?;
                let elem = self.child(&mut it)?;
                let elem = self.build_type(elem)?;
                let rest = it.next();
                if first.as_rule() == Rule::unranked {
                    if !is_tensor {
                        return Ok(self.ctx.ty(TypeKind::Opaque(text.to_string())));
                    }
                    if rest.is_some() {
                        return Err(self.err(pos, "unranked tensors cannot have an encoding"));
                    }
                    TypeKind::UnrankedTensor { elem }
                } else {
                    let mut shape = Vec::new();
                    for d in first.into_inner() {
                        let s = d.as_str();
                        if s == "?" {
                            shape.push(DYNAMIC);
                        } else {
                            match s.parse::<i64>() {
                                Ok(v) => shape.push(v),
                                Err(_) => {
                                    let dpos = self.off(&d);
                                    return Err(self.err(dpos, "invalid dimension"));
                                }
                            }
                        }
                    }
                    if is_tensor {
                        let encoding = match rest {
                            Some(e) => Some(self.attr_from_text(e.as_str())?),
                            None => None,
                        };
                        TypeKind::Tensor {
                            shape,
                            elem,
                            encoding,
                        }
                    } else {
                        TypeKind::MemRef {
                            shape,
                            elem,
                            rest: rest.map(|r| r.as_str().trim().to_string()),
                        }
                    }
                }
            }
            Rule::function_type => {
                let mut inputs = Vec::new();
                let mut results = Vec::new();
                for c in p.into_inner() {
                    if c.as_rule() == Rule::fn_results {
                        for r in c.into_inner() {
                            results.push(self.build_type(r)?);
                        }
                    } else {
                        inputs.push(self.build_type(c)?);
                    }
                }
                TypeKind::Function { inputs, results }
            }
            Rule::tuple_type => {
                let mut elems = Vec::new();
                for c in p.into_inner() {
                    elems.push(self.build_type(c)?);
                }
                TypeKind::Tuple(elems)
            }
            Rule::opaque_type => TypeKind::Opaque(text.to_string()),
            Rule::dialect_type => {
                let body = &text[1..];
                if !body.contains('.') && !body.contains('<') {
                    return match self.type_aliases.get(body) {
                        Some(&t) => Ok(t),
                        None => Err(self.err(pos, format!("undefined symbol alias id '{body}'"))),
                    };
                }
                let end = body.find(['.', '<']).unwrap_or(body.len());
                let dialect = self.ctx.ident(&body[..end]);
                TypeKind::Dialect {
                    dialect,
                    text: body.to_string(),
                }
            }
            _ => return Err(self.err(pos, "expected type")),
        };
        let t = self.ctx.ty(kind);
        self.type_text.entry(t).or_insert(text);
        Ok(t)
    }

    // ----- attributes -------------------------------------------------------------------------

    /// Parses an attribute's text (a slice of the source), through a cache; used for tensor
    /// encodings, which live inside type tokens.
    pub(super) fn attr_from_text(&mut self, text: &'a str) -> PResult<Attr> {
        if let Some(&a) = self.attr_cache.get(text) {
            return Ok(a);
        }
        // Only a type attribute starts with `(`: a function type, built by parts (see
        // `function_type_by_parts`) rather than by running the grammar over the whole text.
        if text.starts_with('(') && !text.ends_with(TYPE_WS) {
            if let Some(t) = self.function_type_by_parts(text) {
                self.type_cache.insert(text, t);
                self.type_text.entry(t).or_insert(text);
                let a = self.ctx.attr(AttrKind::Type(t));
                self.attr_cache.insert(text, a);
                return Ok(a);
            }
        }
        let tree = self.sub_parse(Rule::attr_tree, text)?;
        let body = tree.into_inner().find(|p| p.as_rule() != Rule::EOI);
        let a = match body {
            Some(b) => self.build_attr(b)?,
            None => {
                let pos = self.off_str(text);
                return Err(self.err(pos, "expected attribute value"));
            }
        };
        self.attr_cache.insert(text, a);
        Ok(a)
    }

    /// The entries of a `dict_attr` pair, in source order; duplicate keys are an error.
    pub(super) fn named_attrs(&mut self, p: Pair<'a, Rule>) -> PResult<Vec<(Ident, Attr)>> {
        let mut out: Vec<(Ident, Attr)> = Vec::new();
        for e in p.into_inner() {
            let epos = self.off(&e);
            let mut it = e.into_inner();
            let key = self.child(&mut it)?;
            let k = self.key_ident(key.as_str())?;
            let v = match it.next() {
                Some(v) => self.build_attr(v)?,
                None => self.ctx.unit_attr(),
            };
            self.push_named(&mut out, k, v, epos)?;
        }
        Ok(out)
    }

    /// A dictionary key token (a bare identifier or a string literal) as an identifier.
    pub(super) fn key_ident(&mut self, text: &'a str) -> PResult<Ident> {
        if text.starts_with('"') {
            self.string_ident_of(text)
        } else {
            Ok(self.ctx.ident(text))
        }
    }

    /// Appends entry `k = v` (written at `pos`) to a dictionary's entries; a key may appear
    /// only once.
    pub(super) fn push_named(
        &mut self,
        out: &mut Vec<(Ident, Attr)>,
        k: Ident,
        v: Attr,
        pos: usize,
    ) -> PResult<()> {
        if out.iter().any(|(x, _)| *x == k) {
            let name = self.ctx.ident_str(k).to_string();
            return Err(self.err(
                pos,
                format!("duplicate key '{name}' in dictionary attribute"),
            ));
        }
        out.push((k, v));
        Ok(())
    }

    /// Builds an attribute from one of the attribute rules.
    pub(super) fn build_attr(&mut self, p: Pair<'a, Rule>) -> PResult<Attr> {
        let pos = self.off(&p);
        // A normal rule ending in an optional part spans the whitespace after it.
        let text = p.as_str().trim_end();
        let kind = match p.as_rule() {
            Rule::number => return self.number_attr(text, pos, None),
            Rule::typed_number => {
                let mut it = p.into_inner();
                let num = self.child(&mut it)?;
                let t = self.child(&mut it)?;
                let tpos = self.off(&t);
                let ty = self.type_token(t)?;
                return self.number_attr(num.as_str(), pos, Some((ty, tpos)));
            }
            Rule::string => AttrKind::String(self.string_bytes(&p)?),
            Rule::typed_string => {
                let mut it = p.into_inner();
                let s = self.child(&mut it)?;
                self.string_bytes(&s)?;
                self.type_token(self.child(&mut it)?)?;
                AttrKind::Opaque(text.to_string())
            }
            Rule::symbol_ref => {
                let mut names = Vec::new();
                for s in p.into_inner() {
                    let n = self.symbol_name(&s)?;
                    names.push(self.ctx.ident(&n));
                }
                let mut names = names.into_iter();
                let Some(root) = names.next() else {
                    return Err(self.err(pos, "expected symbol reference"));
                };
                AttrKind::SymbolRef {
                    root,
                    nested: names.collect(),
                }
            }
            Rule::array_attr => {
                let mut items = Vec::new();
                for c in p.into_inner() {
                    items.push(self.build_attr(c)?);
                }
                AttrKind::Array(items)
            }
            Rule::dict_attr => {
                let entries = self.named_attrs(p)?;
                return Ok(self.ctx.dict_attr(entries));
            }
            Rule::hash_attr => {
                let body = &text[1..];
                if !body.contains('.') && !body.contains('<') {
                    return self.attr_alias(body, pos, 0);
                }
                let end = body.find(['.', '<']).unwrap_or(body.len());
                let dialect = self.ctx.ident(&body[..end]);
                AttrKind::Dialect {
                    dialect,
                    text: body.to_string(),
                }
            }
            Rule::bool_attr => AttrKind::Bool(text.starts_with('t')),
            Rule::unit_attr => AttrKind::Unit,
            Rule::dense_array => {
                let mut it = p.into_inner();
                let tp = self.child(&mut it)?;
                let tpos = self.off(&tp);
                let elem = self.type_token(tp)?;
                let mut values = Vec::new();
                for e in it {
                    let epos = self.off(&e);
                    let v = self.dense_elem(e.as_str(), epos, elem, tpos)?;
                    values.push(v);
                }
                AttrKind::DenseArray { elem, values }
            }
            Rule::opaque_attr => {
                let mut it = p.into_inner();
                let body = self.child(&mut it)?;
                let ty = match it.next() {
                    Some(t) => Some(self.type_token(t)?),
                    None => None,
                };
                let b = body.as_str();
                match (b.strip_prefix("dense<"), ty) {
                    (Some(inner), Some(ty)) => AttrKind::Dense {
                        body: inner[..inner.len() - 1].to_string(),
                        ty,
                    },
                    _ => AttrKind::Opaque(text.to_string()),
                }
            }
            Rule::location => AttrKind::Location(self.build_location(p)?),
            Rule::type_attr => {
                let t = self.child(&mut p.into_inner())?;
                AttrKind::Type(self.type_token(t)?)
            }
            _ => return Err(self.err(pos, "expected attribute value")),
        };
        Ok(self.ctx.attr(kind))
    }

    /// Resolves `#name`: an attribute alias, or a location alias defined later in the file.
    fn attr_alias(&mut self, name: &'a str, pos: usize, depth: usize) -> PResult<Attr> {
        if let Some(&a) = self.attr_aliases.get(name) {
            return Ok(a);
        }
        if depth > self.max_nesting {
            return Err(self.err(pos, "alias chain too deep"));
        }
        if let Some(def) = self.lazy_locs.remove(name) {
            let l = self.location_inner_of(def, depth + 1)?;
            let a = self.ctx.attr(AttrKind::Location(l));
            self.attr_aliases.insert(name, a);
            self.lazily_built.insert(name);
            return Ok(a);
        }
        Err(self.err(pos, format!("undefined symbol alias id '{name}'")))
    }

    /// An integer or float literal with an optional type (`42`, `-3 : i8`, `1.5 : f32`,
    /// `0x7FC00000 : f32`).
    fn number_attr(&mut self, text: &str, pos: usize, ty: Option<(Type, usize)>) -> PResult<Attr> {
        let is_float = text.contains('.');
        let (ty, tpos) = match ty {
            Some(t) => t,
            None if is_float => (self.ctx.float_type(FloatKind::F64), pos),
            None => (self.ctx.int_type(64), pos),
        };
        let kind = match self.ctx.type_kind(ty).clone() {
            TypeKind::Float(fk) => AttrKind::Float {
                value: self.float_value(text, pos)?.rounded_to(fk),
                ty,
            },
            TypeKind::Integer { width, signedness } => {
                if is_float {
                    return Err(self.err(pos, "floating point value not valid for specified type"));
                }
                AttrKind::Integer {
                    value: self.int_value(text, pos, width, signedness)?,
                    ty,
                }
            }
            TypeKind::Index => {
                if is_float {
                    return Err(self.err(pos, "floating point value not valid for specified type"));
                }
                AttrKind::Integer {
                    value: self.int_value(text, pos, 64, Signedness::Signless)?,
                    ty,
                }
            }
            _ => {
                let what = if is_float {
                    "floating point"
                } else {
                    "integer"
                };
                return Err(self.err(tpos, format!("{what} literal not valid for specified type")));
            }
        };
        Ok(self.ctx.attr(kind))
    }

    fn float_value(&mut self, text: &str, pos: usize) -> PResult<FloatValue> {
        if is_hex_literal(text) {
            if text.starts_with('-') {
                return Err(self.err(
                    pos,
                    "hexadecimal float literal should not have a leading minus",
                ));
            }
            return Ok(FloatValue::Hex(text.to_string()));
        }
        match text.parse::<f64>() {
            Ok(v) => Ok(FloatValue::Bits(v.to_bits())),
            Err(_) => Err(self.err(pos, "invalid floating point literal")),
        }
    }

    /// An integer literal checked against a `width`-bit type. Signless and signed values are
    /// stored sign-extended (as MLIR prints them: `0xFFFFFFFF : i32` is `-1 : i32`).
    fn int_value(
        &mut self,
        text: &str,
        pos: usize,
        width: u32,
        sign: Signedness,
    ) -> PResult<IntValue> {
        let (neg, mag) = parse_int_literal(text);
        if neg && sign == Signedness::Unsigned && mag != Some(0) {
            return Err(self.err(
                pos,
                "negative integer literal not valid for unsigned integer type",
            ));
        }
        let Some(m) = mag else {
            if width > 128 {
                return Ok(IntValue::Big(text.to_string()));
            }
            return Err(self.err(pos, "integer constant out of range for attribute"));
        };
        if width > 128 {
            let limit = 1u128 << 127;
            return Ok(match (neg, m) {
                (true, m) if m <= limit => IntValue::Small((m as i128).wrapping_neg()),
                (false, m) if m < limit => IntValue::Small(m as i128),
                _ => IntValue::Big(text.to_string()),
            });
        }
        let pow = |w: u32| {
            if w >= 128 {
                u128::MAX
            } else {
                (1u128 << w) - 1
            }
        };
        // Largest magnitude for positive / negative values.
        let (max_pos, max_neg) = match sign {
            Signedness::Signed if width == 0 => (0, 0),
            Signedness::Signed => (pow(width - 1), pow(width - 1) + 1),
            Signedness::Unsigned => (pow(width), 0),
            Signedness::Signless if width == 0 => (0, 0),
            Signedness::Signless => (pow(width), pow(width - 1) + 1),
        };
        if (neg && m > max_neg) || (!neg && m > max_pos) {
            return Err(self.err(pos, "integer constant out of range for attribute"));
        }
        let raw = if neg {
            (m as i128).wrapping_neg()
        } else {
            m as i128
        };
        let v = match sign {
            Signedness::Unsigned => raw,
            _ if width <= 1 || width >= 128 => raw,
            _ => {
                let shift = 128 - width;
                (raw << shift) >> shift
            }
        };
        Ok(IntValue::Small(v))
    }

    fn dense_elem(
        &mut self,
        text: &str,
        pos: usize,
        elem: Type,
        tpos: usize,
    ) -> PResult<DenseElem> {
        match self.ctx.type_kind(elem).clone() {
            TypeKind::Integer { width, signedness } => {
                if text == "true" || text == "false" {
                    return Ok(DenseElem::Int(IntValue::Small((text == "true") as i128)));
                }
                if text.contains('.') {
                    return Err(self.err(pos, "floating point value not valid for specified type"));
                }
                Ok(DenseElem::Int(
                    self.int_value(text, pos, width, signedness)?,
                ))
            }
            TypeKind::Index => Ok(DenseElem::Int(self.int_value(
                text,
                pos,
                64,
                Signedness::Signless,
            )?)),
            TypeKind::Float(_) => Ok(DenseElem::Float(self.float_value(text, pos)?)),
            _ => Err(self.err(tpos, "expected integer or float type")),
        }
    }

    // ----- locations --------------------------------------------------------------------------

    /// Builds a `location` pair (`loc(...)`).
    pub(super) fn build_location(&mut self, p: Pair<'a, Rule>) -> PResult<Loc> {
        self.location_inner_of(p, 0)
    }

    fn location_inner_of(&mut self, p: Pair<'a, Rule>, depth: usize) -> PResult<Loc> {
        let inner = self.child(&mut p.into_inner())?;
        self.loc_inner(inner, depth)
    }

    pub(super) fn loc_inner(&mut self, p: Pair<'a, Rule>, depth: usize) -> PResult<Loc> {
        let pos = self.off(&p);
        let kind = match p.as_rule() {
            Rule::loc_unknown => return Ok(self.ctx.unknown_loc()),
            Rule::loc_callsite => {
                let mut it = p.into_inner();
                let callee = self.child(&mut it)?;
                let callee = self.loc_inner(callee, depth)?;
                let caller = self.child(&mut it)?;
                let caller = self.loc_inner(caller, depth)?;
                LocKind::CallSite { callee, caller }
            }
            Rule::loc_fused => {
                let mut metadata = None;
                let mut locs = Vec::new();
                for c in p.into_inner() {
                    match c.as_rule() {
                        Rule::loc_unknown
                        | Rule::loc_callsite
                        | Rule::loc_fused
                        | Rule::loc_file
                        | Rule::loc_name
                        | Rule::loc_alias => locs.push(self.loc_inner(c, depth)?),
                        _ => metadata = Some(self.build_attr(c)?),
                    }
                }
                LocKind::Fused { metadata, locs }
            }
            Rule::loc_file => return self.file_loc(p.as_str(), pos),
            Rule::loc_name => {
                let mut it = p.into_inner();
                let name = self.child(&mut it)?;
                let name = self.string_ident(&name)?;
                let child = match it.next() {
                    Some(c) => Some(self.loc_inner(c, depth)?),
                    None => None,
                };
                LocKind::Name { name, child }
            }
            Rule::loc_alias => {
                let name = &p.as_str()[1..];
                let a = self.attr_alias(name, pos, depth)?;
                return match self.ctx.attr_kind(a) {
                    AttrKind::Location(l) => Ok(*l),
                    _ => Err(self.err(
                        pos,
                        format!("expected location, but '#{name}' is not a location alias"),
                    )),
                };
            }
            _ => return Err(self.err(pos, "expected location")),
        };
        Ok(self.ctx.loc(kind))
    }

    /// `"file":line[:col] [to [line]:col | to line]`, one token.
    pub(super) fn file_loc(&mut self, text: &'a str, pos: usize) -> PResult<Loc> {
        // End of the string literal: the first unescaped quote after the opening one.
        let b = text.as_bytes();
        let mut i = 1;
        while i < b.len() && b[i] != b'"' {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        // Consecutive locations nearly always name the same file.
        let quoted = &text[..(i + 1).min(text.len())];
        let file = match self.last_loc_file {
            Some((t, id)) if t == quoted => id,
            _ => {
                let id = self.string_ident_of(quoted)?;
                self.last_loc_file = Some((quoted, id));
                id
            }
        };
        let rest = text.get(i + 2..).unwrap_or("");
        let (head, tail) = match rest.split_once("to") {
            Some((h, t)) => (h.trim(), Some(t.trim())),
            None => (rest.trim(), None),
        };
        let num = |s: &str| s.parse::<u32>().ok();
        let bad = |this: &mut Self| this.err(pos, "invalid line or column number in location");
        let (line, col) = match head.split_once(':') {
            Some((l, c)) => (num(l), num(c)),
            None => (num(head), Some(0)),
        };
        let (Some(line), Some(col)) = (line, col) else {
            return Err(bad(self));
        };
        let kind = match tail {
            None => LocKind::FileLineCol { file, line, col },
            Some(t) => {
                let (end_line, end_col) = match t.split_once(':') {
                    Some(("", c)) => (Some(line), num(c)),
                    Some((l, c)) => (num(l), num(c)),
                    None => (num(t), Some(col)),
                };
                let (Some(end_line), Some(end_col)) = (end_line, end_col) else {
                    return Err(bad(self));
                };
                LocKind::FileRange {
                    file,
                    line,
                    col,
                    end_line,
                    end_col,
                }
            }
        };
        Ok(self.ctx.loc(kind))
    }
}

/// Whitespace inside a type (the grammar's `w` without comments, which the fast paths leave
/// to the grammar).
const TYPE_WS: [char; 4] = [' ', '\t', '\r', '\n'];

/// The index of the bracket closing the one at `open` (`(`, `<`, `[` or `{`), if the
/// brackets in between balance.
fn matching_close(text: &str, open: usize) -> Option<usize> {
    let mut stack: Vec<u8> = Vec::new();
    for (i, &c) in text.as_bytes().iter().enumerate().skip(open) {
        match c {
            b'(' | b'<' | b'[' | b'{' => stack.push(c),
            b')' | b'>' | b']' | b'}' => {
                // `->` is an arrow, not a closing angle bracket.
                if c == b'>' && i > 0 && text.as_bytes()[i - 1] == b'-' {
                    continue;
                }
                let want = match c {
                    b')' => b'(',
                    b'>' => b'<',
                    b']' => b'[',
                    _ => b'{',
                };
                if stack.pop() != Some(want) {
                    return None;
                }
                if stack.is_empty() {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `text` split at its top-level commas, each part trimmed; `None` if a part is empty or
/// the brackets do not balance. Empty (or blank) text has no parts.
fn split_top_level(text: &str) -> Option<Vec<&str>> {
    if text.trim_matches(TYPE_WS).is_empty() {
        return Some(Vec::new());
    }
    let bytes = text.as_bytes();
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'(' | b'<' | b'[' | b'{' => depth += 1,
            b'>' if i > 0 && bytes[i - 1] == b'-' => {}
            b')' | b'>' | b']' | b'}' => depth = depth.checked_sub(1)?,
            b',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return None;
    }
    parts.push(&text[start..]);
    let parts: Vec<&str> = parts.into_iter().map(|p| p.trim_matches(TYPE_WS)).collect();
    (!parts.iter().any(|p| p.is_empty())).then_some(parts)
}
