//! Types: the structural description interned by the [`Context`](crate::Context).
//!
//! The builtin types commlir reasons about are modelled precisely (integers, floats, index,
//! tensors with shape/element/encoding, memrefs, functions, tuples). Everything else the MLIR
//! syntax allows (vectors, complex, opaque builtin forms, dialect types) is kept as text so that
//! real MLIR files survive a round trip unchanged.

use crate::entity::{Attr, Ident, Type};

/// The marker for a dynamic dimension (`?`), as MLIR's `ShapedType::kDynamic`.
pub const DYNAMIC: i64 = i64::MIN;

/// Signedness of an integer type (`i32`, `si32`, `ui32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signedness {
    Signless,
    Signed,
    Unsigned,
}

/// Floating-point formats with a builtin spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FloatKind {
    F16,
    BF16,
    F32,
    F64,
    F80,
    F128,
    TF32,
    /// Any of the small-float spellings (`f8E4M3FN`, `f4E2M1FN`, ...), kept by name.
    Other(Ident),
}

impl FloatKind {
    /// Bit width of the format, where known.
    pub fn width(self) -> u32 {
        match self {
            FloatKind::F16 | FloatKind::BF16 => 16,
            FloatKind::F32 | FloatKind::TF32 => 32,
            FloatKind::F64 => 64,
            FloatKind::F80 => 80,
            FloatKind::F128 => 128,
            FloatKind::Other(_) => 8,
        }
    }
}

/// The structure of a type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TypeKind {
    Integer {
        width: u32,
        signedness: Signedness,
    },
    Index,
    Float(FloatKind),
    None,
    /// `tensor<4x?xf32[, #enc]>`; dynamic dims are [`DYNAMIC`].
    Tensor {
        shape: Vec<i64>,
        elem: Type,
        encoding: Option<Attr>,
    },
    /// `tensor<*xf32>`.
    UnrankedTensor {
        elem: Type,
    },
    /// `memref<4x8xf32[, layout][, memspace]>`; `rest` keeps the layout/memory-space text.
    MemRef {
        shape: Vec<i64>,
        elem: Type,
        rest: Option<String>,
    },
    /// `(T, ...) -> (T, ...)`.
    Function {
        inputs: Vec<Type>,
        results: Vec<Type>,
    },
    /// `tuple<T, ...>`.
    Tuple(Vec<Type>),
    /// `!dialect.name<...>` or `!dialect<...>`: the text after `!`, verbatim.
    Dialect {
        dialect: Ident,
        text: String,
    },
    /// Any other builtin form (`vector<4xf32>`, `complex<f32>`, ...), verbatim.
    Opaque(String),
}

impl TypeKind {
    /// Shape and element type of a ranked tensor or memref.
    pub fn shaped(&self) -> Option<(&[i64], Type)> {
        match self {
            TypeKind::Tensor { shape, elem, .. } | TypeKind::MemRef { shape, elem, .. } => {
                Some((shape, *elem))
            }
            _ => None,
        }
    }
}
