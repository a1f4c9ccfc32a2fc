//! `dce`: erases unused `Pure` ops until none is left.
//!
//! Ops are visited users-first (reverse program order); when an op is erased, the ops defining
//! its operands are revisited, since they may have lost their last use. A worklist makes this
//! linear in the size of the IR and deterministic.

use crate::util::is_trivially_dead;
use commlir_ir::pass::{Anchor, Pass, PassEnv, PassInfo, StatisticDef};
use commlir_ir::{Context, Diagnostic, OpId};

commlir_ir::register_pass!(
    /// The `dce` pass.
    pub DCE = PassInfo {
        argument: "dce",
        name: "DCE",
        summary: "Erase unused side-effect-free operations",
        description: "Erases every `Pure` op (other than terminators) whose results have no \
            uses, repeatedly, so that chains of dead ops disappear entirely.",
        anchor: Anchor::Any,
        options: &[],
        statistics: &[StatisticDef::new("num-erased", "Number of operations erased")],
        create: |_| Ok(Box::new(Dce)),
    }
);

/// The `dce` pass instance (stateless).
pub struct Dce;

/// Erases the trivially dead ops nested under `root` (never `root` itself); returns how many.
pub fn run_dce(ctx: &mut Context, root: OpId) -> u64 {
    let mut worklist: Vec<OpId> = Vec::new();
    ctx.walk(root, |op| {
        if op != root {
            worklist.push(op);
        }
    });
    // The walk is pre-order; popping from the end visits users before their definitions.
    let mut erased = 0;
    while let Some(op) = worklist.pop() {
        if ctx.is_erased(op) || !is_trivially_dead(ctx, op) {
            continue;
        }
        let defs: Vec<OpId> = ctx
            .operands(op)
            .iter()
            .filter_map(|&v| ctx.defining_op(v))
            .collect();
        let mut nested = 0u64;
        ctx.walk(op, |_| nested += 1);
        ctx.erase_op(op);
        erased += nested;
        worklist.extend(defs.into_iter().filter(|&d| d != root).rev());
    }
    erased
}

impl Pass for Dce {
    fn info(&self) -> &'static PassInfo {
        &DCE
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let n = run_dce(ctx, op);
        env.add_stat("num-erased", n);
        Ok(())
    }
}
