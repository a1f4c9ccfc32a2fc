//! Attributes: compile-time constant data attached to operations, interned by the context.

use crate::entity::{Attr, Ident, Loc, Type};

/// An integer literal. Values beyond 128 bits (legal for wide integer types) keep their text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IntValue {
    Small(i128),
    Big(String),
}

impl IntValue {
    /// The value as `i64`, if it fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            IntValue::Small(v) => i64::try_from(*v).ok(),
            IntValue::Big(_) => None,
        }
    }
}

/// A float literal: a value (stored as f64 bits so it can be hashed), or a hex bit pattern
/// (`0x7FC00000`) kept verbatim, which is how MLIR spells NaNs and exact bit patterns.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FloatValue {
    Bits(u64),
    Hex(String),
}

impl FloatValue {
    /// The value as an `f64` (hex patterns are decoded for f64 and f32 widths).
    pub fn to_f64(&self) -> f64 {
        match self {
            FloatValue::Bits(b) => f64::from_bits(*b),
            FloatValue::Hex(h) => {
                let digits = h.trim_start_matches("0x").trim_start_matches("0X");
                match u64::from_str_radix(digits, 16) {
                    Ok(v) if digits.len() <= 8 => f32::from_bits(v as u32) as f64,
                    Ok(v) => f64::from_bits(v),
                    Err(_) => f64::NAN,
                }
            }
        }
    }
}

/// One element of a dense array (`array<i64: 1, 2>`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DenseElem {
    Int(IntValue),
    Float(FloatValue),
}

/// The structure of an attribute.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AttrKind {
    /// A bare key in a dictionary (`{symm_mem}`), or the `unit` keyword.
    Unit,
    Bool(bool),
    Integer { value: IntValue, ty: Type },
    Float { value: FloatValue, ty: Type },
    /// `"text"` (the unescaped bytes; may be non-UTF-8 through `\xx` escapes).
    String(Vec<u8>),
    Type(Type),
    Array(Vec<Attr>),
    /// `{k = v, ...}`, sorted by key text.
    Dict(Vec<(Ident, Attr)>),
    /// `@root::@nested...`.
    SymbolRef { root: Ident, nested: Vec<Ident> },
    /// `array<i64: 1, 2>`.
    DenseArray { elem: Type, values: Vec<DenseElem> },
    /// `dense<...> : T`; the body between the angle brackets, verbatim.
    Dense { body: String, ty: Type },
    /// `#dialect.name<...>` / `#dialect<...>`: the text after `#`, verbatim.
    Dialect { dialect: Ident, text: String },
    /// A location used as an attribute value (`loc(...)` inside fused metadata etc.).
    Location(Loc),
    /// Any other builtin attribute form (`affine_map<...>`, `strided<...>`, ...), verbatim,
    /// with its trailing `: type` when it had one.
    Opaque(String),
}
