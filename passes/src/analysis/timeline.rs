//! The two-stream timeline simulator: one compute stream and one comm stream per rank (all
//! ranks run the same SPMD program, so one rank's timeline stands for all).
//!
//! A collective starts when its inputs are ready and the comm stream is free; a wait blocks
//! the compute stream until its collective ends; a blocking collective occupies both. The
//! result is the makespan and, per collective, how long the compute stream stalled on it
//! (its *exposed* time).

use super::cost::{op_cost, Machine, OpCost};
use commlir_ir::{BlockId, Context, OpId, Trait};

/// One collective's timing.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveTiming {
    pub op: OpId,
    pub start_ns: f64,
    pub end_ns: f64,
    /// Time the compute stream stalled waiting for it.
    pub exposed_ns: f64,
}

/// The simulated timeline of a block.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    pub compute_ns: f64,
    pub comm_ns: f64,
    pub exposed_comm_ns: f64,
    pub makespan_ns: f64,
    pub collectives: Vec<CollectiveTiming>,
}

/// The traits the simulator asks about, as bits, cached per op name (every op of a name
/// shares its definition): a block has a few dozen names and thousands of ops.
struct TraitBits {
    by_name: Vec<u8>,
}

impl TraitBits {
    const KNOWN: u8 = 1;
    const WAIT: u8 = 2;
    const BLOCKING: u8 = 4;
    const MEM_WRITE: u8 = 8;
    const COLLECTIVE: u8 = 16;

    /// The bits of `op`'s name: a table read, once the name was seen.
    #[inline]
    fn of(&mut self, ctx: &Context, op: OpId) -> u8 {
        let i = ctx.op_name_ident(op).index();
        match self.by_name.get(i) {
            Some(&b) if b != 0 => b,
            _ => self.first_of(ctx, op, i),
        }
    }

    /// [`TraitBits::of`] for a name not seen yet.
    #[cold]
    #[inline(never)]
    fn first_of(&mut self, ctx: &Context, op: OpId, i: usize) -> u8 {
        if i >= self.by_name.len() {
            self.by_name.resize(i + 1, 0);
        }
        let mut b = Self::KNOWN;
        for (t, bit) in [
            (Trait::Wait, Self::WAIT),
            (Trait::Blocking, Self::BLOCKING),
            (Trait::MemWrite, Self::MEM_WRITE),
            (Trait::Collective, Self::COLLECTIVE),
        ] {
            if ctx.op_has_trait(op, t) {
                b |= bit;
            }
        }
        self.by_name[i] = b;
        b
    }
}

/// Simulates `block` on `machine`.
pub fn simulate(ctx: &Context, machine: &Machine, block: BlockId) -> Timeline {
    simulate_with(ctx, block, |op| op_cost(ctx, machine, op))
}

/// Simulates `block` with op costs from `cost` (which must agree with [`op_cost`] on some
/// machine): lets a caller that simulates the same ops several times, in different orders,
/// compute each op's cost once.
pub fn simulate_with(ctx: &Context, block: BlockId, cost: impl Fn(OpId) -> OpCost) -> Timeline {
    simulate_ops(ctx, ctx.block_ops(block), cost)
}

/// [`simulate_with`] on `ops` in the given order (every op of one block, once): simulates an
/// order of a block's ops without writing it into the block.
pub fn simulate_ops(
    ctx: &Context,
    ops: impl IntoIterator<Item = OpId>,
    cost: impl Fn(OpId) -> OpCost,
) -> Timeline {
    // The schedulers call this in their inner loops: the no-op sink compiles away.
    simulate_core(ctx, ops, cost, |_| {})
}

/// Where an op ran in the simulated schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// The compute stream (kernels, waits, blocking `symm` and fused ops).
    Compute,
    /// The comm stream (NCCL collectives).
    Comm,
    /// Nowhere: the op costs nothing (views, constants, the terminator).
    None,
}

/// One event of a simulated schedule, as [`schedule`] reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SimEvent {
    /// An op, in program order (every op of the block, free ones too, so that a caller can
    /// tell when each was issued).
    Op {
        op: OpId,
        lane: Lane,
        start_ns: f64,
        end_ns: f64,
        /// For a collective: the part of it the compute stream waited for.
        exposed_ns: f64,
    },
    /// The compute stream idle from `start_ns` to `end_ns`, waiting for `collective` (a wait
    /// or a blocking collective on the comm stream).
    Stall {
        collective: OpId,
        start_ns: f64,
        end_ns: f64,
    },
}

/// The full simulated schedule of a block: the summary and every op's and stall's interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schedule {
    pub timeline: Timeline,
    pub events: Vec<SimEvent>,
}

/// Simulates `block` on `machine` and keeps every event (for timelines to look at; the
/// schedulers use [`simulate_ops`], which keeps only the summary).
pub fn schedule(ctx: &Context, machine: &Machine, block: BlockId) -> Schedule {
    let mut events = Vec::new();
    let timeline = simulate_core(
        ctx,
        ctx.block_ops(block),
        |op| op_cost(ctx, machine, op),
        |e| events.push(e),
    );
    Schedule { timeline, events }
}

/// The simulator, reporting each event to `sink`.
#[inline]
fn simulate_core(
    ctx: &Context,
    ops: impl IntoIterator<Item = OpId>,
    cost: impl Fn(OpId) -> OpCost,
    mut sink: impl FnMut(SimEvent),
) -> Timeline {
    let mut ready = vec![0.0f64; ctx.num_value_slots()];
    // Index into `collectives` of the collective producing a value (for waits).
    // `u32::MAX` for none: a quarter of the memory of `Option<usize>`, for a table as long
    // as the context's values.
    let mut coll_of_value: Vec<u32> = vec![u32::MAX; ctx.num_value_slots()];
    let mut t = Timeline::default();
    let (mut compute_free, mut comm_free) = (0.0f64, 0.0f64);
    let mut traits = TraitBits {
        by_name: Vec::new(),
    };
    let mut waited: Vec<usize> = Vec::new();
    for op in ops {
        let bits = traits.of(ctx, op);
        let inputs_ready = ctx
            .operands(op)
            .iter()
            .map(|v| ready[v.index()])
            .fold(0.0, f64::max);
        let cost = cost(op);
        if bits & TraitBits::WAIT != 0 {
            let mut end = inputs_ready;
            let before = compute_free;
            waited.clear();
            waited.extend(
                ctx.operands(op)
                    .iter()
                    .map(|v| coll_of_value[v.index()])
                    .filter(|&c| c != u32::MAX)
                    .map(|c| c as usize),
            );
            waited.sort_unstable();
            waited.dedup();
            for &c in &waited {
                end = end.max(t.collectives[c].end_ns);
            }
            let stall = (end - before).max(0.0);
            // Charge the stall to the collective that ends last.
            if let Some(&c) = waited.iter().max_by(|a, b| {
                t.collectives[**a]
                    .end_ns
                    .total_cmp(&t.collectives[**b].end_ns)
            }) {
                t.collectives[c].exposed_ns += stall;
                if stall > 0.0 {
                    sink(SimEvent::Stall {
                        collective: t.collectives[c].op,
                        start_ns: before,
                        end_ns: end,
                    });
                }
            }
            let start = compute_free.max(end);
            compute_free = start + cost.ns();
            sink(SimEvent::Op {
                op,
                lane: Lane::Compute,
                start_ns: start,
                end_ns: compute_free,
                exposed_ns: 0.0,
            });
            t.compute_ns += cost.ns();
            for r in ctx.results(op) {
                ready[r.index()] = compute_free;
            }
            continue;
        }
        match cost {
            OpCost::Collective(ns) => {
                let blocking = bits & TraitBits::BLOCKING != 0;
                let mut start = inputs_ready.max(comm_free);
                if blocking {
                    start = start.max(compute_free);
                }
                let end = start + ns;
                comm_free = end;
                t.comm_ns += ns;
                let idx = t.collectives.len();
                let exposed = if blocking {
                    end - compute_free.min(end)
                } else {
                    0.0
                };
                t.collectives.push(CollectiveTiming {
                    op,
                    start_ns: start,
                    end_ns: end,
                    exposed_ns: exposed,
                });
                sink(SimEvent::Op {
                    op,
                    lane: Lane::Comm,
                    start_ns: start,
                    end_ns: end,
                    exposed_ns: exposed,
                });
                if blocking {
                    if exposed > 0.0 {
                        sink(SimEvent::Stall {
                            collective: op,
                            start_ns: end - exposed,
                            end_ns: end,
                        });
                    }
                    compute_free = end;
                }
                for r in ctx.results(op) {
                    ready[r.index()] = end;
                    coll_of_value[r.index()] = idx as u32;
                }
                // In-place collectives: the buffer operands are ready again only at the end.
                if bits & TraitBits::MEM_WRITE != 0 {
                    for v in ctx.operands(op) {
                        coll_of_value[v.index()] = idx as u32;
                    }
                }
            }
            OpCost::Compute(ns) => {
                let start = inputs_ready.max(compute_free);
                compute_free = start + ns;
                t.compute_ns += ns;
                let exposed_ns = if bits & TraitBits::COLLECTIVE != 0 {
                    // A blocking collective run by the compute stream (one-shot all-reduce).
                    t.comm_ns += ns;
                    t.collectives.push(CollectiveTiming {
                        op,
                        start_ns: start,
                        end_ns: compute_free,
                        exposed_ns: ns,
                    });
                    ns
                } else {
                    0.0
                };
                sink(SimEvent::Op {
                    op,
                    lane: Lane::Compute,
                    start_ns: start,
                    end_ns: compute_free,
                    exposed_ns,
                });
                for r in ctx.results(op) {
                    ready[r.index()] = compute_free;
                }
            }
            OpCost::Fused { ns, exposed_ns } => {
                // Blocking on the compute stream; only its unhidden communication is exposed.
                let start = inputs_ready.max(compute_free);
                compute_free = start + ns;
                t.compute_ns += ns - exposed_ns;
                t.comm_ns += exposed_ns;
                t.collectives.push(CollectiveTiming {
                    op,
                    start_ns: start,
                    end_ns: compute_free,
                    exposed_ns,
                });
                sink(SimEvent::Op {
                    op,
                    lane: Lane::Compute,
                    start_ns: start,
                    end_ns: compute_free,
                    exposed_ns,
                });
                for r in ctx.results(op) {
                    ready[r.index()] = compute_free;
                }
            }
            OpCost::Free => {
                sink(SimEvent::Op {
                    op,
                    lane: Lane::None,
                    start_ns: inputs_ready,
                    end_ns: inputs_ready,
                    exposed_ns: 0.0,
                });
                for r in ctx.results(op) {
                    ready[r.index()] = inputs_ready;
                }
            }
        }
    }
    t.exposed_comm_ns = t.collectives.iter().map(|c| c.exposed_ns).sum();
    t.makespan_ns = compute_free.max(comm_free);
    t
}
