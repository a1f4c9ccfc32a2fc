//! Verifiers of the `comm` ops: buffers carry a comm-buffer encoding of the op's group, shapes
//! match the group size, work handles flow from a start op to exactly one wait.

use super::encoding::{buffer_encoding_ref, is_work_type};
use crate::coll::{group_ref, GroupRef};
use crate::compute::fmt_shape;
use crate::shape::{int_attr, same_modulo_encoding, ty_str, value_tensor_view};
use commlir_ir::{Context, Diagnostic, OpId, Trait, Value};
use std::fmt::Display;

/// Checks that `v` is a comm buffer of `g`; `what` names it in a diagnostic (and is only
/// rendered then, so callers pass `format_args!` rather than a built string).
fn check_buffer(
    ctx: &Context,
    op: OpId,
    v: Value,
    what: impl Display,
    g: &GroupRef<'_>,
) -> Result<(), Diagnostic> {
    let t = ctx.value_type(v);
    match buffer_encoding_ref(ctx, t) {
        Some(enc) if enc.group == g.name => Ok(()),
        Some(enc) => Err(ctx.op_error(
            op,
            format!(
                "{what} is a comm buffer of group @{}, but the op runs on @{}",
                enc.group, g.name
            ),
        )),
        None => Err(ctx.op_error(
            op,
            format!(
                "{what} must be a comm buffer (tensor with a #comm.buffer encoding), got {}",
                ty_str(ctx, t)
            ),
        )),
    }
}

fn check_work_result(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let w = ctx.result(op, 0);
    if !is_work_type(ctx, ctx.value_type(w)) {
        return Err(ctx.op_error(
            op,
            format!(
                "result must be !comm.work, got {}",
                ty_str(ctx, ctx.value_type(w))
            ),
        ));
    }
    let uses = ctx.uses(w);
    if uses.len() > 1
        || uses
            .iter()
            .any(|u| ctx.op_name(u.op) != "comm.wait" || u.index != 0)
    {
        return Err(ctx.op_error(
            op,
            "work handle must be consumed by at most one 'comm.wait'",
        ));
    }
    Ok(())
}

pub(super) fn verify_alloc(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let t = ctx.value_type(ctx.result(op, 0));
    let Some(enc) = buffer_encoding_ref(ctx, t) else {
        return Err(ctx.op_error(
            op,
            format!("result must be a comm buffer, got {}", ty_str(ctx, t)),
        ));
    };
    let ok = ctx
        .lookup_symbol(op, enc.group)
        .is_some_and(|g| ctx.op_name(g) == "coll.group");
    if !ok {
        return Err(ctx.op_error(
            op,
            format!("group @{} does not reference a 'coll.group'", enc.group),
        ));
    }
    Ok(())
}

pub(super) fn verify_all_reduce(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    if ctx.operands(op).is_empty() {
        return Err(ctx.op_error(op, "expects at least one buffer"));
    }
    for (i, v) in ctx.operands(op).iter().enumerate() {
        check_buffer(ctx, op, *v, format_args!("operand #{i}"), &g)?;
    }
    check_work_result(ctx, op)
}

fn split_pairs(ctx: &Context, op: OpId) -> Result<usize, Diagnostic> {
    let n = ctx.operands(op).len();
    if n == 0 || !n.is_multiple_of(2) {
        return Err(ctx.op_error(
            op,
            format!("expects inputs then as many outputs, got {n} operands"),
        ));
    }
    Ok(n / 2)
}

fn verify_gather_like(ctx: &Context, op: OpId, gather: bool) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    let n = split_pairs(ctx, op)?;
    for i in 0..n {
        let (xi, oi) = (ctx.operand(op, i), ctx.operand(op, n + i));
        check_buffer(ctx, op, xi, format_args!("input #{i}"), &g)?;
        check_buffer(ctx, op, oi, format_args!("output #{i}"), &g)?;
        let x = value_tensor_view(ctx, xi).unwrap();
        let o = value_tensor_view(ctx, oi).unwrap();
        let Some(&d0) = x.shape.first() else {
            return Err(ctx.op_error(op, format!("input #{i} must have rank at least 1")));
        };
        // The output is the input with dim 0 multiplied (gather) or divided by the group size.
        let want0 = if gather {
            d0.checked_mul(g.size).ok_or_else(|| {
                ctx.op_error(
                    op,
                    format!("input #{i} dim 0 times the group size overflows"),
                )
            })?
        } else {
            if d0.checked_rem(g.size) != Some(0) {
                return Err(ctx.op_error(
                    op,
                    format!(
                        "input #{i} dim 0 ({d0}) must be divisible by the group size ({})",
                        g.size
                    ),
                ));
            }
            d0 / g.size
        };
        let same = o.elem == x.elem
            && o.shape.len() == x.shape.len()
            && o.shape[0] == want0
            && o.shape[1..] == x.shape[1..];
        if !same {
            let mut want = x.shape.to_vec();
            want[0] = want0;
            return Err(ctx.op_error(
                op,
                format!(
                    "output #{i} must be {} (group @{} has size {}), got {}",
                    fmt_shape(&want),
                    g.name,
                    g.size,
                    fmt_shape(o.shape)
                ),
            ));
        }
    }
    check_work_result(ctx, op)
}

pub(super) fn verify_all_gather(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_gather_like(ctx, op, true)
}

pub(super) fn verify_reduce_scatter(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_gather_like(ctx, op, false)?;
    crate::coll::verify_prescale(ctx, op)
}

pub(super) fn verify_all_to_all(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    let (x, o) = (ctx.operand(op, 0), ctx.operand(op, 1));
    check_buffer(ctx, op, x, "input", &g)?;
    check_buffer(ctx, op, o, "output", &g)?;
    if !same_modulo_encoding(ctx, ctx.value_type(x), ctx.value_type(o)) {
        return Err(ctx.op_error(
            op,
            "input and output must have the same shape and element type",
        ));
    }
    crate::coll::verify::split_matrix(ctx, op, "input_split_sizes", g.size)?;
    crate::coll::verify::split_matrix(ctx, op, "output_split_sizes", g.size)?;
    check_work_result(ctx, op)
}

pub(super) fn verify_broadcast(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    check_buffer(ctx, op, ctx.operand(op, 0), "operand #0", &g)?;
    let src = int_attr(ctx, op, "src").unwrap_or(-1);
    if src < 0 || src >= g.size {
        return Err(ctx.op_error(
            op,
            format!(
                "src {src} is out of range for group @{} of size {}",
                g.name, g.size
            ),
        ));
    }
    check_work_result(ctx, op)
}

pub(super) fn verify_shard_dim_alltoall(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    check_buffer(ctx, op, ctx.operand(op, 0), "input", &g)?;
    check_buffer(ctx, op, ctx.operand(op, 1), "output", &g)?;
    if ctx.value_type(ctx.operand(op, 1)) != ctx.value_type(ctx.result(op, 0)) {
        return Err(ctx.op_error(op, "result must have the output buffer's type"));
    }
    Ok(())
}

pub(super) fn verify_wait(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let w = ctx.operand(op, 0);
    if !is_work_type(ctx, ctx.value_type(w)) {
        return Err(ctx.op_error(op, "operand #0 must be a !comm.work handle"));
    }
    let Some(start) = ctx
        .defining_op(w)
        .filter(|d| ctx.op_has_trait(*d, Trait::Collective))
    else {
        return Err(ctx.op_error(op, "work handle must come from a comm collective"));
    };
    let bufs = &ctx.operands(op)[1..];
    if bufs.len() != ctx.results(op).len() {
        return Err(ctx.op_error(op, "expects one result per buffer operand"));
    }
    for (i, (b, r)) in bufs.iter().zip(ctx.results(op)).enumerate() {
        if ctx.value_type(*b) != ctx.value_type(*r) {
            return Err(ctx.op_error(
                op,
                format!(
                    "result #{i} must have the type of buffer operand #{}",
                    i + 1
                ),
            ));
        }
        if !ctx.operands(start).contains(b) {
            return Err(ctx
                .op_error(
                    op,
                    format!(
                        "buffer operand #{} is not a buffer of the collective it waits for",
                        i + 1
                    ),
                )
                .with_note(ctx.op_loc(start), "the collective"));
        }
    }
    Ok(())
}
