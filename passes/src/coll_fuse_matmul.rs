//! `coll-fuse-matmul`: fuses an all-gather with the matmuls that consume it, and a matmul
//! with the reduce-scatter of its product, into the pipelined `symm` ops (Inductor's
//! micro-pipeline TP pass, on `coll` IR).
//!
//! - `all_gather_into_tensor` → `wait_tensor` → views → `matmul(s)` with the gathered tensor
//!   as the left operand becomes one `symm.fused_all_gather_matmul` with one `b` per matmul,
//!   placed at the first matmul. Users of the gathered tensor other than those chains read the
//!   op's `return_a` result, so they must come after it: a user before the first matmul leaves
//!   the pattern alone.
//! - `matmul` → views → `reduce_scatter_tensor` → `wait_tensor` (every value on the way used
//!   only there) becomes `symm.fused_matmul_reduce_scatter` at the reduce-scatter.
//!
//! The views are `compute.reshape`s and layout-identity slice/concat groups (see
//! [`layout_identity_source`]): each keeps the row-major element order, so the all-gather's
//! rank blocks (G runs of `shard` elements) are the row blocks of the matmul's M×K operand
//! exactly when K divides `shard`, and the reduce-scatter's blocks are row blocks of the
//! M×N product exactly when G divides M. The fused op then works on the shard reshaped to
//! `shard/K × K` and its results are reshaped back, which moves no element.
//!
//! Only on groups with `symm_mem`. The fused op occupies the position of one collective of
//! the pattern and no collective lies between the old and the new position, so the order of
//! collectives on every group is unchanged. The sim semantics of the fused ops are the
//! unfused sequences, so results are bit-identical.
//!
//! Cost check (skipped with `ignore-cost`): both forms run the same matmuls, so the pass
//! compares what each leaves exposed on the compute stream once scheduled. The fused op
//! exposes its pipeline's time beyond the matmuls (`pipelined_ns − mm`, the chunked model of
//! [`pipelined_ns`]). The unfused sequence exposes the views the rewrite erases and the part
//! of its collective that no independent compute hides: `max(0, comm − hidden)`, where
//! `hidden` is the compute an overlap scheduler (`comm-overlap-schedule`) can run while the
//! collective is in flight — compute that neither needs the collective's result nor feeds
//! it, lying between the collectives issued just before and just after it in program order,
//! shared among the collectives in order ([`HidingBudget`], one linear pass over the block
//! built once per function; the collective order is fixed). A collective that is kept takes
//! its share; a fused one leaves it to the next. The overlap counts only when it covers at
//! least half the collective ([`MIN_HIDDEN_FRACTION`]); otherwise, or with
//! `overlap-aware=false` (for pipelines without an overlap scheduler), the check is the
//! serial `pipelined < mm + comm + views`. So a pattern alone in its function fuses exactly
//! when the pipeline beats the serial sequence, and one whose collective the schedule hides
//! anyway is left alone (statistic `kept-by-overlap`). Costs honour `cost_ns` overrides.

use crate::analysis::cost::{op_cost, pipelined_ns, Machine};
use crate::analysis::hiding::HidingBudget;
use crate::schedule::{body_block, CostTable};
use commlir_dialects::coll::group_of;
use commlir_dialects::shape::{int_attr, value_tensor_view};
use commlir_ir::pass::{
    Anchor, OptionDef, OptionKind, Pass, PassEnv, PassInfo, PassOptions, StatisticDef,
};
use commlir_ir::{Attr, BlockId, Builder, Context, Diagnostic, Loc, OpId, Trait, Value};

commlir_ir::register_pass!(
    /// `coll-fuse-matmul`.
    pub COLL_FUSE_MATMUL = PassInfo {
        argument: "coll-fuse-matmul",
        name: "CollFuseMatmul",
        summary: "Fuse all-gather→matmul and matmul→reduce-scatter into pipelined symm ops",
        description: "On groups with `symm_mem`: an all-gather whose waited result is the left \
            operand of matmuls becomes `symm.fused_all_gather_matmul` (one `b` per matmul; the \
            gathered tensor is returned for its other users), and a matmul whose product is only \
            reduce-scattered becomes `symm.fused_matmul_reduce_scatter`, when the cost model \
            says the pipeline exposes less than the unfused sequence once scheduled (its \
            collective hidden behind the independent compute next to it). Sees through reshapes and layout-identity slice/concat \
            groups where the rank blocks are whole rows of the matmul.",
        anchor: Anchor::FUNC,
        options: &[
            OptionDef::new(
                "ignore-cost",
                OptionKind::Bool,
                "false",
                "Fuse every pattern, even where the cost model says fusing loses",
            ),
            OptionDef::new(
                "overlap-aware",
                OptionKind::Bool,
                "true",
                "Compare with the unfused sequence as an overlap scheduler (comm-overlap-schedule) \
                 places it, collective hidden behind independent compute; false: run serially",
            ),
            crate::analysis::machine::MACHINE_OPTION,
        ],
        statistics: &[
            StatisticDef::new("fused-all-gather", "All-gathers fused with their matmuls"),
            StatisticDef::new("fused-reduce-scatter", "Matmuls fused with their reduce-scatters"),
            StatisticDef::new("kept-by-cost", "Patterns left alone because fusing loses"),
            StatisticDef::new(
                "kept-by-overlap",
                "Of those, patterns whose collective independent compute would hide",
            ),
            StatisticDef::new(
                "through-views",
                "Fused patterns with reshapes or slice/concat groups in between",
            ),
        ],
        create: |o: &PassOptions| Ok(Box::new(FuseMatmul {
            ignore_cost: o.get_bool("ignore-cost"),
            overlap_aware: o.get_bool("overlap-aware"),
            machine: crate::analysis::machine::from_option(o.get_str("machine"))?,
        })),
    }
);

struct FuseMatmul {
    ignore_cost: bool,
    /// Count the compute the scheduler can overlap with an unfused collective.
    overlap_aware: bool,
    /// The `machine` option's machine (`None`: the module's or the default).
    machine: Option<Machine>,
}

/// What one run did.
#[derive(Default)]
struct Stats {
    all_gather: u64,
    reduce_scatter: u64,
    kept_by_cost: u64,
    kept_by_overlap: u64,
    through_views: u64,
}

impl Pass for FuseMatmul {
    fn info(&self) -> &'static PassInfo {
        &COLL_FUSE_MATMUL
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let mut stats = Stats::default();
        if let Some(block) = body_block(ctx, op) {
            let machine = crate::analysis::machine::for_op(ctx, op, self.machine.as_ref())?;
            fuse_block(ctx, block, &machine, self, &mut stats);
        }
        env.add_stat("fused-all-gather", stats.all_gather);
        env.add_stat("fused-reduce-scatter", stats.reduce_scatter);
        env.add_stat("kept-by-cost", stats.kept_by_cost);
        env.add_stat("kept-by-overlap", stats.kept_by_overlap);
        env.add_stat("through-views", stats.through_views);
        Ok(())
    }
}

fn fuse_block(
    ctx: &mut Context,
    block: BlockId,
    machine: &Machine,
    opts: &FuseMatmul,
    stats: &mut Stats,
) {
    let candidates: Vec<OpId> = ctx
        .block_ops(block)
        .filter(|&o| {
            matches!(
                ctx.op_name(o),
                "coll.all_gather_into_tensor" | "coll.reduce_scatter_tensor"
            )
        })
        .collect();
    // What the scheduler can hide of each collective, on the block as it was before the
    // first rewrite (a rewrite touches only the ops of a pattern already decided, before the
    // next candidate); built at the first matched pattern.
    let mut budget: Option<HidingBudget> = None;
    for op in candidates {
        let Some(plan) = (match ctx.op_name(op) {
            "coll.all_gather_into_tensor" => match_all_gather(ctx, block, op),
            _ => match_reduce_scatter(ctx, block, op),
        }) else {
            continue;
        };
        if !opts.ignore_cost {
            let hidden = if opts.overlap_aware {
                budget
                    .get_or_insert_with(|| {
                        HidingBudget::new(ctx, block, &CostTable::new_on(ctx, machine, block))
                    })
                    .hideable(op)
                    .unwrap_or(0.0)
            } else {
                0.0
            };
            let verdict = plan.verdict(ctx, machine, hidden);
            if let Some(budget) = budget.as_mut() {
                // A kept collective takes its share of the compute; a fused one leaves it to
                // the collectives after it.
                budget.settle(op, verdict != Verdict::Fuse);
            }
            match verdict {
                Verdict::Fuse => {}
                Verdict::KeepSerial => {
                    stats.kept_by_cost += 1;
                    continue;
                }
                Verdict::KeepHidden => {
                    stats.kept_by_cost += 1;
                    stats.kept_by_overlap += 1;
                    continue;
                }
            }
        }
        if !plan.views.is_empty() {
            stats.through_views += 1;
        }
        if plan.gather {
            stats.all_gather += 1;
        } else {
            stats.reduce_scatter += 1;
        }
        plan.apply(ctx);
    }
}

/// The least part of an unfused collective that independent compute must be able to hide for
/// the overlap to count. The budget is an idealized placement (no memory limit, compute moved
/// exactly where it helps); where it covers only part of a collective, the collective stays
/// mostly exposed, the verdict would turn on a few microseconds of estimated overlap that the
/// scheduler may not realize, and the pipeline's known gain over the serial sequence decides.
pub const MIN_HIDDEN_FRACTION: f64 = 0.5;

/// The cost check's answer for one pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// The pipeline exposes less than the unfused sequence: fuse.
    Fuse,
    /// The pipeline loses even to the unfused sequence run serially.
    KeepSerial,
    /// The pipeline would beat the serial sequence, but independent compute hides enough of
    /// the unfused collective that it loses to the scheduled sequence.
    KeepHidden,
}

/// A matched pattern and how to rewrite it.
struct Plan {
    gather: bool,
    /// The collective and its wait.
    coll: OpId,
    wait: OpId,
    /// The matmuls folded in, in program order.
    matmuls: Vec<OpId>,
    /// The fused op goes right before this op.
    at: OpId,
    /// All-gather side: the waited result keeps users after the rewrite.
    return_a: bool,
    /// The contraction dimension K of the fused op's `a` (gather side) or the product's
    /// width N (reduce-scatter side).
    width: i64,
    /// The view ops between the collective and the matmuls that the rewrite erases, in
    /// program order (reshapes, and the slices and concat of layout-identity groups).
    views: Vec<OpId>,
    /// Pure ops defining a `b` after `at` whose operands exist before the all-gather: they
    /// move up to `at` (program order), so that their matmul can join the fused op.
    hoist: Vec<OpId>,
}

/// The group of collective `op`, if it enables symmetric memory (and its size).
fn symm_group_size(ctx: &Context, op: OpId) -> Option<u64> {
    group_of(ctx, op)
        .ok()
        .filter(|g| g.symm_mem)
        .map(|g| g.size.max(1) as u64)
}

/// The only user of `v`, if it is a `coll.wait_tensor` in `block`.
fn sole_wait(ctx: &Context, block: BlockId, v: Value) -> Option<OpId> {
    match ctx.uses(v) {
        [u] if ctx.op_name(u.op) == "coll.wait_tensor" && ctx.op_parent(u.op) == Some(block) => {
            Some(u.op)
        }
        _ => None,
    }
}

fn is_matrix(ctx: &Context, v: Value) -> bool {
    value_tensor_view(ctx, v).is_some_and(|t| t.shape.len() == 2)
}

fn shape_of(ctx: &Context, v: Value) -> Option<Vec<i64>> {
    value_tensor_view(ctx, v).map(|t| t.shape.to_vec())
}

fn numel(ctx: &Context, v: Value) -> Option<i64> {
    value_tensor_view(ctx, v).and_then(|t| t.checked_numel())
}

/// Whether `v` is available right before `at` (in `block`).
fn available_before(ctx: &Context, block: BlockId, v: Value, at: OpId) -> bool {
    match ctx.defining_op(v) {
        None => ctx.value_block(v) == Some(block),
        Some(d) => ctx.op_parent(d) == Some(block) && ctx.is_before_in_block(d, at),
    }
}

/// Whether a collective lies strictly between `from` and `to` (program order, same block).
fn collective_between(ctx: &Context, from: OpId, to: OpId) -> bool {
    let mut cur = ctx.next_op(from);
    while let Some(o) = cur {
        if o == to {
            return false;
        }
        if ctx.op_has_trait(o, Trait::Collective) {
            return true;
        }
        cur = ctx.next_op(o);
    }
    false
}

/// Sorts ops of one block into program order and drops duplicates.
fn sort_program_order(ctx: &Context, ops: &mut Vec<OpId>) {
    ops.sort_by(|a, b| {
        if a == b {
            std::cmp::Ordering::Equal
        } else if ctx.is_before_in_block(*a, *b) {
            std::cmp::Ordering::Less
        } else {
            std::cmp::Ordering::Greater
        }
    });
    ops.dedup();
}

/// If `concat` (a `compute.concat` in `block`) is a layout-identity slice/concat group, the
/// sliced tensor `x`; the group is `concat(slice(x, d, 0, s₀), slice(x, d, s₀, s₁), …)` along
/// dim `c` with the slices consecutive and covering `x`'s dim `d` in order, every slice used
/// only by this concat, `x`'s dims before `d` all 1 and the operands' dims before `c` all 1.
/// Then each slice is one contiguous run of `x`'s row-major elements (nothing varies above
/// `d`), the runs are in order, and the concat lays its operands end to end (nothing varies
/// above `c`): the result holds `x`'s elements in `x`'s row-major order, a reshape of `x`.
/// (PyTorch's sequence-parallel exports split the sequence dimension this way to stack the
/// reduce-scatter's rank blocks on dim 0.)
fn layout_identity_source(ctx: &Context, block: BlockId, concat: OpId) -> Option<Value> {
    if ctx.op_name(concat) != "compute.concat" || ctx.op_parent(concat) != Some(block) {
        return None;
    }
    let c = usize::try_from(int_attr(ctx, concat, "dim")?).ok()?;
    let mut x = None;
    let mut d = None;
    let mut next = 0i64;
    for (i, &o) in ctx.operands(concat).iter().enumerate() {
        let s = ctx.defining_op(o)?;
        if ctx.op_name(s) != "compute.slice" || ctx.op_parent(s) != Some(block) {
            return None;
        }
        match ctx.uses(o) {
            [u] if u.op == concat && u.index as usize == i => {}
            _ => return None,
        }
        let src = ctx.operand(s, 0);
        let sd = usize::try_from(int_attr(ctx, s, "dim")?).ok()?;
        if *x.get_or_insert(src) != src || *d.get_or_insert(sd) != sd {
            return None;
        }
        if int_attr(ctx, s, "start")? != next {
            return None;
        }
        next += int_attr(ctx, s, "size")?;
        let os = shape_of(ctx, o)?;
        if os.len() <= c || os[..c].iter().any(|&n| n != 1) {
            return None;
        }
    }
    let (x, d) = (x?, d?);
    let xs = shape_of(ctx, x)?;
    let covers = xs.len() > d && xs[d] == next && xs[..d].iter().all(|&n| n == 1);
    covers.then_some(x)
}

/// The layout-preserving view the value `v` flows into through its use by `op`, if any: a
/// `compute.reshape` (its result), or a slice whose concat is a layout-identity group of
/// `v` (the concat's result; the group's ops are `ops`).
fn view_step(ctx: &Context, block: BlockId, v: Value, op: OpId) -> Option<(Value, Vec<OpId>)> {
    if ctx.op_parent(op) != Some(block) {
        return None;
    }
    match ctx.op_name(op) {
        "compute.reshape" => Some((ctx.result(op, 0), vec![op])),
        "compute.slice" => {
            let s = ctx.result(op, 0);
            let [u] = ctx.uses(s) else { return None };
            let concat = u.op;
            (layout_identity_source(ctx, block, concat)? == v).then(|| {
                let mut ops: Vec<OpId> = ctx
                    .operands(concat)
                    .iter()
                    .filter_map(|&o| ctx.defining_op(o))
                    .collect();
                ops.push(concat);
                (ctx.result(concat, 0), ops)
            })
        }
        _ => None,
    }
}

/// Whether `op` defining a `b` may move up to the fused op: pure, in `block`, every operand
/// defined before the all-gather `ag` (so no value of the gathered tree, which the rewrite
/// erases or re-defines, feeds it).
fn hoistable(ctx: &Context, block: BlockId, op: OpId, ag: OpId) -> bool {
    ctx.op_parent(op) == Some(block)
        && ctx.op_has_trait(op, Trait::Pure)
        && ctx.op_regions(op).is_empty()
        && ctx
            .operands(op)
            .iter()
            .all(|&o| available_before(ctx, block, o, ag))
}

fn match_all_gather(ctx: &Context, block: BlockId, ag: OpId) -> Option<Plan> {
    let g = symm_group_size(ctx, ag)? as i64;
    if ctx.operands(ag).len() != 1 {
        return None;
    }
    let x = ctx.operand(ag, 0);
    let shard_elems = numel(ctx, x)?;
    let wait = sole_wait(ctx, block, ctx.result(ag, 0))?;
    let y = ctx.result(wait, 0);
    // Walk the views of `y`: every value reached holds the gathered elements in the gathered
    // row-major order, G rank blocks of `shard_elems` elements each.
    let mut views: Vec<OpId> = Vec::new();
    let mut lhs: Vec<(OpId, i64)> = Vec::new();
    let mut stack = vec![y];
    let mut seen = vec![y];
    while let Some(v) = stack.pop() {
        for u in ctx.uses(v) {
            if u.index == 0
                && ctx.op_name(u.op) == "compute.matmul"
                && ctx.op_parent(u.op) == Some(block)
            {
                if let Some([m, k]) = shape_of(ctx, v).as_deref() {
                    // Rank r's shard is rows [r·M/G, (r+1)·M/G) of the M×K matrix iff whole
                    // rows make up a shard.
                    if *k > 0 && shard_elems % k == 0 && *m == g * (shard_elems / k) {
                        lhs.push((u.op, *k));
                    }
                }
                continue;
            }
            if let Some((w, ops)) = view_step(ctx, block, v, u.op) {
                if !seen.contains(&w) {
                    seen.push(w);
                    stack.push(w);
                    views.extend(ops);
                }
            }
        }
    }
    let mut order: Vec<OpId> = lhs.iter().map(|l| l.0).collect();
    sort_program_order(ctx, &mut order);
    let at = *order.first()?;
    let k = lhs.iter().find(|l| l.0 == at)?.1;
    let a_elem = value_tensor_view(ctx, x)?.elem;
    let mut hoist = Vec::new();
    // One `a` of K columns serves every fused matmul; every `b` must exist where the fused op
    // goes (hoisting a pure op that defines it if need be); a matmul that fails stays.
    let matmuls: Vec<OpId> = order
        .into_iter()
        .filter(|&m| {
            let b = ctx.operand(m, 1);
            let same_k = lhs.iter().any(|l| l.0 == m && l.1 == k);
            let shapes_ok = is_matrix(ctx, b)
                && value_tensor_view(ctx, ctx.result(m, 0))
                    .is_some_and(|r| r.shape.len() == 2 && r.elem == a_elem)
                && value_tensor_view(ctx, b).is_some_and(|t| t.elem == a_elem);
            if !same_k || !shapes_ok {
                return false;
            }
            if available_before(ctx, block, b, at) {
                return true;
            }
            match ctx.defining_op(b) {
                Some(d) if hoistable(ctx, block, d, ag) => {
                    hoist.push(d);
                    true
                }
                _ => false,
            }
        })
        .collect();
    if matmuls.is_empty() {
        return None;
    }
    sort_program_order(ctx, &mut hoist);
    // The views left without users once the matmuls are gone are erased (to a fixpoint:
    // a reshape of a reshape dies with it).
    let mut dead: Vec<OpId> = matmuls.clone();
    loop {
        let before = dead.len();
        for &o in &views {
            if !dead.contains(&o)
                && ctx
                    .results(o)
                    .iter()
                    .all(|&r| ctx.uses(r).iter().all(|u| dead.contains(&u.op)))
            {
                dead.push(o);
            }
        }
        if dead.len() == before {
            break;
        }
    }
    let views: Vec<OpId> = views.into_iter().filter(|o| dead.contains(o)).collect();
    // The remaining users of `y` read the returned gathered tensor, which exists only from
    // `at` on.
    let others: Vec<OpId> = ctx
        .uses(y)
        .iter()
        .map(|u| u.op)
        .filter(|o| !dead.contains(o))
        .collect();
    if others
        .iter()
        .any(|&o| ctx.op_parent(o) != Some(block) || ctx.is_before_in_block(o, at))
    {
        return None;
    }
    // Moving the all-gather down to `at` must not pass another collective.
    if collective_between(ctx, ag, at) {
        return None;
    }
    let mut views = views;
    sort_program_order(ctx, &mut views);
    Some(Plan {
        gather: true,
        coll: ag,
        wait,
        matmuls,
        at,
        return_a: !others.is_empty(),
        width: k,
        views,
        hoist,
    })
}

fn match_reduce_scatter(ctx: &Context, block: BlockId, rs: OpId) -> Option<Plan> {
    let g = symm_group_size(ctx, rs)? as i64;
    // The fused op has no `prescale` (coll-fold-prescale runs after this pass, if at all).
    if ctx.operands(rs).len() != 1 || ctx.inherent_attr(rs, "prescale").is_some() {
        return None;
    }
    let op_ok = ctx
        .inherent_attr(rs, "reduce_op")
        .and_then(|a| ctx.attr_as_str(a))
        .is_some_and(|r| r == "sum" || r == "avg");
    if !op_ok {
        return None;
    }
    // Walk back from the reduce-scatter's input through views used only on this path.
    let mut views = Vec::new();
    let mut v = ctx.operand(rs, 0);
    // The ops allowed to use `v`: the next step towards the reduce-scatter.
    let mut users = vec![rs];
    let mm = loop {
        if ctx.uses(v).len() != users.len() || ctx.uses(v).iter().any(|u| !users.contains(&u.op)) {
            return None;
        }
        let d = ctx
            .defining_op(v)
            .filter(|&d| ctx.op_parent(d) == Some(block))?;
        match ctx.op_name(d) {
            "compute.matmul" => break d,
            "compute.reshape" => {
                views.push(d);
                users = vec![d];
                v = ctx.operand(d, 0);
            }
            "compute.concat" => {
                let src = layout_identity_source(ctx, block, d)?;
                views.push(d);
                users = ctx
                    .operands(d)
                    .iter()
                    .filter_map(|&o| ctx.defining_op(o))
                    .collect();
                views.extend(users.iter().copied());
                v = src;
            }
            _ => return None,
        }
    };
    if !is_matrix(ctx, ctx.operand(mm, 0)) || !is_matrix(ctx, ctx.operand(mm, 1)) {
        return None;
    }
    let [m, n] = shape_of(ctx, ctx.result(mm, 0))?[..] else {
        return None;
    };
    // Rank r receives the r-th of G equal runs of the product's row-major elements: whole
    // rows [r·M/G, (r+1)·M/G) iff G divides M (the reduce-scatter input has M·N elements).
    if g <= 0 || m % g != 0 || numel(ctx, ctx.operand(rs, 0))? != m * n {
        return None;
    }
    let wait = sole_wait(ctx, block, ctx.result(rs, 0))?;
    sort_program_order(ctx, &mut views);
    Some(Plan {
        gather: false,
        coll: rs,
        wait,
        matmuls: vec![mm],
        at: rs,
        return_a: false,
        width: n,
        views,
        hoist: Vec::new(),
    })
}

impl Plan {
    /// Whether to fuse, when independent compute can run for `hidden` ns while the unfused
    /// collective is in flight ([`HidingBudget`]). Both sides run the same matmuls; the
    /// difference is what each leaves exposed on the compute stream: the fused op its
    /// pipeline's time beyond the matmuls (`pipelined_ns − mm`), the unfused sequence the
    /// views the rewrite erases plus the part of the collective nothing hides
    /// (`max(0, comm − hidden)`). Overlap counts only when it covers at least
    /// [`MIN_HIDDEN_FRACTION`] of the collective; otherwise (and with `hidden = 0`) this is
    /// the serial comparison `pipelined < mm + comm + views`.
    fn verdict(&self, ctx: &Context, machine: &Machine, hidden: f64) -> Verdict {
        let g = symm_group_size(ctx, self.coll).unwrap_or(1);
        let mm: f64 = self
            .matmuls
            .iter()
            .map(|&m| op_cost(ctx, machine, m).ns())
            .sum();
        // The erased views (copies for the slices and concats) are part of the unfused cost.
        let views: f64 = self
            .views
            .iter()
            .map(|&v| op_cost(ctx, machine, v).ns())
            .sum();
        let comm = op_cost(ctx, machine, self.coll).ns();
        // The chunks cut the product's rows (dim 0 of the matmul's result).
        let rows = self
            .matmuls
            .first()
            .and_then(|&m| value_tensor_view(ctx, ctx.result(m, 0)))
            .and_then(|t| t.shape.first().copied())
            .unwrap_or(1) as f64;
        // What each rank ends up with of the product (a reduce-scatter's result).
        let chunk = value_tensor_view(ctx, ctx.result(self.coll, 0))
            .map_or(0, |t| t.shape.iter().product::<i64>()) as f64;
        let pipelined = pipelined_ns(machine, mm, comm, (g, rows, chunk), self.gather);
        if pipelined >= mm + comm + views {
            Verdict::KeepSerial
        } else if hidden >= MIN_HIDDEN_FRACTION * comm
            && pipelined >= mm + (comm - hidden).max(0.0) + views
        {
            Verdict::KeepHidden
        } else {
            Verdict::Fuse
        }
    }

    /// `v` reshaped to `shape` right before `at` (`v` itself when it has that shape).
    fn reshaped(ctx: &mut Context, v: Value, shape: &[i64], at: OpId, loc: Loc) -> Value {
        let t = value_tensor_view(ctx, v).expect("matched values are tensors");
        if t.shape == shape {
            return v;
        }
        let elem = t.elem;
        let ty = ctx.tensor_type(shape, elem);
        let mut b = Builder::before(ctx, at);
        b.loc = loc;
        let r = b.create("compute.reshape", &[v], &[ty], &[]);
        ctx.result(r, 0)
    }

    fn apply(&self, ctx: &mut Context) {
        let group: Attr = ctx
            .inherent_attr(self.coll, "group")
            .expect("matched collectives have a group");
        let loc = ctx.op_loc(self.coll);
        let x = ctx.operand(self.coll, 0);
        if self.gather {
            for &h in &self.hoist {
                ctx.move_before(h, self.at);
            }
            let y = ctx.result(self.wait, 0);
            let k = self.width;
            let shard = numel(ctx, x).expect("matched shards are tensors");
            let g = symm_group_size(ctx, self.coll).unwrap_or(1) as i64;
            // The shard as whole rows of K: gathering those along dim 0 lays the rank blocks
            // out exactly as the all-gather did.
            let a = Self::reshaped(ctx, x, &[shard / k, k], self.at, loc);
            let mut operands = vec![a];
            let mut types = Vec::new();
            if self.return_a {
                let elem = value_tensor_view(ctx, x).expect("tensor").elem;
                types.push(ctx.tensor_type(&[g * (shard / k), k], elem));
            }
            for &m in &self.matmuls {
                operands.push(ctx.operand(m, 1));
                types.push(ctx.value_type(ctx.result(m, 0)));
            }
            let mut attrs = vec![("group", group)];
            if self.return_a {
                let u = ctx.unit_attr();
                attrs.push(("return_a", u));
            }
            let mut b = Builder::before(ctx, self.at);
            b.loc = loc;
            let fused = b.create("symm.fused_all_gather_matmul", &operands, &types, &attrs);
            // Inserted before `at` (the first fused matmul, erased below), right after the
            // fused op.
            if self.return_a {
                let r = ctx.result(fused, 0);
                let shape = shape_of(ctx, y).expect("tensor");
                let r = Self::reshaped(ctx, r, &shape, self.at, loc);
                ctx.replace_all_uses(y, r);
            }
            let first = usize::from(self.return_a);
            for (i, &m) in self.matmuls.iter().enumerate() {
                let r = ctx.result(fused, first + i);
                ctx.replace_all_uses(ctx.result(m, 0), r);
            }
            for &m in &self.matmuls {
                ctx.erase_op(m);
            }
            for &v in self.views.iter().rev() {
                ctx.erase_op(v);
            }
            ctx.erase_op(self.wait);
            ctx.erase_op(self.coll);
        } else {
            let mm = self.matmuls[0];
            let (lhs, rhs) = (ctx.operand(mm, 0), ctx.operand(mm, 1));
            let reduce_op = ctx
                .inherent_attr(self.coll, "reduce_op")
                .expect("matched reduce-scatters have a reduce_op");
            let dim = ctx.int_attr(0, 64);
            let g = symm_group_size(ctx, self.coll).unwrap_or(1) as i64;
            let rows = shape_of(ctx, ctx.result(mm, 0)).expect("matrix")[0] / g;
            let elem = value_tensor_view(ctx, ctx.result(mm, 0))
                .expect("tensor")
                .elem;
            let ty = ctx.tensor_type(&[rows, self.width], elem);
            let mut b = Builder::before(ctx, self.at);
            b.loc = loc;
            let fused = b.create(
                "symm.fused_matmul_reduce_scatter",
                &[lhs, rhs],
                &[ty],
                &[
                    ("reduce_op", reduce_op),
                    ("scatter_dim", dim),
                    ("group", group),
                ],
            );
            let y = ctx.result(self.wait, 0);
            let shape = shape_of(ctx, y).expect("tensor");
            let r = ctx.result(fused, 0);
            let r = Self::reshaped(ctx, r, &shape, self.at, loc);
            ctx.replace_all_uses(y, r);
            ctx.erase_op(self.wait);
            ctx.erase_op(self.coll);
            for &v in self.views.iter().rev() {
                ctx.erase_op(v);
            }
            ctx.erase_op(mm);
        }
    }
}
