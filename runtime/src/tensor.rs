//! Runtime tensors: element types, element storage and row-major data movement.
//!
//! Floats narrower than `f64` (f16, bf16, f32) are stored as `f32` values that are exactly
//! representable in their element type (every producer rounds, see [`ElemType::round`]), so
//! arithmetic "in f32, then round" is direct and the element bit patterns are recovered
//! exactly for digests. Integers of every width are stored as `i64`, normalized to their width
//! (sign-extended for signless/signed, zero-extended for unsigned, 0/1 for `i1`).

use crate::numeric;
use commlir_ir::{Context, FloatKind, Signedness, Type, TypeKind};
use std::fmt;

/// The element types the sim backend executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    F16,
    BF16,
    F32,
    F64,
    Int { width: u32, signedness: Signedness },
    Index,
}

impl ElemType {
    /// The element type of an IR scalar type, if the sim backend supports it.
    pub fn from_type(ctx: &Context, t: Type) -> Option<ElemType> {
        match ctx.type_kind(t) {
            TypeKind::Float(FloatKind::F16) => Some(ElemType::F16),
            TypeKind::Float(FloatKind::BF16) => Some(ElemType::BF16),
            TypeKind::Float(FloatKind::F32) => Some(ElemType::F32),
            TypeKind::Float(FloatKind::F64) => Some(ElemType::F64),
            TypeKind::Integer { width, signedness } if (1..=64).contains(width) => {
                Some(ElemType::Int {
                    width: *width,
                    signedness: *signedness,
                })
            }
            TypeKind::Index => Some(ElemType::Index),
            _ => None,
        }
    }

    /// Whether elements are floats.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            ElemType::F16 | ElemType::BF16 | ElemType::F32 | ElemType::F64
        )
    }

    /// Bytes of one element in memory (and in the digest).
    pub fn byte_width(self) -> usize {
        match self {
            ElemType::F16 | ElemType::BF16 => 2,
            ElemType::F32 => 4,
            ElemType::F64 | ElemType::Index => 8,
            ElemType::Int { width, .. } => width.div_ceil(8) as usize,
        }
    }

    /// `x` rounded to this (f16/bf16/f32) element type. `f64` and integer types are not
    /// stored as `f32`; for them this is the identity on the `f32` value.
    pub fn round(self, x: f32) -> f32 {
        match self {
            ElemType::F16 => numeric::round_f16(f64::from(x)),
            ElemType::BF16 => numeric::round_bf16(f64::from(x)),
            _ => x,
        }
    }

    /// `x` rounded from `f64` to this (f16/bf16/f32) element type, in a single rounding.
    pub fn round_from_f64(self, x: f64) -> f32 {
        match self {
            ElemType::F16 => numeric::round_f16(x),
            ElemType::BF16 => numeric::round_bf16(x),
            _ => x as f32,
        }
    }

    /// `x` reduced to this integer type's width and signedness (two's complement wrap).
    pub fn wrap(self, x: i64) -> i64 {
        match self {
            ElemType::Int { width: 64, .. } | ElemType::Index => x,
            ElemType::Int { width: 1, .. } => x & 1,
            ElemType::Int {
                width,
                signedness: Signedness::Unsigned,
            } => x & ((1i64 << width) - 1),
            ElemType::Int { width, .. } => (x << (64 - width)) >> (64 - width),
            _ => x,
        }
    }

    /// The value range of an integer type, as `f64` bounds used when casting from floats.
    fn int_range(self) -> (f64, f64) {
        match self {
            ElemType::Int { width: 1, .. } => (0.0, 1.0),
            ElemType::Int {
                width,
                signedness: Signedness::Unsigned,
            } => (0.0, 2f64.powi(width as i32) - 1.0),
            ElemType::Int { width, .. } => (
                -(2f64.powi(width as i32 - 1)),
                2f64.powi(width as i32 - 1) - 1.0,
            ),
            _ => (i64::MIN as f64, i64::MAX as f64),
        }
    }

    /// Whether this is `ui64`, the one integer type whose values do not all fit the `i64`
    /// storage as non-negative numbers: its elements are stored as their bit patterns, and
    /// division, comparisons and float conversions must read them as `u64`.
    pub fn is_u64(self) -> bool {
        matches!(
            self,
            ElemType::Int {
                width: 64,
                signedness: Signedness::Unsigned
            }
        )
    }

    /// The larger of two stored integer elements of this type (`ui64` compared unsigned; every
    /// other type's storage orders as its values do).
    pub fn int_max(self, a: i64, b: i64) -> i64 {
        if self.is_u64() {
            (a as u64).max(b as u64) as i64
        } else {
            a.max(b)
        }
    }

    /// The smaller of two stored integer elements of this type (see [`ElemType::int_max`]).
    pub fn int_min(self, a: i64, b: i64) -> i64 {
        if self.is_u64() {
            (a as u64).min(b as u64) as i64
        } else {
            a.min(b)
        }
    }

    /// `a / b` of two stored integer elements of this type, truncating toward zero (`ui64`
    /// unsigned; `MIN / -1` wraps), wrapped to the type; `b` must not be zero.
    pub fn int_div(self, a: i64, b: i64) -> i64 {
        if self.is_u64() {
            ((a as u64) / (b as u64)) as i64
        } else {
            self.wrap(a.wrapping_div(b))
        }
    }

    /// An integer element as `f64` (unsigned 64-bit values are read as unsigned).
    pub fn int_to_f64(self, x: i64) -> f64 {
        match self {
            ElemType::Int {
                width: 64,
                signedness: Signedness::Unsigned,
            } => x as u64 as f64,
            _ => x as f64,
        }
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElemType::F16 => f.write_str("f16"),
            ElemType::BF16 => f.write_str("bf16"),
            ElemType::F32 => f.write_str("f32"),
            ElemType::F64 => f.write_str("f64"),
            ElemType::Index => f.write_str("index"),
            ElemType::Int { width, signedness } => {
                let prefix = match signedness {
                    Signedness::Signless => "i",
                    Signedness::Signed => "si",
                    Signedness::Unsigned => "ui",
                };
                write!(f, "{prefix}{width}")
            }
        }
    }
}

/// Element storage; the variant follows the element type (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    F64(Vec<f64>),
    Int(Vec<i64>),
}

impl Data {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Data::F32(v) => v.len(),
            Data::F64(v) => v.len(),
            Data::Int(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements at `indices`, in that order.
    pub fn gather(&self, indices: &[usize]) -> Data {
        match self {
            Data::F32(v) => Data::F32(indices.iter().map(|&i| v[i]).collect()),
            Data::F64(v) => Data::F64(indices.iter().map(|&i| v[i]).collect()),
            Data::Int(v) => Data::Int(indices.iter().map(|&i| v[i]).collect()),
        }
    }

    /// The elements in `range`.
    pub fn range(&self, range: std::ops::Range<usize>) -> Data {
        match self {
            Data::F32(v) => Data::F32(v[range].to_vec()),
            Data::F64(v) => Data::F64(v[range].to_vec()),
            Data::Int(v) => Data::Int(v[range].to_vec()),
        }
    }

    /// Appends `other` (of the same variant).
    fn extend(&mut self, other: &Data) {
        match (self, other) {
            (Data::F32(a), Data::F32(b)) => a.extend_from_slice(b),
            (Data::F64(a), Data::F64(b)) => a.extend_from_slice(b),
            (Data::Int(a), Data::Int(b)) => a.extend_from_slice(b),
            _ => unreachable!("concatenating storage of different element types"),
        }
    }

    /// Empty storage of the same variant with room for `n` elements.
    fn empty_like(&self, n: usize) -> Data {
        match self {
            Data::F32(_) => Data::F32(Vec::with_capacity(n)),
            Data::F64(_) => Data::F64(Vec::with_capacity(n)),
            Data::Int(_) => Data::Int(Vec::with_capacity(n)),
        }
    }

    /// Element `i` as `f64` (integers converted by value).
    pub fn get_f64(&self, i: usize, elem: ElemType) -> f64 {
        match self {
            Data::F32(v) => f64::from(v[i]),
            Data::F64(v) => v[i],
            Data::Int(v) => elem.int_to_f64(v[i]),
        }
    }
}

/// The shape and element type of a tensor, without its data.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub elem: ElemType,
    pub shape: Vec<usize>,
}

impl TensorType {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The ranked, statically shaped tensor type `t` (its encoding, if any, is ignored:
    /// a comm buffer holds the same elements as a plain tensor).
    pub fn from_type(ctx: &Context, t: Type) -> Option<TensorType> {
        let TypeKind::Tensor { shape, elem, .. } = ctx.type_kind(t) else {
            return None;
        };
        let shape = shape
            .iter()
            .map(|d| usize::try_from(*d).ok())
            .collect::<Option<Vec<_>>>()?;
        Some(TensorType {
            elem: ElemType::from_type(ctx, *elem)?,
            shape,
        })
    }
}

impl fmt::Display for TensorType {
    /// MLIR's spelling, `tensor<4x8xf32>` (never with an encoding).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor<")?;
        for d in &self.shape {
            write!(f, "{d}x")?;
        }
        write!(f, "{}>", self.elem)
    }
}

/// A tensor value: type and elements in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub ty: TensorType,
    pub data: Data,
}

impl Tensor {
    /// A tensor of `ty` with every element `value` (rounded to the element type).
    pub fn splat(ty: TensorType, value: f64) -> Tensor {
        let n = ty.numel();
        let data = match ty.elem {
            ElemType::F64 => Data::F64(vec![value; n]),
            e if e.is_float() => Data::F32(vec![e.round_from_f64(value); n]),
            e => Data::Int(vec![Tensor::float_to_int(e, value); n]),
        };
        Tensor { ty, data }
    }

    /// A tensor from elements given as `f64`, each rounded to the element type.
    pub fn from_f64(ty: TensorType, values: &[f64]) -> Tensor {
        assert_eq!(
            ty.numel(),
            values.len(),
            "element count does not match the shape"
        );
        let data = match ty.elem {
            ElemType::F64 => Data::F64(values.to_vec()),
            e if e.is_float() => Data::F32(values.iter().map(|v| e.round_from_f64(*v)).collect()),
            e => Data::Int(values.iter().map(|v| Tensor::float_to_int(e, *v)).collect()),
        };
        Tensor { ty, data }
    }

    /// A float converted to integer type `e`: truncated toward zero, saturated, NaN → 0.
    fn float_to_int(e: ElemType, value: f64) -> i64 {
        let (lo, hi) = e.int_range();
        if value.is_nan() {
            0
        } else if e.is_u64() {
            // Through `i64` everything from 2^63 up would saturate at 2^63 - 1.
            value.trunc().clamp(lo, hi) as u64 as i64
        } else {
            e.wrap(value.trunc().clamp(lo, hi) as i64)
        }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.data.len()
    }

    /// The elements as `f64` (exact for every float type; integers by value).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        (0..self.numel())
            .map(|i| self.data.get_f64(i, self.ty.elem))
            .collect()
    }

    /// The same elements under another shape with the same element count.
    pub fn reshaped(&self, shape: Vec<usize>) -> Tensor {
        Tensor {
            ty: TensorType {
                elem: self.ty.elem,
                shape,
            },
            data: self.data.clone(),
        }
    }

    /// Converts to another element type: floats round to nearest even, floats to integers
    /// truncate toward zero and saturate (NaN becomes 0), integers wrap to the new width.
    pub fn cast(&self, to: ElemType) -> Tensor {
        let ty = TensorType {
            elem: to,
            shape: self.ty.shape.clone(),
        };
        let from = self.ty.elem;
        let data = match (&self.data, to) {
            (Data::F32(v), ElemType::F64) => Data::F64(v.iter().map(|x| f64::from(*x)).collect()),
            (Data::F32(v), e) if e.is_float() => Data::F32(v.iter().map(|x| e.round(*x)).collect()),
            (Data::F64(v), ElemType::F64) => Data::F64(v.clone()),
            (Data::F64(v), e) if e.is_float() => {
                Data::F32(v.iter().map(|x| e.round_from_f64(*x)).collect())
            }
            (Data::Int(v), ElemType::F64) => {
                Data::F64(v.iter().map(|x| from.int_to_f64(*x)).collect())
            }
            (Data::Int(v), e) if e.is_float() => Data::F32(
                v.iter()
                    .map(|x| e.round_from_f64(from.int_to_f64(*x)))
                    .collect(),
            ),
            (Data::Int(v), e) => Data::Int(v.iter().map(|x| e.wrap(*x)).collect()),
            (d, e) => Data::Int(
                (0..d.len())
                    .map(|i| Tensor::float_to_int(e, d.get_f64(i, from)))
                    .collect(),
            ),
        };
        Tensor { ty, data }
    }

    /// The sub-tensor `[start, start + size)` along `dim`.
    pub fn slice(&self, dim: usize, start: usize, size: usize) -> Tensor {
        let shape = &self.ty.shape;
        let outer: usize = shape[..dim].iter().product();
        let inner: usize = shape[dim + 1..].iter().product();
        let mut data = self.data.empty_like(outer * size * inner);
        for o in 0..outer {
            let base = (o * shape[dim] + start) * inner;
            data.extend(&self.data.range(base..base + size * inner));
        }
        let mut out_shape = shape.clone();
        out_shape[dim] = size;
        Tensor {
            ty: TensorType {
                elem: self.ty.elem,
                shape: out_shape,
            },
            data,
        }
    }

    /// Concatenation along `dim`; the parts agree on every other dimension.
    pub fn concat(parts: &[&Tensor], dim: usize) -> Tensor {
        let first = parts[0];
        let shape = &first.ty.shape;
        let outer: usize = shape[..dim].iter().product();
        let inner: usize = shape[dim + 1..].iter().product();
        let total: usize = parts.iter().map(|p| p.ty.shape[dim]).sum();
        let mut data = first.data.empty_like(outer * total * inner);
        for o in 0..outer {
            for p in parts {
                let rows = p.ty.shape[dim] * inner;
                data.extend(&p.data.range(o * rows..(o + 1) * rows));
            }
        }
        let mut out_shape = shape.clone();
        out_shape[dim] = total;
        Tensor {
            ty: TensorType {
                elem: first.ty.elem,
                shape: out_shape,
            },
            data,
        }
    }

    /// Splits along `dim` into consecutive parts of the given sizes.
    pub fn split(&self, dim: usize, sizes: &[usize]) -> Vec<Tensor> {
        let mut start = 0;
        sizes
            .iter()
            .map(|&s| {
                let t = self.slice(dim, start, s);
                start += s;
                t
            })
            .collect()
    }

    /// Swaps the last two dimensions.
    pub fn transpose_last2(&self) -> Tensor {
        let shape = &self.ty.shape;
        let r = shape.len();
        let (m, n) = (shape[r - 2], shape[r - 1]);
        let batch: usize = shape[..r - 2].iter().product();
        let mut idx = Vec::with_capacity(self.numel());
        for b in 0..batch {
            for j in 0..n {
                for i in 0..m {
                    idx.push(b * m * n + i * n + j);
                }
            }
        }
        let mut out_shape = shape.clone();
        out_shape.swap(r - 2, r - 1);
        Tensor {
            ty: TensorType {
                elem: self.ty.elem,
                shape: out_shape,
            },
            data: self.data.gather(&idx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32t(shape: &[usize], v: &[f64]) -> Tensor {
        Tensor::from_f64(
            TensorType {
                elem: ElemType::F32,
                shape: shape.to_vec(),
            },
            v,
        )
    }

    #[test]
    fn slice_concat_split_transpose() {
        let t = f32t(&[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(t.slice(1, 1, 2).to_f64_vec(), vec![1.0, 2.0, 4.0, 5.0]);
        assert_eq!(t.slice(0, 1, 1).to_f64_vec(), vec![3.0, 4.0, 5.0]);
        let c = Tensor::concat(&[&t, &t.slice(1, 0, 1)], 1);
        assert_eq!(c.ty.shape, vec![2, 4]);
        assert_eq!(c.to_f64_vec(), vec![0.0, 1.0, 2.0, 0.0, 3.0, 4.0, 5.0, 3.0]);
        let parts = t.split(0, &[1, 1]);
        assert_eq!(parts[1].to_f64_vec(), vec![3.0, 4.0, 5.0]);
        let tr = t.transpose_last2();
        assert_eq!(tr.ty.shape, vec![3, 2]);
        assert_eq!(tr.to_f64_vec(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    }

    #[test]
    fn int_wrap_and_cast() {
        let i8t = ElemType::Int {
            width: 8,
            signedness: Signedness::Signless,
        };
        assert_eq!(i8t.wrap(200), -56);
        let u8t = ElemType::Int {
            width: 8,
            signedness: Signedness::Unsigned,
        };
        assert_eq!(u8t.wrap(-1), 255);
        let t = f32t(&[4], &[1.7, -1.7, 300.0, f64::NAN]);
        assert_eq!(t.cast(i8t).data, Data::Int(vec![1, -1, 127, 0]));
        assert_eq!(t.cast(ElemType::BF16).ty.to_string(), "tensor<4xbf16>");
    }
}
