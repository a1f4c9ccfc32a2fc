//! A do-no-harm guard for the iterative schedulers: their acceptance test is a local estimate
//! (compute between a collective and its wait), which ignores that the comm stream may still be
//! busy with the previous collective. After a pass, the two-stream timeline simulator (the same
//! one `--comm-report` uses) compares the new order with the old; an order that makes the
//! function slower is undone. O(n): two simulations and, when reverting, one relink.

use super::CostTable;
use crate::analysis::timeline::simulate_with;
use commlir_ir::{BlockId, Context, OpId};

/// Runs `schedule` on `func`'s body and undoes it if the simulated makespan grew. Returns the
/// scheduler's result and whether the order was reverted. The scheduler gets the cost table
/// the guard simulates with (`None` when the function has no body), so that every op is
/// costed once.
pub fn keep_if_not_slower<R>(
    ctx: &mut Context,
    func: OpId,
    schedule: impl FnOnce(&mut Context, Option<&CostTable>) -> R,
) -> (R, bool) {
    let Some(body) = body(ctx, func) else {
        return (schedule(ctx, None), false);
    };
    let before_order: Vec<OpId> = ctx.block_ops(body).collect();
    let costs = CostTable::of_ops(ctx, before_order.iter().copied());
    let before = simulate_with(ctx, body, |op| costs.get(op)).makespan_ns;
    let r = schedule(ctx, Some(&costs));
    let after = simulate_with(ctx, body, |op| costs.get(op)).makespan_ns;
    // A relative tolerance keeps float noise from undoing an equal-time reorder.
    if after > before * (1.0 + 1e-9) {
        for &op in &before_order {
            ctx.unlink(op);
        }
        for &op in &before_order {
            ctx.append_op(body, op);
        }
        return (r, true);
    }
    (r, false)
}

fn body(ctx: &Context, func: OpId) -> Option<BlockId> {
    let r = *ctx.op_regions(func).first()?;
    ctx.region_blocks(r).first().copied()
}
