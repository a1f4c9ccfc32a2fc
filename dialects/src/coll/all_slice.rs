//! `coll.all_slice` and the `coll.replicated` argument attribute: the two halves of
//! replication in the `coll` dialect. A value identical on every rank of a group (a waited
//! all-reduce or all-gather, or an argument marked `coll.replicated = @group`) can be cut to
//! this rank's shard without communicating, which is what sequence parallelism needs for the
//! replicated operands of its row-local ops (upstream MLIR's `shard.all_slice`).

use super::verify::group_ref;
use crate::compute::fmt_shape;
use crate::shape::{int_attr, value_tensor_view};
use commlir_ir::{
    register_op, ArgDef, AttrConstraint, AttrDef, AttrKind, Context, Diagnostic, OpDef, OpId,
    Trait, TypeConstraint,
};

/// The argument attribute that marks a function argument as identical on every rank of a
/// group: `%w: tensor<…> {coll.replicated = @tp}`.
pub const REPLICATED_ARG_ATTR: &str = "coll.replicated";

register_op!(
    pub ALL_SLICE = OpDef {
        name: "coll.all_slice",
        summary: "This rank's slice of a replicated tensor (no communication)",
        description: "`x: …×(G·d)×…` → `r: …×d×…` along `dim`: rank `i` of the group keeps \
            `[i·d, (i+1)·d)`. No data moves between ranks; meaningful when `x` is the same on \
            every rank of the group (the inverse of `coll.all_gather_into_tensor` on such a \
            value). Upstream MLIR's `shard.all_slice`.",
        operands: &[ArgDef::one("x", TypeConstraint::StaticTensor)],
        results: &[ArgDef::one("r", TypeConstraint::StaticTensor)],
        attributes: &[
            AttrDef::required("dim", AttrConstraint::Integer).doc("The sliced dimension."),
            AttrDef::required("group", AttrConstraint::SymbolRef).doc("The group whose ranks split `x`."),
            AttrDef::optional("cost_ns", AttrConstraint::Integer)
                .doc("Overrides the cost model's runtime estimate for this op (nanoseconds)."),
        ],
        traits: &[Trait::Pure, Trait::MemAlloc],
        verify: Some(verify_all_slice),
        example: "%r = coll.all_slice %x {dim = 0 : i64, group = @tp} : (tensor<8x16xf32>) -> tensor<4x16xf32>",
        ..OpDef::EMPTY
    }
);

fn verify_all_slice(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    let x = value_tensor_view(ctx, ctx.operand(op, 0))
        .ok_or_else(|| ctx.op_error(op, "expects a tensor operand"))?;
    let r = value_tensor_view(ctx, ctx.result(op, 0))
        .ok_or_else(|| ctx.op_error(op, "expects a tensor result"))?;
    let d = int_attr(ctx, op, "dim").unwrap_or(-1);
    let dim = usize::try_from(d)
        .ok()
        .filter(|d| *d < x.shape.len())
        .ok_or_else(|| {
            ctx.op_error(
                op,
                format!("dim {d} is out of range for rank {}", x.shape.len()),
            )
        })?;
    if g.size < 1 || x.shape[dim] % g.size != 0 {
        return Err(ctx.op_error(
            op,
            format!(
                "dim {dim} ({}) must be divisible by the size of group @{} ({})",
                x.shape[dim], g.name, g.size
            ),
        ));
    }
    let mut want = x.shape.to_vec();
    want[dim] /= g.size;
    if r.shape != want.as_slice() || r.elem != x.elem {
        return Err(ctx.op_error(
            op,
            format!(
                "result must have shape {} and the operand's element type, got {}",
                fmt_shape(&want),
                fmt_shape(r.shape)
            ),
        ));
    }
    Ok(())
}

/// The group named by argument `index`'s `coll.replicated` attribute on `func`, if any.
pub fn replicated_arg_group(ctx: &Context, func: OpId, index: usize) -> Option<&str> {
    let list = ctx.inherent_attr(func, "arg_attrs")?;
    let AttrKind::Array(items) = ctx.attr_kind(list) else {
        return None;
    };
    let AttrKind::Dict(entries) = ctx.attr_kind(*items.get(index)?) else {
        return None;
    };
    entries
        .iter()
        .find(|(k, _)| ctx.ident_str(*k) == REPLICATED_ARG_ATTR)
        .and_then(|(_, v)| ctx.attr_as_symbol(*v))
}
