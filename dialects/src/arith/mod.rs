//! The upstream `arith` dialect, as far as commlir consumes it: the elementwise ops and splat
//! constants that `arith-to-compute` rewrites to `compute`. Declaring them lets commlir-opt
//! read an imported upstream program without `--allow-unregistered-dialect` and verify what
//! is cheap to verify (operand and result types, element kinds, required attributes); the
//! dialect is partial, so its other ops (`arith.cmpf`, `arith.select`, ...) are accepted under
//! that flag, as before.
//!
//! Ops keep MLIR's spelling and generic form (`"arith.addf"(%a, %b) <{fastmath =
//! #arith.fastmath<none>}> : (T, T) -> T`); they print in the generic form unless MLIR's own
//! custom form is the uniform one (`arith.addf %a, %b : T`), see [`Syntax::Upstream`].

use crate::shape::ty_str;
use commlir_ir::{
    register_dialect, register_op, register_partial_dialect, ArgDef, AttrConstraint, AttrDef,
    AttrKind, Context, Diagnostic, OpDef, OpId, Syntax, Trait, Type, TypeConstraint, TypeKind,
};

register_dialect!(pub ARITH_DIALECT = commlir_ir::opdef::DialectDef {
    name: "arith",
    summary: "Upstream MLIR's `arith` dialect: the elementwise ops commlir converts.",
    description: "The ops of MLIR's `arith` dialect that `arith-to-compute` rewrites to \
        `compute` (on statically shaped tensors), with MLIR's names, operands and properties. \
        They apply to scalars, vectors and tensors alike, as upstream. The dialect is partial: \
        its other ops are accepted under `--allow-unregistered-dialect` and left alone. They \
        print in MLIR's generic form, or in the custom form where MLIR's is the uniform one \
        (`arith.addf %a, %b : tensor<4xf32>`).",
});
register_partial_dialect!("arith");

/// The element kind an op's operands must have.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elem {
    Float,
    /// Signless integer or index.
    Int,
}

/// The element type of a scalar, tensor, memref, or `None` where the IR does not model the
/// type (`vector<...>` and other opaque forms are left to MLIR).
pub(crate) fn elem_of(ctx: &Context, t: Type) -> Option<Type> {
    match ctx.type_kind(t) {
        TypeKind::Integer { .. } | TypeKind::Index | TypeKind::Float(_) => Some(t),
        TypeKind::Tensor { elem, .. }
        | TypeKind::UnrankedTensor { elem }
        | TypeKind::MemRef { elem, .. } => Some(*elem),
        _ => None,
    }
}

/// Checks that value `t` (operand or result `what`) is `elem`-like, as MLIR words it.
pub(crate) fn check_elem(
    ctx: &Context,
    op: OpId,
    t: Type,
    elem: Elem,
    what: &str,
) -> Result<(), Diagnostic> {
    let Some(e) = elem_of(ctx, t) else {
        return Ok(());
    };
    let ok = matches!(
        (elem, ctx.type_kind(e)),
        (Elem::Float, TypeKind::Float(_)) | (Elem::Int, TypeKind::Integer { .. } | TypeKind::Index)
    );
    if ok {
        return Ok(());
    }
    let kind = match elem {
        Elem::Float => "floating-point-like",
        Elem::Int => "signless-integer-like",
    };
    Err(ctx.op_error(
        op,
        format!("{what} must be {kind}, but got '{}'", ty_str(ctx, t)),
    ))
}

/// `SameOperandsAndResultType` plus the element kind: the shape of every elementwise op here.
pub(crate) fn verify_elementwise(ctx: &Context, op: OpId, elem: Elem) -> Result<(), Diagnostic> {
    let (operands, results) = (ctx.operands(op), ctx.results(op));
    let Some(&r) = results.first() else {
        return Ok(());
    };
    let rt = ctx.value_type(r);
    for (i, v) in operands.iter().enumerate() {
        let t = ctx.value_type(*v);
        if t != rt {
            return Err(ctx.op_error(
                op,
                format!(
                    "requires the same type for all operands and results, but operand #{i} is '{}' and the result '{}'",
                    ty_str(ctx, t),
                    ty_str(ctx, rt)
                ),
            ));
        }
    }
    check_elem(ctx, op, rt, elem, "result #0")
}

fn verify_float(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_elementwise(ctx, op, Elem::Float)
}

fn verify_int(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_elementwise(ctx, op, Elem::Int)
}

/// The shape of a value's type with its element type dropped, to compare casts: the same
/// container and dims, or `None` for a scalar.
fn container(ctx: &Context, t: Type) -> Option<String> {
    match ctx.type_kind(t) {
        TypeKind::Tensor { shape, .. } | TypeKind::MemRef { shape, .. } => {
            Some(format!("{shape:?}"))
        }
        TypeKind::UnrankedTensor { .. } => Some("*".into()),
        _ => None,
    }
}

/// `extf` / `truncf`: float to float of the same shape, wider (`extf`) or narrower.
fn verify_float_cast(ctx: &Context, op: OpId, widen: bool) -> Result<(), Diagnostic> {
    let a = ctx.value_type(ctx.operand(op, 0));
    let r = ctx.value_type(ctx.result(op, 0));
    check_elem(ctx, op, a, Elem::Float, "operand #0")?;
    check_elem(ctx, op, r, Elem::Float, "result #0")?;
    if container(ctx, a) != container(ctx, r) {
        return Err(ctx.op_error(
            op,
            format!(
                "requires the same shape for the operand and the result, got '{}' and '{}'",
                ty_str(ctx, a),
                ty_str(ctx, r)
            ),
        ));
    }
    let width = |t: Type| match elem_of(ctx, t).map(|e| ctx.type_kind(e)) {
        // Small floats are kept by name only; their widths are MLIR's to compare.
        Some(TypeKind::Float(k)) if !matches!(k, commlir_ir::FloatKind::Other(_)) => {
            Some(k.width())
        }
        _ => None,
    };
    if let (Some(wa), Some(wr)) = (width(a), width(r)) {
        let ok = if widen { wr > wa } else { wr < wa };
        if !ok {
            let want = if widen { "wider" } else { "narrower" };
            return Err(ctx.op_error(
                op,
                format!(
                    "result type '{}' must be {want} than operand type '{}'",
                    ty_str(ctx, r),
                    ty_str(ctx, a)
                ),
            ));
        }
    }
    Ok(())
}

fn verify_extf(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_float_cast(ctx, op, true)
}

fn verify_truncf(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_float_cast(ctx, op, false)
}

fn verify_constant(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let r = ctx.value_type(ctx.result(op, 0));
    let Some(value) = ctx.inherent_attr(op, "value") else {
        return Ok(());
    };
    // Only typed literals carry a type to compare; opaque text is MLIR's to check.
    let ty = match ctx.attr_kind(value) {
        AttrKind::Dense { ty, .. } | AttrKind::Integer { ty, .. } | AttrKind::Float { ty, .. } => {
            Some(*ty)
        }
        _ => None,
    };
    match ty {
        Some(t) if t != r => Err(ctx.op_error(
            op,
            format!(
                "value type '{}' must match the result type '{}'",
                ty_str(ctx, t),
                ty_str(ctx, r)
            ),
        )),
        _ => Ok(()),
    }
}

const ANY: TypeConstraint = TypeConstraint::Any;
const PURE: &[Trait] = &[Trait::Pure];
/// MLIR's `fastmath` property; `compute` never reassociates, so the conversion drops it.
pub(crate) const FASTMATH: AttrDef = AttrDef::optional("fastmath", AttrConstraint::Any)
    .doc("Fast-math flags (`#arith.fastmath<...>`).");
const OVERFLOW: AttrDef = AttrDef::optional("overflowFlags", AttrConstraint::Any)
    .doc("Overflow flags (`#arith.overflow<...>`).");
const BINARY: &[ArgDef] = &[ArgDef::one("lhs", ANY), ArgDef::one("rhs", ANY)];
const UNARY: &[ArgDef] = &[ArgDef::one("operand", ANY)];
const RESULT: &[ArgDef] = &[ArgDef::one("result", ANY)];

/// Declares an elementwise `arith` op with MLIR's operands, `attrs` and verifier `verify`.
macro_rules! elementwise {
    ($id:ident, $name:literal, $summary:literal, $operands:expr, $attrs:expr, $verify:path, $example:literal) => {
        register_op!(
            #[doc = concat!("`", $name, "`.")]
            pub $id = OpDef {
                name: $name,
                summary: $summary,
                description: "Elementwise, on scalars, vectors and tensors of one type. \
                    `arith-to-compute` rewrites it on statically shaped tensors.",
                operands: $operands,
                results: RESULT,
                attributes: $attrs,
                traits: PURE,
                syntax: Syntax::Upstream,
                verify: Some($verify),
                example: $example,
                ..OpDef::EMPTY
            }
        );
    };
}

elementwise!(
    ADDF,
    "arith.addf",
    "Floating-point addition",
    BINARY,
    &[FASTMATH],
    verify_float,
    "%c = arith.addf %a, %b : tensor<4x8xf32>"
);
elementwise!(
    SUBF,
    "arith.subf",
    "Floating-point subtraction",
    BINARY,
    &[FASTMATH],
    verify_float,
    "%c = arith.subf %a, %b : tensor<4x8xf32>"
);
elementwise!(
    MULF,
    "arith.mulf",
    "Floating-point multiplication",
    BINARY,
    &[FASTMATH],
    verify_float,
    "%c = arith.mulf %a, %b : tensor<4x8xf32>"
);
elementwise!(
    DIVF,
    "arith.divf",
    "Floating-point division",
    BINARY,
    &[FASTMATH],
    verify_float,
    "%c = arith.divf %a, %b : tensor<4x8xf32>"
);
elementwise!(
    MAXIMUMF,
    "arith.maximumf",
    "Floating-point maximum (NaN-propagating)",
    BINARY,
    &[FASTMATH],
    verify_float,
    "%c = arith.maximumf %a, %b : tensor<4x8xf32>"
);
elementwise!(
    MINIMUMF,
    "arith.minimumf",
    "Floating-point minimum (NaN-propagating)",
    BINARY,
    &[FASTMATH],
    verify_float,
    "%c = arith.minimumf %a, %b : tensor<4x8xf32>"
);
elementwise!(
    NEGF,
    "arith.negf",
    "Floating-point negation",
    UNARY,
    &[FASTMATH],
    verify_float,
    "%b = arith.negf %a : tensor<4x8xf32>"
);
elementwise!(
    ADDI,
    "arith.addi",
    "Integer addition",
    BINARY,
    &[OVERFLOW],
    verify_int,
    "%c = arith.addi %a, %b : tensor<4x8xi32>"
);
elementwise!(
    SUBI,
    "arith.subi",
    "Integer subtraction",
    BINARY,
    &[OVERFLOW],
    verify_int,
    "%c = arith.subi %a, %b : tensor<4x8xi32>"
);
elementwise!(
    MULI,
    "arith.muli",
    "Integer multiplication",
    BINARY,
    &[OVERFLOW],
    verify_int,
    "%c = arith.muli %a, %b : tensor<4x8xi32>"
);
elementwise!(
    MAXSI,
    "arith.maxsi",
    "Signed integer maximum",
    BINARY,
    &[],
    verify_int,
    "%c = arith.maxsi %a, %b : tensor<4x8xi32>"
);
elementwise!(
    MINSI,
    "arith.minsi",
    "Signed integer minimum",
    BINARY,
    &[],
    verify_int,
    "%c = arith.minsi %a, %b : tensor<4x8xi32>"
);

register_op!(
    /// `arith.extf`.
    pub EXTF = OpDef {
        name: "arith.extf",
        summary: "Floating-point extension to a wider type",
        description: "Elementwise; the operand and the result have the same shape. \
            `arith-to-compute` rewrites it to `compute.cast` on statically shaped tensors.",
        operands: UNARY,
        results: RESULT,
        attributes: &[FASTMATH],
        traits: PURE,
        syntax: Syntax::Upstream,
        verify: Some(verify_extf),
        example: "\"arith.extf\"(%a) : (tensor<4xbf16>) -> tensor<4xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    /// `arith.truncf`.
    pub TRUNCF = OpDef {
        name: "arith.truncf",
        summary: "Floating-point truncation to a narrower type",
        description: "Elementwise; the operand and the result have the same shape. \
            `arith-to-compute` rewrites it to `compute.cast` (round to nearest even) on \
            statically shaped tensors.",
        operands: UNARY,
        results: RESULT,
        attributes: &[
            AttrDef::optional("roundingmode", AttrConstraint::Any).doc("Rounding mode (`#arith<rounding ...>`)."),
            FASTMATH,
        ],
        traits: PURE,
        syntax: Syntax::Upstream,
        verify: Some(verify_truncf),
        example: "\"arith.truncf\"(%a) : (tensor<4xf32>) -> tensor<4xbf16>",
        ..OpDef::EMPTY
    }
);

register_op!(
    /// `arith.constant`.
    pub CONSTANT = OpDef {
        name: "arith.constant",
        summary: "A constant",
        description: "`value` is a typed attribute of the result's type. `arith-to-compute` \
            rewrites a splat `dense<v>` tensor constant to `compute.fill`.",
        operands: &[],
        results: RESULT,
        attributes: &[AttrDef::required("value", AttrConstraint::Any).doc("The constant (`dense<0.5> : tensor<4xf32>`, `1 : i32`, ...).")],
        traits: PURE,
        syntax: Syntax::Upstream,
        verify: Some(verify_constant),
        example: "%c = \"arith.constant\"() <{value = dense<5.000000e-01> : tensor<4xf32>}> : () -> tensor<4xf32>",
        ..OpDef::EMPTY
    }
);
