//! `comm-plan-pools`: comm-buffer pool planning (PyTorch PR #138519).
//!
//! Registered communication needs buffers from a persistent allocation of the right kind
//! (`ncclMemAlloc` + `ncclCommRegister`, or symmetric memory), so every comm buffer of a
//! function is carved from one pool per (kind, group):
//!
//! - `comm.pool` ops at function entry allocate each pool (size, alignment); matching
//!   `comm.pool_release` ops right before the return free it, so the allocator can reuse the
//!   memory for the next graph and comm buffers can never be function results;
//! - every op producing a comm buffer gets `comm.slot = array<i64: OFFSET, SIZE>`, its range in
//!   the pool; buffers live at the same time (see [`crate::pools::liveness`]) never share a
//!   byte, the others reuse each other's bytes;
//! - offsets come from [`crate::pools::packing::plan`], a deterministic function of the op
//!   order and the types, hence identical on every rank of an SPMD program.
//!
//! Comm buffers are planned apart from regular buffers (neither uses the other's memory).
//! The pass is idempotent: it first removes an earlier plan, so running it again after a
//! reordering re-plans for the new order. Run it after scheduling: moving ops after planning
//! can make slots overlap while live, which the sim backend then reports.

use crate::pools::{packing, plan_block};
use commlir_dialects::comm::{pool_type, set_slot, PoolSlot, SLOT_ATTR};
use commlir_ir::{Attr, Builder, Context, Diagnostic, OpId, Trait};
use rustc_hash::FxHashMap;

/// Default slot alignment in bytes: a cache line, enough for vectorized access, and small
/// enough that small buffers pack tightly.
pub const DEFAULT_ALIGNMENT: u64 = 64;

/// Options of `comm-plan-pools`.
#[derive(Clone, Debug)]
pub struct PlanPoolsOptions {
    /// Slot offsets are multiples of this power of two.
    pub alignment: u64,
}

impl Default for PlanPoolsOptions {
    fn default() -> Self {
        PlanPoolsOptions {
            alignment: DEFAULT_ALIGNMENT,
        }
    }
}

/// What planning one function did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanPoolsStats {
    pub pools: u64,
    pub slots: u64,
    /// Total planned pool bytes.
    pub pool_bytes: u64,
    /// Total of the pools' lower bounds.
    pub lower_bound_bytes: u64,
    /// Total bytes without reuse.
    pub unshared_bytes: u64,
}

/// Plans the comm-buffer pools of `func` (a `func.func`).
pub fn plan_function(
    ctx: &mut Context,
    func: OpId,
    opts: &PlanPoolsOptions,
) -> Result<PlanPoolsStats, Diagnostic> {
    let Some(&region) = ctx.op_regions(func).first() else {
        return Ok(PlanPoolsStats::default());
    };
    let blocks = ctx.region_blocks(region).to_vec();
    let Some(&body) = blocks.first() else {
        return Ok(PlanPoolsStats::default());
    };
    strip_plan(ctx, func);
    let plan = plan_block(ctx, body, opts.alignment);
    if let Some(problem) = plan.liveness.problems.first() {
        return Err(problem.clone());
    }
    if plan.pools.is_empty() {
        return Ok(PlanPoolsStats::default());
    }
    if blocks.len() > 1 {
        return Err(ctx.op_error(
            func,
            "comm-plan-pools plans single-block function bodies only",
        ));
    }
    let Some(first) = ctx.block_first(body) else {
        return Ok(PlanPoolsStats::default());
    };
    let terminator = ctx
        .block_last(body)
        .filter(|t| ctx.op_has_trait(*t, Trait::Terminator));
    let mut stats = PlanPoolsStats::default();
    let pt = pool_type(ctx);
    let mut slot_attrs: FxHashMap<PoolSlot, Attr> = FxHashMap::default();
    for pool in &plan.pools {
        // Re-checked here, cheaply, because a wrong plan would corrupt data on a GPU silently.
        let items: Vec<packing::Interval> = pool
            .slots
            .iter()
            .map(|(i, _)| {
                let s = &plan.liveness.slots[*i];
                packing::Interval {
                    start: s.start,
                    end: s.end,
                    size: s.size,
                }
            })
            .collect();
        let placement = packing::Placement {
            offsets: pool.slots.iter().map(|(_, s)| s.offset).collect(),
            bytes: pool.bytes,
        };
        if let Some((a, b)) = packing::first_conflict(&items, &placement) {
            let (pa, pb) = (
                plan.liveness.slots[pool.slots[a].0].producer,
                plan.liveness.slots[pool.slots[b].0].producer,
            );
            return Err(ctx
                .op_error(
                    pa,
                    "internal error: planned slot overlaps a buffer live at the same time",
                )
                .with_note(ctx.op_loc(pb), "the other buffer"));
        }
        let kind = ctx.str_attr(pool.kind_str());
        let group = ctx.symbol_ref(&pool.group);
        let size = ctx.int_attr(pool.bytes as i64, 64);
        let align = ctx.int_attr(pool.alignment as i64, 64);
        let loc = ctx.op_loc(func);
        let mut b = Builder::before(ctx, first);
        b.loc = loc;
        let p = b.create(
            "comm.pool",
            &[],
            &[pt],
            &[
                ("alignment", align),
                ("group", group),
                ("kind", kind),
                ("size", size),
            ],
        );
        let handle = ctx.result(p, 0);
        if let Some(t) = terminator {
            Builder::before(ctx, t).create("comm.pool_release", &[handle], &[], &[]);
        } else {
            Builder::at_end(ctx, body).create("comm.pool_release", &[handle], &[], &[]);
        }
        // Buffers reusing a range get the same attribute: build it once per distinct range.
        for (i, slot) in &pool.slots {
            let op = plan.liveness.slots[*i].producer;
            match slot_attrs.get(slot) {
                Some(&a) => ctx.set_attr(op, SLOT_ATTR, a),
                None => {
                    set_slot(ctx, op, *slot);
                    if let Some(a) = ctx.get_attr(op, SLOT_ATTR) {
                        slot_attrs.insert(*slot, a);
                    }
                }
            }
        }
        stats.pools += 1;
        stats.slots += pool.slots.len() as u64;
        stats.pool_bytes += pool.bytes;
        stats.lower_bound_bytes += pool.lower_bound;
        stats.unshared_bytes += pool.unshared_bytes;
    }
    Ok(stats)
}

/// Removes an earlier plan of `func`: its pools, their releases and every slot attribute.
fn strip_plan(ctx: &mut Context, func: OpId) {
    let mut ops = Vec::new();
    ctx.walk(func, |o| ops.push(o));
    for &op in &ops {
        if ctx.get_attr(op, SLOT_ATTR).is_some() {
            ctx.remove_attr(op, SLOT_ATTR);
        }
    }
    let named = |ctx: &Context, name: &str| -> Vec<OpId> {
        ops.iter()
            .copied()
            .filter(|o| ctx.op_name(*o) == name)
            .collect()
    };
    for op in named(ctx, "comm.pool_release") {
        ctx.erase_op(op);
    }
    for op in named(ctx, "comm.pool") {
        if ctx.results(op).iter().all(|r| ctx.use_empty(*r)) {
            ctx.erase_op(op);
        }
    }
}

mod pass {
    //! The `comm-plan-pools` pass: registration, options and statistics around
    //! [`super::plan_function`].

    use super::{plan_function, PlanPoolsOptions};
    use commlir_ir::pass::{
        Anchor, OptionDef, OptionKind, Pass, PassEnv, PassInfo, PassOptions, StatisticDef,
    };
    use commlir_ir::{Context, Diagnostic, OpId};

    commlir_ir::register_pass!(pub COMM_PLAN_POOLS = PassInfo {
        argument: "comm-plan-pools",
        name: "CommPlanPools",
        summary: "Plan one persistent pool per comm-buffer (kind, group) and a slot per comm buffer",
        description: "Allocates one `comm.pool` per (kind, group) at function entry and releases \
            it before the return; every comm-buffer producer gets `comm.slot = array<i64: \
            OFFSET, SIZE>` in its pool. Buffers live at the same time (producer to last reader, \
            through collectives until their wait and through aliases) never overlap; offsets \
            come from best-fit/first-fit placement under several orders, the smallest kept, \
            and are identical on every rank. Comm buffers returned from the function are an \
            error.",
        anchor: Anchor::FUNC,
        options: &[OptionDef::new("alignment", OptionKind::UInt, "64", "Slot offset alignment in bytes (a power of two)")],
        statistics: &[
            StatisticDef::new("pools", "Pools planned"),
            StatisticDef::new("slots", "Comm buffers placed in pools"),
            StatisticDef::new("pool-bytes", "Total bytes of the planned pools"),
            StatisticDef::new("lower-bound-bytes", "Total of the pools' lower bounds (most bytes live at once)"),
            StatisticDef::new("unshared-bytes", "Total bytes without slot reuse"),
        ],
        create: |o: &PassOptions| {
            let alignment = o.get_uint("alignment");
            if !alignment.is_power_of_two() {
                return Err(format!("alignment must be a power of two, got {alignment}"));
            }
            Ok(Box::new(CommPlanPools(PlanPoolsOptions { alignment })))
        },
    });

    struct CommPlanPools(PlanPoolsOptions);

    impl Pass for CommPlanPools {
        fn info(&self) -> &'static PassInfo {
            &COMM_PLAN_POOLS
        }
        fn run(
            &mut self,
            ctx: &mut Context,
            op: OpId,
            env: &mut PassEnv<'_>,
        ) -> Result<(), Diagnostic> {
            let s = plan_function(ctx, op, &self.0)?;
            env.add_stat("pools", s.pools);
            env.add_stat("slots", s.slots);
            env.add_stat("pool-bytes", s.pool_bytes);
            env.add_stat("lower-bound-bytes", s.lower_bound_bytes);
            env.add_stat("unshared-bytes", s.unshared_bytes);
            Ok(())
        }
    }
}

pub use pass::COMM_PLAN_POOLS;
