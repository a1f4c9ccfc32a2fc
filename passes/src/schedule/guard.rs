//! A do-no-harm guard for the iterative schedulers: their acceptance test is a local estimate
//! (compute between a collective and its wait), which ignores that the comm stream may still be
//! busy with the previous collective. After a pass, the two-stream timeline simulator (the same
//! one `--comm-report` uses) compares the new order with the old; an order that makes the
//! function slower is dropped. The scheduler hands over its order instead of writing it, so the
//! guard simulates it first and writes it into the block only when it keeps it: O(n), two
//! simulations and at most one relink.

use super::{apply_op_order, CostTable};
use crate::analysis::timeline::simulate_ops;
use commlir_ir::{BlockId, Context, OpId};

/// Runs `schedule` on `func`'s body and keeps its order unless the simulated makespan grew.
/// Returns the scheduler's result and whether the order was dropped (reverted).
///
/// The scheduler gets the cost table the guard simulates with (`None` when the function has
/// no body), so that every op is costed once, and returns the body's ops in their new order
/// (every op of the body, once), or `None` when it has nothing to reorder. It must leave the
/// body in its input order or in any order that `apply_op_order` may overwrite (the
/// `verify-memory` checks write intermediate orders).
pub fn keep_if_not_slower<R>(
    ctx: &mut Context,
    func: OpId,
    schedule: impl FnOnce(&mut Context, Option<&CostTable>) -> (R, Option<Vec<OpId>>),
) -> (R, bool) {
    let Some(body) = body(ctx, func) else {
        let (r, order) = schedule(ctx, None);
        if let Some(order) = order {
            apply_op_order(ctx, order);
        }
        return (r, false);
    };
    let before_order: Vec<OpId> = ctx.block_op_list(body);
    let costs = CostTable::of_ops(ctx, ctx.prefetched(&before_order));
    let before = simulate_ops(ctx, ctx.prefetched(&before_order), |op| costs.get(op)).makespan_ns;
    let (r, order) = schedule(ctx, Some(&costs));
    let Some(order) = order else {
        return (r, false);
    };
    let after = simulate_ops(ctx, ctx.prefetched(&order), |op| costs.get(op)).makespan_ns;
    // A relative tolerance keeps float noise from undoing an equal-time reorder.
    if after > before * (1.0 + 1e-9) {
        // Nothing to relink unless `verify-memory` wrote intermediate orders.
        apply_op_order(ctx, before_order);
        return (r, true);
    }
    apply_op_order(ctx, order);
    (r, false)
}

fn body(ctx: &Context, func: OpId) -> Option<BlockId> {
    let r = *ctx.op_regions(func).first()?;
    ctx.region_blocks(r).first().copied()
}
