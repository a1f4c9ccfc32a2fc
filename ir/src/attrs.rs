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
    /// The value rounded to the precision of `kind` (round to nearest, ties to even), as MLIR
    /// stores a float attribute in its type's semantics: `1.1 : f32` is the f32 nearest 1.1.
    pub fn rounded_to(self, kind: crate::types::FloatKind) -> FloatValue {
        use crate::types::FloatKind;
        let b = match self {
            FloatValue::Bits(b) => b,
            // A bit pattern that is not a NaN is just a value: canonicalize it, so that
            // `0x7C00 : f16` and the infinity it denotes intern to the same attribute.
            FloatValue::Hex(ref h) => match decode_hex(h, kind) {
                Some(v) if !v.is_nan() => return FloatValue::Bits(v.to_bits()),
                _ => return self,
            },
        };
        let v = f64::from_bits(b);
        let r = match kind {
            FloatKind::F32 | FloatKind::TF32 => v as f32 as f64,
            FloatKind::F16 => round_mantissa(v as f32, 10, -14, 15),
            FloatKind::BF16 => round_mantissa(v as f32, 7, -126, 127),
            _ => v,
        };
        FloatValue::Bits(r.to_bits())
    }

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
    Integer {
        value: IntValue,
        ty: Type,
    },
    Float {
        value: FloatValue,
        ty: Type,
    },
    /// `"text"` (the unescaped bytes; may be non-UTF-8 through `\xx` escapes).
    String(Vec<u8>),
    Type(Type),
    Array(Vec<Attr>),
    /// `{k = v, ...}`, sorted by key text.
    Dict(Vec<(Ident, Attr)>),
    /// `@root::@nested...`.
    SymbolRef {
        root: Ident,
        nested: Vec<Ident>,
    },
    /// `array<i64: 1, 2>`.
    DenseArray {
        elem: Type,
        values: Vec<DenseElem>,
    },
    /// `dense<...> : T`; the body between the angle brackets, verbatim.
    Dense {
        body: String,
        ty: Type,
    },
    /// `#dialect.name<...>` / `#dialect<...>`: the text after `#`, verbatim.
    Dialect {
        dialect: Ident,
        text: String,
    },
    /// A location used as an attribute value (`loc(...)` inside fused metadata etc.).
    Location(Loc),
    /// Any other builtin attribute form (`affine_map<...>`, `strided<...>`, ...), verbatim,
    /// with its trailing `: type` when it had one.
    Opaque(String),
}

/// Rounds an f32 to a format with `mant` explicit mantissa bits and exponent range
/// [`emin`, `emax`] (ties to even; overflow to infinity; gradual underflow).
fn round_mantissa(x: f32, mant: u32, emin: i32, emax: i32) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x as f64;
    }
    let a = x.abs() as f64;
    let e = a.log2().floor() as i32;
    // Below the normal range the quantum is fixed at the subnormal spacing.
    let q = 2f64.powi(e.max(emin) - mant as i32);
    let m = a / q;
    let r = m.round();
    // Ties to even.
    let r = if (m - m.floor() - 0.5).abs() < f64::EPSILON && r % 2.0 != 0.0 {
        r - 1.0
    } else {
        r
    };
    let v = r * q;
    let max = (2.0 - 2f64.powi(-(mant as i32))) * 2f64.powi(emax);
    let v = if v > max { f64::INFINITY } else { v };
    if x < 0.0 {
        -v
    } else {
        v
    }
}

/// Decodes a hex bit pattern in the format of `kind`.
fn decode_hex(h: &str, kind: crate::types::FloatKind) -> Option<f64> {
    use crate::types::FloatKind;
    let digits = h.strip_prefix("0x").or_else(|| h.strip_prefix("0X"))?;
    let bits = u64::from_str_radix(digits, 16).ok()?;
    Some(match kind {
        FloatKind::F64 => f64::from_bits(bits),
        FloatKind::F32 | FloatKind::TF32 => f32::from_bits(u32::try_from(bits).ok()?) as f64,
        FloatKind::BF16 => f32::from_bits(u32::try_from(bits).ok()? << 16) as f64,
        FloatKind::F16 => {
            let b = u16::try_from(bits).ok()?;
            let sign = if b >> 15 == 1 { -1.0 } else { 1.0 };
            let exp = ((b >> 10) & 0x1f) as i32;
            let frac = (b & 0x3ff) as f64;
            sign * match exp {
                0 => frac * 2f64.powi(-24),
                31 if frac == 0.0 => f64::INFINITY,
                31 => f64::NAN,
                e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
            }
        }
        _ => return None,
    })
}
