//! How much of each asynchronous collective of a block independent compute can hide once an
//! overlap scheduler (`comm-overlap-schedule`) has placed the block's ops: the overlap that a
//! pass deciding *before* scheduling (`coll-fuse-matmul`) should expect.
//!
//! The collectives keep their program order: the scheduling passes never reorder the
//! collectives of a group, and the simulator runs one comm stream, so a collective starts only
//! after the previous one ends. Number the asynchronous collectives by program order (their
//! *rank*). A compute op X can run while the collective of rank `r` is in flight only when
//!
//! - it needs the result of no collective of rank ≥ `r` (those end no earlier than `r` ends)
//!   and no collective of rank ≤ `r` needs it (those start after it ends, and `r` starts no
//!   earlier than they do): with `after(X)` the highest rank whose wait X depends on and
//!   `before(X)` the lowest rank that depends on X, both through the [`DepGraph`] edges (data,
//!   memory, barriers, group order; one pass over the graph each way), `r` lies in
//!   `after(X) + 1 ..= before(X) − 1`;
//! - and the scheduler actually puts it there. The schedulers keep the compute order (up to
//!   local moves) and move the collectives: each starts as soon as its inputs exist and its
//!   wait goes just before the first use. So X, lying between the collectives of ranks `h − 1`
//!   and `h` in program order, can overlap the one issued before it (`h − 1`, whose wait sinks
//!   past X) and the one issued after it (`h`, which rises above X). Compute further away would
//!   have to cross other collectives, which the schedulers seldom do under their memory limit;
//!   it is not counted ([`REACH_BEFORE`], [`REACH_AFTER`]).
//!
//! The compute time of the ops ([`OpCost`], `cost_ns` overrides included) is then shared out
//! among the collectives in rank order, each taking from the ops whose window closes first
//! (earliest deadline first, which hides the most in total when the ops may be split); what a
//! collective cannot cover is exposed. Building the budget is linear in the block (plus a heap
//! of the ops whose windows are open, at most two collectives wide), so it stays cheap on
//! 100k-op programs.

use super::cost::OpCost;
use crate::schedule::{CostTable, DepGraph, GraphOptions, NONE};
use commlir_ir::{BlockId, Context, OpId};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How many collectives issued before an op (in program order) beyond the last one it may
/// overlap: 0, only the last one (whose wait the scheduler sinks past the op).
pub const REACH_BEFORE: u32 = 0;

/// How many collectives issued after an op it may overlap: 1, the next one (which the
/// scheduler issues as soon as its inputs exist).
pub const REACH_AFTER: u32 = 1;

/// One compute op's share: the ranks it can hide (`lo ..= hi`) and its time.
#[derive(Clone, Copy, Debug)]
struct Item {
    lo: u32,
    hi: u32,
    ns: f64,
}

/// The compute that can hide each asynchronous collective of a block, handed out in rank
/// order (see the module docs). A caller walks the collectives in program order: it asks
/// [`HidingBudget::hideable`] for one, decides, and says with [`HidingBudget::settle`]
/// whether the collective stays (and takes its share) or goes; collectives it skips stay.
pub struct HidingBudget {
    /// Rank of each asynchronous collective, by op arena index (`NONE` for other ops).
    rank_of: Vec<u32>,
    /// Per rank: the collective's time (ns).
    comm: Vec<f64>,
    /// The compute ops with a non-empty window, by `lo` (then program order).
    items: Vec<Item>,
    /// Per item: the time not yet handed out.
    left: Vec<f64>,
    /// The first item not yet admitted.
    next_item: usize,
    /// The first rank not yet settled.
    next_rank: u32,
    /// Admitted items with time left, by `hi` (then index): the first to close on top.
    open: BinaryHeap<Reverse<(u32, u32)>>,
    /// Total time left in `open`.
    pool: f64,
}

impl HidingBudget {
    /// The budget of `block` with op costs from `costs` (a table of this block's ops).
    pub fn new(ctx: &Context, block: BlockId, costs: &CostTable) -> HidingBudget {
        let graph = DepGraph::build(ctx, block, GraphOptions::default());
        let n = graph.len();
        let mut rank_of = vec![NONE; ctx.num_op_slots()];
        let mut node_rank = vec![NONE; n];
        let mut comm = Vec::new();
        for (i, &op) in graph.ops.iter().enumerate() {
            if !graph.is_async_collective(i as u32) {
                continue;
            }
            if let OpCost::Collective(ns) = costs.get(op) {
                node_rank[i] = comm.len() as u32;
                rank_of[op.index()] = comm.len() as u32;
                comm.push(ns);
            }
        }
        let ranks = comm.len() as u32;
        // `after + 1` (0: the node depends on no collective's wait). Edges go forward in node
        // order, so one pass in that order sees every predecessor first.
        let mut after = vec![0u32; n];
        for i in 0..n {
            let mut a = graph
                .preds(i as u32)
                .iter()
                .map(|&p| after[p as usize])
                .max()
                .unwrap_or(0);
            let c = graph.coll_of_wait[i];
            if c != NONE && node_rank[c as usize] != NONE {
                a = a.max(node_rank[c as usize] + 1);
            }
            after[i] = a;
        }
        // `before` (`ranks`: no collective depends on the node).
        let mut before = vec![ranks; n];
        for i in (0..n).rev() {
            let mut b = ranks;
            for &s in graph.succs(i as u32) {
                b = b.min(before[s as usize]).min(node_rank[s as usize]);
            }
            before[i] = b;
        }
        let mut items = Vec::new();
        // `home`: the collectives issued before the op in program order.
        let mut home = 0i64;
        for (i, &op) in graph.ops.iter().enumerate() {
            if node_rank[i] != NONE {
                home += 1;
                continue;
            }
            let ns = match costs.get(op) {
                OpCost::Compute(t) | OpCost::Fused { ns: t, .. } => t,
                OpCost::Collective(_) | OpCost::Free => continue,
            };
            let lo = i64::from(after[i]).max(home - 1 - i64::from(REACH_BEFORE));
            let hi = (i64::from(before[i]) - 1).min(home - 1 + i64::from(REACH_AFTER));
            if ns.is_nan() || ns <= 0.0 || lo > hi {
                continue;
            }
            items.push(Item {
                lo: lo as u32,
                hi: hi as u32,
                ns,
            });
        }
        // Stable: program order among equal `lo`s.
        items.sort_by_key(|it| it.lo);
        let left = items.iter().map(|it| it.ns).collect();
        HidingBudget {
            rank_of,
            comm,
            items,
            left,
            next_item: 0,
            next_rank: 0,
            open: BinaryHeap::new(),
            pool: 0.0,
        }
    }

    /// The rank of `op`, if it is an asynchronous collective of the block.
    pub fn rank(&self, op: OpId) -> Option<u32> {
        self.rank_of.get(op.index()).copied().filter(|&r| r != NONE)
    }

    /// The compute time that can run while the collective `op` is in flight, once every
    /// earlier collective has taken its share (every unsettled one before it stays): the most
    /// of its time the schedule can hide. `None` when `op` is not an asynchronous collective
    /// of the block, or lies before the last one settled.
    pub fn hideable(&mut self, op: OpId) -> Option<f64> {
        let r = self.rank(op)?;
        if r < self.next_rank {
            return None;
        }
        while self.next_rank < r {
            let q = self.next_rank;
            self.admit(q);
            self.take(self.comm[q as usize]);
            self.next_rank += 1;
        }
        self.admit(r);
        Some(self.pool.max(0.0))
    }

    /// Settles the collective `op` (and, as staying, every unsettled one before it): when it
    /// `stays`, it takes its share of the open compute (the ops whose window closes first);
    /// otherwise it leaves everything to the collectives after it.
    pub fn settle(&mut self, op: OpId, stays: bool) {
        if self.hideable(op).is_none() {
            return;
        }
        let r = self.next_rank;
        if stays {
            self.take(self.comm[r as usize]);
        }
        self.next_rank += 1;
    }

    /// Opens the windows starting at or before rank `r` and drops those closed before it.
    fn admit(&mut self, r: u32) {
        while let Some(it) = self.items.get(self.next_item).copied() {
            if it.lo > r {
                break;
            }
            self.open.push(Reverse((it.hi, self.next_item as u32)));
            self.pool += it.ns;
            self.next_item += 1;
        }
        while let Some(&Reverse((hi, i))) = self.open.peek() {
            if hi >= r {
                break;
            }
            self.pool -= self.left[i as usize];
            self.open.pop();
        }
    }

    /// Hands out up to `ns` of the open compute, the first window to close first.
    fn take(&mut self, mut ns: f64) {
        while ns > 0.0 {
            let Some(&Reverse((_, i))) = self.open.peek() else {
                break;
            };
            let left = &mut self.left[i as usize];
            let t = left.min(ns);
            *left -= t;
            ns -= t;
            self.pool -= t;
            if *left <= 0.0 {
                self.open.pop();
            }
        }
        if self.open.is_empty() {
            self.pool = 0.0;
        }
    }
}
