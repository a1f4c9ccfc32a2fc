//! Machinery shared by the two iterative passes (`comm-reorder-peak-memory`,
//! `comm-sink-waits-iterative`): the current order as a doubly linked list over graph nodes,
//! moving one node across a contiguous *group* of nodes (the memory tracker's open run) with
//! the memory levels updated as by one adjacent swap per member (and undone when the move
//! breaks the peak-memory budget), the per-node statistics, and the options.

use super::graph::{DepGraph, NONE};
use super::memory::MemoryTracker;
use super::{apply_order, body_block, CostTable, GraphOptions, Limit, NodeKind, Windows};
use commlir_ir::pass::{OptionDef, OptionKind, PassOptions};
use commlir_ir::{BlockId, Context, OpId};

/// Options of the iterative passes.
#[derive(Clone, Copy, Debug)]
pub struct IterOptions {
    /// Allowed peak increase as a fraction of the input's peak.
    pub peak_memory_budget: f64,
    /// Keep moving until compute covers twice the communication (instead of once).
    pub extra_overlap: bool,
    /// Stop once the estimated exposure is gone, and weigh moves that expose other
    /// communication (cost model or `cost_ns`).
    pub use_runtime_estimates: bool,
    /// Drop every collective-order constraint (not SPMD-safe).
    pub unsafe_collective_reorder: bool,
    /// Check the incremental memory levels against a full recompute after every move.
    pub verify_memory: bool,
    /// Emit one remark per collective (or wait) with its statistics.
    pub remarks: bool,
    /// Most ops one collective (or wait) may move past; 0 = no limit. Bounds the pass to
    /// O(n × max-moves) when nothing else stops a move (e.g. prefetches that never raise the
    /// peak), the step limit Inductor's docstring promises.
    pub max_moves: u32,
    /// Undo the pass when the two-stream timeline says the function got slower.
    pub revert_if_slower: bool,
    /// Record each collective's statistics on it as a discardable attribute (read by
    /// `--comm-report`).
    pub annotate: bool,
}

impl IterOptions {
    /// Extra overlap as Inductor's factor: stop when exposure < -factor × comm time.
    pub fn extra_factor(&self) -> f64 {
        if self.extra_overlap {
            1.0
        } else {
            0.0
        }
    }

    /// Reads the options declared by [`OPTIONS`].
    pub fn from_pass_options(o: &PassOptions) -> Result<IterOptions, String> {
        let budget = o.get_float("peak-memory-budget");
        if budget.is_nan() || budget < 0.0 {
            return Err(format!(
                "peak-memory-budget must be a non-negative number, got {budget}"
            ));
        }
        Ok(IterOptions {
            peak_memory_budget: budget,
            extra_overlap: o.get_bool("extra-overlap"),
            use_runtime_estimates: o.get_bool("use-runtime-estimates"),
            unsafe_collective_reorder: o.get_bool("unsafe-collective-reorder"),
            verify_memory: o.get_bool("verify-memory"),
            remarks: o.get_bool("remarks"),
            max_moves: u32::try_from(o.get_uint("max-moves")).unwrap_or(u32::MAX),
            revert_if_slower: o.get_bool("revert-if-slower"),
            annotate: o.get_bool("annotate"),
        })
    }
}

impl Default for IterOptions {
    fn default() -> Self {
        IterOptions {
            peak_memory_budget: 0.0,
            extra_overlap: false,
            use_runtime_estimates: false,
            unsafe_collective_reorder: false,
            verify_memory: false,
            remarks: false,
            max_moves: DEFAULT_MAX_MOVES,
            revert_if_slower: true,
            annotate: false,
        }
    }
}

/// Default of `max-moves`: far more than any useful prefetch distance in a transformer layer,
/// small enough that a 100k-op program schedules in linear time.
pub const DEFAULT_MAX_MOVES: u32 = 256;

impl IterOptions {
    /// Whether a collective that moved `moves` times must stop.
    pub fn out_of_moves(&self, moves: u32) -> bool {
        self.max_moves != 0 && moves >= self.max_moves
    }
}

/// The options of both iterative passes.
pub const OPTIONS: &[OptionDef] = &[
    OptionDef::new(
        "peak-memory-budget",
        OptionKind::Float,
        "0.0",
        "Largest allowed peak-memory increase, as a fraction of the input's peak",
    ),
    OptionDef::bool(
        "extra-overlap",
        false,
        "With runtime estimates: overlap twice the communication time before stopping",
    ),
    OptionDef::bool(
        "use-runtime-estimates",
        false,
        "Stop when the estimated exposure is gone; weigh moves that expose other collectives",
    ),
    OptionDef::bool(
        "unsafe-collective-reorder",
        false,
        "Allow collectives to change their relative order (not SPMD-safe)",
    ),
    OptionDef::bool(
        "verify-memory",
        false,
        "Check incremental peak memory against a full recompute after every move (slow)",
    ),
    OptionDef::bool(
        "remarks",
        false,
        "Emit a remark per collective (or wait) with its statistics",
    ),
    OptionDef::new(
        "max-moves",
        OptionKind::UInt,
        "256",
        "Most ops one collective (or wait) may move past (0: no limit)",
    ),
    OptionDef::bool(
        "revert-if-slower",
        true,
        "Undo the reordering when the two-stream timeline simulation says it made the function slower",
    ),
    OptionDef::bool(
        "annotate",
        false,
        "Record each collective's moves, grouping, estimated exposure and limiting factor on it \
         (attribute `comm.sched.<pass>`), which --comm-report includes",
    ),
    crate::analysis::machine::MACHINE_OPTION,
];

/// What happened to one collective (or wait), Inductor's `ReorderInfo` / `SinkWaitInfo`.
#[derive(Clone, Debug, PartialEq)]
pub struct MoveInfo {
    /// The op that moved (a collective or a wait).
    pub op: OpId,
    /// Moves: ops it was swapped past.
    pub moves: u32,
    /// Ops that joined its group (moved along because of a dependency).
    pub grouped: u32,
    /// Estimated communication time (ns).
    pub comm_ns: f64,
    /// Estimated compute overlapping it, before and after (ns).
    pub initial_comp_ns: f64,
    pub final_comp_ns: f64,
    /// Why it stopped.
    pub limit: Limit,
    /// The op it stopped at, when there is one.
    pub blocker: Option<OpId>,
}

impl MoveInfo {
    pub fn new(op: OpId, comm_ns: f64, comp_ns: f64) -> Self {
        MoveInfo {
            op,
            moves: 0,
            grouped: 0,
            comm_ns,
            initial_comp_ns: comp_ns,
            final_comp_ns: comp_ns,
            limit: Limit::None,
            blocker: None,
        }
    }
    /// Estimated exposed communication before the pass (may be negative: slack).
    pub fn initial_exposed(&self) -> f64 {
        self.comm_ns - self.initial_comp_ns
    }
    /// Estimated exposed communication after the pass.
    pub fn final_exposed(&self) -> f64 {
        self.comm_ns - self.final_comp_ns
    }
    /// One line for remarks and tables.
    pub fn describe(&self, ctx: &Context) -> String {
        let blocker = self
            .blocker
            .map(|b| format!(" at '{}'", ctx.op_name(b)))
            .unwrap_or_default();
        format!(
            "moves={} grouped={} comm={:.1}ns exposed {:.1}ns -> {:.1}ns, limited by {}{}",
            self.moves,
            self.grouped,
            self.comm_ns,
            self.initial_exposed(),
            self.final_exposed(),
            self.limit.as_str(),
            blocker
        )
    }
}

/// The current order of a block as a doubly linked list over graph nodes.
pub struct ListOrder {
    pub prev: Vec<u32>,
    pub next: Vec<u32>,
    pub head: u32,
    pub tail: u32,
}

impl ListOrder {
    /// The graph's own order.
    pub fn new(n: usize) -> ListOrder {
        let prev = (0..n as u32)
            .map(|i| if i == 0 { NONE } else { i - 1 })
            .collect();
        let next = (0..n as u32)
            .map(|i| if i + 1 == n as u32 { NONE } else { i + 1 })
            .collect();
        ListOrder {
            prev,
            next,
            head: if n == 0 { NONE } else { 0 },
            tail: if n == 0 { NONE } else { n as u32 - 1 },
        }
    }

    #[inline]
    fn unlink(&mut self, x: u32) {
        let (p, n) = (self.prev[x as usize], self.next[x as usize]);
        if p == NONE {
            self.head = n
        } else {
            self.next[p as usize] = n
        }
        if n == NONE {
            self.tail = p
        } else {
            self.prev[n as usize] = p
        }
    }

    #[inline]
    fn insert_after(&mut self, x: u32, anchor: u32) {
        let n = self.next[anchor as usize];
        self.prev[x as usize] = anchor;
        self.next[x as usize] = n;
        self.next[anchor as usize] = x;
        if n == NONE {
            self.tail = x
        } else {
            self.prev[n as usize] = x
        }
    }

    #[inline]
    fn insert_before(&mut self, x: u32, anchor: u32) {
        let p = self.prev[anchor as usize];
        self.next[x as usize] = anchor;
        self.prev[x as usize] = p;
        self.prev[anchor as usize] = x;
        if p == NONE {
            self.head = x
        } else {
            self.next[p as usize] = x
        }
    }

    /// The nodes in order.
    pub fn to_vec(&self) -> Vec<u32> {
        let mut v = Vec::with_capacity(self.prev.len());
        let mut c = self.head;
        while c != NONE {
            v.push(c);
            c = self.next[c as usize];
        }
        v
    }

    /// The graph's ops in this order.
    pub fn ops(&self, graph: &DepGraph) -> Vec<OpId> {
        let mut v = Vec::with_capacity(self.prev.len());
        let mut c = self.head;
        while c != NONE {
            v.push(graph.ops[c as usize]);
            c = self.next[c as usize];
        }
        v
    }

    /// Fills `out` with the nodes from `head` to `tail` inclusive.
    pub fn segment(&self, head: u32, tail: u32, out: &mut Vec<u32>) {
        out.clear();
        let mut c = head;
        loop {
            out.push(c);
            if c == tail {
                break;
            }
            c = self.next[c as usize];
        }
    }
}

/// Moves `x`, directly before the tracker's open run (the group; its last node is `last`),
/// to directly after it, if the memory levels of the nodes involved stay within `limit`;
/// returns whether it moved ([`MemoryTracker::move_after_run`]).
#[inline]
pub fn try_move_after(
    mem: &mut MemoryTracker,
    list: &mut ListOrder,
    x: u32,
    last: u32,
    limit: i64,
) -> bool {
    if !mem.move_after_run(x, limit) {
        return false;
    }
    list.unlink(x);
    list.insert_after(x, last);
    true
}

/// Moves `x`, directly after the tracker's open run (the group; its first node is `first`),
/// to directly before it, within `limit`.
#[inline]
pub fn try_move_before(
    mem: &mut MemoryTracker,
    list: &mut ListOrder,
    x: u32,
    first: u32,
    limit: i64,
) -> bool {
    if !mem.move_before_run(x, limit) {
        return false;
    }
    list.unlink(x);
    list.insert_before(x, first);
    true
}

/// What both iterative passes start from: the body's dependency graph, op runtimes, comm
/// windows, memory tracker, peak limit and a list order over the graph's nodes.
pub struct Setup {
    pub block: BlockId,
    pub graph: DepGraph,
    pub rt: Vec<f64>,
    pub windows: Windows,
    pub mem: MemoryTracker,
    pub limit: i64,
    pub list: ListOrder,
}

/// Builds the [`Setup`] of `func`'s body, with the op costs in `costs` when the caller has
/// them; `None` when the function has no body or no node of kind `needs` (nothing to move).
pub fn setup(
    ctx: &Context,
    func: OpId,
    opts: &IterOptions,
    costs: Option<&CostTable>,
    needs: NodeKind,
) -> Option<Setup> {
    let block = body_block(ctx, func)?;
    let graph = DepGraph::build(
        ctx,
        block,
        GraphOptions {
            collective_order: !opts.unsafe_collective_reorder,
        },
    );
    if !graph.kind.contains(&needs) {
        return None;
    }
    let rt = match costs {
        Some(c) => super::runtimes_from(c, &graph),
        None => super::runtimes(ctx, &graph),
    };
    let windows = Windows::new(&graph, &rt);
    let mem = MemoryTracker::new(ctx, block, &graph);
    let limit = memory_limit(mem.initial_peak(), opts.peak_memory_budget);
    let list = ListOrder::new(graph.len());
    Some(Setup {
        block,
        graph,
        rt,
        windows,
        mem,
        limit,
        list,
    })
}

/// The largest memory level allowed: `base × (1 + budget)` (Inductor's test, in integers).
pub fn memory_limit(base_peak: i64, budget: f64) -> i64 {
    let extra = (base_peak as f64 * budget).floor();
    if extra >= (i64::MAX - base_peak) as f64 {
        i64::MAX
    } else {
        base_peak + extra as i64
    }
}

/// For `verify-memory`: writes the list order into the block and checks the tracker against
/// a recompute.
pub fn verify_against_recompute(
    ctx: &mut Context,
    block: BlockId,
    graph: &DepGraph,
    list: &ListOrder,
    mem: &MemoryTracker,
) {
    let order = list.to_vec();
    apply_order(ctx, graph, &order);
    mem.assert_matches_recompute(ctx, block, &order);
}

/// Writes `info` on its op as `comm.sched.<pass> = {moves, grouped, limit,
/// exposed_before_ns, exposed_after_ns}` (Inductor's ReorderInfo / SinkWaitInfo row).
pub fn annotate(ctx: &mut Context, pass: &str, info: &MoveInfo) {
    let moves = ctx.int_attr(i64::from(info.moves), 64);
    let grouped = ctx.int_attr(i64::from(info.grouped), 64);
    let limit = ctx.str_attr(info.limit.as_str());
    let before = ctx.int_attr(info.initial_exposed().max(0.0).round() as i64, 64);
    let after = ctx.int_attr(info.final_exposed().max(0.0).round() as i64, 64);
    let entries = vec![
        (ctx.ident("moves"), moves),
        (ctx.ident("grouped"), grouped),
        (ctx.ident("limit"), limit),
        (ctx.ident("exposed_before_ns"), before),
        (ctx.ident("exposed_after_ns"), after),
    ];
    let d = ctx.dict_attr(entries);
    ctx.set_attr(info.op, &format!("comm.sched.{pass}"), d);
}
