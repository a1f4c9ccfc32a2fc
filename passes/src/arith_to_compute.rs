//! `arith-to-compute`: upstream elementwise `arith` / `math` ops on tensors → `compute` ops.
//!
//! An upstream program imported through real MLIR (`commlir-translate --import-mlir`) keeps
//! its tensor arithmetic in `arith` and `math`, which the runtime, the cost model and the
//! code generator do not know. This pass rewrites the ops whose semantics `compute` has
//! exactly, on statically shaped tensors:
//!
//! | upstream | compute |
//! |---|---|
//! | `arith.addf` / `addi`, `subf` / `subi`, `mulf` / `muli`, `divf` | `add`, `sub`, `mul`, `div` |
//! | `arith.maximumf` / `maxsi`, `minimumf` / `minsi` (NaN-propagating) | `maximum`, `minimum` |
//! | `arith.negf` | `neg` |
//! | `arith.extf`, `arith.truncf` | `cast` |
//! | `arith.constant dense<splat>` | `fill` |
//! | `math.exp`, `tanh`, `sqrt`, `rsqrt`, `sin`, `cos`, `log` | `exp`, `tanh`, `sqrt`, `rsqrt`, `sin`, `cos`, `log` |
//!
//! Everything else (scalar arithmetic, `maxnumf` / `minnumf`, which ignore NaNs, unsigned and
//! integer-division ops, non-splat constants) is left as it is; fastmath flags are dropped,
//! since `compute` never reassociates. Locations are kept.

use commlir_ir::pass::{Anchor, Pass, PassEnv, PassInfo, StatisticDef};
use commlir_ir::{AttrKind, Builder, Context, Diagnostic, FloatKind, OpId, TypeKind};

commlir_ir::register_pass!(
    /// The `arith-to-compute` pass.
    pub ARITH_TO_COMPUTE = PassInfo {
        argument: "arith-to-compute",
        name: "ArithToCompute",
        summary: "Convert elementwise arith/math ops on tensors to compute ops",
        description: "Rewrites `arith` and `math` ops on statically shaped tensors whose \
            semantics `compute` has exactly (add, sub, mul, div, NaN-propagating maximum and \
            minimum, neg, float casts, splat constants, exp, tanh, sqrt, rsqrt, sin, cos, \
            log) to the `compute` op; other ops are left alone.",
        anchor: Anchor::Any,
        options: &[],
        statistics: &[
            StatisticDef::new("num-converted", "Number of ops converted"),
            StatisticDef::new("num-left", "Number of arith/math ops on tensors left as they are"),
        ],
        create: |_| Ok(Box::new(ArithToCompute)),
    }
);

/// The `arith-to-compute` pass instance (stateless).
pub struct ArithToCompute;

/// The compute op for an elementwise upstream op, if the semantics match.
fn target(name: &str) -> Option<&'static str> {
    Some(match name {
        "arith.addf" | "arith.addi" => "compute.add",
        "arith.subf" | "arith.subi" => "compute.sub",
        "arith.mulf" | "arith.muli" => "compute.mul",
        "arith.divf" => "compute.div",
        "arith.maximumf" | "arith.maxsi" => "compute.maximum",
        "arith.minimumf" | "arith.minsi" => "compute.minimum",
        "arith.negf" => "compute.neg",
        "arith.extf" | "arith.truncf" => "compute.cast",
        "math.exp" => "compute.exp",
        "math.tanh" => "compute.tanh",
        "math.sqrt" => "compute.sqrt",
        "math.rsqrt" => "compute.rsqrt",
        "math.sin" => "compute.sin",
        "math.cos" => "compute.cos",
        "math.log" => "compute.log",
        _ => return None,
    })
}

fn is_static_tensor(ctx: &Context, t: commlir_ir::Type) -> bool {
    matches!(ctx.type_kind(t), TypeKind::Tensor { .. })
        && ctx
            .type_kind(t)
            .shaped()
            .is_some_and(|(s, _)| s.iter().all(|d| *d >= 0))
}

/// The value of a splat `dense<v>` body, if it is one number.
fn splat_value(body: &str) -> Option<f64> {
    let b = body.trim();
    if b.starts_with('[') || b.starts_with('"') {
        return None;
    }
    match b {
        "true" => Some(1.0),
        "false" => Some(0.0),
        _ => b.parse::<f64>().ok(),
    }
}

/// Converts one op if it can; returns whether it did.
fn convert(ctx: &mut Context, op: OpId) -> bool {
    let name = ctx.op_name(op);
    let results = ctx.results(op).to_vec();
    if results.len() != 1 || !is_static_tensor(ctx, ctx.value_type(results[0])) {
        return false;
    }
    let res = results[0];
    let ty = ctx.value_type(res);
    let new = if name == "arith.constant" {
        let Some(v) = ctx.inherent_attr(op, "value") else {
            return false;
        };
        let value = match ctx.attr_kind(v) {
            AttrKind::Dense { body, .. } => splat_value(body),
            _ => None,
        };
        let Some(value) = value else { return false };
        let mut b = Builder::before(ctx, op);
        let f64t = b.ctx.float_type(FloatKind::F64);
        let a = b.ctx.attr(AttrKind::Float {
            value: commlir_ir::FloatValue::Bits(value.to_bits()),
            ty: f64t,
        });
        b.create_value("compute.fill", &[], ty, &[("value", a)])
    } else {
        let Some(target) = target(name) else {
            return false;
        };
        let operands = ctx.operands(op).to_vec();
        if operands
            .iter()
            .any(|v| !is_static_tensor(ctx, ctx.value_type(*v)))
        {
            return false;
        }
        let arity_ok = match target {
            "compute.add" | "compute.sub" | "compute.mul" | "compute.div" | "compute.maximum"
            | "compute.minimum" => {
                operands.len() == 2 && operands.iter().all(|v| ctx.value_type(*v) == ty)
            }
            "compute.cast" => operands.len() == 1,
            _ => operands.len() == 1 && ctx.value_type(operands[0]) == ty,
        };
        if !arity_ok {
            return false;
        }
        let mut b = Builder::before(ctx, op);
        b.create_value(target, &operands, ty, &[])
    };
    ctx.replace_all_uses(res, new);
    ctx.erase_op(op);
    true
}

/// Runs the conversion under `root`; returns (converted, left).
pub fn arith_to_compute(ctx: &mut Context, root: OpId) -> (u64, u64) {
    let mut ops = Vec::new();
    ctx.walk(root, |op| {
        let n = ctx.op_name(op);
        if n.starts_with("arith.") || n.starts_with("math.") {
            ops.push(op);
        }
    });
    let (mut converted, mut left) = (0, 0);
    for op in ops {
        if convert(ctx, op) {
            converted += 1;
        } else if ctx
            .results(op)
            .iter()
            .chain(ctx.operands(op))
            .any(|v| matches!(ctx.type_kind(ctx.value_type(*v)), TypeKind::Tensor { .. }))
        {
            left += 1;
        }
    }
    (converted, left)
}

impl Pass for ArithToCompute {
    fn info(&self) -> &'static PassInfo {
        &ARITH_TO_COMPUTE
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let (c, l) = arith_to_compute(ctx, op);
        env.add_stat("num-converted", c);
        env.add_stat("num-left", l);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::splat_value;

    #[test]
    fn splats() {
        assert_eq!(splat_value("2.000000e+00"), Some(2.0));
        assert_eq!(splat_value("-3"), Some(-3.0));
        assert_eq!(splat_value("[1.0, 2.0]"), None);
        assert_eq!(splat_value("\"0x0000\""), None);
    }
}
