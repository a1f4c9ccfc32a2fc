//! The three greedy schedules of Inductor's `_schedule_for_comm`, as the passes
//! `comm-sink-waits`, `comm-raise-comms` and `comm-reorder-compute-for-overlap`.
//!
//! A list scheduler over the block's [`DepGraph`]: among the ready ops, pick the one with the
//! smallest score `(score_0, score_1, score_2)`:
//!
//! - `score_0` (raise-comms): the smallest index, among collectives in program order, of the
//!   collectives the op must precede (itself included), or ∞: the ops a collective needs are
//!   scheduled as soon as possible, so collectives start early;
//! - `score_1` (sink-waits): 1 for a wait, else 0: waits are deferred as long as anything else
//!   is ready;
//! - `score_2`: the original position, for stability.
//!
//! With overlap (`comm-reorder-compute-for-overlap`, which also raises comms and sinks waits),
//! scheduling a collective is followed by scheduling ready compute (neither collective nor
//! wait), smallest score first, until the compute scheduled covers the collective's estimated
//! time (cost model, or `cost_ns`).
//!
//! Improvements over the seed: `score_0` comes from one reverse sweep over the graph (O(E))
//! instead of walking every collective's ancestors (O(n²)); the overlap candidates sit in a
//! heap of their own with lazy deletion instead of a scan of the ready list per pick; and the
//! graph carries the per-group collective order, so `sink-waits` alone (which ignores
//! `score_0`) can no longer let a later collective overtake an earlier one on the same group
//! when the earlier one waits behind a deferred wait — the seed relies on a separate
//! `decide_global_ordering_of_comms` for that. Peak memory is checked after scheduling: a
//! schedule above `(1 + peak-memory-budget) ×` the input's peak is dropped and the function
//! keeps its order.

use crate::schedule::{self, check, DepGraph, GraphOptions, NodeKind};
use commlir_ir::pass::{
    Anchor, OptionDef, OptionKind, Pass, PassEnv, PassInfo, PassOptions, StatisticDef,
};
use commlir_ir::{Context, Diagnostic, OpId};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Which objectives the list scheduler pursues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    pub raise_comms: bool,
    pub sink_waits: bool,
    pub reorder_for_overlap: bool,
}

impl Mode {
    pub const SINK_WAITS: Mode = Mode {
        raise_comms: false,
        sink_waits: true,
        reorder_for_overlap: false,
    };
    pub const RAISE_COMMS: Mode = Mode {
        raise_comms: true,
        sink_waits: false,
        reorder_for_overlap: false,
    };
    pub const OVERLAP: Mode = Mode {
        raise_comms: true,
        sink_waits: true,
        reorder_for_overlap: true,
    };
}

type Score = (u32, u8, u32);

/// The greedy schedule of `graph` (node numbers in their new order). `rt` gives each node's
/// estimated runtime (only the overlap step uses it). O((n + E) log n).
pub fn schedule_for_comm(graph: &DepGraph, rt: &[f64], mode: Mode) -> Vec<u32> {
    let n = graph.len();
    let is_coll = |i: usize| graph.kind[i] == NodeKind::Collective;
    // score_0: a reverse sweep (edges go forward in node order) propagates the smallest
    // collective index down to every ancestor.
    let mut score0 = vec![u32::MAX; n];
    if mode.raise_comms {
        let mut comm_idx = vec![u32::MAX; n];
        let mut k = 0;
        for (i, c) in comm_idx.iter_mut().enumerate() {
            if is_coll(i) {
                *c = k;
                k += 1;
            }
        }
        for i in (0..n).rev() {
            let m = graph
                .succs(i as u32)
                .iter()
                .map(|&s| score0[s as usize])
                .min()
                .unwrap_or(u32::MAX);
            score0[i] = m.min(comm_idx[i]);
        }
    }
    let score = |i: u32| -> Score {
        let s1 = u8::from(mode.sink_waits && graph.kind[i as usize] == NodeKind::Wait);
        (score0[i as usize], s1, i)
    };
    let overlappable = |i: u32| {
        !matches!(
            graph.kind[i as usize],
            NodeKind::Collective | NodeKind::Wait
        )
    };

    let mut missing: Vec<u32> = (0..n as u32).map(|i| graph.preds(i).len() as u32).collect();
    let mut ready: BinaryHeap<Reverse<Score>> = BinaryHeap::new();
    let mut ready_compute: BinaryHeap<Reverse<Score>> = BinaryHeap::new();
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let push =
        |i: u32, ready: &mut BinaryHeap<Reverse<Score>>, rc: &mut BinaryHeap<Reverse<Score>>| {
            ready.push(Reverse(score(i)));
            if mode.reorder_for_overlap && overlappable(i) {
                rc.push(Reverse(score(i)));
            }
        };
    for i in 0..n as u32 {
        if missing[i as usize] == 0 {
            push(i, &mut ready, &mut ready_compute);
        }
    }
    // Schedules `i` and releases its successors.
    let mut emit = |i: u32,
                    order: &mut Vec<u32>,
                    done: &mut Vec<bool>,
                    ready: &mut BinaryHeap<Reverse<Score>>,
                    rc: &mut BinaryHeap<Reverse<Score>>| {
        done[i as usize] = true;
        order.push(i);
        for &s in graph.succs(i) {
            missing[s as usize] -= 1;
            if missing[s as usize] == 0 {
                push(s, ready, rc);
            }
        }
    };
    while let Some(Reverse((_, _, i))) = ready.pop() {
        if done[i as usize] {
            continue; // already taken as an overlap candidate
        }
        emit(i, &mut order, &mut done, &mut ready, &mut ready_compute);
        if mode.reorder_for_overlap && is_coll(i as usize) {
            let mut remaining = rt[i as usize];
            while remaining > 0.0 {
                let Some(Reverse((_, _, c))) = ready_compute.pop() else {
                    break;
                };
                if done[c as usize] {
                    continue;
                }
                emit(c, &mut order, &mut done, &mut ready, &mut ready_compute);
                remaining -= rt[c as usize];
            }
        }
    }
    debug_assert_eq!(order.len(), n, "the dependency graph has a cycle");
    order
}

/// Options shared by the three greedy passes.
#[derive(Clone, Copy, Debug)]
pub struct GreedyOptions {
    pub peak_memory_budget: f64,
    pub unsafe_collective_reorder: bool,
}

/// What a greedy pass did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GreedyStats {
    /// Ops whose position changed.
    pub ops_moved: u64,
    /// Schedules dropped because they raised peak memory beyond the budget.
    pub rejected_for_memory: u64,
}

/// Runs the greedy schedule `mode` on the body of `func`, on the default machine.
pub fn run_on_func(ctx: &mut Context, func: OpId, mode: Mode, opts: GreedyOptions) -> GreedyStats {
    run_on_func_on(
        ctx,
        crate::analysis::machine::default_machine(),
        func,
        mode,
        opts,
    )
}

/// [`run_on_func`] with the op runtimes of `machine`.
pub fn run_on_func_on(
    ctx: &mut Context,
    machine: &crate::analysis::cost::Machine,
    func: OpId,
    mode: Mode,
    opts: GreedyOptions,
) -> GreedyStats {
    let mut stats = GreedyStats::default();
    let Some(block) = schedule::body_block(ctx, func) else {
        return stats;
    };
    let graph = DepGraph::build(
        ctx,
        block,
        GraphOptions {
            collective_order: !opts.unsafe_collective_reorder,
        },
    );
    if !graph.kind.contains(&NodeKind::Collective) {
        return stats;
    }
    let rt = schedule::runtimes_on(ctx, machine, &graph);
    let order = schedule_for_comm(&graph, &rt, mode);
    debug_assert!(check::is_topological(&graph, &order));
    debug_assert!(opts.unsafe_collective_reorder || check::keeps_group_order(&graph, &order));
    let moved = order
        .iter()
        .enumerate()
        .filter(|(p, &i)| *p as u32 != i)
        .count() as u64;
    if moved == 0 {
        return stats;
    }
    let peak_before = schedule::block_peak(ctx, block);
    schedule::apply_order(ctx, &graph, &order);
    let peak_after = schedule::block_peak(ctx, block);
    if !schedule::within_budget(peak_after, peak_before, opts.peak_memory_budget) {
        let original: Vec<u32> = (0..graph.len() as u32).collect();
        schedule::apply_order(ctx, &graph, &original);
        stats.rejected_for_memory = 1;
        return stats;
    }
    stats.ops_moved = moved;
    stats
}

const OPTIONS: &[OptionDef] = &[
    OptionDef::new(
        "peak-memory-budget",
        OptionKind::Float,
        "0.0",
        "Largest allowed peak-memory increase, as a fraction of the input's peak; a schedule beyond it is dropped",
    ),
    OptionDef::bool(
        "unsafe-collective-reorder",
        false,
        "Allow collectives on one group to change their relative order (not SPMD-safe)",
    ),
    crate::analysis::machine::MACHINE_OPTION,
];

const STATS: &[StatisticDef] = &[
    StatisticDef::new("ops-moved", "Ops whose position changed"),
    StatisticDef::new(
        "rejected-for-memory",
        "Schedules dropped for exceeding the peak-memory budget",
    ),
];

fn options(o: &PassOptions) -> Result<GreedyOptions, String> {
    let budget = o.get_float("peak-memory-budget");
    if budget.is_nan() || budget < 0.0 {
        return Err(format!(
            "peak-memory-budget must be a non-negative number, got {budget}"
        ));
    }
    Ok(GreedyOptions {
        peak_memory_budget: budget,
        unsafe_collective_reorder: o.get_bool("unsafe-collective-reorder"),
    })
}

/// One greedy pass instance.
struct Greedy {
    info: &'static PassInfo,
    mode: Mode,
    opts: GreedyOptions,
    /// The `machine` option's machine (`None`: the module's or the default).
    machine: Option<crate::analysis::cost::Machine>,
}

impl Pass for Greedy {
    fn info(&self) -> &'static PassInfo {
        self.info
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let machine = crate::analysis::machine::for_op(ctx, op, self.machine.as_ref())?;
        let s = run_on_func_on(ctx, &machine, op, self.mode, self.opts);
        env.add_stat("ops-moved", s.ops_moved);
        env.add_stat("rejected-for-memory", s.rejected_for_memory);
        // A schedule only permutes the body: verified for order alone (or not at all when
        // no op changed position).
        if s.ops_moved == 0 {
            env.mark_unchanged();
        } else {
            env.mark_reordered_only();
        }
        Ok(())
    }
}

commlir_ir::register_pass!(
    /// `comm-sink-waits`.
    pub COMM_SINK_WAITS = PassInfo {
        argument: "comm-sink-waits",
        name: "CommSinkWaits",
        summary: "Greedily schedule waits as late as possible",
        description: "List scheduling by (is-wait, original position): every other ready op \
            runs before a wait. Keeps dependencies, the per-group collective order and the \
            peak-memory budget (a schedule beyond it is dropped).",
        anchor: Anchor::FUNC,
        options: OPTIONS,
        statistics: STATS,
        create: |o| Ok(Box::new(Greedy { info: &COMM_SINK_WAITS, mode: Mode::SINK_WAITS, opts: options(o)?, machine: crate::analysis::machine::from_option(o.get_str("machine"))? })),
    }
);

commlir_ir::register_pass!(
    /// `comm-raise-comms`.
    pub COMM_RAISE_COMMS = PassInfo {
        argument: "comm-raise-comms",
        name: "CommRaiseComms",
        summary: "Greedily schedule collectives as early as possible",
        description: "List scheduling by (smallest index of the collectives an op must \
            precede, original position): the ops a collective needs run as early as possible, \
            then the collective. Keeps dependencies, the per-group collective order and the \
            peak-memory budget (a schedule beyond it is dropped).",
        anchor: Anchor::FUNC,
        options: OPTIONS,
        statistics: STATS,
        create: |o| Ok(Box::new(Greedy { info: &COMM_RAISE_COMMS, mode: Mode::RAISE_COMMS, opts: options(o)?, machine: crate::analysis::machine::from_option(o.get_str("machine"))? })),
    }
);

commlir_ir::register_pass!(
    /// `comm-reorder-compute-for-overlap`.
    pub COMM_REORDER_COMPUTE_FOR_OVERLAP = PassInfo {
        argument: "comm-reorder-compute-for-overlap",
        name: "CommReorderComputeForOverlap",
        summary: "Raise collectives, sink waits and schedule compute to overlap each collective",
        description: "The raise-comms and sink-waits scores together; after each collective, \
            ready compute (smallest score first) is scheduled until its estimated runtime \
            covers the collective's (cost model or `cost_ns`). Keeps dependencies, the \
            per-group collective order and the peak-memory budget.",
        anchor: Anchor::FUNC,
        options: OPTIONS,
        statistics: STATS,
        create: |o| Ok(Box::new(Greedy { info: &COMM_REORDER_COMPUTE_FOR_OVERLAP, mode: Mode::OVERLAP, opts: options(o)?, machine: crate::analysis::machine::from_option(o.get_str("machine"))? })),
    }
);
