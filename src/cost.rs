//! Op cost estimates: the `cost` hook of an [`OpDef`](crate::dialect::OpDef) (Inductor's
//! `estimate_op_runtime` for ops commlir's cost model does not know) and the `cost_ns`
//! attribute that overrides any estimate.
//!
//! commlir's analyses (the timeline simulator, the report, the scheduling passes' runtime
//! estimates) price an op by its `cost_ns` attribute if it has one, else by its definition's
//! `cost` hook, else by the cost model
//! ([`op_cost`](commlir_passes::analysis::cost::op_cost)); an embedder's op is costed by its
//! hook everywhere without any further step.

use commlir_ir::{Context, OpId};

/// The attribute the analyses read as an op's runtime in nanoseconds (DESIGN.md §3.1).
pub const COST_ATTR: &str = "cost_ns";

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
