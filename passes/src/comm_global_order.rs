//! `comm-global-order`: pins the order of every collective of a function, Inductor's
//! `decide_global_ordering_of_comms`.
//!
//! The seed adds a fake dependency from each collective to the previous one; here the pin is
//! an attribute, `comm_order = i : i64`, the collective's rank in program order, so that it
//! survives between passes and shows in the IR. Every scheduling pass reads the pins into its
//! dependency graph and keeps pinned collectives in their relative order across *all* groups
//! (without pins only the order within each group is kept), unless
//! `unsafe-collective-reorder=true` drops collective-order constraints altogether.

use crate::schedule::{body_block, PIN_ATTR};
use commlir_ir::pass::{Anchor, Pass, PassEnv, PassInfo, StatisticDef};
use commlir_ir::{Context, Diagnostic, OpId, Trait};

commlir_ir::register_pass!(
    /// `comm-global-order`.
    pub COMM_GLOBAL_ORDER = PassInfo {
        argument: "comm-global-order",
        name: "CommGlobalOrder",
        summary: "Pin the relative order of all collectives of a function",
        description: "Numbers the collectives of each function body in program order with a \
            `comm_order` attribute; scheduling passes then keep that order across groups.",
        anchor: Anchor::FUNC,
        options: &[],
        statistics: &[StatisticDef::new("pinned", "Collectives pinned")],
        create: |_| Ok(Box::new(GlobalOrder)),
    }
);

struct GlobalOrder;

/// Pins the collectives of `func`'s body; returns how many.
pub fn pin_collectives(ctx: &mut Context, func: OpId) -> u64 {
    let Some(block) = body_block(ctx, func) else {
        return 0;
    };
    let colls: Vec<OpId> = ctx
        .block_ops(block)
        .filter(|&op| ctx.op_has_trait(op, Trait::Collective))
        .collect();
    for (i, &op) in colls.iter().enumerate() {
        let a = ctx.int_attr(i as i64, 64);
        ctx.set_attr(op, PIN_ATTR, a);
    }
    colls.len() as u64
}

impl Pass for GlobalOrder {
    fn info(&self) -> &'static PassInfo {
        &COMM_GLOBAL_ORDER
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let n = pin_collectives(ctx, op);
        env.add_stat("pinned", n);
        Ok(())
    }
}
