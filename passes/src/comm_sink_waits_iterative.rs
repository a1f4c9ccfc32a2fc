//! `comm-sink-waits-iterative`: moves each wait later, one op at a time, without raising peak
//! memory beyond a budget — Inductor's `sink_waits_iterative`.
//!
//! Waits are taken right to left. Each starts as a group of one; the op after the group is the
//! *candidate*:
//!
//! - an async collective stops it (the seed's conservative default: bucketing, not sinking,
//!   should make room) unless `unsafe-collective-reorder=true`; an op with unknown effects or
//!   the terminator stops it too;
//! - if the candidate depends on the group (or both hold collectives), the candidate joins
//!   the group when it may (not a wait, not an async collective; without
//!   `use-runtime-estimates` not a collective nor a matmul either), else the wait stops;
//! - with `use-runtime-estimates`, the wait stops once the compute between its collective and
//!   it covers the collective's estimated time (twice with `extra-overlap`), before a wait
//!   whose collective would lose overlap, or when passing compute would expose the
//!   collectives in the group more than it hides this one;
//! - otherwise the candidate moves before the group, within `(1 + peak-memory-budget) ×` the
//!   input's peak.
//!
//! Difference from the seed: its trade-off test for compute candidates drops the gain term
//! (a stray line break turns `- max(...)` into a statement of its own) and then stops exactly
//! when the move *helps*; here the move is refused when the net exposure grows.

use crate::comm_reorder_peak_memory::{run_iterative, STATS};
use crate::schedule::iterative::{
    setup, try_move_before, verify_against_recompute, IterOptions, MoveInfo, Setup, OPTIONS,
};
use crate::schedule::{self, CostTable, DepGraph, Limit, NodeKind, NONE};
use commlir_ir::pass::{Anchor, Pass, PassEnv, PassInfo, PassOptions};
use commlir_ir::{Context, Diagnostic, OpId};

/// Runs the pass on `func`; returns the statistics of every wait processed, right to left.
pub fn sink_waits_iterative(ctx: &mut Context, func: OpId, opts: &IterOptions) -> Vec<MoveInfo> {
    sink_waits_iterative_with(ctx, func, opts, None)
}

/// [`sink_waits_iterative`] with the op costs of the function body when the caller has them.
pub fn sink_waits_iterative_with(
    ctx: &mut Context,
    func: OpId,
    opts: &IterOptions,
    costs: Option<&CostTable>,
) -> Vec<MoveInfo> {
    let (infos, order) = plan_sink_waits_iterative(ctx, func, opts, costs);
    if let Some(order) = order {
        schedule::apply_op_order(ctx, order);
    }
    infos
}

/// [`sink_waits_iterative_with`] without writing the result: the statistics and the body's ops in their new
/// order (`None` when there is nothing to move), for the do-no-harm guard to judge first.
pub fn plan_sink_waits_iterative(
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
    }) = setup(ctx, func, opts, costs, NodeKind::Wait)
    else {
        return (Vec::new(), None);
    };
    // Estimated compute overlapping each collective, indexed by the collective's node; for a
    // wait, the window of its collective is what matters.
    let mut comp = vec![0.0f64; graph.len()];
    for w in 0..graph.len() as u32 {
        let c = graph.coll_of_wait[w as usize];
        if graph.kind[w as usize] == NodeKind::Wait
            && c != NONE
            && graph.wait_of_coll[c as usize] == w
        {
            comp[c as usize] = windows.before_wait(&graph, w);
        }
    }
    // `needs[s] == w`: `s` depends on some node of `w`'s group (stamped as nodes join, so
    // that testing a candidate is O(1) rather than a scan of its predecessors).
    let mut needs = vec![NONE; graph.len()];
    let mut processed = vec![false; graph.len()];
    let mut group_colls: Vec<u32> = Vec::new();
    let mut infos = Vec::new();
    let extra = opts.extra_factor();

    let mut cur = list.tail;
    while cur != NONE {
        let prev_cur = list.prev[cur as usize];
        if graph.kind[cur as usize] != NodeKind::Wait || processed[cur as usize] {
            cur = prev_cur;
            continue;
        }
        processed[cur as usize] = true;
        let w = cur;
        let coll = graph.coll_of_wait[w as usize];
        let comm = if coll == NONE { 0.0 } else { rt[coll as usize] };
        // The window belongs to the collective; waits other than its first share it.
        let own = coll != NONE && graph.wait_of_coll[coll as usize] == w;
        let comp_of = |comp: &[f64]| if own { comp[coll as usize] } else { 0.0 };
        let mut info = MoveInfo::new(graph.ops[w as usize], comm, comp_of(&comp));
        for &s in graph.succs(w) {
            needs[s as usize] = w;
        }
        let mut group_tail = w;
        // The group is the tracker's run: it only grows at its tail (a moved candidate goes
        // before it), and `w` stays its first node.
        mem.run_start(w);
        let mut group_has_coll = false;
        group_colls.clear();
        let mut group_runtime = 0.0;
        let mut cand = list.next[w as usize];
        while cand != NONE {
            if opts.out_of_moves(info.moves) {
                info.limit = Limit::MoveLimit;
                break;
            }
            let ci = cand as usize;
            if graph.kind[ci] == NodeKind::Fixed {
                info.limit = Limit::FixedOp;
                info.blocker = Some(graph.ops[ci]);
                break;
            }
            if opts.use_runtime_estimates && comm - comp_of(&comp) < -extra * comm {
                info.limit = Limit::Unexposed;
                break;
            }
            if !opts.unsafe_collective_reorder && graph.is_async_collective(cand) {
                info.limit = Limit::CollectiveOrder;
                info.blocker = Some(graph.ops[ci]);
                break;
            }
            let data_dep = needs[ci] == w;
            let both_colls = group_has_coll && graph.kind[ci] == NodeKind::Collective;
            if data_dep || both_colls {
                let groupable = graph.kind[ci] != NodeKind::Wait
                    && !graph.is_async_collective(cand)
                    && (opts.use_runtime_estimates
                        || (graph.kind[ci] != NodeKind::Collective && !graph.gemm_like[ci]));
                if groupable {
                    for &s in graph.succs(cand) {
                        needs[s as usize] = w;
                    }
                    group_tail = cand;
                    mem.run_push_back(cand);
                    if graph.kind[ci] == NodeKind::Collective {
                        group_has_coll = true;
                        group_colls.push(cand);
                    } else {
                        group_runtime += rt[ci];
                    }
                    info.grouped += 1;
                    cand = list.next[ci];
                    continue;
                }
                if data_dep || !opts.unsafe_collective_reorder {
                    info.limit = if data_dep {
                        Limit::DataDependency
                    } else {
                        Limit::CollectiveOrder
                    };
                    info.blocker = Some(graph.ops[ci]);
                    break;
                }
            }
            if opts.use_runtime_estimates
                && !tradeoff_ok(
                    &graph,
                    &rt,
                    &comp,
                    comm,
                    comp_of(&comp),
                    cand,
                    &group_colls,
                    group_runtime,
                )
            {
                info.limit = Limit::ExposureTradeoff;
                info.blocker = Some(graph.ops[ci]);
                break;
            }
            debug_assert!({
                let mut s = Vec::new();
                list.segment(w, group_tail, &mut s);
                s.iter().eq(mem.run_members())
            });
            if !try_move_before(&mut mem, &mut list, cand, w, limit) {
                info.limit = Limit::PeakMemory;
                info.blocker = Some(graph.ops[ci]);
                break;
            }
            info.moves += 1;
            // The candidate now sits between this wait's collective and the wait.
            match graph.kind[ci] {
                NodeKind::Collective => comp[ci] += group_runtime,
                NodeKind::Wait => {
                    let oc = graph.coll_of_wait[ci];
                    if oc != NONE {
                        comp[oc as usize] -= group_runtime;
                    }
                    if own {
                        comp[coll as usize] += rt[ci];
                    }
                }
                _ => {
                    if own {
                        comp[coll as usize] += rt[ci];
                    }
                }
            }
            if graph.kind[ci] != NodeKind::Collective {
                for &gc in &group_colls {
                    comp[gc as usize] -= rt[ci];
                }
            }
            if opts.verify_memory {
                verify_against_recompute(ctx, block, &graph, &list, &mem);
            }
            cand = list.next[group_tail as usize];
        }
        mem.run_finish();
        info.final_comp_ns = comp_of(&comp);
        infos.push(info);
        cur = prev_cur;
    }
    (infos, Some(list.ops(&graph)))
}

/// With runtime estimates: whether moving `cand` before the group is worth it.
#[allow(clippy::too_many_arguments)]
fn tradeoff_ok(
    graph: &DepGraph,
    rt: &[f64],
    comp: &[f64],
    comm: f64,
    own_comp: f64,
    cand: u32,
    group_colls: &[u32],
    group_runtime: f64,
) -> bool {
    let exposed = |comm: f64, comp: f64| (comm - comp).max(0.0);
    let ci = cand as usize;
    if graph.kind[ci] == NodeKind::Wait {
        // Its collective is before the group: the group leaves that collective's window.
        let oc = graph.coll_of_wait[ci];
        if oc != NONE {
            let (c, cc) = (rt[oc as usize], comp[oc as usize]);
            if exposed(c, cc - group_runtime) > exposed(c, cc) {
                return false;
            }
        }
    }
    if graph.is_async_collective(cand) {
        return true;
    }
    let r = rt[ci];
    if r <= 0.0 || group_colls.is_empty() {
        return true;
    }
    // Net change of exposure: this wait gains `r` of overlap, each collective in the group
    // loses `r`.
    let mut delta = exposed(comm, own_comp + r) - exposed(comm, own_comp);
    for &g in group_colls {
        delta += exposed(rt[g as usize], comp[g as usize] - r)
            - exposed(rt[g as usize], comp[g as usize]);
    }
    delta <= 0.0
}

commlir_ir::register_pass!(
    /// `comm-sink-waits-iterative`.
    pub COMM_SINK_WAITS_ITERATIVE = PassInfo {
        argument: "comm-sink-waits-iterative",
        name: "CommSinkWaitsIterative",
        summary: "Move waits later, one op at a time, within a peak-memory budget",
        description: "Inductor's sink_waits_iterative: each wait moves later past independent \
            ops, dragging along the ops that depend on it where allowed, until a collective, a \
            dependency, the peak-memory budget or (with use-runtime-estimates) enough overlap \
            stops it.",
        anchor: Anchor::FUNC,
        options: OPTIONS,
        statistics: STATS,
        create: |o: &PassOptions| Ok(Box::new(SinkWaitsIterative(
            IterOptions::from_pass_options(o)?,
            crate::analysis::machine::from_option(o.get_str("machine"))?,
        ))),
    }
);

/// The options and the `machine` option's machine (`None`: the module's or the default).
struct SinkWaitsIterative(IterOptions, Option<crate::analysis::cost::Machine>);

impl Pass for SinkWaitsIterative {
    fn info(&self) -> &'static PassInfo {
        &COMM_SINK_WAITS_ITERATIVE
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
            "comm-sink-waits-iterative",
            plan_sink_waits_iterative,
        )
    }
}
