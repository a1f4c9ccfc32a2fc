//! `comm-overlap-schedule`: orders a function's ops to minimize the simulated makespan of the
//! two-stream machine (one compute stream, one comm stream; [`crate::analysis::timeline`])
//! under a hard peak-memory limit of `(1 + peak-memory-budget) ×` the input's peak, keeping
//! every data dependency and every group's collective order (the [`DepGraph`] edges).
//!
//! How (docs/passes/comm-overlap-schedule.md says why):
//!
//! 1. A node-level model of the function ([`Model`]): per node its stream class and duration
//!    from the cost table, the nodes its operands come from, the collectives each wait
//!    completes, and the buffer model (allocations, the storages each node touches, when each
//!    is freed). Stepping it over an order gives exactly what the timeline simulator and the
//!    buffer model give for that order, in O(degree) per node, so schedules are compared
//!    without touching the IR.
//! 2. List schedules ([`list_schedule`]): the compute stream keeps a fixed order (the
//!    input's, or one re-ranked by critical path); every async collective is issued as soon
//!    as its inputs and its group's previous collective are issued — the one with the longest
//!    path to the end first — if hoisting its buffer that far keeps every memory level within
//!    the limit (a max segment tree over the compute-order slots, so the check is
//!    O(log n)); each wait goes just before its first user. XLA's latency-hiding scheduler
//!    and Inductor's overlap scheduler make the same two moves (start early, done late) under
//!    a memory limit.
//! 3. Seeds: the orders Inductor's passes find (`comm-reorder-peak-memory` alone and the
//!    whole sequence with `comm-sink-waits-iterative`), each a candidate as it is and a base
//!    for the list schedule, so the pass is never slower than that sequence (above 20 000
//!    ops the single reorder only, for time).
//! 4. Local search (`improve_locally`, on functions of at most 256 ops): moves
//!    and swaps of ops a few dozen places apart, kept when the simulated makespan drops
//!    within the limit.
//! 5. Exact search ([`branch_and_bound`]) over the topological orders of a function of at
//!    most `exact-region-ops` ops, with memory pruning, lower bounds (each unissued op's
//!    earliest start plus its path to the end, each stream's remaining work), costless ops
//!    issued at once, and dominance on (issued set, stream times); bounded by a node budget.
//! 6. The result is the best, by simulated makespan, of the input order and every schedule
//!    above that fits, computed for each step of the budget ladder ([`BUDGET_LADDER`]) up to
//!    the requested budget: a schedule that fits a smaller budget fits a larger one, so the
//!    result is never slower than the input and never slower for a larger budget.
//!
//! Everything is deterministic: ties break on node numbers, never on addresses or hashes.

use crate::analysis::buffers::is_donated;
use crate::analysis::cost::OpCost;
use crate::analysis::timeline::{simulate_ops_overlap, Overlap};
use crate::comm_reorder_peak_memory::{plan_reorder_peak_memory, Planner};
use crate::comm_sink_waits_iterative::plan_sink_waits_iterative;
use crate::schedule::iterative::IterOptions;
use crate::schedule::{self, body_block, check, CostTable, DepGraph, GraphOptions, NodeKind, NONE};
use commlir_dialects::shape::tensor_bytes;
use commlir_ir::pass::{
    Anchor, OptionDef, OptionKind, Pass, PassEnv, PassInfo, PassOptions, StatisticDef,
};
use commlir_ir::{BlockId, Context, Diagnostic, OpId, Trait, Type};
use rustc_hash::FxHashMap;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// The budgets the pass schedules for, in increasing order. A requested budget is rounded
/// down to the ladder (the largest step not above it) and every step up to it is tried: that
/// is what makes the pass exactly monotone in its budget. The steps are dense where budgets
/// are usually set (a few percent to a half).
pub const BUDGET_LADDER: &[f64] = &[
    0.0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0,
];

/// Default `exact-region-ops`: functions this small are searched exactly (within the node
/// budget); a few dozen ops is where branch and bound stays in the milliseconds.
pub const DEFAULT_EXACT_OPS: u32 = 40;

/// Functions above this many ops try each compute order under the limit only (not under
/// tighter ones): four times fewer list schedules where time matters most.
const TIGHTER_MAX_OPS: usize = 20_000;

/// Default node budget of the exact search.
pub const DEFAULT_EXACT_NODES: u64 = 200_000;

/// A deliberately broken behaviour, for the tests that show each invariant's check fails
/// when the invariant breaks (option `test-break`; never set outside tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestBreak {
    None,
    /// Ignore the memory limit.
    Memory,
    /// Swap the first two collectives of a group (SPMD order).
    GroupOrder,
    /// Move the first op with a user to the end, before the terminator (a data dependency).
    Dependency,
    /// Keep the slowest list schedule, without comparing with the input order.
    NoGuard,
    /// Use the requested budget only, not the ladder below it.
    NoLadder,
    /// Every other run in the process keeps the input order (nondeterminism).
    Nondeterministic,
}

/// Options of the pass.
#[derive(Clone, Copy, Debug)]
pub struct OverlapOptions {
    /// Allowed peak increase as a fraction of the input's peak (a hard limit).
    pub peak_memory_budget: f64,
    /// How many deferred collectives are retried per compute slot (per group at least one).
    pub lookahead: u32,
    /// Functions of at most this many ops are searched exactly; 0 turns the search off.
    pub exact_region_ops: u32,
    /// Node budget of the exact search.
    pub exact_nodes: u64,
    pub test_break: TestBreak,
}

impl Default for OverlapOptions {
    fn default() -> Self {
        OverlapOptions {
            peak_memory_budget: 0.0,
            lookahead: 8,
            exact_region_ops: DEFAULT_EXACT_OPS,
            exact_nodes: DEFAULT_EXACT_NODES,
            test_break: TestBreak::None,
        }
    }
}

const BREAKS: &[&str] = &[
    "none",
    "memory",
    "group-order",
    "dependency",
    "no-guard",
    "no-ladder",
    "nondeterministic",
];

/// The options of the pass.
pub const OPTIONS: &[OptionDef] = &[
    OptionDef::new(
        "peak-memory-budget",
        OptionKind::Float,
        "0.0",
        "Largest allowed peak-memory increase, as a fraction of the input's peak (hard limit; \
         rounded down to the budget ladder)",
    ),
    OptionDef::new(
        "lookahead",
        OptionKind::UInt,
        "8",
        "Deferred collectives retried per compute slot when memory stopped them (at least 1)",
    ),
    OptionDef::new(
        "exact-region-ops",
        OptionKind::UInt,
        "40",
        "Search functions of at most this many ops exactly (branch and bound); 0: never",
    ),
    OptionDef::new(
        "exact-nodes",
        OptionKind::UInt,
        "200000",
        "Node budget of the exact search",
    ),
    OptionDef::new(
        "test-break",
        OptionKind::Enum(BREAKS),
        "none",
        "Testing only: break one invariant on purpose, to show its check catches it",
    ),
    crate::analysis::machine::MACHINE_OPTION,
];

impl OverlapOptions {
    /// Reads the options declared by [`OPTIONS`].
    pub fn from_pass_options(o: &PassOptions) -> Result<OverlapOptions, String> {
        let budget = o.get_float("peak-memory-budget");
        if !budget.is_finite() || budget < 0.0 {
            return Err(format!(
                "peak-memory-budget must be a non-negative number, got {budget}"
            ));
        }
        let lookahead = o.get_uint("lookahead");
        if lookahead == 0 {
            return Err("lookahead must be at least 1".to_string());
        }
        let test_break = match o.get_str("test-break") {
            "memory" => TestBreak::Memory,
            "group-order" => TestBreak::GroupOrder,
            "dependency" => TestBreak::Dependency,
            "no-guard" => TestBreak::NoGuard,
            "no-ladder" => TestBreak::NoLadder,
            "nondeterministic" => TestBreak::Nondeterministic,
            _ => TestBreak::None,
        };
        Ok(OverlapOptions {
            peak_memory_budget: budget,
            lookahead: u32::try_from(lookahead).unwrap_or(u32::MAX),
            exact_region_ops: u32::try_from(o.get_uint("exact-region-ops")).unwrap_or(u32::MAX),
            exact_nodes: o.get_uint("exact-nodes"),
            test_break,
        })
    }
}

/// How a node uses the two streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Completes collectives: blocks the compute stream until they end.
    Wait,
    /// A collective on the comm stream; a blocking one also holds the compute stream.
    Comm { blocking: bool },
    /// Runs on the compute stream (compute, one-shot collectives, fused collective-matmuls).
    Stream,
    /// Takes no time on either stream.
    Free,
}

/// The node-level model of one function body (see the module docs).
pub struct Model {
    pub graph: DepGraph,
    class: Vec<Class>,
    dur: Vec<f64>,
    in_off: Vec<u32>,
    ins: Vec<u32>,
    wait_off: Vec<u32>,
    waits_on: Vec<u32>,
    alloc: Vec<i64>,
    touch_off: Vec<u32>,
    touch: Vec<u32>,
    holders: Vec<u32>,
    free_size: Vec<i64>,
    base: i64,
    /// Longest path from the node's start to the end of the function (its own time
    /// included), over every edge of the graph: the list schedules' priority.
    pub bottom: Vec<f64>,
    /// The same over the edges that are also time constraints only (see [`Model::new`]):
    /// the exact search's bounds and [`Model::lower_bound`].
    tail: Vec<f64>,
}

/// Timing state of the two-stream machine after some prefix of an order.
#[derive(Clone, Debug)]
pub struct Clock {
    compute_free: f64,
    comm_free: f64,
    finish: Vec<f64>,
}

/// Memory state after some prefix of an order.
#[derive(Clone, Debug)]
pub struct Mem {
    cur: i64,
    peak: i64,
    remaining: Vec<u32>,
}

fn csr_slice<'a>(off: &[u32], data: &'a [u32], n: u32) -> &'a [u32] {
    &data[off[n as usize] as usize..off[n as usize + 1] as usize]
}

impl Model {
    /// The model of `block` in its current order with the costs of `costs`.
    pub fn new(ctx: &Context, block: BlockId, costs: &CostTable) -> Model {
        let graph = DepGraph::build(ctx, block, GraphOptions::default());
        let n = graph.len();
        // Per op name: (wait, blocking, writes its operands, return-like), looked up once.
        let mut by_name: Vec<Option<(bool, bool, bool, bool)>> = Vec::new();
        let mut facts = |op: OpId| {
            let i = ctx.op_name_ident(op).index();
            if i >= by_name.len() {
                by_name.resize(i + 1, None);
            }
            *by_name[i].get_or_insert_with(|| {
                (
                    ctx.op_has_trait(op, Trait::Wait),
                    ctx.op_has_trait(op, Trait::Blocking),
                    ctx.op_has_trait(op, Trait::MemWrite),
                    ctx.op_has_trait(op, Trait::ReturnLike),
                )
            })
        };
        let mut class = Vec::with_capacity(n);
        let mut dur = Vec::with_capacity(n);
        let (mut in_off, mut ins) = (vec![0u32], Vec::with_capacity(n * 2));
        let (mut wait_off, mut waits_on) = (vec![0u32], Vec::new());
        // The simulator's map from a value to the collective whose completion it waits for.
        let mut coll_of_value = vec![NONE; ctx.num_value_slots()];
        // Storages, as the buffer model resolves them.
        let mut storage_of = vec![NONE; ctx.num_value_slots()];
        let mut size_of_type: FxHashMap<Type, i64> = FxHashMap::default();
        let mut bytes = |t: Type| {
            *size_of_type
                .entry(t)
                .or_insert_with(|| tensor_bytes(ctx, t).unwrap_or(0) as i64)
        };
        let mut free_size: Vec<i64> = Vec::new();
        let mut escapes: Vec<bool> = Vec::new();
        let mut counted: Vec<bool> = Vec::new();
        let mut base = 0i64;
        let func = ctx.block_parent_op(block);
        for (i, &a) in ctx.block_args(block).iter().enumerate() {
            let donated = func.is_some_and(|f| is_donated(ctx, f, i));
            let s = bytes(ctx.value_type(a));
            storage_of[a.index()] = free_size.len() as u32;
            free_size.push(s);
            escapes.push(false);
            counted.push(donated);
            if donated {
                base += s;
            }
        }
        let mut alloc = vec![0i64; n];
        let (mut touch_off, mut touch) = (vec![0u32], Vec::with_capacity(n * 2));
        let mut scratch: Vec<u32> = Vec::new();
        for (p, &op) in graph.ops.iter().enumerate() {
            let (wait, blocking, writes, ret) = facts(op);
            let cost = costs.get(op);
            let c = if wait {
                Class::Wait
            } else {
                match cost {
                    OpCost::Collective(_) => Class::Comm { blocking },
                    OpCost::Compute(_) | OpCost::Fused { .. } => Class::Stream,
                    OpCost::Free => Class::Free,
                }
            };
            class.push(c);
            dur.push(cost.ns());
            let operands = ctx.operands(op);
            scratch.clear();
            for &v in operands {
                if let Some(d) = ctx.defining_op(v).and_then(|d| graph.node(d)) {
                    scratch.push(d);
                }
            }
            scratch.sort_unstable();
            scratch.dedup();
            ins.extend_from_slice(&scratch);
            in_off.push(ins.len() as u32);
            if wait {
                scratch.clear();
                scratch.extend(
                    operands
                        .iter()
                        .map(|v| coll_of_value[v.index()])
                        .filter(|&c| c != NONE),
                );
                scratch.sort_unstable();
                scratch.dedup();
                waits_on.extend_from_slice(&scratch);
            }
            wait_off.push(waits_on.len() as u32);
            if c == (Class::Comm { blocking }) {
                for r in ctx.results(op) {
                    coll_of_value[r.index()] = p as u32;
                }
                if writes {
                    for v in operands {
                        coll_of_value[v.index()] = p as u32;
                    }
                }
            }
            // Storages: those of the operands, then new ones for results that alias nothing.
            let t0 = touch.len();
            for &v in operands {
                let s = storage_of[v.index()];
                if s != NONE {
                    if ret {
                        escapes[s as usize] = true;
                    }
                    if !touch[t0..].contains(&s) {
                        touch.push(s);
                    }
                }
            }
            let rule = crate::schedule::graph::AliasRule::of_name(ctx.op_name(op));
            for (r, &v) in ctx.results(op).iter().enumerate() {
                if let Some(a) = rule.alias(operands, r) {
                    let s = storage_of[a.index()];
                    if s != NONE {
                        storage_of[v.index()] = s;
                        continue;
                    }
                }
                let s = bytes(ctx.value_type(v));
                storage_of[v.index()] = free_size.len() as u32;
                touch.push(free_size.len() as u32);
                free_size.push(s);
                escapes.push(false);
                counted.push(true);
                alloc[p] += s;
            }
            touch_off.push(touch.len() as u32);
        }
        let mut holders = vec![0u32; free_size.len()];
        for &s in &touch {
            holders[s as usize] += 1;
        }
        for s in 0..free_size.len() {
            if !counted[s] || escapes[s] {
                free_size[s] = 0;
            }
        }
        let mut bottom = vec![0.0f64; n];
        for i in (0..n).rev() {
            let tail = graph
                .succs(i as u32)
                .iter()
                .map(|&s| bottom[s as usize])
                .fold(0.0, f64::max);
            bottom[i] = dur[i] + tail;
        }
        // Time edges: an input (a node's finish feeds its user's start), a wait's collective,
        // and an order edge between two nodes of the same stream (a stream runs its ops in
        // issue order). Other order edges (an in-place collective after the last reader of
        // its buffer, an op pinned after another) constrain the order only: the comm stream
        // may start a collective before a compute op issued ahead of it finishes, so a path
        // through them is no bound on time.
        let on_compute = |c: Class| {
            matches!(
                c,
                Class::Wait | Class::Stream | Class::Comm { blocking: true }
            )
        };
        let on_comm = |c: Class| matches!(c, Class::Comm { .. });
        let mut tail = vec![0.0f64; n];
        for i in (0..n).rev() {
            tail[i] += dur[i];
            let (ti, ci) = (tail[i], class[i]);
            let lift = |p: usize, tail: &mut Vec<f64>| {
                if p < i {
                    tail[p] = tail[p].max(ti);
                }
            };
            for &p in csr_slice(&in_off, &ins, i as u32) {
                lift(p as usize, &mut tail);
            }
            for &p in csr_slice(&wait_off, &waits_on, i as u32) {
                lift(p as usize, &mut tail);
            }
            for &p in graph.preds(i as u32) {
                let cp = class[p as usize];
                if (on_compute(cp) && on_compute(ci)) || (on_comm(cp) && on_comm(ci)) {
                    lift(p as usize, &mut tail);
                }
            }
        }
        Model {
            graph,
            class,
            dur,
            in_off,
            ins,
            wait_off,
            waits_on,
            alloc,
            touch_off,
            touch,
            holders,
            free_size,
            base,
            bottom,
            tail,
        }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.graph.len()
    }

    /// Whether the function body is empty.
    pub fn is_empty(&self) -> bool {
        self.graph.is_empty()
    }

    /// The clock before the first op.
    pub fn clock(&self) -> Clock {
        Clock {
            compute_free: 0.0,
            comm_free: 0.0,
            finish: vec![0.0; self.len()],
        }
    }

    /// The memory state before the first op.
    pub fn mem(&self) -> Mem {
        Mem {
            cur: self.base,
            peak: self.base,
            remaining: self.holders.clone(),
        }
    }

    fn inputs_ready(&self, c: &Clock, n: u32) -> f64 {
        csr_slice(&self.in_off, &self.ins, n)
            .iter()
            .map(|&p| c.finish[p as usize])
            .fold(0.0, f64::max)
    }

    /// Issues node `n` on the clock, as the timeline simulator does.
    pub fn step_time(&self, c: &mut Clock, n: u32) {
        let ni = n as usize;
        let ready = self.inputs_ready(c, n);
        let d = self.dur[ni];
        c.finish[ni] = match self.class[ni] {
            Class::Wait => {
                let end = csr_slice(&self.wait_off, &self.waits_on, n)
                    .iter()
                    .map(|&x| c.finish[x as usize])
                    .fold(ready, f64::max);
                c.compute_free = c.compute_free.max(end) + d;
                c.compute_free
            }
            Class::Comm { blocking } => {
                let mut start = ready.max(c.comm_free);
                if blocking {
                    start = start.max(c.compute_free);
                }
                c.comm_free = start + d;
                if blocking {
                    c.compute_free = c.comm_free;
                }
                c.comm_free
            }
            Class::Stream => {
                c.compute_free = ready.max(c.compute_free) + d;
                c.compute_free
            }
            Class::Free => ready,
        };
    }

    /// Issues node `n` in memory; returns the level right after its allocations.
    pub fn step_mem(&self, m: &mut Mem, n: u32) -> i64 {
        m.cur += self.alloc[n as usize];
        let level = m.cur;
        m.peak = m.peak.max(level);
        for &s in csr_slice(&self.touch_off, &self.touch, n) {
            let r = &mut m.remaining[s as usize];
            *r -= 1;
            if *r == 0 {
                m.cur -= self.free_size[s as usize];
            }
        }
        level
    }

    /// Makespan (ns) and peak memory (bytes) of `order` (node numbers).
    pub fn evaluate(&self, order: &[u32]) -> (f64, i64) {
        let (mut c, mut m) = (self.clock(), self.mem());
        for &n in order {
            self.step_time(&mut c, n);
            self.step_mem(&mut m, n);
        }
        (c.compute_free.max(c.comm_free), m.peak)
    }

    /// A lower bound on the makespan of every order, whatever the memory: the longest
    /// dependency chain, the compute stream's total work and the comm stream's.
    pub fn lower_bound(&self) -> f64 {
        let (mut compute, mut comm) = (0.0, 0.0);
        for (c, d) in self.class.iter().zip(&self.dur) {
            match c {
                Class::Wait | Class::Stream => compute += d,
                Class::Comm { blocking } => {
                    comm += d;
                    if *blocking {
                        compute += d;
                    }
                }
                Class::Free => {}
            }
        }
        self.tail.iter().copied().fold(compute.max(comm), f64::max)
    }

    fn is_async(&self, n: u32) -> bool {
        self.class[n as usize] == Class::Comm { blocking: false }
            && self.graph.kind[n as usize] == NodeKind::Collective
    }
}

/// A max segment tree with range add, over the compute-order slots: the memory levels of a
/// schedule while collectives are hoisted into it.
struct SegTree {
    size: usize,
    max: Vec<i64>,
    add: Vec<i64>,
}

impl SegTree {
    fn new(levels: &[i64]) -> SegTree {
        let size = levels.len().next_power_of_two().max(1);
        let mut max = vec![i64::MIN / 4; 2 * size];
        max[size..size + levels.len()].copy_from_slice(levels);
        for i in (1..size).rev() {
            max[i] = max[2 * i].max(max[2 * i + 1]);
        }
        SegTree {
            size,
            max,
            add: vec![0; 2 * size],
        }
    }

    /// Max over slots `[l, r)`.
    fn query(&self, l: usize, r: usize) -> i64 {
        self.query_in(1, 0, self.size, l, r)
    }

    fn query_in(&self, node: usize, lo: usize, hi: usize, l: usize, r: usize) -> i64 {
        if r <= lo || hi <= l {
            return i64::MIN / 4;
        }
        if l <= lo && hi <= r {
            return self.max[node];
        }
        let mid = (lo + hi) / 2;
        self.add[node]
            + self
                .query_in(2 * node, lo, mid, l, r)
                .max(self.query_in(2 * node + 1, mid, hi, l, r))
    }

    /// Adds `v` to slots `[l, r)`.
    fn add(&mut self, l: usize, r: usize, v: i64) {
        self.add_in(1, 0, self.size, l, r, v);
    }

    fn add_in(&mut self, node: usize, lo: usize, hi: usize, l: usize, r: usize, v: i64) {
        if r <= lo || hi <= l {
            return;
        }
        if l <= lo && hi <= r {
            self.max[node] += v;
            self.add[node] += v;
            return;
        }
        let mid = (lo + hi) / 2;
        self.add_in(2 * node, lo, mid, l, r, v);
        self.add_in(2 * node + 1, mid, hi, l, r, v);
        self.max[node] = self.add[node] + self.max[2 * node].max(self.max[2 * node + 1]);
    }
}

/// A ready collective in the issue heap: longest path to the end first, then node number.
#[derive(PartialEq)]
struct Prio(f64, u32);

impl Eq for Prio {}

impl PartialOrd for Prio {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Prio {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .total_cmp(&other.0)
            .then_with(|| other.1.cmp(&self.1))
    }
}

/// How the compute stream's order is chosen in [`list_schedule`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComputeOrder {
    /// The input's order.
    Input,
    /// A list schedule of the compute stream: of the ops that can start when it is free,
    /// the one with the longest path to the end first, within the memory limit.
    CriticalPath,
    /// The same, earliest in the input first: the input's order, except that an op waiting
    /// for a collective lets ready ops behind it go first.
    EarliestStart,
}

/// Whether a node may be placed lazily (just before its first user): a wait that is not the
/// last to touch one of its storages in `order` (sinking it then frees nothing later).
fn lazy_waits(model: &Model, order: &[u32]) -> Vec<bool> {
    let mut last = vec![NONE; model.free_size.len()];
    for &n in order {
        for &s in csr_slice(&model.touch_off, &model.touch, n) {
            last[s as usize] = n;
        }
    }
    let mut lazy = vec![false; model.len()];
    for n in 0..model.len() as u32 {
        if model.class[n as usize] == Class::Wait && model.graph.kind[n as usize] == NodeKind::Wait
        {
            lazy[n as usize] = csr_slice(&model.touch_off, &model.touch, n)
                .iter()
                .all(|&s| last[s as usize] != n || model.free_size[s as usize] == 0);
        }
    }
    lazy
}

/// A key of a compute-stream candidate that can start now: larger is picked first.
fn key_of(model: &Model, compute: ComputeOrder, i: u32) -> Prio {
    match compute {
        ComputeOrder::CriticalPath => Prio(model.bottom[i as usize], i),
        // Earliest in the input first.
        _ => Prio(-f64::from(i), i),
    }
}

/// A compute-stream order for [`list_schedule`]: a list schedule on the two-stream clock in
/// which async collectives are issued as soon as they are ready and every other node is a
/// candidate once its predecessors are issued, startable at `est` (its inputs, and for a
/// wait its collectives' ends). Among the candidates that can start when the compute stream
/// is free, the one of the highest key (longest path to the end, or earliest in the input)
/// whose allocation fits `limit` goes next; when none can start yet, the earliest to start.
/// Returns the whole order (the list schedule re-places its floating nodes), or `None` as
/// soon as a node it must issue takes memory over `hard_limit` (the list schedule's baseline
/// from such an order is over the limit too, so it would be dropped). O(n log n).
fn compute_order(
    model: &Model,
    limit: i64,
    hard_limit: i64,
    compute: ComputeOrder,
) -> Option<Vec<u32>> {
    let n = model.len();
    let g = &model.graph;
    let mut indeg: Vec<u32> = (0..n as u32).map(|i| g.preds(i).len() as u32).collect();
    let mut clock = model.clock();
    let mut mem = model.mem();
    // Candidates that can start now, by key; the others by their earliest start.
    let mut now: BinaryHeap<Prio> = BinaryHeap::new();
    let mut later: BinaryHeap<std::cmp::Reverse<Prio>> = BinaryHeap::new();
    let mut out = Vec::with_capacity(n);
    let mut stack: Vec<u32> = (0..n as u32).filter(|&i| indeg[i as usize] == 0).collect();
    stack.reverse();
    let mut skipped: Vec<Prio> = Vec::new();
    let mut issued = 0usize;
    // Collectives the memory limit held back, retried after every issue (node order).
    let mut held: Vec<u32> = Vec::new();
    loop {
        // Issue what became ready: collectives at once when they fit, the rest as candidates.
        loop {
            let mut progressed = false;
            while let Some(x) = stack.pop() {
                if model.is_async(x) {
                    held.push(x);
                    continue;
                }
                let est = match model.class[x as usize] {
                    Class::Wait => csr_slice(&model.wait_off, &model.waits_on, x)
                        .iter()
                        .map(|&c| clock.finish[c as usize])
                        .fold(model.inputs_ready(&clock, x), f64::max),
                    _ => model.inputs_ready(&clock, x),
                };
                later.push(std::cmp::Reverse(Prio(est, x)));
            }
            held.sort_unstable();
            let stuck = now.is_empty() && later.is_empty();
            let mut k = 0;
            while k < held.len() {
                let x = held[k];
                if mem.cur + model.alloc[x as usize] <= limit || (stuck && k == 0) {
                    held.remove(k);
                    out.push(x);
                    model.step_time(&mut clock, x);
                    if model.step_mem(&mut mem, x) > hard_limit {
                        return None;
                    }
                    issued += 1;
                    progressed = true;
                    for &s in g.succs(x).iter().rev() {
                        indeg[s as usize] -= 1;
                        if indeg[s as usize] == 0 {
                            stack.push(s);
                        }
                    }
                    break;
                }
                k += 1;
            }
            if !progressed {
                break;
            }
        }
        if issued == n {
            break;
        }
        while let Some(std::cmp::Reverse(Prio(est, x))) = later.peek() {
            if *est <= clock.compute_free || now.is_empty() {
                let x = *x;
                later.pop();
                now.push(key_of(model, compute, x));
            } else {
                break;
            }
        }
        let mut pick = None;
        for _ in 0..4 {
            let Some(p) = now.pop() else { break };
            if mem.cur + model.alloc[p.1 as usize] <= limit {
                pick = Some(p.1);
                break;
            }
            skipped.push(p);
        }
        if pick.is_none() {
            // Nothing fits: the input's next candidate (the order most likely to fit).
            let first = skipped.iter().map(|p| p.1).min();
            pick = first.or_else(|| now.pop().map(|p| p.1));
            skipped.retain(|p| Some(p.1) != pick);
        }
        now.extend(skipped.drain(..));
        let Some(x) = pick else { break };
        model.step_time(&mut clock, x);
        if model.step_mem(&mut mem, x) > hard_limit {
            return None;
        }
        issued += 1;
        out.push(x);
        for &s in g.succs(x).iter().rev() {
            indeg[s as usize] -= 1;
            if indeg[s as usize] == 0 {
                stack.push(s);
            }
        }
    }
    Some(out)
}

/// A list schedule (see the module docs) for memory `limit`; `keep_comm_order` issues the
/// collectives of all groups in the input's relative order (else each group's own order
/// only). Returns an order of every node (a topological order of the graph). O(n log n).
pub fn list_schedule(
    model: &Model,
    limit: i64,
    compute: ComputeOrder,
    keep_comm_order: bool,
    lookahead: u32,
) -> Vec<u32> {
    list_schedule_with(model, limit, limit, compute, keep_comm_order, lookahead)
}

/// [`list_schedule`] whose compute order is chosen under `order_limit` (a tighter limit
/// leaves room for the frees that a greedy order delays).
pub fn list_schedule_with(
    model: &Model,
    limit: i64,
    order_limit: i64,
    compute: ComputeOrder,
    keep_comm_order: bool,
    lookahead: u32,
) -> Vec<u32> {
    let n = model.len();
    // The order the compute stream follows; its collectives' places are where hoisting
    // starts from (and what the memory levels are measured on).
    let base = match compute {
        ComputeOrder::Input => (0..n as u32).collect(),
        _ => match compute_order(model, order_limit, limit, compute) {
            Some(order) => order,
            // Over the limit: the input order's schedule instead (it always fits).
            None => (0..n as u32).collect(),
        },
    };
    // When no schedule from this base fits, the base itself (over the limit too).
    list_schedule_from(model, limit, &base, keep_comm_order, lookahead).unwrap_or(base)
}

/// [`list_schedule`] keeping the compute order of `base` (a topological order of every
/// node), e.g. the order another scheduling pass found: its collectives are hoisted and its
/// waits sunk from there. `None` when `base` itself, with its collectives at their latest
/// places, is over `limit` (then so is every schedule from it).
pub fn list_schedule_from(
    model: &Model,
    limit: i64,
    base: &[u32],
    keep_comm_order: bool,
    lookahead: u32,
) -> Option<Vec<u32>> {
    let n = model.len();
    let g = &model.graph;
    let lazy = lazy_waits(model, base);
    let floating: Vec<bool> = (0..n as u32)
        .map(|i| model.is_async(i) || lazy[i as usize])
        .collect();
    let seq: Vec<u32> = base
        .iter()
        .copied()
        .filter(|&i| !floating[i as usize])
        .collect();
    let mut slot_of = vec![0u32; n];
    for (k, &x) in seq.iter().enumerate() {
        slot_of[x as usize] = k as u32;
    }
    // A collective's latest slot: the slot of the first sequence node after it in `base`.
    let mut latest = vec![0u32; n];
    let mut next_slot = seq.len() as u32;
    for &i in base.iter().rev() {
        if floating[i as usize] {
            latest[i as usize] = next_slot;
        } else {
            next_slot = slot_of[i as usize];
        }
    }
    // Baseline memory levels per slot: the sequence with each collective issued right
    // before its latest slot and each lazy wait right before its first user.
    let base_order = baseline(model, &seq, &latest, &floating);
    let mut levels = vec![i64::MIN / 4; seq.len() + 1];
    {
        let mut m = model.mem();
        let mut pending: Vec<i64> = Vec::new();
        for &x in &base_order {
            let lv = model.step_mem(&mut m, x);
            pending.push(lv);
            if !floating[x as usize] {
                let s = slot_of[x as usize] as usize;
                levels[s] = pending.drain(..).fold(levels[s], i64::max);
            }
        }
        let end = seq.len();
        levels[end] = pending.drain(..).fold(levels[end], i64::max);
    }
    // Hoisting only adds to levels where the sum fits the limit, so a slot already over it
    // stays over it: no schedule from this base fits (`None`, before the O(n log n) part).
    if levels.iter().any(|&l| l > limit) {
        return None;
    }
    let mut tree = SegTree::new(&levels);

    let mut indeg: Vec<u32> = (0..n as u32).map(|i| g.preds(i).len() as u32).collect();
    let mut emitted = vec![false; n];
    let mut out: Vec<u32> = Vec::with_capacity(n);
    // Collectives in input order, for the forced issue at their latest slot and for the
    // all-groups order.
    let colls: Vec<u32> = (0..n as u32).filter(|&i| model.is_async(i)).collect();
    let mut next_forced = 0usize;
    let mut next_in_comm_order = 0usize;
    let mut ready: BinaryHeap<Prio> = BinaryHeap::new();
    let mut in_ready = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();

    // Emits `x` after every unemitted predecessor (lazy waits, collectives) in node order.
    struct St<'a> {
        model: &'a Model,
        indeg: Vec<u32>,
        emitted: Vec<bool>,
        out: Vec<u32>,
    }
    let mut st = St {
        model,
        indeg: std::mem::take(&mut indeg),
        emitted: std::mem::take(&mut emitted),
        out: std::mem::take(&mut out),
    };
    fn emit_with_preds(st: &mut St<'_>, x: u32, stack: &mut Vec<u32>, newly: &mut Vec<u32>) {
        if st.emitted[x as usize] {
            return;
        }
        stack.clear();
        stack.push(x);
        while let Some(&y) = stack.last() {
            if st.emitted[y as usize] {
                stack.pop();
                continue;
            }
            let missing = st
                .model
                .graph
                .preds(y)
                .iter()
                .rev()
                .find(|&&p| !st.emitted[p as usize])
                .copied();
            match missing {
                Some(p) => stack.push(p),
                None => {
                    stack.pop();
                    st.emitted[y as usize] = true;
                    st.out.push(y);
                    for &s in st.model.graph.succs(y) {
                        st.indeg[s as usize] -= 1;
                        if st.indeg[s as usize] == 0 {
                            newly.push(s);
                        }
                    }
                }
            }
        }
    }
    let mut newly: Vec<u32> = (0..n as u32).filter(|&i| g.preds(i).is_empty()).collect();
    let mut deferred: Vec<Prio> = Vec::new();
    for slot in 0..=seq.len() {
        // Collectives whose latest slot is this one go now, whatever the memory: the
        // baseline counted them here.
        while next_forced < colls.len() && latest[colls[next_forced] as usize] as usize <= slot {
            let c = colls[next_forced];
            next_forced += 1;
            if !st.emitted[c as usize] {
                emit_with_preds(&mut st, c, &mut stack, &mut newly);
            }
        }
        // Newly ready collectives join the issue heap; then issue what fits, best first.
        let mut tries = 0u32;
        loop {
            for &x in &newly {
                if model.is_async(x) && !in_ready[x as usize] && !st.emitted[x as usize] {
                    in_ready[x as usize] = true;
                    ready.push(Prio(model.bottom[x as usize], x));
                }
            }
            newly.clear();
            let Some(p) = ready.pop() else { break };
            let c = p.1;
            if st.emitted[c as usize] {
                continue;
            }
            if keep_comm_order {
                while next_in_comm_order < colls.len()
                    && st.emitted[colls[next_in_comm_order] as usize]
                {
                    next_in_comm_order += 1;
                }
                if colls.get(next_in_comm_order) != Some(&c) {
                    deferred.push(p);
                    continue;
                }
            }
            let hi = latest[c as usize] as usize;
            let fits = slot >= hi || tree.query(slot, hi) + model.alloc[c as usize] <= limit;
            if fits {
                if slot < hi {
                    tree.add(slot, hi, model.alloc[c as usize]);
                }
                emit_with_preds(&mut st, c, &mut stack, &mut newly);
            } else {
                deferred.push(p);
                tries += 1;
                if tries >= lookahead {
                    break;
                }
            }
        }
        ready.extend(deferred.drain(..));
        if slot == seq.len() {
            break;
        }
        let x = seq[slot];
        emit_with_preds(&mut st, x, &mut stack, &mut newly);
    }
    // Anything left (lazy waits without users): in node order.
    for x in 0..n as u32 {
        emit_with_preds(&mut st, x, &mut stack, &mut newly);
    }
    Some(st.out)
}

/// The order the list schedule's memory levels are measured on: `seq` with each floating
/// node at its latest slot (collectives) or just before its first user (waits).
fn baseline(model: &Model, seq: &[u32], latest: &[u32], floating: &[bool]) -> Vec<u32> {
    let n = model.len();
    let g = &model.graph;
    let mut by_slot: Vec<Vec<u32>> = vec![Vec::new(); seq.len() + 1];
    for i in 0..n {
        if floating[i] && model.is_async(i as u32) {
            by_slot[latest[i] as usize].push(i as u32);
        }
    }
    let mut emitted = vec![false; n];
    let mut out = Vec::with_capacity(n);
    let mut stack = Vec::new();
    let mut emit = |x: u32, out: &mut Vec<u32>, emitted: &mut Vec<bool>| {
        stack.clear();
        stack.push(x);
        while let Some(&y) = stack.last() {
            if emitted[y as usize] {
                stack.pop();
                continue;
            }
            match g.preds(y).iter().rev().find(|&&p| !emitted[p as usize]) {
                Some(&p) => stack.push(p),
                None => {
                    stack.pop();
                    emitted[y as usize] = true;
                    out.push(y);
                }
            }
        }
    };
    for (slot, colls) in by_slot.iter().enumerate() {
        for &c in colls {
            emit(c, &mut out, &mut emitted);
        }
        if let Some(&x) = seq.get(slot) {
            emit(x, &mut out, &mut emitted);
        }
    }
    for x in 0..n as u32 {
        emit(x, &mut out, &mut emitted);
    }
    out
}

/// Functions of at most this many ops get [`improve_locally`] at every ladder step (each
/// candidate move re-simulates the suffix after it; above this the pass stays O(n log n)).
const LOCAL_MAX_OPS: usize = 256;

/// How far (in positions) a node moves in one step of [`improve_locally`]: a few dozen ops,
/// the size of a layer's worth of compute and its collectives.
const LOCAL_WINDOW: usize = 24;

/// Most node steps [`improve_locally`] simulates per call (its time bound).
const LOCAL_STEPS: u64 = 40_000_000;

/// Snapshot spacing of [`improve_locally`]: a move re-simulates from the last snapshot
/// before it rather than from the start.
const LOCAL_SNAP: usize = 8;

/// Hill climbing on `order` (a feasible order of makespan `ms`): moves one node to another
/// place at most [`LOCAL_WINDOW`] away, or swaps two nodes that far apart, whenever the
/// result keeps the dependencies, fits `limit` and is faster; first improvement, sweeps
/// until none is found or the step budget is spent. Each candidate is simulated from a
/// snapshot of the machine state before the first changed place, and dropped as soon as its
/// partial makespan reaches the incumbent's or its memory the limit. Deterministic. Returns
/// the number of moves kept.
fn improve_locally(model: &Model, limit: i64, order: &mut Vec<u32>, ms: &mut f64) -> u64 {
    let n = order.len();
    let g = &model.graph;
    let mut pos = vec![0usize; n];
    let mut steps: u64 = 0;
    let mut snaps: Vec<(Clock, Mem)> = Vec::new();
    let take_snaps = |order: &[u32], from: usize, snaps: &mut Vec<(Clock, Mem)>| {
        let k0 = from / LOCAL_SNAP;
        snaps.truncate(k0.max(1));
        if snaps.is_empty() {
            snaps.push((model.clock(), model.mem()));
        }
        let (mut c, mut m) = snaps[snaps.len() - 1].clone();
        for (k, &x) in order
            .iter()
            .enumerate()
            .skip((snaps.len() - 1) * LOCAL_SNAP)
        {
            if k % LOCAL_SNAP == 0 && k / LOCAL_SNAP >= snaps.len() {
                snaps.push((c.clone(), m.clone()));
            }
            model.step_time(&mut c, x);
            model.step_mem(&mut m, x);
        }
    };
    take_snaps(order, 0, &mut snaps);
    let mut cand: Vec<u32> = Vec::with_capacity(n);
    let mut improved = true;
    let mut kept = 0u64;
    while improved && steps < LOCAL_STEPS {
        improved = false;
        for (k, &x) in order.iter().enumerate() {
            pos[x as usize] = k;
        }
        let mut i = 0;
        while i < n && steps < LOCAL_STEPS {
            let x = order[i];
            let lo = g
                .preds(x)
                .iter()
                .map(|&p| pos[p as usize] + 1)
                .max()
                .unwrap_or(0)
                .max(i.saturating_sub(LOCAL_WINDOW));
            let hi = g
                .succs(x)
                .iter()
                .map(|&s| pos[s as usize])
                .min()
                .unwrap_or(n)
                .min(i + LOCAL_WINDOW + 1)
                .min(n);
            let mut accepted = false;
            // Insertions of x at j (in [lo, hi), j != i), then swaps of x with a later node.
            let moves = (lo..hi)
                .filter(|&j| j != i)
                .map(|j| (j, false))
                .chain((i + 1..hi).map(|j| (j, true)));
            for (j, swap) in moves {
                if swap {
                    // y = order[j] moves to i: its preds must all be before i, and x's
                    // succs after j (checked by hi) and y's succs after j hold trivially.
                    let y = order[j];
                    if g.preds(y).iter().any(|&p| pos[p as usize] >= i) {
                        continue;
                    }
                    cand.clear();
                    cand.extend_from_slice(order);
                    cand.swap(i, j);
                } else {
                    cand.clear();
                    cand.extend_from_slice(order);
                    let v = cand.remove(i);
                    cand.insert(j, v);
                }
                let from = i.min(j);
                let k0 = (from / LOCAL_SNAP).min(snaps.len() - 1);
                let (mut c, mut m) = snaps[k0].clone();
                let mut ok = true;
                for &y in &cand[k0 * LOCAL_SNAP..] {
                    steps += 1;
                    model.step_time(&mut c, y);
                    if model.step_mem(&mut m, y) > limit
                        || c.compute_free.max(c.comm_free) >= *ms - 1e-6
                    {
                        ok = false;
                        break;
                    }
                }
                if ok {
                    *ms = c.compute_free.max(c.comm_free);
                    std::mem::swap(order, &mut cand);
                    take_snaps(order, from, &mut snaps);
                    for (k, &y) in order.iter().enumerate() {
                        pos[y as usize] = k;
                    }
                    accepted = true;
                    improved = true;
                    kept += 1;
                    break;
                }
            }
            if !accepted {
                i += 1;
            }
        }
    }
    kept
}

/// Result of [`branch_and_bound`].
#[derive(Clone, Debug)]
pub struct Exact {
    /// The best order found (node numbers).
    pub order: Vec<u32>,
    pub makespan_ns: f64,
    /// Whether the search finished within its node budget (the order is then optimal).
    pub proven: bool,
    /// Search nodes expanded.
    pub nodes: u64,
}

/// Exact search for the order of least makespan with peak memory ≤ `limit`, over the
/// topological orders of the model's graph (at most 128 nodes), starting from `incumbent`
/// (a feasible order). Depth-first, children by critical path; pruned by memory, by a
/// lower bound (the streams' remaining work, and for every ready node its earliest start
/// plus its longest path to the end), and by dominance: two prefixes with the same set of
/// issued nodes have the same memory state, so the one whose stream times and open finish
/// times are all no later is kept.
pub fn branch_and_bound(model: &Model, limit: i64, incumbent: &[u32], max_nodes: u64) -> Exact {
    let n = model.len();
    let (best_ms, _) = model.evaluate(incumbent);
    let mut s = Search {
        model,
        limit,
        best: incumbent.to_vec(),
        best_ms,
        nodes: 0,
        max_nodes,
        aborted: false,
        memo: FxHashMap::default(),
        prefix: Vec::with_capacity(n),
        memo_entries: 0,
        head: vec![0.0; n],
    };
    if n == 0 || n > 128 {
        return Exact {
            order: incumbent.to_vec(),
            makespan_ns: best_ms,
            proven: n == 0,
            nodes: 0,
        };
    }
    let g = &model.graph;
    let indeg: Vec<u32> = (0..n as u32).map(|i| g.preds(i).len() as u32).collect();
    let mut rem_compute = 0.0;
    let mut rem_comm = 0.0;
    for i in 0..n {
        match model.class[i] {
            Class::Wait | Class::Stream => rem_compute += model.dur[i],
            Class::Comm { blocking } => {
                rem_comm += model.dur[i];
                if blocking {
                    rem_compute += model.dur[i];
                }
            }
            Class::Free => {}
        }
    }
    let state = Node {
        clock: model.clock(),
        mem: model.mem(),
        indeg,
        set: 0,
        rem_compute,
        rem_comm,
    };
    s.dfs(state);
    Exact {
        order: s.best,
        makespan_ns: s.best_ms,
        proven: !s.aborted,
        nodes: s.nodes,
    }
}

#[derive(Clone)]
struct Node {
    clock: Clock,
    mem: Mem,
    indeg: Vec<u32>,
    set: u128,
    rem_compute: f64,
    rem_comm: f64,
}

struct Search<'a> {
    model: &'a Model,
    limit: i64,
    best: Vec<u32>,
    best_ms: f64,
    nodes: u64,
    max_nodes: u64,
    aborted: bool,
    memo: FxHashMap<u128, Vec<Vec<f64>>>,
    memo_entries: usize,
    prefix: Vec<u32>,
    /// Scratch: the earliest start of each unissued node (see `dfs`).
    head: Vec<f64>,
}

/// Most dominance signatures kept (memory bound of the search).
const MEMO_LIMIT: usize = 2_000_000;

impl Search<'_> {
    fn dfs(&mut self, st: Node) {
        let m = self.model;
        let n = m.len();
        if self.prefix.len() == n {
            let ms = st.clock.compute_free.max(st.clock.comm_free);
            if ms < self.best_ms - 1e-6 {
                self.best_ms = ms;
                self.best = self.prefix.clone();
            }
            return;
        }
        self.nodes += 1;
        if self.nodes > self.max_nodes {
            self.aborted = true;
            return;
        }
        // Lower bounds. Heads: for every unissued node, the earliest it can start (its
        // issued inputs' finish times, its unissued inputs' heads plus their times, its
        // stream's free time); a node's head plus its longest path to the end bounds the
        // makespan. Node numbers are a topological order (the input's), so one pass does it.
        let (cf, kf) = (st.clock.compute_free, st.clock.comm_free);
        let head = &mut self.head;
        let mut lb = 0.0f64;
        let (mut min_c, mut min_k) = (f64::INFINITY, f64::INFINITY);
        let (mut tail_c, mut tail_k) = (f64::INFINITY, f64::INFINITY);
        let mut ready: Vec<u32> = Vec::new();
        for i in 0..n as u32 {
            let iu = i as usize;
            if st.set & (1u128 << i) != 0 {
                continue;
            }
            let mut r = 0.0f64;
            for &p in csr_slice(&m.in_off, &m.ins, i) {
                let pu = p as usize;
                let f = if st.set & (1u128 << p) != 0 {
                    st.clock.finish[pu]
                } else if p < i {
                    head[pu] + m.dur[pu]
                } else {
                    // Not yet computed in this pass (never for an input-order graph).
                    0.0
                };
                r = r.max(f);
            }
            let cls = m.class[iu];
            let h = match cls {
                Class::Comm { blocking: true } => r.max(kf).max(cf),
                Class::Comm { .. } => r.max(kf),
                Class::Free => r,
                _ => r.max(cf),
            };
            head[iu] = h;
            lb = lb.max(h + m.tail[iu]);
            let tail = m.tail[iu] - m.dur[iu];
            match cls {
                Class::Comm { blocking } => {
                    min_k = min_k.min(h);
                    tail_k = tail_k.min(tail);
                    if blocking {
                        min_c = min_c.min(h);
                        tail_c = tail_c.min(tail);
                    }
                }
                Class::Wait | Class::Stream => {
                    min_c = min_c.min(h);
                    tail_c = tail_c.min(tail);
                }
                Class::Free => {}
            }
            if st.indeg[iu] == 0 {
                ready.push(i);
            }
        }
        // Each stream still has its remaining work to do, from its earliest remaining start,
        // and after its last op at least the shortest tail of its remaining ops.
        if min_c.is_finite() {
            lb = lb.max(cf.max(min_c) + st.rem_compute + tail_c.max(0.0));
        }
        if min_k.is_finite() {
            lb = lb.max(kf.max(min_k) + st.rem_comm + tail_k.max(0.0));
        }
        lb = lb.max(cf).max(kf);
        if lb >= self.best_ms - 1e-6 {
            return;
        }
        // A ready node that allocates nothing and, issued now, leaves both streams' free
        // times as they are goes now, alone: it finishes as early as it ever can (its
        // inputs, or the stream's free time it cannot beat), so issuing it later only
        // delays its users and holds its storages longer. Free nodes always qualify; a wait
        // whose collectives have ended and a zero-time op whose inputs are ready, too.
        let costless = |x: u32| {
            let xu = x as usize;
            if m.alloc[xu] != 0 {
                return false;
            }
            match m.class[xu] {
                Class::Free => true,
                Class::Comm { .. } => false,
                Class::Stream => m.dur[xu] == 0.0 && m.inputs_ready(&st.clock, x) <= cf,
                Class::Wait => {
                    m.dur[xu] == 0.0
                        && csr_slice(&m.wait_off, &m.waits_on, x)
                            .iter()
                            .all(|&c| st.set & (1u128 << c) != 0)
                        && csr_slice(&m.wait_off, &m.waits_on, x)
                            .iter()
                            .map(|&c| st.clock.finish[c as usize])
                            .fold(m.inputs_ready(&st.clock, x), f64::max)
                            <= cf
                }
            }
        };
        if let Some(&x) = ready.iter().find(|&&x| costless(x)) {
            ready.clear();
            ready.push(x);
        }
        // Dominance: stream times and the finish times of issued nodes that still matter,
        // each raised to the free time of the streams its unissued successors run on (a
        // successor cannot start before its stream is free, so an input that finishes
        // earlier than that is as good as one finishing then): more prefixes compare equal.
        let mut sig = vec![cf, kf];
        for i in 0..n as u32 {
            if st.set & (1u128 << i) == 0 {
                continue;
            }
            let mut open = false;
            let mut clamp = f64::INFINITY;
            for &s in m.graph.succs(i) {
                if st.set & (1u128 << s) != 0 {
                    continue;
                }
                open = true;
                clamp = clamp.min(match m.class[s as usize] {
                    Class::Comm { blocking: true } => cf.max(kf),
                    Class::Comm { .. } => kf,
                    Class::Free => 0.0,
                    _ => cf,
                });
            }
            if open {
                sig.push(st.clock.finish[i as usize].max(clamp));
            }
        }
        let entry = self.memo.entry(st.set).or_default();
        if entry
            .iter()
            .any(|o| o.iter().zip(&sig).all(|(a, b)| *a <= *b + 1e-9))
        {
            return;
        }
        if self.memo_entries < MEMO_LIMIT {
            entry.retain(|o| !o.iter().zip(&sig).all(|(a, b)| *b <= *a + 1e-9));
            entry.push(sig);
            self.memo_entries += 1;
        }
        // Children: a free node that is ready goes first alone when it allocates nothing
        // (issuing it now costs no time and no memory).
        ready.sort_by(|&a, &b| {
            let ka = m.is_async(a);
            let kb = m.is_async(b);
            kb.cmp(&ka)
                .then(m.bottom[b as usize].total_cmp(&m.bottom[a as usize]))
                .then(a.cmp(&b))
        });
        for x in ready {
            let mut child = st.clone();
            let level = m.step_mem(&mut child.mem, x);
            if level > self.limit {
                continue;
            }
            m.step_time(&mut child.clock, x);
            child.set |= 1u128 << x;
            for &s in m.graph.succs(x) {
                child.indeg[s as usize] -= 1;
            }
            match m.class[x as usize] {
                Class::Wait | Class::Stream => child.rem_compute -= m.dur[x as usize],
                Class::Comm { blocking } => {
                    child.rem_comm -= m.dur[x as usize];
                    if blocking {
                        child.rem_compute -= m.dur[x as usize];
                    }
                }
                Class::Free => {}
            }
            self.prefix.push(x);
            self.dfs(child);
            self.prefix.pop();
            if self.aborted {
                return;
            }
        }
    }
}

/// The memory limit for `budget` over a peak of `base` bytes, as [`schedule::within_budget`]
/// tests it.
pub fn limit_for(base: i64, budget: f64) -> i64 {
    base + (base as f64 * budget).floor() as i64
}

/// The ladder steps up to `budget` (at least the first, 0).
pub fn ladder_up_to(budget: f64) -> Vec<f64> {
    BUDGET_LADDER
        .iter()
        .copied()
        .filter(|&b| b <= budget + 1e-12)
        .collect()
}

/// What the pass found for one function.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub makespan_before_ns: f64,
    pub makespan_after_ns: f64,
    pub peak_before: i64,
    pub peak_after: i64,
    /// Which candidate won: "input", "list", "exact".
    pub winner: &'static str,
    /// Whether the exact search ran and finished.
    pub exact_proven: bool,
    /// List schedules built (the pass's main cost on large functions).
    pub list_schedules: u64,
    /// Moves the local search kept.
    pub local_moves: u64,
}

/// Schedules the function body `block` (see the module docs); returns the new order of its
/// ops (or `None` when it keeps the input) and what it found.
pub fn plan(
    ctx: &Context,
    block: BlockId,
    costs: &CostTable,
    opts: &OverlapOptions,
) -> (Option<Vec<OpId>>, Outcome) {
    plan_with_seeds(ctx, block, costs, opts, &|_| Vec::new())
}

/// [`plan`] with seed orders: `seed(budget)` may give orders of the block's ops (e.g. what
/// `comm-reorder-peak-memory` or Inductor's whole sequence finds at that budget); each is a
/// candidate itself and its compute order one more base for the list schedule at that
/// ladder step.
pub fn plan_with_seeds(
    ctx: &Context,
    block: BlockId,
    costs: &CostTable,
    opts: &OverlapOptions,
    seed: &dyn Fn(f64) -> Vec<Vec<OpId>>,
) -> (Option<Vec<OpId>>, Outcome) {
    let model = Model::new(ctx, block, costs);
    let seeds = |b: f64| -> Vec<Vec<u32>> {
        seed(b)
            .iter()
            .filter_map(|ops| ops.iter().map(|&op| model.graph.node(op)).collect())
            .collect()
    };
    plan_model(&model, opts, &seeds)
}

/// [`plan_with_seeds`] on a model already built, with seed orders as node numbers; returns
/// the new order as ops.
pub fn plan_model(
    model: &Model,
    opts: &OverlapOptions,
    seed: &dyn Fn(f64) -> Vec<Vec<u32>>,
) -> (Option<Vec<OpId>>, Outcome) {
    let n = model.len();
    let input: Vec<u32> = (0..n as u32).collect();
    let (ms_in, peak_in) = model.evaluate(&input);
    let mut out = Outcome {
        makespan_before_ns: ms_in,
        makespan_after_ns: ms_in,
        peak_before: peak_in,
        peak_after: peak_in,
        winner: "input",
        exact_proven: false,
        list_schedules: 0,
        local_moves: 0,
    };
    if n < 2 {
        return (None, out);
    }
    let budgets = match opts.test_break {
        TestBreak::NoLadder => vec![opts.peak_memory_budget],
        _ => ladder_up_to(opts.peak_memory_budget),
    };
    let mut best: (f64, Vec<u32>, &'static str) = (ms_in, input.clone(), "input");
    // Whether every async collective is in one group (or none is): then keeping the input's
    // order of all collectives is keeping the group's, and the second variant of each list
    // schedule would repeat the first.
    let single_group = {
        let mut groups = (0..n as u32)
            .filter(|&i| model.is_async(i))
            .map(|i| model.graph.group[i as usize]);
        let first = groups.next();
        first.is_none_or(|g0| g0 != NONE && groups.all(|g| g == g0))
    };
    let top_limit = limit_for(peak_in, *budgets.last().unwrap_or(&0.0));
    for &b in &budgets {
        let limit = match opts.test_break {
            TestBreak::Memory => i64::MAX / 4,
            _ => limit_for(peak_in, b),
        };
        let mut local: (f64, Vec<u32>) = (f64::INFINITY, Vec::new());
        let consider = |order: Vec<u32>, local: &mut (f64, Vec<u32>)| {
            let (ms, peak) = model.evaluate(&order);
            if opts.test_break == TestBreak::NoGuard {
                if peak <= limit && (local.1.is_empty() || ms > local.0) {
                    *local = (ms, order);
                }
            } else if peak <= limit && ms < local.0 - 1e-6 {
                *local = (ms, order);
            }
        };
        // Bases of the list schedule: the input order, greedy compute orders (under the
        // limit and under tighter ones, which leave room for the frees a greedy order
        // delays; large functions try each once, to stay cheap), and the seeds, which are
        // also candidates as they are (so the pass is never slower than the pass or
        // sequence that made them).
        let mut bases: Vec<Vec<u32>> = vec![input.clone()];
        for compute in [ComputeOrder::EarliestStart, ComputeOrder::CriticalPath] {
            let tighter: &[f64] = if n > TIGHTER_MAX_OPS {
                &[1.0]
            } else {
                &[1.0, 0.9, 0.75, 0.5]
            };
            for &f in tighter {
                let order_limit = model.base.max((limit as f64 * f) as i64);
                bases.extend(compute_order(model, order_limit, limit, compute));
            }
        }
        for base in seed(b)
            .into_iter()
            .filter(|o| o.len() == n && check::is_topological(&model.graph, o))
        {
            consider(base.clone(), &mut local);
            bases.push(base);
        }
        // Equal bases give equal schedules (greedy orders under different limits often
        // coincide, and so do the seeds): each is scheduled once.
        let mut seen: Vec<&Vec<u32>> = Vec::new();
        for base in &bases {
            if seen.contains(&base) {
                continue;
            }
            seen.push(base);
            for keep in [false, true] {
                if keep && single_group {
                    // One group: its order edges already fix the order of all collectives.
                    break;
                }
                out.list_schedules += 1;
                match list_schedule_from(model, limit, base, keep, opts.lookahead) {
                    Some(order) => consider(order, &mut local),
                    // The base's own levels are over the limit: no schedule from it fits.
                    None => break,
                }
            }
        }
        if local.1.is_empty() {
            local = (ms_in, input.clone());
        }
        // Local improvement of the best order so far: the greedy compute orders miss
        // exchanges of compute ops that the memory limit allows only in pairs.
        if n <= LOCAL_MAX_OPS && opts.test_break != TestBreak::NoGuard {
            out.local_moves += improve_locally(model, limit, &mut local.1, &mut local.0);
        }
        let mut winner = "list";
        if opts.exact_region_ops > 0
            && n <= opts.exact_region_ops as usize
            && n <= 128
            && opts.test_break != TestBreak::NoGuard
        {
            let ex = branch_and_bound(model, limit, &local.1, opts.exact_nodes);
            out.exact_proven |= ex.proven;
            if ex.makespan_ns < local.0 - 1e-6 {
                local = (ex.makespan_ns, ex.order);
                winner = "exact";
            }
        }
        let better = match opts.test_break {
            TestBreak::NoGuard => best.2 == "input",
            _ => local.0 < best.0 - 1e-6,
        };
        if better {
            best = (local.0, local.1, winner);
        }
    }
    debug_assert!(top_limit >= peak_in);
    let mut order = best.1;
    match opts.test_break {
        TestBreak::GroupOrder => break_group_order(model, &mut order),
        TestBreak::Dependency => break_dependency(model, &mut order),
        TestBreak::Nondeterministic => {
            use std::sync::atomic::{AtomicU64, Ordering as O};
            static RUNS: AtomicU64 = AtomicU64::new(0);
            if RUNS.fetch_add(1, O::Relaxed) % 2 == 1 {
                order = input.clone();
            }
        }
        _ => {}
    }
    debug_assert!(
        opts.test_break != TestBreak::None || check::is_topological(&model.graph, &order),
        "comm-overlap-schedule produced a non-topological order"
    );
    let (ms, peak) = model.evaluate(&order);
    out.makespan_after_ns = ms;
    out.peak_after = peak;
    out.winner = best.2;
    if order == input {
        return (None, out);
    }
    (
        Some(order.iter().map(|&i| model.graph.ops[i as usize]).collect()),
        out,
    )
}

/// `test-break=group-order`: swaps the first two adjacent-in-order collectives of one group.
fn break_group_order(model: &Model, order: &mut [u32]) {
    let g = &model.graph;
    let pos: Vec<usize> = {
        let mut p = vec![0; order.len()];
        for (k, &x) in order.iter().enumerate() {
            p[x as usize] = k;
        }
        p
    };
    let mut last_of_group: FxHashMap<u32, u32> = FxHashMap::default();
    for &x in order.iter() {
        if g.kind[x as usize] == NodeKind::Collective && g.group[x as usize] != NONE {
            if let Some(&prev) = last_of_group.get(&g.group[x as usize]) {
                order.swap(pos[prev as usize], pos[x as usize]);
                return;
            }
            last_of_group.insert(g.group[x as usize], x);
        }
    }
}

/// `test-break=dependency`: moves the first node that has a non-fixed successor after it.
fn break_dependency(model: &Model, order: &mut Vec<u32>) {
    let g = &model.graph;
    if let Some(k) = order.iter().position(|&x| {
        g.kind[x as usize] != NodeKind::Fixed
            && g.succs(x)
                .iter()
                .any(|&s| g.kind[s as usize] != NodeKind::Fixed)
    }) {
        let x = order.remove(k);
        let at = order.len().saturating_sub(1);
        order.insert(at, x);
    }
}

commlir_ir::register_pass!(
    /// `comm-overlap-schedule`.
    pub COMM_OVERLAP_SCHEDULE = PassInfo {
        argument: "comm-overlap-schedule",
        name: "CommOverlapSchedule",
        summary: "Order ops to minimize the simulated makespan under a hard peak-memory limit",
        description: "List scheduling on the two-stream machine model (collectives issued as \
            early as their inputs, group order and the memory limit allow, longest path first; \
            waits just before their first user), exact branch and bound on small functions, \
            and the best of these and the input order by simulated makespan, for every step of \
            the budget ladder up to peak-memory-budget (monotone in the budget, never slower \
            than the input).",
        anchor: Anchor::FUNC,
        options: OPTIONS,
        statistics: STATS,
        create: |o: &PassOptions| Ok(Box::new(OverlapSchedule(
            OverlapOptions::from_pass_options(o)?,
            crate::analysis::machine::from_option(o.get_str("machine"))?,
        ))),
    }
);

/// The statistics of the pass.
const STATS: &[StatisticDef] = &[
    StatisticDef::new("scheduled", "Functions given a new order"),
    StatisticDef::new(
        "makespan-ns-before",
        "Simulated makespan of the input orders (ns)",
    ),
    StatisticDef::new(
        "makespan-ns-after",
        "Simulated makespan of the output orders (ns)",
    ),
    StatisticDef::new("exact-proven", "Functions whose exact search finished"),
    StatisticDef::new("list-schedules", "List schedules built"),
    StatisticDef::new("local-moves", "Moves the local search kept"),
];

/// The seed orders for every ladder step up to `budget`, as node numbers of `model`:
/// Inductor's memory-preserving reorder (`comm-reorder-peak-memory` at that budget: it moves
/// the compute a collective needs along with the collective, which the list schedules do
/// not) and Inductor's whole sequence (`comm-reorder-peak-memory, comm-sink-waits-iterative,
/// comm-reorder-peak-memory`, each pass kept only if the simulated makespan does not grow, as
/// their `revert-if-slower` does), so that the pass is never slower than that sequence. The
/// sequence's first step is the single reorder, computed once; each step is judged on the
/// node model (the simulator's makespan, in O(n)) rather than by re-simulating the IR. The
/// block is left in its input order.
fn inductor_seeds(
    ctx: &mut Context,
    func: OpId,
    block: BlockId,
    model: &Model,
    costs: &CostTable,
    budget: f64,
) -> Vec<(f64, Vec<Vec<u32>>)> {
    let input: Vec<OpId> = ctx.block_op_list(block);
    let to_nodes = |ops: &[OpId]| -> Option<Vec<u32>> {
        let o: Vec<u32> = ops
            .iter()
            .map(|&op| model.graph.node(op))
            .collect::<Option<_>>()?;
        (o.len() == model.len()).then_some(o)
    };
    let (ms_in, _) = model.evaluate(&(0..model.len() as u32).collect::<Vec<_>>());
    let mut out = Vec::new();
    for b in ladder_up_to(budget) {
        let o = IterOptions {
            peak_memory_budget: b,
            ..IterOptions::default()
        };
        let mut orders: Vec<Vec<u32>> = Vec::new();
        // The current order of the sequence (ops and nodes) and its makespan.
        let mut cur: Option<(Vec<OpId>, Vec<u32>)> = None;
        let mut cur_ms = ms_in;
        let steps: [Planner; 3] = [
            plan_reorder_peak_memory,
            plan_sink_waits_iterative,
            plan_reorder_peak_memory,
        ];
        // Above TIGHTER_MAX_OPS the single reorder only: the list schedule from it sinks the
        // waits itself, and the other two passes would triple the seeds' time.
        let run = if model.len() > TIGHTER_MAX_OPS { 1 } else { 3 };
        let mut written = false;
        for (k, step) in steps.into_iter().enumerate().take(run) {
            let planned = step(ctx, func, &o, Some(costs)).1;
            if let Some(nodes) = planned.as_deref().and_then(to_nodes) {
                if k == 0 {
                    // The single reorder, whatever its makespan (the list schedule may still
                    // profit from its compute order).
                    orders.push(nodes.clone());
                }
                let (ms, _) = model.evaluate(&nodes);
                if ms <= cur_ms * (1.0 + 1e-9) {
                    cur_ms = ms;
                    cur = planned.map(|ops| (ops, nodes));
                }
            }
            // The next planner reads the block's order: the one the sequence kept (a
            // planner may also have left intermediate orders in the block).
            if k + 1 < run {
                match &cur {
                    Some((ops, _)) => schedule::apply_op_order(ctx, ops.iter().copied()),
                    None => schedule::apply_op_order(ctx, input.iter().copied()),
                }
                written = true;
            }
        }
        if written {
            schedule::apply_op_order(ctx, input.iter().copied());
        }
        if let Some((_, nodes)) = cur {
            if orders.first() != Some(&nodes) {
                orders.push(nodes);
            }
        }
        out.push((b, orders));
    }
    out
}

/// The options and the `machine` option's machine (`None`: the module's or the default).
struct OverlapSchedule(OverlapOptions, Option<crate::analysis::cost::Machine>);

impl Pass for OverlapSchedule {
    fn info(&self) -> &'static PassInfo {
        &COMM_OVERLAP_SCHEDULE
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let Some(block) = body_block(ctx, op) else {
            env.mark_unchanged();
            return Ok(());
        };
        let machine = crate::analysis::machine::for_op(ctx, op, self.1.as_ref())?;
        let costs = CostTable::new_on(ctx, &machine, block);
        let model = Model::new(ctx, block, &costs);
        let seeds = inductor_seeds(ctx, op, block, &model, &costs, self.0.peak_memory_budget);
        let seed = |b: f64| -> Vec<Vec<u32>> {
            seeds
                .iter()
                .filter(|(x, _)| *x == b)
                .flat_map(|(_, o)| o.iter().cloned())
                .collect()
        };
        let (order, out) = plan_model(&model, &self.0, &seed);
        env.add_stat("makespan-ns-before", out.makespan_before_ns.round() as u64);
        env.add_stat("makespan-ns-after", out.makespan_after_ns.round() as u64);
        env.add_stat("exact-proven", u64::from(out.exact_proven));
        env.add_stat("list-schedules", out.list_schedules);
        env.add_stat("local-moves", out.local_moves);
        match order {
            Some(order) => {
                // The order was judged on the node model; check it on the real simulator
                // and buffer model too (both O(n)) and keep the input if they disagree, so
                // a modelling gap in the output order can never make it slower or over the
                // limit. The input's numbers are the model's: the model is the simulator
                // and the buffer model stepped op by op (a property test checks it against
                // both on every schedule), so simulating the input again would only repeat
                // them.
                let peak_before = out.peak_before;
                let input: Vec<OpId> = ctx.block_op_list(block);
                // The model knows no overlap slowdown: on a machine that has one, the input
                // and the output are judged on the simulator with it (the slowdown may change
                // which of the two is faster).
                let overlap = Overlap::of(&machine);
                let before = if overlap.is_none() {
                    out.makespan_before_ns
                } else {
                    simulate_ops_overlap(ctx, input.iter().copied(), |o| costs.get(o), overlap)
                        .makespan_ns
                };
                let after =
                    simulate_ops_overlap(ctx, order.iter().copied(), |o| costs.get(o), overlap)
                        .makespan_ns;
                schedule::apply_op_order(ctx, order);
                let peak_after = schedule::block_peak(ctx, block);
                let guard = self.0.test_break == TestBreak::None;
                let budget_ok = schedule::within_budget(
                    peak_after,
                    peak_before,
                    ladder_up_to(self.0.peak_memory_budget)
                        .last()
                        .copied()
                        .unwrap_or(0.0),
                );
                if guard && (after > before * (1.0 + 1e-9) || !budget_ok) {
                    schedule::apply_op_order(ctx, input);
                    env.mark_unchanged();
                } else {
                    env.add_stat("scheduled", 1);
                    env.mark_reordered_only();
                }
            }
            None => env.mark_unchanged(),
        }
        Ok(())
    }
}
