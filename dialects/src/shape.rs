//! Shape helpers shared by the dialect verifiers: reading ranked tensor types, comparing
//! them modulo encoding (a comm-buffer encoding changes where a tensor lives, not what it is),
//! and rendering shapes for diagnostics.

use commlir_ir::{printer, Attr, Context, OpId, Type, TypeKind, Value};

/// A ranked tensor's shape, element type and encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub shape: Vec<i64>,
    pub elem: Type,
    pub encoding: Option<Attr>,
}

impl TensorInfo {
    /// The same tensor type as a borrowed view.
    pub fn view(&self) -> TensorView<'_> {
        TensorView {
            shape: &self.shape,
            elem: self.elem,
            encoding: self.encoding,
        }
    }

    /// Number of elements (saturating: a shape whose count overflows i64 is too large for
    /// any machine, and verifiers report it rather than wrap).
    pub fn numel(&self) -> i64 {
        self.view().numel()
    }

    /// Number of elements, `None` if it overflows i64.
    pub fn checked_numel(&self) -> Option<i64> {
        self.view().checked_numel()
    }
}

/// A ranked tensor type as a view of the interned type: the shape is borrowed, not copied,
/// which is what the verifiers (run after every pass that changes the IR) want.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorView<'a> {
    pub shape: &'a [i64],
    pub elem: Type,
    pub encoding: Option<Attr>,
}

impl TensorView<'_> {
    /// Number of elements (saturating, as [`TensorInfo::numel`]).
    pub fn numel(&self) -> i64 {
        self.checked_numel().unwrap_or(i64::MAX)
    }

    /// Number of elements, `None` if it overflows i64.
    pub fn checked_numel(&self) -> Option<i64> {
        self.shape
            .iter()
            .try_fold(1i64, |acc, d| acc.checked_mul(*d))
    }

    /// An owned copy.
    pub fn to_info(&self) -> TensorInfo {
        TensorInfo {
            shape: self.shape.to_vec(),
            elem: self.elem,
            encoding: self.encoding,
        }
    }
}

/// The tensor type of `t`, if it is a ranked tensor.
pub fn tensor_info(ctx: &Context, t: Type) -> Option<TensorInfo> {
    tensor_view(ctx, t).map(|v| v.to_info())
}

/// The tensor type of value `v`.
pub fn value_tensor(ctx: &Context, v: Value) -> Option<TensorInfo> {
    tensor_info(ctx, ctx.value_type(v))
}

/// The tensor type of `t` as a borrowed view, if it is a ranked tensor.
pub fn tensor_view(ctx: &Context, t: Type) -> Option<TensorView<'_>> {
    match ctx.type_kind(t) {
        TypeKind::Tensor {
            shape,
            elem,
            encoding,
        } => Some(TensorView {
            shape,
            elem: *elem,
            encoding: *encoding,
        }),
        _ => None,
    }
}

/// The tensor type of value `v` as a borrowed view.
pub fn value_tensor_view(ctx: &Context, v: Value) -> Option<TensorView<'_>> {
    tensor_view(ctx, ctx.value_type(v))
}

/// `t` without its encoding.
pub fn strip_encoding(ctx: &mut Context, t: Type) -> Type {
    match ctx.type_kind(t).clone() {
        TypeKind::Tensor {
            shape,
            elem,
            encoding: Some(_),
        } => ctx.ty(TypeKind::Tensor {
            shape,
            elem,
            encoding: None,
        }),
        _ => t,
    }
}

/// Whether two types are equal once encodings are ignored.
pub fn same_modulo_encoding(ctx: &Context, a: Type, b: Type) -> bool {
    if a == b {
        return true;
    }
    match (tensor_view(ctx, a), tensor_view(ctx, b)) {
        (Some(x), Some(y)) => x.shape == y.shape && x.elem == y.elem,
        _ => false,
    }
}

/// Size in bytes of one element of type `t` (sub-byte formats round up to one byte).
pub fn elem_bytes(ctx: &Context, t: Type) -> u64 {
    match ctx.type_kind(t) {
        TypeKind::Integer { width, .. } => u64::from(width.div_ceil(8)).max(1),
        TypeKind::Float(k) => u64::from(k.width().div_ceil(8)).max(1),
        TypeKind::Index => 8,
        _ => 0,
    }
}

/// Size in bytes of a statically shaped tensor type.
pub fn tensor_bytes(ctx: &Context, t: Type) -> Option<u64> {
    let ti = tensor_view(ctx, t)?;
    if ti.shape.iter().any(|d| *d < 0) {
        return None;
    }
    ti.shape
        .iter()
        .try_fold(elem_bytes(ctx, ti.elem), |acc, d| {
            acc.checked_mul(*d as u64)
        })
}

/// A type as text, for diagnostics.
pub fn ty_str(ctx: &Context, t: Type) -> String {
    printer::type_to_string(ctx, t)
}

/// Verifies that every operand and result of `op` has the same type modulo encoding.
pub fn verify_same_tensor_types(ctx: &Context, op: OpId) -> Result<(), commlir_ir::Diagnostic> {
    let mut all = ctx.operands(op).iter().chain(ctx.results(op));
    if let Some(&first) = all.next() {
        let t0 = ctx.value_type(first);
        for v in all {
            let t = ctx.value_type(*v);
            if !same_modulo_encoding(ctx, t0, t) {
                return Err(ctx.op_error(
                    op,
                    format!(
                        "requires all operands and results to have the same type, got {} and {}",
                        ty_str(ctx, t0),
                        ty_str(ctx, t)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The value of an integer attribute, required by the op's definition.
pub fn int_attr(ctx: &Context, op: OpId, name: &str) -> Option<i64> {
    ctx.inherent_attr(op, name).and_then(|a| ctx.attr_as_i64(a))
}
