//! The two-stream timeline simulator: one compute stream and one comm stream per rank (all
//! ranks run the same SPMD program, so one rank's timeline stands for all).
//!
//! A collective starts when its inputs are ready and the comm stream is free; a wait blocks
//! the compute stream until its collective ends; a blocking collective occupies both. The
//! result is the makespan and, per collective, how long the compute stream stalled on it
//! (its *exposed* time).
//!
//! A kernel and a collective running at the same time on one GPU slow each other down (they
//! share SMs and memory bandwidth). With a machine's overlap factors ([`Overlap`]) above 1,
//! the simulator is event-driven: while both streams run, compute progresses at
//! 1 / `overlap_compute_slowdown` of its rate and communication at 1 / `overlap_comm_slowdown`,
//! each op ending when its work is done — except an op whose `cost_ns` was measured where it
//! ran (`cost_measured`, from `comm-apply-profile`), whose time has the slowdown in it. With
//! both factors at 1 (every built-in machine but a
//! calibrated one) the simple one-pass simulator runs, exactly as without the model.

use super::cost::{op_cost, Machine, OpCost};

/// The discardable unit attribute marking a `cost_ns` measured in the running program (a
/// profile's per-op time, overlap included): the overlap model does not slow such an op
/// again.
pub const COST_MEASURED: &str = "cost_measured";
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

/// How much a kernel and a collective running at the same time slow each other down: the
/// factors by which each one's duration stretches while both run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Overlap {
    /// The compute stream's slowdown while a collective runs.
    pub compute: f64,
    /// The comm stream's slowdown while a kernel runs.
    pub comm: f64,
}

impl Overlap {
    /// No interference: the two streams run at full rate whatever the other does.
    pub const NONE: Overlap = Overlap {
        compute: 1.0,
        comm: 1.0,
    };

    /// The factors of `machine`.
    pub fn of(machine: &Machine) -> Overlap {
        Overlap {
            compute: machine.overlap_compute_slowdown,
            comm: machine.overlap_comm_slowdown,
        }
    }

    /// Whether both factors are 1 (the one-pass simulator applies).
    pub fn is_none(self) -> bool {
        self.compute == 1.0 && self.comm == 1.0
    }
}

/// Simulates `block` on `machine` (with its overlap slowdown).
pub fn simulate(ctx: &Context, machine: &Machine, block: BlockId) -> Timeline {
    simulate_ops_overlap(
        ctx,
        ctx.block_ops(block),
        |op| op_cost(ctx, machine, op),
        Overlap::of(machine),
    )
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

/// [`simulate_ops`] with the overlap slowdown `overlap` (the one-pass simulator when it is
/// [`Overlap::NONE`]).
pub fn simulate_ops_overlap(
    ctx: &Context,
    ops: impl IntoIterator<Item = OpId>,
    cost: impl Fn(OpId) -> OpCost,
    overlap: Overlap,
) -> Timeline {
    if overlap.is_none() {
        simulate_core(ctx, ops, cost, |_| {})
    } else {
        simulate_rates(ctx, ops, cost, overlap, |_| {})
    }
}

/// The event-driven simulator whatever the factors (with [`Overlap::NONE`] it computes what
/// [`simulate_ops`] does, up to rounding): for tests comparing the two.
#[doc(hidden)]
pub fn simulate_ops_event_driven(
    ctx: &Context,
    ops: impl IntoIterator<Item = OpId>,
    cost: impl Fn(OpId) -> OpCost,
    overlap: Overlap,
) -> Timeline {
    simulate_rates(ctx, ops, cost, overlap, |_| {})
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
    let overlap = Overlap::of(machine);
    let cost = |op| op_cost(ctx, machine, op);
    let timeline = if overlap.is_none() {
        simulate_core(ctx, ctx.block_ops(block), cost, |e| events.push(e))
    } else {
        simulate_rates(ctx, ctx.block_ops(block), cost, overlap, |e| events.push(e))
    };
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

/// What one op is to the event-driven simulator.
#[derive(Clone, Copy, Debug, PartialEq)]
enum TaskKind {
    /// No stream: done when its inputs are.
    Free,
    /// On the compute stream (a kernel, a blocking `symm` or fused op, a wait).
    Compute,
    /// On the comm stream.
    Comm,
    /// On the comm stream and holding the compute stream too.
    Blocking,
}

/// One op of the event-driven simulation.
struct Task {
    op: OpId,
    kind: TaskKind,
    cost: OpCost,
    /// Work at full rate, ns.
    work: f64,
    /// Tasks whose end it needs, and how many of them are not done.
    pending: usize,
    /// The latest end among its finished dependencies (its inputs' readiness).
    ready: f64,
    /// For a wait: the collectives it completes (indices into the timeline's collectives).
    waited: Vec<usize>,
    /// Index of its entry in the timeline's collectives, if it has one.
    coll: Option<usize>,
    start: f64,
    end: f64,
    /// The compute stream's free time when a wait or blocking op reached it.
    lane_free: f64,
    done: bool,
    /// Its cost was measured in the running program (`cost_measured`, set by
    /// `comm-apply-profile`): the slowdown of overlapping is in it already.
    measured: bool,
}

/// The event-driven simulator with overlap slowdown: the one-pass simulator's semantics
/// (streams run their ops in program order; an op starts when its inputs are ready and its
/// stream is free), but time advances from one op end to the next, and between two events
/// each running op progresses at its rate (slowed while the other stream also runs).
/// Deterministic: ties are broken by stream (compute first) and program order. Events go to
/// `sink` in program order, as the one-pass simulator reports them.
fn simulate_rates(
    ctx: &Context,
    ops: impl IntoIterator<Item = OpId>,
    cost: impl Fn(OpId) -> OpCost,
    overlap: Overlap,
    mut sink: impl FnMut(SimEvent),
) -> Timeline {
    let mut traits = TraitBits {
        by_name: Vec::new(),
    };
    // The task producing each value, and the collective a value waits for.
    let mut producer: Vec<u32> = vec![u32::MAX; ctx.num_value_slots()];
    let mut coll_of_value: Vec<u32> = vec![u32::MAX; ctx.num_value_slots()];
    let mut tasks: Vec<Task> = Vec::new();
    let mut succs: Vec<Vec<u32>> = Vec::new();
    let mut colls: Vec<CollectiveTiming> = Vec::new();
    let mut coll_task: Vec<usize> = Vec::new();
    let (mut compute_q, mut comm_q): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    // Interned once (absent: no op carries it): the loop below compares keys, not text.
    let measured_key = ctx.find_ident(COST_MEASURED);
    for op in ops {
        let i = tasks.len();
        let bits = traits.of(ctx, op);
        let c = cost(op);
        let mut deps: Vec<u32> = ctx
            .operands(op)
            .iter()
            .map(|v| producer[v.index()])
            .filter(|&p| p != u32::MAX)
            .collect();
        let mut waited = Vec::new();
        let (kind, coll) = if bits & TraitBits::WAIT != 0 {
            waited.extend(
                ctx.operands(op)
                    .iter()
                    .map(|v| coll_of_value[v.index()])
                    .filter(|&c| c != u32::MAX)
                    .map(|c| c as usize),
            );
            waited.sort_unstable();
            waited.dedup();
            deps.extend(waited.iter().map(|&c| coll_task[c] as u32));
            (TaskKind::Compute, None)
        } else {
            match c {
                OpCost::Collective(_) => {
                    let k = if bits & TraitBits::BLOCKING != 0 {
                        TaskKind::Blocking
                    } else {
                        TaskKind::Comm
                    };
                    (k, Some(colls.len()))
                }
                OpCost::Compute(_) if bits & TraitBits::COLLECTIVE != 0 => {
                    (TaskKind::Compute, Some(colls.len()))
                }
                OpCost::Fused { .. } => (TaskKind::Compute, Some(colls.len())),
                OpCost::Compute(_) => (TaskKind::Compute, None),
                OpCost::Free => (TaskKind::Free, None),
            }
        };
        if let Some(ci) = coll {
            colls.push(CollectiveTiming {
                op,
                start_ns: 0.0,
                end_ns: 0.0,
                exposed_ns: 0.0,
            });
            coll_task.push(i);
            // Waits find a collective of the comm stream through its results, and through
            // the buffers an in-place one writes (the compute stream's blocking ops need no
            // wait: their results are ready at their end).
            if kind != TaskKind::Compute {
                for r in ctx.results(op) {
                    coll_of_value[r.index()] = ci as u32;
                }
                if bits & TraitBits::MEM_WRITE != 0 {
                    for v in ctx.operands(op) {
                        coll_of_value[v.index()] = ci as u32;
                    }
                }
            }
        }
        for r in ctx.results(op) {
            producer[r.index()] = i as u32;
        }
        deps.sort_unstable();
        deps.dedup();
        for &d in &deps {
            succs[d as usize].push(i as u32);
        }
        match kind {
            TaskKind::Compute => compute_q.push(i),
            TaskKind::Comm => comm_q.push(i),
            TaskKind::Blocking => {
                compute_q.push(i);
                comm_q.push(i);
            }
            TaskKind::Free => {}
        }
        succs.push(Vec::new());
        tasks.push(Task {
            op,
            kind,
            cost: c,
            work: c.ns(),
            pending: deps.len(),
            ready: 0.0,
            waited,
            coll,
            start: 0.0,
            end: 0.0,
            lane_free: 0.0,
            done: false,
            measured: measured_key.is_some_and(|k| ctx.inherent_attr_id(op, k).is_some()),
        });
    }

    // Finishes task `i` at `t`: its successors learn the time; free ones finish at once.
    fn finish(tasks: &mut [Task], succs: &[Vec<u32>], i: usize, t: f64) {
        let mut stack = vec![(i, t)];
        while let Some((i, t)) = stack.pop() {
            tasks[i].end = t;
            tasks[i].done = true;
            for &s in &succs[i] {
                let s = s as usize;
                tasks[s].ready = tasks[s].ready.max(t);
                tasks[s].pending -= 1;
                if tasks[s].pending == 0 && tasks[s].kind == TaskKind::Free {
                    tasks[s].start = tasks[s].ready;
                    stack.push((s, tasks[s].ready));
                }
            }
        }
    }
    for i in 0..tasks.len() {
        if tasks[i].kind == TaskKind::Free && tasks[i].pending == 0 && !tasks[i].done {
            finish(&mut tasks, &succs, i, 0.0);
        }
    }

    let (mut ci, mut mi) = (0usize, 0usize);
    // The running op of each stream and its remaining work; a blocking op runs on the comm
    // stream and holds the compute stream.
    let mut run_c: Option<(usize, f64)> = None;
    let mut run_m: Option<(usize, f64)> = None;
    let (mut compute_free, mut comm_free) = (0.0f64, 0.0f64);
    let mut t = 0.0f64;
    loop {
        // Start (and finish, when they take no time) whatever can run now.
        loop {
            let mut progressed = false;
            // A running blocking op holds the compute stream.
            let held = run_m.is_some_and(|(i, _)| tasks[i].kind == TaskKind::Blocking);
            if run_c.is_none() && !held && ci < compute_q.len() {
                let i = compute_q[ci];
                let task = &tasks[i];
                if task.pending == 0 {
                    if task.kind == TaskKind::Blocking {
                        // Needs the comm stream too, with every earlier comm op done.
                        if run_m.is_none() && mi < comm_q.len() && comm_q[mi] == i {
                            let start = t.max(task.ready).max(compute_free).max(comm_free);
                            tasks[i].start = start;
                            tasks[i].lane_free = compute_free;
                            ci += 1;
                            mi += 1;
                            run_m = Some((i, tasks[i].work));
                            progressed = true;
                        }
                    } else {
                        let start = t.max(task.ready).max(compute_free);
                        tasks[i].start = start;
                        tasks[i].lane_free = compute_free;
                        ci += 1;
                        if tasks[i].work <= 0.0 {
                            compute_free = start;
                            finish(&mut tasks, &succs, i, start);
                        } else {
                            run_c = Some((i, tasks[i].work));
                        }
                        progressed = true;
                    }
                }
            }
            if run_m.is_none() && mi < comm_q.len() {
                let i = comm_q[mi];
                if tasks[i].pending == 0 && tasks[i].kind == TaskKind::Comm {
                    let start = t.max(tasks[i].ready).max(comm_free);
                    tasks[i].start = start;
                    mi += 1;
                    if tasks[i].work <= 0.0 {
                        comm_free = start;
                        finish(&mut tasks, &succs, i, start);
                    } else {
                        run_m = Some((i, tasks[i].work));
                    }
                    progressed = true;
                }
            }
            if !progressed {
                break;
            }
        }
        // A blocking op holds the compute stream while it runs.
        let blocking = run_m.is_some_and(|(i, _)| tasks[i].kind == TaskKind::Blocking);
        let both = run_c.is_some() && run_m.is_some();
        let slowed =
            |run: Option<(usize, f64)>| both && run.is_some_and(|(i, _)| !tasks[i].measured);
        let rc = if slowed(run_c) {
            1.0 / overlap.compute
        } else {
            1.0
        };
        let rm = if slowed(run_m) {
            1.0 / overlap.comm
        } else {
            1.0
        };
        let dc = run_c.map(|(_, w)| w / rc);
        let dm = run_m.map(|(_, w)| w / rm);
        let dt = match (dc, dm) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => break,
        };
        t += dt;
        // The op whose remaining time is the minimum ends now (both on a tie); the other
        // keeps the work it has left.
        if let Some((i, w)) = run_c {
            if dc == Some(dt) {
                run_c = None;
                compute_free = t;
                finish(&mut tasks, &succs, i, t);
            } else {
                // Rounding must not leave negative work (time would run backwards).
                run_c = Some((i, (w - dt * rc).max(0.0)));
            }
        }
        if let Some((i, w)) = run_m {
            if dm == Some(dt) {
                run_m = None;
                comm_free = t;
                if blocking {
                    compute_free = t;
                }
                finish(&mut tasks, &succs, i, t);
            } else {
                run_m = Some((i, (w - dt * rm).max(0.0)));
            }
        }
    }

    // The timeline and the events, in program order.
    let mut tl = Timeline::default();
    for task in &tasks {
        let dur = task.end - task.start;
        match (task.kind, task.cost) {
            (TaskKind::Free, _) => sink(SimEvent::Op {
                op: task.op,
                lane: Lane::None,
                start_ns: task.start,
                end_ns: task.start,
                exposed_ns: 0.0,
            }),
            (TaskKind::Compute, _) if !task.waited.is_empty() || task.coll.is_none() => {
                if !task.waited.is_empty() {
                    let stall = (task.start - task.lane_free).max(0.0);
                    // Charge the stall to the collective that ends last.
                    let last = task.waited.iter().copied().max_by(|a, b| {
                        colls_end(&tasks, &coll_task, *a)
                            .total_cmp(&colls_end(&tasks, &coll_task, *b))
                    });
                    if let Some(c) = last {
                        colls[c].exposed_ns += stall;
                        if stall > 0.0 {
                            sink(SimEvent::Stall {
                                collective: colls[c].op,
                                start_ns: task.lane_free,
                                end_ns: task.start,
                            });
                        }
                    }
                }
                tl.compute_ns += dur;
                sink(SimEvent::Op {
                    op: task.op,
                    lane: Lane::Compute,
                    start_ns: task.start,
                    end_ns: task.end,
                    exposed_ns: 0.0,
                });
            }
            (TaskKind::Compute, OpCost::Fused { ns, exposed_ns }) => {
                // Stretched as a whole: its exposed share stretches with it.
                let exposed = if ns > 0.0 { exposed_ns * dur / ns } else { 0.0 };
                tl.compute_ns += dur - exposed;
                tl.comm_ns += exposed;
                let c = task.coll.expect("a fused op has a collective entry");
                colls[c] = CollectiveTiming {
                    op: task.op,
                    start_ns: task.start,
                    end_ns: task.end,
                    exposed_ns: exposed,
                };
                sink(SimEvent::Op {
                    op: task.op,
                    lane: Lane::Compute,
                    start_ns: task.start,
                    end_ns: task.end,
                    exposed_ns: exposed,
                });
            }
            (TaskKind::Compute, _) => {
                // A blocking collective run by the compute stream: all of it exposed.
                tl.compute_ns += dur;
                tl.comm_ns += dur;
                let c = task
                    .coll
                    .expect("a blocking symm op has a collective entry");
                let exposed = colls[c].exposed_ns + dur;
                colls[c] = CollectiveTiming {
                    op: task.op,
                    start_ns: task.start,
                    end_ns: task.end,
                    exposed_ns: exposed,
                };
                sink(SimEvent::Op {
                    op: task.op,
                    lane: Lane::Compute,
                    start_ns: task.start,
                    end_ns: task.end,
                    exposed_ns: dur,
                });
            }
            (TaskKind::Comm | TaskKind::Blocking, _) => {
                let blocking = task.kind == TaskKind::Blocking;
                tl.comm_ns += dur;
                let exposed = if blocking {
                    task.end - task.lane_free.min(task.end)
                } else {
                    0.0
                };
                let c = task.coll.expect("a collective has a collective entry");
                colls[c].start_ns = task.start;
                colls[c].end_ns = task.end;
                colls[c].exposed_ns += exposed;
                sink(SimEvent::Op {
                    op: task.op,
                    lane: Lane::Comm,
                    start_ns: task.start,
                    end_ns: task.end,
                    exposed_ns: exposed,
                });
                if blocking && exposed > 0.0 {
                    sink(SimEvent::Stall {
                        collective: task.op,
                        start_ns: task.end - exposed,
                        end_ns: task.end,
                    });
                }
            }
        }
    }
    tl.collectives = colls;
    tl.exposed_comm_ns = tl.collectives.iter().map(|c| c.exposed_ns).sum();
    tl.makespan_ns = compute_free.max(comm_free);
    tl
}

/// The end of collective `c` in the event-driven simulation.
fn colls_end(tasks: &[Task], coll_task: &[usize], c: usize) -> f64 {
    tasks[coll_task[c]].end
}
