//! `cse`: common-subexpression elimination of `Pure` ops, block by block.
//!
//! Two ops are equivalent when they have the same name, operands, attributes, properties and
//! result types (locations do not matter); the later one is replaced by the earlier one. Like
//! MLIR's CSE, trivially dead `Pure` ops met on the way are erased too. Ops with regions are
//! left alone, and the scope of equivalence is one block, so the result does not depend on
//! dominance between regions. The traversal is in program order, so the output is
//! deterministic.

use crate::util::is_trivially_dead;
use commlir_ir::pass::{Anchor, Pass, PassEnv, PassInfo, StatisticDef};
use commlir_ir::{Attr, BlockId, Context, Diagnostic, Ident, LocKind, OpId, Trait, Type, Value};
use rustc_hash::FxHashMap;

commlir_ir::register_pass!(
    /// The `cse` pass.
    pub CSE = PassInfo {
        argument: "cse",
        name: "CSE",
        summary: "Eliminate common sub-expressions",
        description: "Replaces each `Pure` op by an earlier equivalent op of the same block \
            (same name, operands, attributes, properties and result types) and erases \
            trivially dead `Pure` ops.",
        anchor: Anchor::Any,
        options: &[],
        statistics: &[
            StatisticDef::new("num-cse'd", "Number of operations CSE'd"),
            StatisticDef::new("num-dce'd", "Number of operations DCE'd"),
        ],
        create: |_| Ok(Box::new(Cse)),
    }
);

/// The `cse` pass instance (stateless).
pub struct Cse;

/// What makes two ops interchangeable. Types and attributes are interned, so comparing
/// their ids compares their content.
#[derive(Clone, PartialEq, Eq, Hash)]
struct OpKey {
    name: Ident,
    operands: Vec<Value>,
    attrs: Vec<(Ident, Attr)>,
    properties: Option<Attr>,
    result_types: Vec<Type>,
}

/// Counts of what [`run_cse`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CseStats {
    pub cse: u64,
    pub dce: u64,
}

/// Runs CSE on every block nested under `root`.
pub fn run_cse(ctx: &mut Context, root: OpId) -> CseStats {
    let mut blocks: Vec<BlockId> = Vec::new();
    ctx.walk(root, |op| {
        for &r in ctx.op_regions(op) {
            blocks.extend_from_slice(ctx.region_blocks(r));
        }
    });
    let mut stats = CseStats::default();
    for b in blocks {
        // A block of an op erased earlier in this run has nothing left to do.
        if ctx.block_parent_op(b).is_some_and(|p| ctx.is_erased(p)) {
            continue;
        }
        cse_block(ctx, b, &mut stats);
    }
    stats
}

fn cse_block(ctx: &mut Context, block: BlockId, stats: &mut CseStats) {
    let mut known: FxHashMap<OpKey, OpId> = FxHashMap::default();
    let ops: Vec<OpId> = ctx.block_op_list(block);
    for op in ops {
        if is_trivially_dead(ctx, op) {
            ctx.erase_op(op);
            stats.dce += 1;
            continue;
        }
        if !ctx.op_has_trait(op, Trait::Pure)
            || !ctx.op_regions(op).is_empty()
            || ctx.results(op).is_empty()
        {
            continue;
        }
        let key = OpKey {
            name: ctx.op_name_ident(op),
            operands: ctx.operands(op).to_vec(),
            attrs: ctx.attrs(op).to_vec(),
            properties: ctx.properties(op),
            result_types: ctx.results(op).iter().map(|&r| ctx.value_type(r)).collect(),
        };
        match known.get(&key) {
            Some(&existing) => {
                // Keep the most precise location, as MLIR does.
                let unknown = |l| matches!(ctx.loc_kind(l), LocKind::Unknown);
                if unknown(ctx.op_loc(existing)) && !unknown(ctx.op_loc(op)) {
                    let l = ctx.op_loc(op);
                    ctx.set_op_loc(existing, l);
                }
                let replacement = ctx.results(existing).to_vec();
                ctx.replace_op(op, &replacement);
                stats.cse += 1;
            }
            None => {
                known.insert(key, op);
            }
        }
    }
}

impl Pass for Cse {
    fn info(&self) -> &'static PassInfo {
        &CSE
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let s = run_cse(ctx, op);
        env.add_stat("num-cse'd", s.cse);
        env.add_stat("num-dce'd", s.dce);
        Ok(())
    }
}
