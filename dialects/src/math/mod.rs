//! The upstream `math` dialect, as far as commlir consumes it: the unary functions that
//! `arith-to-compute` rewrites to `compute` (`exp`, `tanh`, `sqrt`, `rsqrt`, `sin`, `cos`,
//! `log`). Partial, like
//! [`crate::arith`]: other `math` ops are accepted under `--allow-unregistered-dialect`.

use crate::arith::{verify_elementwise, Elem, FASTMATH};
use commlir_ir::{
    register_dialect, register_op, register_partial_dialect, ArgDef, Context, Diagnostic, OpDef,
    OpId, Syntax, Trait, TypeConstraint,
};

register_dialect!(pub MATH_DIALECT = commlir_ir::opdef::DialectDef {
    name: "math",
    summary: "Upstream MLIR's `math` dialect: the functions commlir converts.",
    description: "The unary functions of MLIR's `math` dialect that `arith-to-compute` rewrites \
        to `compute` (on statically shaped tensors), with MLIR's names and properties. The \
        dialect is partial: its other ops are accepted under `--allow-unregistered-dialect`. \
        They print as MLIR does when there are no fast-math flags (`math.exp %a : T`), in the \
        generic form otherwise.",
});
register_partial_dialect!("math");

fn verify_unary(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_elementwise(ctx, op, Elem::Float)
}

/// Declares a unary `math` function.
macro_rules! unary {
    ($id:ident, $name:literal, $summary:literal, $example:literal) => {
        register_op!(
            #[doc = concat!("`", $name, "`.")]
            pub $id = OpDef {
                name: $name,
                summary: $summary,
                description: "Elementwise on floats (scalars, vectors, tensors); the operand and \
                    the result have one type. `arith-to-compute` rewrites it on statically shaped \
                    tensors.",
                operands: &[ArgDef::one("operand", TypeConstraint::Any)],
                results: &[ArgDef::one("result", TypeConstraint::Any)],
                attributes: &[FASTMATH],
                traits: &[Trait::Pure],
                syntax: Syntax::Upstream,
                verify: Some(verify_unary),
                example: $example,
                ..OpDef::EMPTY
            }
        );
    };
}

unary!(
    EXP,
    "math.exp",
    "Base-e exponential",
    "%b = math.exp %a : tensor<4x8xf32>"
);
unary!(
    TANH,
    "math.tanh",
    "Hyperbolic tangent",
    "%b = math.tanh %a : tensor<4x8xf32>"
);
unary!(
    SQRT,
    "math.sqrt",
    "Square root",
    "%b = math.sqrt %a : tensor<4x8xf32>"
);
unary!(
    RSQRT,
    "math.rsqrt",
    "Reciprocal square root",
    "%b = math.rsqrt %a : tensor<4x8xf32>"
);
unary!(
    SIN,
    "math.sin",
    "Sine",
    "%b = math.sin %a : tensor<4x8xf32>"
);
unary!(
    COS,
    "math.cos",
    "Cosine",
    "%b = math.cos %a : tensor<4x8xf32>"
);
unary!(
    LOG,
    "math.log",
    "Natural logarithm",
    "%b = math.log %a : tensor<4x8xf32>"
);
