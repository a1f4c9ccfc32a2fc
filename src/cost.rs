//! Op cost estimates: the `cost` hook of an [`OpDef`](crate::dialect::OpDef) (Inductor's
//! `estimate_op_runtime` for ops commlir's cost model does not know) and the `cost_ns`
//! attribute that overrides any estimate.
//!
//! commlir's analyses (the timeline simulator, the report, the scheduling passes' runtime
//! estimates) read costs from the cost model and from `cost_ns`. For an op defined outside
//! commlir, the estimate lives in its definition's `cost` hook; [`apply_cost_hooks`] writes
//! each hook's estimate onto its op as `cost_ns` (marked, so [`clear_cost_hooks`] removes
//! exactly those again), which is how the analyses see it. [`Pipeline::run`] and
//! [`comm_report`] bracket their work with the two, so an embedder's op is costed by its
//! hook everywhere without any further step.
//!
//! [`Pipeline::run`]: crate::Pipeline::run
//! [`comm_report`]: crate::comm_report

use commlir_ir::{Context, OpId};

/// The attribute the analyses read as an op's runtime in nanoseconds (DESIGN.md §3.1).
pub const COST_ATTR: &str = "cost_ns";

/// Marks a `cost_ns` written by [`apply_cost_hooks`] (rather than by the user), so that
/// [`clear_cost_hooks`] removes it even from ops a pass recreated with the same attributes.
pub const HOOK_MARKER_ATTR: &str = "commlir.cost_from_hook";

/// The runtime of `op` in nanoseconds as given by its `cost_ns` attribute, else by its
/// definition's cost hook; `None` when neither gives one (the cost model decides).
pub fn op_cost_estimate(ctx: &Context, op: OpId) -> Option<f64> {
    if let Some(ns) = ctx
        .inherent_attr(op, COST_ATTR)
        .and_then(|a| ctx.attr_as_f64(a))
    {
        return Some(ns);
    }
    let hook = ctx.op_def(op)?.cost?;
    hook(ctx, op).filter(|ns| ns.is_finite() && *ns >= 0.0)
}

/// Writes the estimate of every op's cost hook inside `root` (included) as `cost_ns = N :
/// i64` (rounded to the nanosecond), on ops that do not carry `cost_ns` already; returns how
/// many ops got one. Undo with [`clear_cost_hooks`].
pub fn apply_cost_hooks(ctx: &mut Context, root: OpId) -> usize {
    let mut stamped = Vec::new();
    ctx.walk(root, |op| {
        if ctx.inherent_attr(op, COST_ATTR).is_some() {
            return;
        }
        let Some(hook) = ctx.op_def(op).and_then(|d| d.cost) else {
            return;
        };
        if let Some(ns) = hook(ctx, op).filter(|ns| ns.is_finite() && *ns >= 0.0) {
            stamped.push((op, ns.round() as i64));
        }
    });
    for &(op, ns) in &stamped {
        let cost = ctx.int_attr(ns, 64);
        let marker = ctx.unit_attr();
        ctx.set_attr(op, COST_ATTR, cost);
        ctx.set_attr(op, HOOK_MARKER_ATTR, marker);
    }
    stamped.len()
}

/// Removes every `cost_ns` that [`apply_cost_hooks`] wrote inside `root`, leaving the ones
/// the user wrote.
pub fn clear_cost_hooks(ctx: &mut Context, root: OpId) {
    let mut marked = Vec::new();
    ctx.walk(root, |op| {
        if ctx.get_attr(op, HOOK_MARKER_ATTR).is_some() {
            marked.push(op);
        }
    });
    for op in marked {
        ctx.remove_attr(op, HOOK_MARKER_ATTR);
        ctx.remove_attr(op, COST_ATTR);
    }
}
