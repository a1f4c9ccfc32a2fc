//! The dependency graph of one block, the shared ground truth of every scheduling pass.
//!
//! Nodes are the block's ops, numbered in their current program order (which is therefore a
//! topological order: every edge goes from a lower to a higher number). An edge `a → b` means
//! `b` must stay after `a`. Edges come from:
//!
//! - SSA def-use;
//! - memory: every op's accesses to *storages* (buffers, with aliases resolved the way
//!   [`BufferModel`](crate::analysis::BufferModel) resolves them: a wait's results alias the
//!   buffers it completes). A start op and its wait both *write* the buffers the collective
//!   writes (the write happens somewhere in between), and the wait also *reads* the
//!   collective's inputs (the collective may read them until it completes). Readers stay after
//!   the last writer (RAW), writers after every reader since the previous writer (WAR) and
//!   after that writer (WAW). This keeps in-place comm buffers safe at the `comm` level, and
//!   costs nothing at the `coll` level, where every value is immutable;
//! - barriers: an op whose effects are unknown (unregistered, with regions, or without any
//!   trait describing its effects) and the terminator stay fixed: everything before stays
//!   before and everything after stays after. Chaining through the barrier keeps this linear;
//! - collective order (unless the caller drops it, which is what
//!   `unsafe-collective-reorder=true` does): each collective stays after the previous one on
//!   its group, and collectives pinned by `comm-global-order` (attribute `comm_order`) keep
//!   their relative order across groups.

use commlir_ir::{BlockId, Context, Ident, OpDef, OpId, Trait, Value, PREFETCH_DISTANCE};
use rustc_hash::FxHashMap;

/// The attribute `comm-global-order` sets on every collective: its rank in the pinned order.
pub const PIN_ATTR: &str = "comm_order";

/// "No node" in node-indexed arrays.
pub const NONE: u32 = u32::MAX;

/// What a node is, as far as scheduling is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// Ordinary computation (or allocation): freely movable within its dependencies.
    Compute,
    /// Issues a collective (trait `Collective`), asynchronous or blocking.
    Collective,
    /// Completes an asynchronous collective (trait `Wait`).
    Wait,
    /// Unknown effects or the terminator: never moves relative to anything.
    Fixed,
}

/// Whether to add the collective-order edges (group order and pins).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphOptions {
    pub collective_order: bool,
}

impl Default for GraphOptions {
    fn default() -> Self {
        GraphOptions {
            collective_order: true,
        }
    }
}

/// The dependency graph of a block (see the module docs).
#[derive(Clone, Debug)]
pub struct DepGraph {
    /// The block's ops, in the order the graph was built from.
    pub ops: Vec<OpId>,
    pub kind: Vec<NodeKind>,
    /// For collectives: whether it blocks (has no wait).
    pub blocking: Vec<bool>,
    /// For collectives: the group id (index into `group_names`); `NONE` when unknown.
    pub group: Vec<u32>,
    pub group_names: Vec<String>,
    /// For waits: the collective node it completes, `NONE` if not in this block.
    pub coll_of_wait: Vec<u32>,
    /// For collectives: the first wait completing it, `NONE` if none.
    pub wait_of_coll: Vec<u32>,
    /// Whether the node is a matmul (Inductor's "gemm-like", which some heuristics refuse to
    /// drag along with a collective).
    pub gemm_like: Vec<bool>,
    pred_off: Vec<u32>,
    preds: Vec<u32>,
    succ_off: Vec<u32>,
    succs: Vec<u32>,
    /// Node of each op, by op arena index (`NONE` for ops outside the block).
    index_of: Vec<u32>,
}

/// Scratch state of [`DepGraph::build`]: dense tables indexed by value (or storage) number,
/// so that building the graph of a 100k-op block does no hashing and few allocations.
struct Builder {
    /// Storage of each value (by value index), `NONE` until first seen.
    storage_of: Vec<u32>,
    next_storage: u32,
    /// Per storage: the last node writing it.
    last_writer: Vec<u32>,
    /// Per storage: head of its list of readers since the last write (into `reader_link`).
    readers_head: Vec<u32>,
    /// Reader lists of all storages, as (node, next entry) in one pool; a write drops the
    /// storage's list by resetting its head (the pool is never compacted: it grows by one
    /// entry per read).
    reader_link: Vec<(u32, u32)>,
    /// Scratch: the storages the op being visited reads and writes.
    reads: Vec<u32>,
    writes: Vec<u32>,
}

impl Builder {
    fn storage(&mut self, v: Value) -> u32 {
        let slot = &mut self.storage_of[v.index()];
        if *slot == NONE {
            *slot = self.next_storage;
            self.next_storage += 1;
            self.last_writer.push(NONE);
            self.readers_head.push(NONE);
        }
        *slot
    }
}

impl DepGraph {
    /// Builds the graph of `block` in its current order.
    ///
    /// Every edge is found while visiting its head (each rule looks back from the op being
    /// visited), so the predecessor lists come out grouped by node and only need a small
    /// per-node sort to dedup; no global edge sort, and the successor lists follow by
    /// counting. Op and value lookups go through dense tables indexed by arena number.
    pub fn build(ctx: &Context, block: BlockId, opts: GraphOptions) -> DepGraph {
        let ops: Vec<OpId> = ctx.block_op_list(block);
        let n = ops.len();
        let mut index_of = vec![NONE; ctx.num_op_slots()];
        let mut kind = Vec::with_capacity(n);
        let mut blocking = Vec::with_capacity(n);
        let mut gemm_like = Vec::with_capacity(n);
        let mut facts = Vec::with_capacity(n);
        // What scheduling needs from an op's definition, once per op name (by interned name
        // number: a 100k-op block has a few dozen names, and the rules are string matches and
        // trait scans).
        let mut by_name: Vec<Option<NameInfo>> = Vec::new();
        for (i, op) in ctx.prefetched(&ops).enumerate() {
            index_of[op.index()] = i as u32;
            let name = ctx.op_name_ident(op).index();
            let info = match by_name.get(name) {
                Some(&Some(info)) => info,
                _ => {
                    if name >= by_name.len() {
                        by_name.resize(name + 1, None);
                    }
                    *by_name[name].insert(NameInfo::of(ctx, op))
                }
            };
            kind.push(if ctx.op_regions(op).is_empty() {
                info.kind
            } else {
                NodeKind::Fixed
            });
            blocking.push(info.blocking);
            gemm_like.push(info.gemm_like);
            facts.push(info);
        }
        let mut g = DepGraph {
            kind,
            blocking,
            group: vec![NONE; n],
            group_names: Vec::new(),
            coll_of_wait: vec![NONE; n],
            wait_of_coll: vec![NONE; n],
            gemm_like,
            pred_off: Vec::with_capacity(n + 1),
            preds: Vec::with_capacity(n * 3),
            succ_off: Vec::new(),
            succs: Vec::new(),
            index_of,
            ops,
        };
        g.assign_groups(ctx);
        let mut b = Builder {
            storage_of: vec![NONE; ctx.num_value_slots()],
            next_storage: 0,
            last_writer: Vec::with_capacity(n * 2),
            readers_head: Vec::with_capacity(n * 2),
            reader_link: Vec::with_capacity(n * 2),
            reads: Vec::new(),
            writes: Vec::new(),
        };
        // Interned once: an op has the attribute exactly when it has this key (none has it
        // when the name was never interned).
        let pin = ctx.find_ident(PIN_ATTR);
        let mut order = OrderState {
            last_fixed: NONE,
            since_fixed: Vec::new(),
            last_of_group: vec![NONE; g.group_names.len()],
            last_unknown: NONE,
            last_pinned: NONE,
        };
        let mut preds: Vec<u32> = Vec::new();
        // A fixed node's predecessors since the previous one: already sorted and distinct,
        // and as long as the stretch between barriers (the whole block before a terminator),
        // so they are merged with the sorted few others rather than sorted with them.
        let mut since_fixed: Vec<u32> = Vec::new();
        g.pred_off.push(0);
        for i in 0..n as u32 {
            // The op's record, then (once it has arrived) its operands' records.
            if let Some(&ahead) = g.ops.get(i as usize + 2 * PREFETCH_DISTANCE) {
                ctx.prefetch_op(ahead);
            }
            if let Some(&ahead) = g.ops.get(i as usize + PREFETCH_DISTANCE) {
                ctx.prefetch_operands(ahead);
            }
            preds.clear();
            g.data_and_memory_preds(ctx, i, &facts, &mut b, &mut preds);
            g.barrier_preds(i, &mut order, &mut preds, &mut since_fixed);
            if opts.collective_order {
                g.collective_order_preds(ctx, i, pin, &mut order, &mut preds);
            }
            preds.sort_unstable();
            preds.dedup();
            if since_fixed.is_empty() {
                g.preds.extend_from_slice(&preds);
            } else {
                merge_distinct(&preds, &since_fixed, &mut g.preds);
                since_fixed.clear();
            }
            debug_assert!(
                g.preds[*g.pred_off.last().expect("offsets") as usize..]
                    .iter()
                    .all(|&p| p < i),
                "edges must follow program order"
            );
            g.pred_off.push(g.preds.len() as u32);
        }
        g.finish();
        g
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the block is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The node of an op of the block.
    pub fn node(&self, op: OpId) -> Option<u32> {
        self.index_of
            .get(op.index())
            .copied()
            .filter(|&n| n != NONE)
    }

    /// Nodes that must stay before `n`.
    pub fn preds(&self, n: u32) -> &[u32] {
        let n = n as usize;
        &self.preds[self.pred_off[n] as usize..self.pred_off[n + 1] as usize]
    }

    /// Nodes that must stay after `n`.
    pub fn succs(&self, n: u32) -> &[u32] {
        let n = n as usize;
        &self.succs[self.succ_off[n] as usize..self.succ_off[n + 1] as usize]
    }

    /// Whether `n` is an asynchronous collective (one completed by a wait).
    pub fn is_async_collective(&self, n: u32) -> bool {
        self.kind[n as usize] == NodeKind::Collective && !self.blocking[n as usize]
    }

    /// Total number of edges.
    pub fn num_edges(&self) -> usize {
        self.succs.len()
    }

    /// SSA and memory predecessors of node `i` (see the module docs).
    fn data_and_memory_preds(
        &mut self,
        ctx: &Context,
        i: u32,
        facts: &[NameInfo],
        b: &mut Builder,
        preds: &mut Vec<u32>,
    ) {
        let mut reads = std::mem::take(&mut b.reads);
        let mut writes = std::mem::take(&mut b.writes);
        // Storage of every value defined or used in the block: aliases resolve to the storage
        // of the value they alias, everything else is its own storage.
        reads.clear();
        writes.clear();
        let op = self.ops[i as usize];
        let info = facts[i as usize];
        let operands = ctx.operands(op);
        let written = info.written.range(operands.len());
        for (k, &v) in operands.iter().enumerate() {
            // SSA edge (also covered by storages; kept explicit for values of other kinds).
            if let Some(d) = ctx.defining_op(v) {
                let d = self.index_of[d.index()];
                if d != NONE {
                    preds.push(d);
                }
            }
            let s = b.storage(v);
            if written.contains(&k) {
                writes.push(s);
            } else {
                reads.push(s);
            }
        }
        if info.written.is_wait {
            // The collective it completes: the op defining its first operand, when that
            // op is a collective ([`completed_collective`], from the node's facts).
            let c = operands
                .first()
                .and_then(|&v| ctx.defining_op(v))
                .map_or(NONE, |d| self.index_of[d.index()]);
            if c != NONE && facts[c as usize].collective {
                self.coll_of_wait[i as usize] = c;
                if self.wait_of_coll[c as usize] == NONE {
                    self.wait_of_coll[c as usize] = i;
                }
                // The collective may read its inputs until it completes.
                let cop = self.ops[c as usize];
                let cw = facts[c as usize].written.range(ctx.operands(cop).len());
                for (k, &v) in ctx.operands(cop).iter().enumerate() {
                    if !cw.contains(&k) {
                        reads.push(b.storage(v));
                    }
                }
            }
        }
        for (r, &v) in ctx.results(op).iter().enumerate() {
            let s = match info.alias.alias(operands, r) {
                Some(a) => b.storage(a),
                None => b.storage(v),
            };
            b.storage_of[v.index()] = s;
            writes.push(s);
        }
        for &s in reads.iter() {
            let s = s as usize;
            let w = b.last_writer[s];
            if w != NONE && w != i {
                preds.push(w);
            }
            let head = b.readers_head[s];
            if head == NONE || b.reader_link[head as usize].0 != i {
                b.readers_head[s] = b.reader_link.len() as u32;
                b.reader_link.push((i, head));
            }
        }
        for &s in writes.iter() {
            let s = s as usize;
            let mut r = b.readers_head[s];
            while r != NONE {
                let (node, next) = b.reader_link[r as usize];
                if node != i {
                    preds.push(node);
                }
                r = next;
            }
            b.readers_head[s] = NONE;
            let w = b.last_writer[s];
            if w != NONE && w != i {
                preds.push(w);
            }
            b.last_writer[s] = i;
        }
        b.reads = reads;
        b.writes = writes;
    }

    /// Barrier predecessors of node `i`: the last fixed op before it, and for a fixed op
    /// every op since the previous one (into `since`, empty on entry: sorted and distinct).
    /// Chaining through the barrier keeps this linear.
    fn barrier_preds(
        &self,
        i: u32,
        st: &mut OrderState,
        preds: &mut Vec<u32>,
        since: &mut Vec<u32>,
    ) {
        if st.last_fixed != NONE {
            preds.push(st.last_fixed);
        }
        if self.kind[i as usize] == NodeKind::Fixed {
            std::mem::swap(since, &mut st.since_fixed);
            st.last_fixed = i;
        } else {
            st.since_fixed.push(i);
        }
    }

    fn assign_groups(&mut self, ctx: &Context) {
        // Keys are interned: an op has a `group` entry only if the name was ever interned.
        let Some(key) = ctx.find_ident("group") else {
            return;
        };
        let mut ids: FxHashMap<&str, u32> = FxHashMap::default();
        for (i, &op) in self.ops.iter().enumerate() {
            if self.kind[i] != NodeKind::Collective {
                continue;
            }
            if let Some(name) = ctx
                .inherent_attr_id(op, key)
                .and_then(|a| ctx.attr_as_symbol(a))
            {
                let next = self.group_names.len() as u32;
                let id = *ids.entry(name).or_insert(next);
                if id == next {
                    self.group_names.push(name.to_string());
                }
                self.group[i] = id;
            }
        }
    }

    /// Collective-order predecessors of node `i`. Per group: each collective after the
    /// previous one. A collective with no known group is ordered against every group (it
    /// might share a communicator with any of them).
    fn collective_order_preds(
        &self,
        ctx: &Context,
        i: u32,
        pin: Option<Ident>,
        st: &mut OrderState,
        preds: &mut Vec<u32>,
    ) {
        let iu = i as usize;
        if self.kind[iu] != NodeKind::Collective {
            return;
        }
        let g = self.group[iu];
        if g == NONE {
            preds.extend(st.last_of_group.iter().copied().filter(|&l| l != NONE));
            st.last_of_group.fill(i);
            if st.last_unknown != NONE {
                preds.push(st.last_unknown);
            }
            st.last_unknown = i;
        } else {
            let l = st.last_of_group[g as usize];
            if l != NONE {
                preds.push(l);
            }
            if st.last_unknown != NONE {
                preds.push(st.last_unknown);
            }
            st.last_of_group[g as usize] = i;
        }
        // Pins chain in the current order: a pass that keeps the pins keeps this order.
        let pinned = pin.is_some_and(|k| ctx.attrs(self.ops[iu]).iter().any(|&(a, _)| a == k));
        if pinned {
            if st.last_pinned != NONE {
                preds.push(st.last_pinned);
            }
            st.last_pinned = i;
        }
    }

    /// Derives the successor lists from the predecessor lists (each comes out sorted, as
    /// heads are visited in increasing order).
    fn finish(&mut self) {
        let n = self.len();
        let mut succ_off = vec![0u32; n + 1];
        for &a in &self.preds {
            succ_off[a as usize + 1] += 1;
        }
        for i in 0..n {
            succ_off[i + 1] += succ_off[i];
        }
        let mut fill = succ_off.clone();
        let mut succs = vec![0u32; self.preds.len()];
        for b in 0..n as u32 {
            for &a in self.preds(b) {
                succs[fill[a as usize] as usize] = b;
                fill[a as usize] += 1;
            }
        }
        self.succ_off = succ_off;
        self.succs = succs;
    }
}

/// Appends the union of `a` and `b`, both sorted and without duplicates, to `out`, sorted and
/// without duplicates.
fn merge_distinct(a: &[u32], b: &[u32], out: &mut Vec<u32>) {
    out.reserve(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        out.push(x.min(y));
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
}

/// The running state of the barrier and collective-order rules during a build.
struct OrderState {
    last_fixed: u32,
    /// Non-fixed nodes since the last fixed one.
    since_fixed: Vec<u32>,
    last_of_group: Vec<u32>,
    last_unknown: u32,
    last_pinned: u32,
}

/// How an op without regions is scheduled, from its definition.
fn classify_def(def: Option<&OpDef>) -> NodeKind {
    let Some(def) = def else {
        return NodeKind::Fixed;
    };
    if def.has_trait(Trait::Terminator) {
        return NodeKind::Fixed;
    }
    if def.has_trait(Trait::Collective) {
        return NodeKind::Collective;
    }
    if def.has_trait(Trait::Wait) {
        return NodeKind::Wait;
    }
    let described = [
        Trait::Pure,
        Trait::MemAlloc,
        Trait::MemRead,
        Trait::MemWrite,
    ]
    .iter()
    .any(|t| def.has_trait(*t));
    if described {
        NodeKind::Compute
    } else {
        NodeKind::Fixed
    }
}

/// The operand positions an op writes (in place).
pub fn written_operands(ctx: &Context, op: OpId) -> std::ops::Range<usize> {
    Written::of(ctx, op).range(ctx.operands(op).len())
}

/// Which operands an op writes, as a rule of its name (see [`written_operands`]), and whether
/// it is a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Written {
    /// Operands from this position on, capped by the operand count...
    from: WrittenFrom,
    is_wait: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WrittenFrom {
    /// ... none.
    Nothing,
    /// ... all of them.
    All,
    /// ... all but the first (the work handle of `comm.wait`).
    Second,
    /// ... the second half (inputs, then destinations).
    SecondHalf,
}

impl Written {
    fn of(ctx: &Context, op: OpId) -> Written {
        let is_wait = ctx.op_has_trait(op, Trait::Wait);
        let from = match ctx.op_name(op) {
            // Work handle first, then the buffers it completes.
            "comm.wait" => WrittenFrom::Second,
            "coll.wait_tensor" => WrittenFrom::All,
            // Inputs then destinations.
            "comm.all_gather"
            | "comm.reduce_scatter"
            | "comm.all_to_all"
            | "comm.shard_dim_alltoall" => WrittenFrom::SecondHalf,
            _ if ctx.op_has_trait(op, Trait::MemWrite) || is_wait => WrittenFrom::All,
            _ => WrittenFrom::Nothing,
        };
        Written { from, is_wait }
    }

    fn range(self, n: usize) -> std::ops::Range<usize> {
        match self.from {
            WrittenFrom::Nothing => 0..0,
            WrittenFrom::All => 0..n,
            WrittenFrom::Second => 1.min(n)..n,
            WrittenFrom::SecondHalf => n / 2..n,
        }
    }
}

/// The per-name facts [`DepGraph::build`] caches.
#[derive(Clone, Copy)]
struct NameInfo {
    /// The kind of an op of this name without regions (one with regions is fixed).
    kind: NodeKind,
    blocking: bool,
    gemm_like: bool,
    /// Whether the definition has trait `Collective` (what a wait completes).
    collective: bool,
    written: Written,
    alias: AliasRule,
}

impl NameInfo {
    fn of(ctx: &Context, op: OpId) -> NameInfo {
        NameInfo {
            kind: classify_def(ctx.op_def(op)),
            blocking: ctx.op_has_trait(op, Trait::Blocking),
            gemm_like: ctx.op_name(op) == "compute.matmul",
            collective: ctx.op_has_trait(op, Trait::Collective),
            written: Written::of(ctx, op),
            alias: AliasRule::of_name(ctx.op_name(op)),
        }
    }
}

/// Which operand each result of an op aliases, as a rule of the op's name: what
/// [`alias_of`] answers, decided once per name rather than by matching the name for every
/// result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AliasRule {
    /// No result aliases an operand.
    None,
    /// Result `r` aliases operand `r + 1` (`comm.wait`: the work handle, then the buffers).
    NextOperand,
    /// Every result aliases the first operand (`coll.wait_tensor`, the in-place
    /// `symm.two_shot_all_reduce`).
    First,
    /// Every result aliases the second operand (`comm.shard_dim_alltoall`).
    Second,
}

impl AliasRule {
    /// The rule of ops named `name`.
    pub fn of_name(name: &str) -> AliasRule {
        match name {
            "comm.wait" => AliasRule::NextOperand,
            "coll.wait_tensor" | "symm.two_shot_all_reduce" => AliasRule::First,
            "comm.shard_dim_alltoall" => AliasRule::Second,
            _ => AliasRule::None,
        }
    }

    /// The operand (of `operands`) that result `result` aliases, as
    /// [`alias_of`](crate::analysis::buffers::alias_of) says.
    #[inline]
    pub fn alias(self, operands: &[Value], result: usize) -> Option<Value> {
        match self {
            AliasRule::None => None,
            AliasRule::NextOperand => operands.get(result + 1).copied(),
            AliasRule::First => operands.first().copied(),
            AliasRule::Second => operands.get(1).copied(),
        }
    }
}

/// The collective op a wait completes.
pub fn completed_collective(ctx: &Context, wait: OpId) -> Option<OpId> {
    let first = *ctx.operands(wait).first()?;
    let d = ctx.defining_op(first)?;
    ctx.op_has_trait(d, Trait::Collective).then_some(d)
}
