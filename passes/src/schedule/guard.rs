//! A do-no-harm guard for the iterative schedulers: their acceptance test is a local estimate
//! (compute between a collective and its wait), which ignores that the comm stream may still be
//! busy with the previous collective. After a pass, the two-stream timeline simulator (the same
//! one `--comm-report` uses) compares the new order with the old; an order that makes the
//! function slower is dropped. The scheduler hands over its order instead of writing it, so the
//! guard simulates it first and writes it into the block only when it keeps it: O(n), two
//! simulations and at most one relink. The op costs and the makespan of the order it leaves
//! go into the pass manager's analysis cache, so that the next guarded pass on the function
//! neither costs its ops nor simulates its input again.

use super::{apply_op_order, CostTable};
use crate::analysis::cost::Machine;
use crate::analysis::timeline::{simulate_ops_overlap, Overlap};
use commlir_ir::pass::PassEnv;
use commlir_ir::{BlockId, Context, OpId};

/// The simulated makespan (ns) of a function body in its current order, with the costs of
/// its [`CostTable`]: what the next guarded pass compares against, kept in the pass manager's
/// analysis cache so that it is not simulated again.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Makespan(pub f64);

/// Runs `schedule` on `func`'s body and keeps its order unless the simulated makespan grew.
/// Returns the scheduler's result and whether the order was dropped (reverted).
///
/// The scheduler gets the cost table the guard simulates with (`None` when the function has
/// no body), so that every op is costed once, and returns the body's ops in their new order
/// (every op of the body, once), or `None` when it has nothing to reorder. It must leave the
/// body in its input order or in any order that `apply_op_order` may overwrite (the
/// `verify-memory` checks write intermediate orders).
///
/// With `env`, the cost table and the input's makespan come from the analysis cache when a
/// previous pass left them there, and both go back for the next pass, valid for the order
/// written (a reordering changes no op, so no op's cost; `keep_costs` false when the
/// scheduler changed ops otherwise, e.g. annotated them).
pub fn keep_if_not_slower<R>(
    ctx: &mut Context,
    func: OpId,
    machine: &Machine,
    mut env: Option<&mut PassEnv<'_>>,
    keep_costs: bool,
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
    let cached = env.as_deref_mut().and_then(|e| {
        let m = e.cached_analysis::<Makespan>(func).copied();
        e.take_cached_analysis::<CostTable>(func).map(|c| (c, m))
    });
    // A table left by a pass on another machine costs the ops wrongly here.
    let cached = cached.filter(|(c, _)| c.machine == *machine);
    let (costs, cached_before) = match cached {
        Some((c, m)) => (c, m),
        None => (
            CostTable::of_ops_on(ctx, machine, ctx.prefetched(&before_order)),
            None,
        ),
    };
    let before = match cached_before {
        Some(Makespan(m)) => m,
        None => {
            simulate_ops_overlap(
                ctx,
                ctx.prefetched(&before_order),
                |op| costs.get(op),
                Overlap::of(&costs.machine),
            )
            .makespan_ns
        }
    };
    let (r, order) = schedule(ctx, Some(&costs));
    let (kept, reverted) = match order {
        None => (before, false),
        Some(order) => {
            let after = simulate_ops_overlap(
                ctx,
                ctx.prefetched(&order),
                |op| costs.get(op),
                Overlap::of(&costs.machine),
            )
            .makespan_ns;
            // A relative tolerance keeps float noise from undoing an equal-time reorder.
            if after > before * (1.0 + 1e-9) {
                // Nothing to relink unless `verify-memory` wrote intermediate orders.
                apply_op_order(ctx, before_order);
                (before, true)
            } else {
                apply_op_order(ctx, order);
                (after, false)
            }
        }
    };
    if let Some(e) = env {
        if keep_costs {
            e.cache_analysis(func, costs);
            e.cache_analysis(func, Makespan(kept));
        }
    }
    (r, reverted)
}

fn body(ctx: &Context, func: OpId) -> Option<BlockId> {
    let r = *ctx.op_regions(func).first()?;
    ctx.region_blocks(r).first().copied()
}
