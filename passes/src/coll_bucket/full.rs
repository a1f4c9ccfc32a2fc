//! The reference evaluation of trial merges: each trial lays the whole function out and
//! simulates it (floating point), and rebuilds the buffer model for the peak. O(ops) per
//! trial; used where the incremental evaluation does not apply, and to decide again should
//! its result fail the floating-point check (see the parent module's docs).

use super::{
    laid_out_members, layout_peak, merged_ns, Bucket, BucketOptions, Member, Refusal, Trials,
};
use crate::analysis::buffers::BufferModel;
use crate::analysis::cost::OpCost;
use crate::analysis::timeline::{simulate_ops_overlap, Overlap};
use crate::schedule::{apply_op_order, within_budget, CostTable};
use commlir_ir::{BlockId, Context, OpId};
use std::collections::BTreeMap;

/// Costs with the virtual layout's: for each bucket of two or more, its first member carries
/// the merged op's time and the others nothing.
pub(super) struct Costs<'a> {
    table: &'a CostTable,
    overrides: Vec<Option<OpCost>>,
}

impl<'a> Costs<'a> {
    pub(super) fn new(ctx: &Context, table: &'a CostTable) -> Self {
        Costs {
            table,
            overrides: vec![None; ctx.num_op_slots()],
        }
    }

    fn get(&self, op: OpId) -> OpCost {
        self.overrides
            .get(op.index())
            .copied()
            .flatten()
            .unwrap_or_else(|| self.table.get(op))
    }

    /// Sets the virtual-layout costs of the members of `bucket` plus `m`.
    fn set(&mut self, ctx: &Context, bucket: &Bucket, m: Option<&Member>) {
        let bytes = bucket.bytes + m.map_or(0, |m| m.bytes);
        let ns = merged_ns(
            ctx,
            &self.table.machine,
            bucket.key,
            bytes,
            bucket.members[0].op,
        );
        let lead = bucket.members[0].op;
        for op in laid_out_members(bucket, m) {
            let c = if op == lead { ns } else { 0.0 };
            if let Some(slot) = self.overrides.get_mut(op.index()) {
                *slot = Some(OpCost::Collective(c));
            }
        }
    }

    fn saved(&self, ops: &[OpId]) -> Vec<(OpId, Option<OpCost>)> {
        ops.iter()
            .map(|&op| (op, self.overrides.get(op.index()).copied().flatten()))
            .collect()
    }

    fn restore(&mut self, saved: &[(OpId, Option<OpCost>)]) {
        for &(op, c) in saved {
            if let Some(slot) = self.overrides.get_mut(op.index()) {
                *slot = c;
            }
        }
    }

    pub(super) fn makespan(&self, ctx: &Context, order: &[OpId]) -> f64 {
        simulate_ops_overlap(
            ctx,
            order.iter().copied(),
            |op| self.get(op),
            Overlap::of(&self.table.machine),
        )
        .makespan_ns
    }
}

/// The floating-point makespan of `order` with `buckets` (those of two or more members)
/// counted as their merged ops.
pub(super) fn laid_out_makespan(
    ctx: &Context,
    table: &CostTable,
    order: &[OpId],
    buckets: &[Bucket],
) -> f64 {
    let mut costs = Costs::new(ctx, table);
    for b in buckets.iter().filter(|b| b.members.len() > 1) {
        costs.set(ctx, b, None);
    }
    costs.makespan(ctx, order)
}

/// The layout of a trial in `order`: the members of `bucket` and `m` go right after the
/// definition of `m`'s latest input, or stay where the bucket starts if that is later; all
/// their waits go where the first of them is. `Err` when an input comes after a wait.
pub(super) fn layout(
    ctx: &Context,
    order: &[OpId],
    bucket: &Bucket,
    m: &Member,
) -> Result<Vec<OpId>, Refusal> {
    let mut pos = vec![usize::MAX; ctx.num_op_slots()];
    for (p, &op) in order.iter().enumerate() {
        pos[op.index()] = p;
    }
    let at = |op: OpId| pos.get(op.index()).copied().unwrap_or(usize::MAX);
    // Where the bucket's ops sit now (contiguous), and the last definition of m's inputs.
    let start = bucket.members.iter().map(|b| at(b.op)).min().unwrap_or(0);
    let mut last_def: Option<usize> = None;
    for &v in ctx.operands(m.op) {
        if let Some(d) = ctx.defining_op(v) {
            let p = at(d);
            if p == usize::MAX {
                return Err(Refusal::Dependency);
            }
            last_def = Some(last_def.map_or(p, |l| l.max(p)));
        }
    }
    if at(m.op) == usize::MAX || at(m.op) < start {
        return Err(Refusal::Dependency);
    }
    // The merged op goes after `after` (the latest input), or stays at `start`.
    let after = last_def.filter(|&d| d >= start);
    let waits: Vec<OpId> = bucket
        .members
        .iter()
        .chain(std::iter::once(m))
        .flat_map(|b| b.waits.iter().copied())
        .collect();
    let first_wait = waits.iter().map(|&w| at(w)).min().unwrap_or(usize::MAX);
    if first_wait == usize::MAX || after.is_some_and(|d| first_wait <= d) {
        return Err(Refusal::Dependency);
    }
    // The virtual layout: later members at no cost, then the first member; the first
    // member's waits first, so that they take the stall.
    let seq_ops = laid_out_members(bucket, Some(m));
    let mut moved = vec![false; ctx.num_op_slots()];
    for &o in seq_ops.iter().chain(&waits) {
        moved[o.index()] = true;
    }
    let mut trial = Vec::with_capacity(order.len());
    for (p, &op) in order.iter().enumerate() {
        if p == first_wait {
            trial.extend_from_slice(&waits);
        }
        if after.is_none() && p == start {
            trial.extend_from_slice(&seq_ops);
        }
        if !moved[op.index()] {
            trial.push(op);
        }
        if after == Some(p) {
            trial.extend_from_slice(&seq_ops);
        }
    }
    Ok(trial)
}

/// The full evaluation: the traced order (always the block's order between trials), and the
/// scheduled order with its makespan.
pub(super) struct Full<'a> {
    block: BlockId,
    opts: &'a BucketOptions,
    costs: Costs<'a>,
    order: Vec<OpId>,
    makespan: f64,
    scheduled: Option<(Vec<OpId>, f64)>,
    base_peak: i64,
    /// The input's peak as `coll-to-comm` will lower it ([`layout_peak`]).
    base_lowered_peak: i64,
    /// The members of every bucket of two or more laid out so far, by first member.
    laid_out: BTreeMap<OpId, Vec<OpId>>,
}

impl<'a> Full<'a> {
    pub(super) fn new(
        ctx: &Context,
        block: BlockId,
        table: &'a CostTable,
        scheduled: Option<Vec<OpId>>,
        opts: &'a BucketOptions,
    ) -> Self {
        let costs = Costs::new(ctx, table);
        let order = ctx.block_op_list(block);
        let makespan = costs.makespan(ctx, &order);
        let scheduled = scheduled.map(|s| {
            let ms = costs.makespan(ctx, &s);
            (s, ms)
        });
        let mut f = Full {
            block,
            opts,
            costs,
            order,
            makespan,
            scheduled,
            base_peak: 0,
            base_lowered_peak: 0,
            laid_out: BTreeMap::new(),
        };
        let model = BufferModel::new(ctx, block);
        f.base_peak = f.peak(ctx, &model, false);
        f.base_lowered_peak = f.peak(ctx, &model, true);
        f
    }

    /// The peak memory of the block as laid out, with each bucket counted as its merged op:
    /// the members sit together, but the merged op allocates every result while every input
    /// is still live, where the layout frees each member's inputs before the next member
    /// allocates. With `staged`, as `coll-to-comm` will lower it (see [`layout_peak`]).
    fn peak(&self, ctx: &Context, model: &BufferModel, staged: bool) -> i64 {
        let mut span: Vec<(usize, usize)> = (0..model.ops.len()).map(|p| (p, p)).collect();
        for members in self.laid_out.values() {
            let Some(start) = members.iter().filter_map(|&m| model.pos(m)).min() else {
                continue;
            };
            let end = (start + members.len() - 1).min(span.len().saturating_sub(1));
            for s in span.iter_mut().take(end + 1).skip(start) {
                *s = (start, end);
            }
        }
        layout_peak(ctx, model, &span, staged)
    }
}

impl Trials for Full<'_> {
    fn try_extend(
        &mut self,
        ctx: &mut Context,
        bucket: &Bucket,
        m: &Member,
    ) -> Result<(), Refusal> {
        let trial = layout(ctx, &self.order, bucket, m)?;
        let mut grown: Vec<OpId> = bucket.members.iter().map(|b| b.op).collect();
        grown.push(m.op);
        let saved = self.costs.saved(&grown);
        self.costs.set(ctx, bucket, Some(m));
        let makespan = self.costs.makespan(ctx, &trial);
        let mut scheduled_trial: Option<(Vec<OpId>, f64)> = None;
        if !self.opts.ignore_cost {
            let verdict = if makespan > self.makespan {
                Err(Refusal::Cost)
            } else if let Some((order, ms)) = &self.scheduled {
                match layout(ctx, order, bucket, m) {
                    Ok(t) => {
                        let tms = self.costs.makespan(ctx, &t);
                        if tms > *ms {
                            Err(Refusal::Schedule)
                        } else {
                            scheduled_trial = Some((t, tms));
                            Ok(())
                        }
                    }
                    Err(_) => Err(Refusal::Schedule),
                }
            } else {
                Ok(())
            };
            if let Err(why) = verdict {
                self.costs.restore(&saved);
                return Err(why);
            }
        }
        apply_op_order(ctx, trial.iter().copied());
        let lead = bucket.members[0].op;
        let before = self.laid_out.insert(lead, grown);
        let budget = self.opts.peak_memory_budget;
        let model = BufferModel::new(ctx, self.block);
        if !within_budget(self.peak(ctx, &model, false), self.base_peak, budget)
            || !within_budget(self.peak(ctx, &model, true), self.base_lowered_peak, budget)
        {
            apply_op_order(ctx, self.order.iter().copied());
            self.costs.restore(&saved);
            match before {
                Some(v) => self.laid_out.insert(lead, v),
                None => self.laid_out.remove(&lead),
            };
            return Err(Refusal::Memory);
        }
        self.order = trial;
        self.makespan = makespan;
        // (With `ignore-cost` there is no scheduled order to keep.)
        if let Some(s) = scheduled_trial {
            self.scheduled = Some(s);
        }
        Ok(())
    }

    fn order(&self, _ctx: &Context) -> Vec<OpId> {
        self.order.clone()
    }
}
