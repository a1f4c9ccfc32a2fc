//! The scheduling core shared by the communication scheduling passes: the dependency graph of
//! a function body ([`graph`]), incremental memory tracking under adjacent swaps
//! ([`memory`]), checks of the scheduling contracts ([`check`]) and small helpers to run a
//! schedule on a function.
//!
//! Every pass works on one block, the body of a `func.func` with a single block; a function
//! with several blocks is left alone (nothing in commlir produces one yet).

pub mod check;
pub mod graph;
pub mod guard;
pub mod iterative;
pub mod memory;

pub use graph::{DepGraph, GraphOptions, NodeKind, NONE, PIN_ATTR};
pub use memory::MemoryTracker;

use crate::analysis::buffers::peak_memory;
use crate::analysis::cost::{op_cost, Machine, OpCost};
use crate::analysis::machine::default_machine;
use commlir_ir::{BlockId, Context, OpId};
use rustc_hash::FxHashMap;

/// The cost-model estimate ([`op_cost`] on a [`Machine`]) of every op of a block, computed
/// once per pass: reordering does not change what an op costs, and a scheduling pass needs it
/// three times (the node runtimes and the do-no-harm guard's two timeline simulations).
pub struct CostTable {
    /// By op arena index; `Free` for ops outside the block.
    by_op: Vec<OpCost>,
    /// The machine the costs are for (a cached table is reused only on the same machine;
    /// the simulations take its overlap slowdown from here).
    pub machine: Machine,
}

impl CostTable {
    /// The costs of the ops of `block` on the default machine.
    pub fn new(ctx: &Context, block: BlockId) -> CostTable {
        Self::new_on(ctx, default_machine(), block)
    }

    /// The costs of the ops of `block` on `machine`.
    pub fn new_on(ctx: &Context, machine: &Machine, block: BlockId) -> CostTable {
        Self::of_ops_on(ctx, machine, ctx.block_ops(block))
    }

    /// The costs of `ops`, all in one block, on the default machine.
    pub fn of_ops(ctx: &Context, ops: impl IntoIterator<Item = OpId>) -> CostTable {
        Self::of_ops_on(ctx, default_machine(), ops)
    }

    /// The costs of `ops`, all in one block, on `machine`.
    ///
    /// An op's cost is a function of its name, operand and result types, properties and
    /// attributes (the group it names resolves the same way from anywhere in the block), so
    /// ops alike in those (a program repeating its layers is mostly such ops) are costed once.
    pub fn of_ops_on(
        ctx: &Context,
        machine: &Machine,
        ops: impl IntoIterator<Item = OpId>,
    ) -> CostTable {
        let mut by_op = vec![OpCost::Free; ctx.num_op_slots()];
        let mut seen: FxHashMap<Box<[u32]>, OpCost> = FxHashMap::default();
        let mut key: Vec<u32> = Vec::new();
        for op in ops {
            key.clear();
            key.push(ctx.op_name_ident(op).index() as u32);
            for vals in [ctx.operands(op), ctx.results(op)] {
                key.push(vals.len() as u32);
                key.extend(vals.iter().map(|&v| ctx.value_type(v).index() as u32));
            }
            key.push(ctx.properties(op).map_or(u32::MAX, |p| p.index() as u32));
            for &(k, a) in ctx.attrs(op) {
                key.extend([k.index() as u32, a.index() as u32]);
            }
            by_op[op.index()] = match seen.get(key.as_slice()) {
                Some(&c) => c,
                None => {
                    let c = op_cost(ctx, machine, op);
                    seen.insert(key.as_slice().into(), c);
                    c
                }
            };
        }
        CostTable {
            by_op,
            machine: machine.clone(),
        }
    }

    /// The cost of `op` (an op of the block the table was built for).
    pub fn get(&self, op: OpId) -> OpCost {
        self.by_op.get(op.index()).copied().unwrap_or(OpCost::Free)
    }
}

/// The body of a function when it has exactly one block.
pub fn body_block(ctx: &Context, func: OpId) -> Option<BlockId> {
    let r = *ctx.op_regions(func).first()?;
    match ctx.region_blocks(r) {
        [b] => Some(*b),
        _ => None,
    }
}

/// Estimated runtime of every node (ns) on the default machine: the cost model, or
/// `cost_ns` where set.
pub fn runtimes(ctx: &Context, graph: &DepGraph) -> Vec<f64> {
    runtimes_on(ctx, default_machine(), graph)
}

/// [`runtimes`] on `machine`.
pub fn runtimes_on(ctx: &Context, machine: &Machine, graph: &DepGraph) -> Vec<f64> {
    graph
        .ops
        .iter()
        .map(|&op| op_cost(ctx, machine, op).ns())
        .collect()
}

/// [`runtimes`] from a precomputed table.
pub fn runtimes_from(costs: &CostTable, graph: &DepGraph) -> Vec<f64> {
    graph.ops.iter().map(|&op| costs.get(op).ns()).collect()
}

/// Rewrites the block to hold the graph's ops in `order` (node numbers). O(n) moves.
pub fn apply_order(ctx: &mut Context, graph: &DepGraph, order: &[u32]) {
    apply_op_order(ctx, order.iter().map(|&n| graph.ops[n as usize]));
}

/// Rewrites the block holding `ops` (every op of one block) to hold them in this order.
/// O(n); ops already in place are not relinked.
pub fn apply_op_order(ctx: &mut Context, ops: impl IntoIterator<Item = OpId>) {
    let mut prev: Option<OpId> = None;
    for op in ops {
        match prev {
            // Already in place: skip the relink.
            Some(p) if ctx.next_op(p) == Some(op) => {}
            Some(p) => ctx.move_after(op, p),
            None => {
                let block = ctx.op_parent(op).expect("op in a block");
                if let Some(first) = ctx.block_first(block) {
                    if first != op {
                        ctx.move_before(op, first);
                    }
                }
            }
        }
        prev = Some(op);
    }
}

/// Whether `peak` is within `(1 + budget) × base`, Inductor's test
/// (`new - base > base × budget` fails).
pub fn within_budget(peak: i64, base: i64, budget: f64) -> bool {
    (peak - base) as f64 <= base as f64 * budget
}

/// Peak memory of the block (a full recompute with [`BufferModel`](crate::analysis::BufferModel)).
pub fn block_peak(ctx: &Context, block: BlockId) -> i64 {
    peak_memory(ctx, block) as i64
}

/// Why a collective (or wait) stopped moving.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Limit {
    /// Reached the start (or end) of the block.
    None,
    /// A data dependency on an op that cannot move along.
    DataDependency,
    /// Another collective (SPMD order).
    CollectiveOrder,
    /// An op with unknown effects, or the terminator.
    FixedOp,
    /// The move would raise peak memory beyond the budget.
    PeakMemory,
    /// Enough compute already overlaps it (runtime estimates).
    Unexposed,
    /// The move would expose other communication more than it hides this one.
    ExposureTradeoff,
    /// It moved `max-moves` times.
    MoveLimit,
}

impl Limit {
    /// The name used in statistics and remarks.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::None => "none",
            Limit::DataDependency => "data dependency",
            Limit::CollectiveOrder => "collective ordering",
            Limit::FixedOp => "fixed op",
            Limit::PeakMemory => "peak memory",
            Limit::Unexposed => "unexposed by runtime estimates",
            Limit::ExposureTradeoff => "exposure trade-off",
            Limit::MoveLimit => "move limit",
        }
    }

    /// The statistic counting collectives stopped by this limit.
    pub fn stat(self) -> &'static str {
        match self {
            Limit::None => "limited-by-none",
            Limit::DataDependency => "limited-by-data",
            Limit::CollectiveOrder => "limited-by-collective",
            Limit::FixedOp => "limited-by-fixed",
            Limit::PeakMemory => "limited-by-memory",
            Limit::Unexposed => "limited-by-overlap",
            Limit::ExposureTradeoff => "limited-by-tradeoff",
            Limit::MoveLimit => "limited-by-moves",
        }
    }
}

/// Exposure-estimate windows computed once on the original order, in O(n) total: for each
/// async collective, the compute between it and its first dependent op (or a blocking
/// collective); for each wait, the compute between its collective (or the last blocking
/// collective) and it. Collectives contribute no compute (they run on the comm stream).
pub struct Windows {
    /// Compute runtime of nodes `0..p` (collectives excluded).
    prefix: Vec<f64>,
    next_blocking: Vec<u32>,
    prev_blocking: Vec<u32>,
}

impl Windows {
    /// Precomputes the sums for `graph` in its own order.
    pub fn new(graph: &DepGraph, rt: &[f64]) -> Windows {
        let n = graph.len();
        let mut prefix = vec![0.0; n + 1];
        for i in 0..n {
            let c = if graph.kind[i] == NodeKind::Collective {
                0.0
            } else {
                rt[i]
            };
            prefix[i + 1] = prefix[i] + c;
        }
        let is_blocking = |i: usize| graph.kind[i] == NodeKind::Collective && graph.blocking[i];
        let mut next_blocking = vec![n as u32; n + 1];
        for i in (0..n).rev() {
            next_blocking[i] = if is_blocking(i) {
                i as u32
            } else {
                next_blocking[i + 1]
            };
        }
        let mut prev_blocking = vec![NONE; n];
        let mut last = NONE;
        for (i, pb) in prev_blocking.iter_mut().enumerate() {
            *pb = last;
            if is_blocking(i) {
                last = i as u32;
            }
        }
        Windows {
            prefix,
            next_blocking,
            prev_blocking,
        }
    }

    /// Compute overlapping async collective `c` in the original order.
    pub fn after_collective(&self, graph: &DepGraph, c: u32) -> f64 {
        let first_user = graph
            .succs(c)
            .iter()
            .copied()
            .filter(|&s| graph.kind[s as usize] != NodeKind::Collective)
            .min()
            .unwrap_or(graph.len() as u32);
        let end = first_user.min(self.next_blocking[c as usize + 1]) as usize;
        self.prefix[end] - self.prefix[c as usize + 1]
    }

    /// Compute between wait `w` and its collective in the original order.
    pub fn before_wait(&self, graph: &DepGraph, w: u32) -> f64 {
        let c = graph.coll_of_wait[w as usize];
        if c == NONE {
            return 0.0;
        }
        let pb = self.prev_blocking[w as usize];
        let start = if pb != NONE && pb > c { pb } else { c };
        self.prefix[w as usize] - self.prefix[start as usize + 1]
    }
}
