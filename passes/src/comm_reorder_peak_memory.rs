//! `comm-reorder-peak-memory`: moves each asynchronous collective earlier, one op at a time,
//! without raising peak memory beyond a budget — Inductor's
//! `reorder_communication_preserving_peak_memory`.
//!
//! Collectives are taken left to right. Each starts as a group of one; the op before the group
//! is the *candidate*:
//!
//! - another collective stops it ("collective ordering", SPMD safety) unless
//!   `unsafe-collective-reorder=true`; an op with unknown effects stops it too;
//! - if the group depends on the candidate, the candidate joins the group when it may (not an
//!   async collective; not a matmul unless `use-runtime-estimates`), else the collective stops
//!   ("data dependency");
//! - with `use-runtime-estimates`, the collective stops once the compute between it and its
//!   wait covers its estimated time (twice with `extra-overlap`), or when moving past the
//!   candidate would expose the collectives whose waits are in the group more than it hides
//!   this one;
//! - otherwise the candidate moves after the group, if the memory levels stay within
//!   `(1 + peak-memory-budget) ×` the input's peak ("peak memory" stops it otherwise).
//!
//! Memory levels are updated per move in O(1) ([`MemoryTracker`]'s runs); the estimated
//! compute overlapping each collective comes from prefix sums over the input order and is then
//! updated per move, rather than by walking the list after every swap as the seed does.

use crate::analysis::cost::Machine;
use crate::schedule::iterative::{
    setup, try_move_after, verify_against_recompute, IterOptions, MoveInfo, Setup, OPTIONS,
};
use crate::schedule::{self, CostTable, DepGraph, Limit, NodeKind, NONE};
use commlir_ir::pass::{Anchor, Pass, PassEnv, PassInfo, PassOptions, StatisticDef};
use commlir_ir::{Context, Diagnostic, OpId};

/// Runs the pass on `func`; returns the statistics of every collective processed, in order.
pub fn reorder_peak_memory(ctx: &mut Context, func: OpId, opts: &IterOptions) -> Vec<MoveInfo> {
    reorder_peak_memory_with(ctx, func, opts, None)
}

/// [`reorder_peak_memory`] with the op costs of the function body when the caller has them.
pub fn reorder_peak_memory_with(
    ctx: &mut Context,
    func: OpId,
    opts: &IterOptions,
    costs: Option<&CostTable>,
) -> Vec<MoveInfo> {
    let (infos, order) = plan_reorder_peak_memory(ctx, func, opts, costs);
    if let Some(order) = order {
        schedule::apply_op_order(ctx, order);
    }
    infos
}

/// [`reorder_peak_memory_with`] without writing the result: the statistics and the body's ops in their new
/// order (`None` when there is nothing to move), for the do-no-harm guard to judge first.
pub fn plan_reorder_peak_memory(
    ctx: &mut Context,
    func: OpId,
    opts: &IterOptions,
    costs: Option<&CostTable>,
) -> (Vec<MoveInfo>, Option<Vec<OpId>>) {
    let Some(Setup {
        block,
        graph,
        rt,
        windows,
        mut mem,
        limit,
        mut list,
    }) = setup(ctx, func, opts, costs, NodeKind::Collective)
    else {
        return (Vec::new(), None);
    };
    // Estimated compute overlapping each async collective, kept current as things move.
    let mut comp: Vec<f64> = (0..graph.len() as u32)
        .map(|c| {
            if graph.is_async_collective(c) {
                windows.after_collective(&graph, c)
            } else {
                0.0
            }
        })
        .collect();
    // `needed[p] == c`: some node of `c`'s group depends on `p` (stamped as nodes join, so
    // that testing a candidate is O(1) rather than a scan of its successors).
    let mut needed = vec![NONE; graph.len()];
    let mut group_colls: Vec<u32> = Vec::new();
    let mut infos = Vec::new();
    let extra = opts.extra_factor();

    let mut cur = list.head;
    while cur != NONE {
        let next_cur = list.next[cur as usize];
        if !graph.is_async_collective(cur) {
            cur = next_cur;
            continue;
        }
        let c = cur;
        let mut info = MoveInfo::new(graph.ops[c as usize], rt[c as usize], comp[c as usize]);
        for &p in graph.preds(c) {
            needed[p as usize] = c;
        }
        let mut group_head = c;
        // The group is the tracker's run: it only grows at its head (a moved candidate goes
        // after it), and `c` stays its last node.
        mem.run_start(c);
        // Collectives whose waits joined the group: moving the group earlier shrinks their
        // overlap window.
        group_colls.clear();
        let mut group_runtime = 0.0;
        let mut cand = list.prev[c as usize];
        while cand != NONE {
            if opts.out_of_moves(info.moves) {
                info.limit = Limit::MoveLimit;
                break;
            }
            let ci = cand as usize;
            if opts.use_runtime_estimates
                && rt[c as usize] - comp[c as usize] < -extra * rt[c as usize]
            {
                info.limit = Limit::Unexposed;
                break;
            }
            if graph.kind[ci] == NodeKind::Fixed {
                info.limit = Limit::FixedOp;
                info.blocker = Some(graph.ops[ci]);
                break;
            }
            if !opts.unsafe_collective_reorder && graph.kind[ci] == NodeKind::Collective {
                info.limit = Limit::CollectiveOrder;
                info.blocker = Some(graph.ops[ci]);
                break;
            }
            let data_dep = needed[ci] == c;
            if data_dep {
                let groupable = !graph.is_async_collective(cand)
                    && (opts.use_runtime_estimates || !graph.gemm_like[ci]);
                if !groupable {
                    info.limit = Limit::DataDependency;
                    info.blocker = Some(graph.ops[ci]);
                    break;
                }
                for &p in graph.preds(cand) {
                    needed[p as usize] = c;
                }
                group_head = cand;
                mem.run_push_front(cand);
                if graph.kind[ci] == NodeKind::Wait && graph.coll_of_wait[ci] != NONE {
                    group_colls.push(graph.coll_of_wait[ci]);
                }
                if !graph.is_async_collective(cand) {
                    group_runtime += rt[ci];
                }
                info.grouped += 1;
                cand = list.prev[ci];
                continue;
            }
            if opts.use_runtime_estimates
                && !tradeoff_ok(&graph, &rt, &comp, c, cand, &group_colls, group_runtime)
            {
                info.limit = Limit::ExposureTradeoff;
                info.blocker = Some(graph.ops[ci]);
                break;
            }
            debug_assert!({
                let mut s = Vec::new();
                list.segment(group_head, c, &mut s);
                s.iter().eq(mem.run_members())
            });
            if !try_move_after(&mut mem, &mut list, cand, c, limit) {
                info.limit = Limit::PeakMemory;
                info.blocker = Some(graph.ops[ci]);
                break;
            }
            info.moves += 1;
            // The candidate now sits between the collective and its wait.
            match graph.kind[ci] {
                NodeKind::Collective if graph.blocking[ci] => comp[c as usize] = 0.0,
                NodeKind::Collective => comp[ci] -= group_runtime,
                NodeKind::Wait => {
                    comp[c as usize] += rt[ci];
                    if graph.coll_of_wait[ci] != NONE {
                        comp[graph.coll_of_wait[ci] as usize] += group_runtime;
                    }
                }
                _ => comp[c as usize] += rt[ci],
            }
            if graph.kind[ci] != NodeKind::Collective {
                for &gc in &group_colls {
                    comp[gc as usize] -= rt[ci];
                }
            }
            if opts.verify_memory {
                verify_against_recompute(ctx, block, &graph, &list, &mem);
            }
            cand = list.prev[group_head as usize];
        }
        mem.run_finish();
        info.final_comp_ns = comp[c as usize];
        infos.push(info);
        cur = next_cur;
    }
    (infos, Some(list.ops(&graph)))
}

/// With runtime estimates: whether moving the group past `cand` is worth it (Inductor's
/// exposure accounting). Passing compute hides more of this collective but shrinks the
/// windows of the collectives whose waits are in the group; passing an async collective
/// (unsafe mode) puts the group's compute out of that collective's window.
fn tradeoff_ok(
    graph: &DepGraph,
    rt: &[f64],
    comp: &[f64],
    c: u32,
    cand: u32,
    group_colls: &[u32],
    group_runtime: f64,
) -> bool {
    let exposed = |comm: f64, comp: f64| (comm - comp).max(0.0);
    let ci = cand as usize;
    if !graph.is_async_collective(cand) {
        let r = rt[ci];
        if r <= 0.0 || group_colls.is_empty() {
            return true;
        }
        let (comm, cc) = (rt[c as usize], comp[c as usize]);
        let mut delta = exposed(comm, cc + r) - exposed(comm, cc);
        for &g in group_colls {
            let (gcomm, gcomp) = (rt[g as usize], comp[g as usize]);
            delta += exposed(gcomm, gcomp - r) - exposed(gcomm, gcomp);
        }
        delta <= 0.0
    } else {
        group_runtime <= 0.0
            || exposed(rt[ci], comp[ci] - group_runtime) <= exposed(rt[ci], comp[ci])
    }
}

commlir_ir::register_pass!(
    /// `comm-reorder-peak-memory`.
    pub COMM_REORDER_PEAK_MEMORY = PassInfo {
        argument: "comm-reorder-peak-memory",
        name: "CommReorderPeakMemory",
        summary: "Move collectives earlier, one op at a time, within a peak-memory budget",
        description: "Inductor's reorder_communication_preserving_peak_memory: each async \
            collective moves earlier past independent ops, dragging along the ops it depends \
            on where allowed, until a collective, a dependency, the peak-memory budget or \
            (with use-runtime-estimates) enough overlap stops it.",
        anchor: Anchor::FUNC,
        options: OPTIONS,
        statistics: STATS,
        create: |o: &PassOptions| Ok(Box::new(ReorderPeakMemory(
            IterOptions::from_pass_options(o)?,
            crate::analysis::machine::from_option(o.get_str("machine"))?,
        ))),
    }
);

/// The statistics of both iterative passes.
pub(crate) const STATS: &[StatisticDef] = &[
    StatisticDef::new("processed", "Collectives (or waits) processed"),
    StatisticDef::new(
        "reverted",
        "Reorderings undone because the timeline got slower",
    ),
    StatisticDef::new("moves", "Ops moved past"),
    StatisticDef::new("grouped", "Ops moved along as a group"),
    StatisticDef::new("limited-by-moves", "Stopped after max-moves moves"),
    StatisticDef::new("limited-by-none", "Stopped at the block boundary"),
    StatisticDef::new("limited-by-data", "Stopped by a data dependency"),
    StatisticDef::new("limited-by-collective", "Stopped by another collective"),
    StatisticDef::new("limited-by-fixed", "Stopped by an op with unknown effects"),
    StatisticDef::new("limited-by-memory", "Stopped by the peak-memory budget"),
    StatisticDef::new(
        "limited-by-overlap",
        "Stopped once unexposed (runtime estimates)",
    ),
    StatisticDef::new(
        "limited-by-tradeoff",
        "Stopped to avoid exposing other collectives",
    ),
    StatisticDef::new(
        "exposed-ns-before",
        "Estimated exposed communication before (ns)",
    ),
    StatisticDef::new(
        "exposed-ns-after",
        "Estimated exposed communication after (ns)",
    ),
];

/// An iterative scheduler without its write-back: statistics and the body's new op order.
pub(crate) type Planner =
    fn(&mut Context, OpId, &IterOptions, Option<&CostTable>) -> (Vec<MoveInfo>, Option<Vec<OpId>>);

/// The `run` of both iterative passes: `plan` judged by the do-no-harm guard (written directly
/// with `revert-if-slower=false`), then statistics, annotations, and the unchanged mark.
pub(crate) fn run_iterative(
    ctx: &mut Context,
    op: OpId,
    opts: &IterOptions,
    machine: &Machine,
    env: &mut PassEnv<'_>,
    pass: &str,
    plan: Planner,
) -> Result<(), Diagnostic> {
    let (infos, reverted) = if opts.revert_if_slower {
        crate::schedule::guard::keep_if_not_slower(
            ctx,
            op,
            machine,
            Some(&mut *env),
            !opts.annotate,
            |ctx, costs| plan(ctx, op, opts, costs),
        )
    } else {
        // The planner costs the ops on the pass's machine.
        let costs = schedule::body_block(ctx, op).map(|b| CostTable::new_on(ctx, machine, b));
        let (infos, order) = plan(ctx, op, opts, costs.as_ref());
        if let Some(order) = order {
            schedule::apply_op_order(ctx, order);
        }
        (infos, false)
    };
    report(ctx, &infos, opts, env);
    env.add_stat("reverted", u64::from(reverted));
    if opts.annotate && !reverted {
        for i in &infos {
            crate::schedule::iterative::annotate(ctx, pass, i);
        }
    }
    let annotated = opts.annotate && !reverted && !infos.is_empty();
    if !annotated {
        // Undone, or nothing moved: the body holds its ops in the input order, untouched.
        // Otherwise the pass only moved ops within the body, which the pass manager then
        // verifies for order alone (dominance, terminators).
        if reverted || infos.iter().all(|i| i.moves == 0) {
            env.mark_unchanged();
        } else {
            env.mark_reordered_only();
        }
    }
    Ok(())
}

/// Reports `infos` as statistics and, if asked, remarks.
pub(crate) fn report(ctx: &Context, infos: &[MoveInfo], opts: &IterOptions, env: &mut PassEnv<'_>) {
    env.add_stat("processed", infos.len() as u64);
    for i in infos {
        env.add_stat("moves", i.moves as u64);
        env.add_stat("grouped", i.grouped as u64);
        env.add_stat(i.limit.stat(), 1);
        env.add_stat(
            "exposed-ns-before",
            i.initial_exposed().max(0.0).round() as u64,
        );
        env.add_stat(
            "exposed-ns-after",
            i.final_exposed().max(0.0).round() as u64,
        );
        if opts.remarks {
            env.emit(Diagnostic::remark(ctx.op_loc(i.op), i.describe(ctx)));
        }
    }
}

/// The options and the `machine` option's machine (`None`: the module's or the default).
struct ReorderPeakMemory(IterOptions, Option<crate::analysis::cost::Machine>);

impl Pass for ReorderPeakMemory {
    fn info(&self) -> &'static PassInfo {
        &COMM_REORDER_PEAK_MEMORY
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let machine = crate::analysis::machine::for_op(ctx, op, self.1.as_ref())?;
        run_iterative(
            ctx,
            op,
            &self.0,
            &machine,
            env,
            "comm-reorder-peak-memory",
            plan_reorder_peak_memory,
        )
    }
}
