//! `coll-bucket`: merges runs of collectives of one kind on one group into coalesced ops, as
//! Inductor's and SimpleFSDP's bucketing do for FSDP's per-layer parameter all-gathers and
//! gradient reduce-scatters: one launch pays the collective's fixed latency once for the
//! whole bucket.
//!
//! | members | merged into |
//! |---|---|
//! | `coll.all_gather_into_tensor[_coalesced]` | `coll.all_gather_into_tensor_coalesced` |
//! | `coll.reduce_scatter_tensor[_coalesced]` | `coll.reduce_scatter_tensor_coalesced` |
//! | `coll.all_reduce[_coalesced]` | `coll.all_reduce_coalesced` |
//!
//! A *bucket* is a run of collectives of one kind, group and reduce op that are consecutive
//! among that group's collectives (so the order of collectives on every group is kept: SPMD
//! safety), each result waited by exactly one `coll.wait_tensor`. The merged op goes right
//! after the definition of its latest input, or where the first member was if that is later;
//! its waits go where the first of the members' waits was, and each old wait's uses read the
//! new wait of the same result. A member whose input is produced after some earlier member's
//! wait cannot join (the merged op would come after that wait): it starts a new bucket.
//!
//! Buckets grow greedily in program order, each group with its own open bucket. A member
//! joins when
//!
//! 1. the bucket stays within `bucket-bytes` (0: no cap);
//! 2. the two-stream timeline ([`crate::analysis::timeline`]) of the whole function in its
//!    traced order is not slower (merging saves the per-collective latency but delays the
//!    first members until the last input exists);
//! 3. the timeline of the *scheduled order* is not slower either: the order
//!    `comm-overlap-schedule` makes of the input at its default budget (computed once, with
//!    the bucket laid out in it by the same rule). In the traced order nothing overlaps, so
//!    merging always looks like a saving; once a scheduler prefetches each collective behind
//!    the compute before its use, a bucket is prefetched only whole: its first members arrive
//!    later, and on a comm stream shared with other groups (TP all-reduces between FSDP
//!    all-gathers) the bucket holds back their collectives. Judging each merge on the
//!    scheduled order too keeps the buckets that still pay after scheduling;
//! 4. the peak memory ([`crate::analysis::buffers`]) stays within `(1 + peak-memory-budget) ×`
//!    the input's (members that move earlier allocate their results earlier).
//!
//! `ignore-cost` drops tests 2 and 3 (size-capped bucketing, as Inductor's `bucket_cap_mb`);
//! the memory limit always holds.
//!
//! A trial merge is judged without building the op: the members are laid out together in a
//! virtual order, the earlier ones at no cost and the first member last with the merged
//! op's cost, so that the comm stream starts the bucket once every input is ready and ends it
//! when the merged op would (one merged node, to the evaluation); the waits are laid out
//! together too, the first member's first.
//! Reduce-scatters bucket only with others of the same `prescale` (the merged op has one).
//! Collectives carrying attributes other than `group`, `reduce_op` and `prescale` (a `cost_ns`
//! override, a pinned order) are left alone: the merged op would have no faithful value for
//! them. So are all-reduces on groups with `symm_mem`: `coll-to-comm` lowers each of those
//! to NCCL or a blocking symm kernel, whichever the cost model prefers, which a coalesced
//! all-reduce (NCCL only) would preempt.
//!
//! Peak memory is checked twice, against the input's under the same model: at the `coll`
//! level ([`BufferModel`]), and as `coll-to-comm` will lower the function, where arguments
//! and waited values are copied into comm buffers before a collective reads them and a
//! returned result is copied out at its wait (a merged op stages all its members' inputs at
//! once, and its single wait copies every result out at the first member's wait).
//!
//! # Evaluation in near-linear time
//!
//! A trial changes the layout in a few places only (the bucket's place, its waits' place, the
//! new member's old places), so it is evaluated incrementally ([`incremental`]), not by
//! simulating the whole function. Each order (traced, scheduled) is kept as *slots* (the ops'
//! positions in that order at the start; a moved op joins the slot it is moved next to), a
//! bucket as one merged node and its waits as one node, with the timeline of the current
//! layout: the stream times after each slot and each node's end, as stored values plus
//! per-stream offsets in Fenwick trees, and for each node reading the other stream's result
//! (a wait, a collective of a computed tensor) a lower bound of its *slack* (how much
//! earlier its stream was free than its latest such input was ready; only the latest
//! matters, each stream running its nodes in order) in a min segment tree with lazy adds.
//! A trial simulates the changed slots exactly and crosses every unchanged run between them
//! in O(log n): entering the run, the trial's streams are the current layout's shifted by one
//! offset each, and they stay so over the whole run unless an input from the other stream
//! becomes (or stops being) the later one of a node, which only a node whose slack is below
//! the offsets' difference can do (the tree finds the first; its slack is made exact first),
//! or a node reads one the trial simulated (checked by itself). Such a node's slot is
//! simulated exactly and the run goes on with the new offsets. The zero-cost nodes at the end
//! (the gradient waits) never move the makespan, the later stream's time where they start, so
//! the simulation stops there. An accepted trial commits the same way: exact values for the
//! simulated slots, range adds for the crossed runs. Times are integers (2⁻¹⁶ ns) so that
//! shifted and simulated times agree exactly.
//!
//! Peak memory is a max-prefix-sum segment tree over the slots of the traced order (each
//! slot's allocations and frees in its ops' order, a bucket's waits kept folded); a trial
//! recomputes the events of the storages whose definition, last use or first wait moves and
//! the slots they land in. A trial thus costs O(log n) per slot it touches, whatever the
//! size of the function or of the bucket (but where a bucket's waits move to an earlier
//! wait, or it moves past other readers of its inputs: then those are looked at).
//!
//! Decisions are the full simulation's (the whole function simulated per trial, floating
//! point; [`full`]) up to the rounding of the integer times: a merge within a fraction of a
//! nanosecond of a tie may go the other way. The pass checks the result with the
//! floating-point simulator and, should it be slower than the input, decides again with the
//! full simulation (statistic `full-simulation`), which also serves machines with an overlap
//! slowdown and functions with in-place collectives, where the incremental timeline does not
//! apply.

mod full;
mod incremental;

use crate::analysis::buffers::BufferModel;
use crate::analysis::cost::{coll_kind, collective_bytes, CollKind, Machine};
use crate::schedule::{apply_op_order, body_block, CostTable};
use commlir_dialects::coll::group_of;
use commlir_dialects::shape::tensor_bytes;
use commlir_ir::pass::{
    Anchor, OptionDef, OptionKind, Pass, PassEnv, PassInfo, PassOptions, StatisticDef,
};
use commlir_ir::{Attr, AttrKind, BlockId, Builder, Context, Diagnostic, OpId, Trait};
use std::collections::BTreeMap;

commlir_ir::register_pass!(
    /// `coll-bucket`.
    pub COLL_BUCKET = PassInfo {
        argument: "coll-bucket",
        name: "CollBucket",
        summary: "Merge collectives of one kind and group into coalesced ops, chosen by the cost model",
        description: "Merges runs of all-gathers, reduce-scatters or all-reduces on one group \
            (consecutive among the group's collectives, same reduce op) into the coalesced ops, \
            placed where every input exists, with one wait per result where the first wait was. \
            A collective joins a bucket when the simulated makespan of the traced order and of \
            the order comm-overlap-schedule makes does not get worse, the peak memory stays \
            within the budget and the bucket within `bucket-bytes`.",
        anchor: Anchor::FUNC,
        options: &[
            OptionDef::new(
                "bucket-bytes",
                OptionKind::UInt,
                "0",
                "Largest bucket, in bytes moved per rank (summed over its members); 0 lets the cost model alone decide",
            ),
            OptionDef::new(
                "peak-memory-budget",
                OptionKind::Float,
                "0.0",
                "Largest allowed peak-memory increase, as a fraction of the input's peak",
            ),
            OptionDef::bool(
                "ignore-cost",
                false,
                "Merge whatever fits in bucket-bytes and the memory budget, even where the timeline gets slower",
            ),
            crate::analysis::machine::MACHINE_OPTION,
        ],
        statistics: &[
            StatisticDef::new("buckets", "Coalesced ops created"),
            StatisticDef::new("merged", "Collectives merged into them"),
            StatisticDef::new("kept-by-cost", "Merges refused because the timeline got slower"),
            StatisticDef::new("kept-by-schedule", "Merges refused because the scheduled order's timeline got slower"),
            StatisticDef::new("kept-by-memory", "Merges refused by the peak-memory budget"),
            StatisticDef::new("kept-by-dependency", "Merges refused because an input comes after a member's wait"),
            StatisticDef::new("kept-by-size", "Merges refused by bucket-bytes"),
            StatisticDef::new("full-simulation", "Functions whose trials simulated the whole function"),
        ],
        create: |o: &PassOptions| Ok(Box::new(CollBucket(
            BucketOptions::from_pass_options(o)?,
            crate::analysis::machine::from_option(o.get_str("machine"))?,
        ))),
    }
);

/// How trial merges are evaluated (tests compare them; the pass picks by itself).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Evaluation {
    /// Incremental where it applies, else the full simulation.
    #[default]
    Auto,
    /// Simulate the whole function per trial.
    Full,
    /// Incremental, each trial also checked against a full simulation and the full memory
    /// model (panics on a difference; for tests).
    Checked,
}

/// The options of `coll-bucket`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BucketOptions {
    /// Largest bucket in bytes moved per rank; 0 = no cap.
    pub bucket_bytes: u64,
    /// Allowed peak increase as a fraction of the input's peak.
    pub peak_memory_budget: f64,
    /// Skip the timeline tests.
    pub ignore_cost: bool,
    #[doc(hidden)]
    pub evaluation: Evaluation,
}

impl BucketOptions {
    /// Reads and checks the options.
    pub fn from_pass_options(o: &PassOptions) -> Result<BucketOptions, String> {
        let budget = o.get_float("peak-memory-budget");
        if !budget.is_finite() || budget < 0.0 {
            return Err(format!(
                "peak-memory-budget must be a non-negative number, got {budget}"
            ));
        }
        Ok(BucketOptions {
            bucket_bytes: o.get_uint("bucket-bytes"),
            peak_memory_budget: budget,
            ignore_cost: o.get_bool("ignore-cost"),
            evaluation: Evaluation::Auto,
        })
    }
}

/// The options and the `machine` option's machine (`None`: the module's or the default).
struct CollBucket(BucketOptions, Option<Machine>);

/// What one run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BucketStats {
    pub buckets: u64,
    pub merged: u64,
    pub kept_by_cost: u64,
    pub kept_by_schedule: u64,
    pub kept_by_memory: u64,
    pub kept_by_dependency: u64,
    pub kept_by_size: u64,
    /// 1 when the trials simulated the whole function (see the module docs).
    pub full_simulation: u64,
}

impl Pass for CollBucket {
    fn info(&self) -> &'static PassInfo {
        &COLL_BUCKET
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let machine = crate::analysis::machine::for_op(ctx, op, self.1.as_ref())?;
        let s = bucket_function_on(ctx, &machine, op, &self.0);
        env.add_stat("buckets", s.buckets);
        env.add_stat("merged", s.merged);
        env.add_stat("kept-by-cost", s.kept_by_cost);
        env.add_stat("kept-by-schedule", s.kept_by_schedule);
        env.add_stat("kept-by-memory", s.kept_by_memory);
        env.add_stat("kept-by-dependency", s.kept_by_dependency);
        env.add_stat("kept-by-size", s.kept_by_size);
        env.add_stat("full-simulation", s.full_simulation);
        Ok(())
    }
}

/// The collective families that have a coalesced form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    AllGather,
    ReduceScatter,
    AllReduce,
}

impl Kind {
    fn of(name: &str) -> Option<Kind> {
        Some(match name {
            "coll.all_gather_into_tensor" | "coll.all_gather_into_tensor_coalesced" => {
                Kind::AllGather
            }
            "coll.reduce_scatter_tensor" | "coll.reduce_scatter_tensor_coalesced" => {
                Kind::ReduceScatter
            }
            "coll.all_reduce" | "coll.all_reduce_coalesced" => Kind::AllReduce,
            _ => return None,
        })
    }

    fn coalesced(self) -> &'static str {
        match self {
            Kind::AllGather => "coll.all_gather_into_tensor_coalesced",
            Kind::ReduceScatter => "coll.reduce_scatter_tensor_coalesced",
            Kind::AllReduce => "coll.all_reduce_coalesced",
        }
    }

    pub(crate) fn cost_kind(self) -> CollKind {
        match self {
            Kind::AllGather => CollKind::AllGather,
            Kind::ReduceScatter => CollKind::ReduceScatter,
            Kind::AllReduce => CollKind::AllReduce,
        }
    }
}

/// A collective that may join a bucket.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub(crate) op: OpId,
    /// The wait of each result, in result order.
    pub(crate) waits: Vec<OpId>,
    /// Bytes it moves per rank (the cost model's measure).
    pub(crate) bytes: u64,
}

/// What members of one bucket share besides their group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) kind: Kind,
    pub(crate) reduce_op: Option<Attr>,
    pub(crate) prescale: Option<Attr>,
    pub(crate) group_size: u64,
}

/// An open or closed bucket: its members in program order.
#[derive(Clone, Debug)]
pub(crate) struct Bucket {
    pub(crate) key: Key,
    pub(crate) members: Vec<Member>,
    pub(crate) bytes: u64,
}

/// Why a collective did not join the open bucket of its group.
pub(crate) enum Refusal {
    /// The traced order's timeline gets slower.
    Cost,
    /// The scheduled order's timeline gets slower, or cannot hold the bucket.
    Schedule,
    Memory,
    Dependency,
}

/// Whether every key of a dictionary attribute is one a coalesced op keeps.
fn only_inherent_keys(ctx: &Context, keys: impl IntoIterator<Item = commlir_ir::Ident>) -> bool {
    keys.into_iter()
        .all(|k| matches!(ctx.ident_str(k), "group" | "reduce_op" | "prescale"))
}

/// The collective as a bucket member with its group name and key, if it may be one.
fn candidate(ctx: &Context, block: BlockId, op: OpId) -> Option<(String, Key, Member)> {
    let kind = Kind::of(ctx.op_name(op))?;
    if !only_inherent_keys(ctx, ctx.attrs(op).iter().map(|(k, _)| *k)) {
        return None;
    }
    if let Some(p) = ctx.properties(op) {
        match ctx.attr_kind(p) {
            AttrKind::Dict(entries) => {
                if !only_inherent_keys(ctx, entries.iter().map(|(k, _)| *k)) {
                    return None;
                }
            }
            _ => return None,
        }
    }
    let group = group_of(ctx, op).ok()?;
    // On a symmetric-memory group `coll-to-comm` picks, per all-reduce, NCCL or a blocking
    // symm kernel by the cost model (one-shot for small sizes); a coalesced all-reduce can
    // only take NCCL, so bucketing would override that choice.
    if kind == Kind::AllReduce && group.symm_mem {
        return None;
    }
    let n = ctx.operands(op).len();
    if n == 0 || ctx.results(op).len() != n {
        return None;
    }
    // Inputs must be values of this block: the merged op is placed after their definitions.
    if ctx
        .operands(op)
        .iter()
        .any(|&v| ctx.value_block(v) != Some(block))
    {
        return None;
    }
    let mut waits = Vec::with_capacity(n);
    for &r in ctx.results(op) {
        match ctx.uses(r) {
            [u] if ctx.op_name(u.op) == "coll.wait_tensor"
                && ctx.op_parent(u.op) == Some(block)
                && ctx.operands(u.op).len() == 1
                && ctx.results(u.op).len() == 1 =>
            {
                waits.push(u.op)
            }
            _ => return None,
        }
    }
    let key = Key {
        kind,
        reduce_op: ctx.inherent_attr(op, "reduce_op"),
        prescale: ctx.inherent_attr(op, "prescale"),
        group_size: group.size.max(1) as u64,
    };
    let member = Member {
        op,
        waits,
        bytes: collective_bytes(ctx, op),
    };
    Some((group.name, key, member))
}

/// A way to judge trial merges and keep the layout of the accepted ones.
pub(crate) trait Trials {
    /// Tries to add `m` to `bucket`; on success the layout holds the bucket with `m`.
    fn try_extend(&mut self, ctx: &mut Context, bucket: &Bucket, m: &Member)
        -> Result<(), Refusal>;
    /// The traced order with every bucket laid out (members together, the first last).
    fn order(&self, ctx: &Context) -> Vec<OpId>;
}

/// The greedy search: buckets grow in program order, each group with its own open bucket.
fn greedy(
    ctx: &mut Context,
    block: BlockId,
    colls: &[OpId],
    opts: &BucketOptions,
    trials: &mut dyn Trials,
) -> (BucketStats, Vec<Bucket>) {
    let mut stats = BucketStats::default();
    // The open bucket of each group (by name: deterministic), and the finished ones.
    let mut open: BTreeMap<String, Bucket> = BTreeMap::new();
    let mut done: Vec<Bucket> = Vec::new();
    for &c in colls {
        let Some((group, key, member)) = candidate(ctx, block, c) else {
            // Any other collective on a group ends its bucket: members must be consecutive
            // among the group's collectives.
            if let Some(g) = ctx
                .inherent_attr(c, "group")
                .and_then(|a| ctx.attr_as_symbol(a))
            {
                if let Some(b) = open.remove(g) {
                    done.push(b);
                }
            }
            continue;
        };
        let fresh = |member: Member| Bucket {
            key,
            bytes: member.bytes,
            members: vec![member],
        };
        let Some(bucket) = open.remove(&group) else {
            open.insert(group, fresh(member));
            continue;
        };
        if bucket.key != key {
            done.push(bucket);
            open.insert(group, fresh(member));
            continue;
        }
        if opts.bucket_bytes != 0 && bucket.bytes.saturating_add(member.bytes) > opts.bucket_bytes {
            stats.kept_by_size += 1;
            done.push(bucket);
            open.insert(group, fresh(member));
            continue;
        }
        match trials.try_extend(ctx, &bucket, &member) {
            Ok(()) => {
                let mut bucket = bucket;
                bucket.bytes += member.bytes;
                bucket.members.push(member);
                open.insert(group, bucket);
            }
            Err(why) => {
                match why {
                    Refusal::Cost => stats.kept_by_cost += 1,
                    Refusal::Schedule => stats.kept_by_schedule += 1,
                    Refusal::Memory => stats.kept_by_memory += 1,
                    Refusal::Dependency => stats.kept_by_dependency += 1,
                }
                done.push(bucket);
                open.insert(group, fresh(member));
            }
        }
    }
    done.extend(open.into_values());
    (stats, done)
}

/// Runs the pass on `func` (a `func.func` with one block; others are left alone).
pub fn bucket_function(ctx: &mut Context, func: OpId, opts: &BucketOptions) -> BucketStats {
    bucket_function_on(ctx, crate::analysis::machine::default_machine(), func, opts)
}

/// [`bucket_function`] with the cost model of `machine`.
pub fn bucket_function_on(
    ctx: &mut Context,
    machine: &Machine,
    func: OpId,
    opts: &BucketOptions,
) -> BucketStats {
    let Some(block) = body_block(ctx, func) else {
        return BucketStats::default();
    };
    let input = ctx.block_op_list(block);
    let colls: Vec<OpId> = input
        .iter()
        .copied()
        .filter(|&o| ctx.op_has_trait(o, Trait::Collective))
        .collect();
    if colls.len() < 2 {
        return BucketStats::default();
    }
    let costs = CostTable::new_on(ctx, machine, block);
    // The scheduled order: what `comm-overlap-schedule` makes of the input at its default
    // budget (none when it keeps the input order, which the traced order already judges).
    let scheduled: Option<Vec<OpId>> = if opts.ignore_cost {
        None
    } else {
        let sched_opts = crate::comm_overlap_schedule::OverlapOptions::default();
        crate::comm_overlap_schedule::plan(ctx, block, &costs, &sched_opts).0
    };
    let incremental = match opts.evaluation {
        Evaluation::Full => false,
        Evaluation::Checked => true,
        Evaluation::Auto => incremental::applies(ctx, &input, &costs),
    };
    let (mut stats, done) = if incremental {
        let check = opts.evaluation == Evaluation::Checked;
        let mut inc =
            incremental::Incremental::new(ctx, block, &costs, scheduled.as_deref(), opts, check);
        let (stats, done) = greedy(ctx, block, &colls, opts, &mut inc);
        let order = inc.order(ctx);
        // The integer times round each cost: check the result with the floating-point
        // simulator, and should it be slower than the input, decide again on that one.
        if opts.evaluation == Evaluation::Auto
            && !opts.ignore_cost
            && full::laid_out_makespan(ctx, &costs, &order, &done)
                > full::laid_out_makespan(ctx, &costs, &input, &[])
        {
            let mut f = full::Full::new(ctx, block, &costs, scheduled, opts);
            let (mut stats, done) = greedy(ctx, block, &colls, opts, &mut f);
            stats.full_simulation = 1;
            apply_op_order(ctx, f.order(ctx));
            (stats, done)
        } else {
            apply_op_order(ctx, order);
            (stats, done)
        }
    } else {
        let mut f = full::Full::new(ctx, block, &costs, scheduled, opts);
        let (mut stats, done) = greedy(ctx, block, &colls, opts, &mut f);
        stats.full_simulation = 1;
        apply_op_order(ctx, f.order(ctx));
        (stats, done)
    };
    for b in done.iter().filter(|b| b.members.len() > 1) {
        stats.buckets += 1;
        stats.merged += b.members.len() as u64;
        rewrite(ctx, b);
    }
    stats
}

/// The merged op's time: the cost model's estimate of one collective of the bucket's bytes
/// (members share their group, so the first tells how many nodes it spans).
pub(crate) fn merged_ns(ctx: &Context, machine: &Machine, key: Key, bytes: u64, lead: OpId) -> f64 {
    let nodes = crate::analysis::cost::group_extent(ctx, machine, lead).1;
    machine
        .collective_on(key.kind.cost_kind(), bytes, key.group_size, nodes)
        .ns
}

/// The members of `bucket` and `m` in their laid-out order: the later ones, then `m`, then
/// the first (which carries the merged op's time).
pub(crate) fn laid_out_members(bucket: &Bucket, m: Option<&Member>) -> Vec<OpId> {
    let mut seq: Vec<OpId> = bucket.members[1..].iter().map(|b| b.op).collect();
    seq.extend(m.map(|m| m.op));
    seq.push(bucket.members[0].op);
    seq
}

/// The peak memory of a block in which the ops at each `span[p] = (first, last)` act as one
/// op (a bucket's members): what they allocate is allocated at `first`, what they free is
/// freed after `last`. With `staged`, as `coll-to-comm` lowers the block: an input of an
/// all-gather, reduce-scatter or all-to-all that no compute op produces (an argument, a wait's
/// result) is first copied into a comm buffer, live during the collective (an all-reduce's
/// or broadcast's copy is its result, counted already), and a returned collective result is
/// copied out of its comm buffer at its (first) wait. Without it, a bucket that gathers many arguments at
/// once looks free at the `coll` level and is not after lowering.
pub(crate) fn layout_peak(
    ctx: &Context,
    model: &BufferModel,
    span: &[(usize, usize)],
    staged: bool,
) -> i64 {
    let (init, levels) = layout_levels(ctx, model, span, staged);
    let peak = levels.into_iter().fold(init, u64::max);
    i64::try_from(peak).unwrap_or(i64::MAX)
}

/// The memory of [`layout_peak`]'s model at entry and right after each position's
/// allocations.
pub(crate) fn layout_levels(
    ctx: &Context,
    model: &BufferModel,
    span: &[(usize, usize)],
    staged: bool,
) -> (u64, Vec<u64>) {
    let n = model.ops.len();
    let at = |p: usize| span.get(p).copied().unwrap_or((p, p));
    let mut alloc = vec![0u64; n];
    let mut free = vec![0u64; n];
    let mut cur = 0u64;
    for s in model.storages.iter().filter(|s| s.counted()) {
        if staged && s.escapes {
            // A returned collective result is copied out of its comm buffer at its wait: the
            // buffer lives until the wait, the copy from there on.
            let wait = s.def.filter(|&d| {
                model
                    .ops
                    .get(d)
                    .is_some_and(|&op| coll_kind(ctx.op_name(op)).is_some())
            });
            let wait = wait.and_then(|_| {
                ctx.uses(s.root)
                    .iter()
                    .filter_map(|u| model.pos(u.op))
                    .min()
            });
            if let (Some(d), Some(w)) = (s.def, wait) {
                alloc[at(d).0] = alloc[at(d).0].saturating_add(s.size);
                free[at(w).1] = free[at(w).1].saturating_add(s.size);
                alloc[at(w).0] = alloc[at(w).0].saturating_add(s.size);
                continue;
            }
        }
        match s.def {
            Some(d) => alloc[at(d).0] = alloc[at(d).0].saturating_add(s.size),
            None => cur = cur.saturating_add(s.size),
        }
        if let (false, Some(l)) = (s.escapes, s.last_use) {
            free[at(l).1] = free[at(l).1].saturating_add(s.size);
        }
    }
    if staged {
        for (p, &op) in model.ops.iter().enumerate() {
            // In-place collectives copy into their buffer anyway: that copy is their result.
            if coll_kind(ctx.op_name(op))
                .is_none_or(|k| matches!(k, CollKind::AllReduce | CollKind::Broadcast))
            {
                continue;
            }
            for &v in ctx.operands(op) {
                // A compute op writes straight into the comm buffer; anything else is copied.
                let written_in_place = ctx.defining_op(v).is_some_and(|d| {
                    ctx.op_name(d).starts_with("compute.") && ctx.op_has_trait(d, Trait::MemAlloc)
                });
                if written_in_place {
                    continue;
                }
                let size = tensor_bytes(ctx, ctx.value_type(v)).unwrap_or(0);
                let (first, last) = at(p);
                alloc[first] = alloc[first].saturating_add(size);
                free[last] = free[last].saturating_add(size);
            }
        }
    }
    let init = cur;
    let mut levels = Vec::with_capacity(n);
    for p in 0..n {
        cur = cur.saturating_add(alloc[p]);
        levels.push(cur);
        cur = cur.saturating_sub(free[p]);
    }
    (init, levels)
}

/// The op of `ops` that comes first in their block.
fn first_in_block(ctx: &Context, ops: impl IntoIterator<Item = OpId>) -> Option<OpId> {
    ops.into_iter()
        .reduce(|a, b| if ctx.is_before_in_block(b, a) { b } else { a })
}

/// Replaces the bucket's members (laid out together, as are their waits) by the coalesced op
/// and one wait per result.
fn rewrite(ctx: &mut Context, b: &Bucket) {
    let lead = b.members[0].op;
    let (Some(at), Some(wait_at)) = (
        first_in_block(ctx, b.members.iter().map(|m| m.op)),
        first_in_block(ctx, b.members.iter().flat_map(|m| m.waits.iter().copied())),
    ) else {
        return;
    };
    let operands: Vec<_> = b
        .members
        .iter()
        .flat_map(|m| ctx.operands(m.op).to_vec())
        .collect();
    let types: Vec<_> = b
        .members
        .iter()
        .flat_map(|m| ctx.results(m.op).to_vec())
        .map(|r| ctx.value_type(r))
        .collect();
    let mut attrs: Vec<(&str, Attr)> = Vec::new();
    if let Some(g) = ctx.inherent_attr(lead, "group") {
        attrs.push(("group", g));
    }
    if let Some(r) = b.key.reduce_op {
        attrs.push(("reduce_op", r));
    }
    if let Some(p) = b.key.prescale {
        attrs.push(("prescale", p));
    }
    let loc = ctx.op_loc(lead);
    let mut builder = Builder::before(ctx, at);
    builder.loc = loc;
    let merged = builder.create(b.key.kind.coalesced(), &operands, &types, &attrs);
    let old_waits: Vec<OpId> = b
        .members
        .iter()
        .flat_map(|m| m.waits.iter().copied())
        .collect();
    for (i, &w) in old_waits.iter().enumerate() {
        let r = ctx.result(merged, i);
        let old = ctx.result(w, 0);
        let ty = ctx.value_type(old);
        let loc = ctx.op_loc(w);
        let mut builder = Builder::before(ctx, wait_at);
        builder.loc = loc;
        let new = builder.create("coll.wait_tensor", &[r], &[ty], &[]);
        let y = ctx.result(new, 0);
        ctx.replace_all_uses(old, y);
    }
    for w in old_waits {
        ctx.erase_op(w);
    }
    for m in &b.members {
        ctx.erase_op(m.op);
    }
}
