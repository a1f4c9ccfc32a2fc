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

use crate::analysis::buffers::alias_of;
use commlir_ir::{BlockId, Context, OpId, Trait, Value};
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
    index_of: FxHashMap<OpId, u32>,
}

/// Storage accesses of one op, gathered before edges are drawn.
#[derive(Default)]
struct Access {
    last_writer: u32,
    readers: Vec<u32>,
}

impl DepGraph {
    /// Builds the graph of `block` in its current order.
    pub fn build(ctx: &Context, block: BlockId, opts: GraphOptions) -> DepGraph {
        let ops: Vec<OpId> = ctx.block_ops(block).collect();
        let n = ops.len();
        let mut index_of = FxHashMap::default();
        index_of.reserve(n);
        for (i, &op) in ops.iter().enumerate() {
            index_of.insert(op, i as u32);
        }
        let mut g = DepGraph {
            kind: ops.iter().map(|&op| classify(ctx, op)).collect(),
            blocking: ops
                .iter()
                .map(|&op| ctx.op_has_trait(op, Trait::Blocking))
                .collect(),
            group: vec![NONE; n],
            group_names: Vec::new(),
            coll_of_wait: vec![NONE; n],
            wait_of_coll: vec![NONE; n],
            gemm_like: ops
                .iter()
                .map(|&op| ctx.op_name(op) == "compute.matmul")
                .collect(),
            pred_off: Vec::new(),
            preds: Vec::new(),
            succ_off: Vec::new(),
            succs: Vec::new(),
            index_of,
            ops,
        };
        let mut edges: Vec<(u32, u32)> = Vec::with_capacity(n * 3);
        g.data_and_memory_edges(ctx, &mut edges);
        g.barrier_edges(&mut edges);
        g.assign_groups(ctx);
        if opts.collective_order {
            g.collective_order_edges(ctx, &mut edges);
        }
        g.finish(edges);
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
        self.index_of.get(&op).copied()
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

    fn data_and_memory_edges(&mut self, ctx: &Context, edges: &mut Vec<(u32, u32)>) {
        // Storage of every value defined or used in the block: aliases resolve to the storage
        // of the value they alias, everything else is its own storage.
        let mut storage_of: FxHashMap<Value, u32> = FxHashMap::default();
        let mut next_storage = 0u32;
        let mut storage = |storage_of: &mut FxHashMap<Value, u32>, v: Value| -> u32 {
            *storage_of.entry(v).or_insert_with(|| {
                next_storage += 1;
                next_storage - 1
            })
        };
        let mut accesses: Vec<Access> = Vec::new();
        let mut reads: Vec<u32> = Vec::new();
        let mut writes: Vec<u32> = Vec::new();
        for (i, &op) in self.ops.iter().enumerate() {
            let i = i as u32;
            reads.clear();
            writes.clear();
            let operands = ctx.operands(op);
            let written = written_operands(ctx, op);
            for (k, &v) in operands.iter().enumerate() {
                // SSA edge (also covered by storages; kept explicit for values of other kinds).
                if let Some(d) = ctx.defining_op(v).and_then(|d| self.index_of.get(&d)) {
                    edges.push((*d, i));
                }
                let s = storage(&mut storage_of, v);
                if written.contains(&k) {
                    writes.push(s);
                } else {
                    reads.push(s);
                }
            }
            if ctx.op_has_trait(op, Trait::Wait) {
                if let Some(c) =
                    completed_collective(ctx, op).and_then(|c| self.index_of.get(&c).copied())
                {
                    self.coll_of_wait[i as usize] = c;
                    if self.wait_of_coll[c as usize] == NONE {
                        self.wait_of_coll[c as usize] = i;
                    }
                    // The collective may read its inputs until it completes.
                    let cop = self.ops[c as usize];
                    let cw = written_operands(ctx, cop);
                    for (k, &v) in ctx.operands(cop).iter().enumerate() {
                        if !cw.contains(&k) {
                            reads.push(storage(&mut storage_of, v));
                        }
                    }
                }
            }
            for (r, &v) in ctx.results(op).iter().enumerate() {
                let s = match alias_of(ctx, op, r) {
                    Some(a) => storage(&mut storage_of, a),
                    None => storage(&mut storage_of, v),
                };
                storage_of.insert(v, s);
                writes.push(s);
            }
            let needed = reads
                .iter()
                .chain(writes.iter())
                .map(|&s| s as usize + 1)
                .max()
                .unwrap_or(0);
            if accesses.len() < needed {
                accesses.resize_with(needed, || Access {
                    last_writer: NONE,
                    readers: Vec::new(),
                });
            }
            for &s in &reads {
                let a = &mut accesses[s as usize];
                if a.last_writer != NONE && a.last_writer != i {
                    edges.push((a.last_writer, i));
                }
                if a.readers.last() != Some(&i) {
                    a.readers.push(i);
                }
            }
            for &s in &writes {
                let a = &mut accesses[s as usize];
                for &r in &a.readers {
                    if r != i {
                        edges.push((r, i));
                    }
                }
                a.readers.clear();
                if a.last_writer != NONE && a.last_writer != i {
                    edges.push((a.last_writer, i));
                }
                a.last_writer = i;
            }
        }
    }

    fn barrier_edges(&self, edges: &mut Vec<(u32, u32)>) {
        let mut last_fixed = NONE;
        let mut since: Vec<u32> = Vec::new();
        for (i, k) in self.kind.iter().enumerate() {
            let i = i as u32;
            if last_fixed != NONE {
                edges.push((last_fixed, i));
            }
            if *k == NodeKind::Fixed {
                edges.extend(since.drain(..).map(|s| (s, i)));
                last_fixed = i;
            } else {
                since.push(i);
            }
        }
    }

    fn assign_groups(&mut self, ctx: &Context) {
        let mut ids: FxHashMap<String, u32> = FxHashMap::default();
        for (i, &op) in self.ops.iter().enumerate() {
            if self.kind[i] != NodeKind::Collective {
                continue;
            }
            if let Some(name) = ctx
                .inherent_attr(op, "group")
                .and_then(|a| ctx.attr_as_symbol(a))
            {
                let next = self.group_names.len() as u32;
                let id = *ids.entry(name.to_string()).or_insert(next);
                if id == next {
                    self.group_names.push(name.to_string());
                }
                self.group[i] = id;
            }
        }
    }

    fn collective_order_edges(&self, ctx: &Context, edges: &mut Vec<(u32, u32)>) {
        // Per group: each collective after the previous one. A collective with no known group
        // is ordered against every group (it might share a communicator with any of them).
        let mut last_of_group: Vec<u32> = vec![NONE; self.group_names.len()];
        let mut last_unknown = NONE;
        let mut last_pinned = NONE;
        for i in 0..self.len() {
            if self.kind[i] != NodeKind::Collective {
                continue;
            }
            let i32_ = i as u32;
            let g = self.group[i];
            if g == NONE {
                edges.extend(
                    last_of_group
                        .iter()
                        .filter(|&&l| l != NONE)
                        .map(|&l| (l, i32_)),
                );
                last_of_group.fill(i32_);
                if last_unknown != NONE {
                    edges.push((last_unknown, i32_));
                }
                last_unknown = i32_;
            } else {
                let l = last_of_group[g as usize];
                if l != NONE {
                    edges.push((l, i32_));
                }
                if last_unknown != NONE {
                    edges.push((last_unknown, i32_));
                }
                last_of_group[g as usize] = i32_;
            }
            // Pins chain in the current order: a pass that keeps the pins keeps this order.
            if ctx.get_attr(self.ops[i], PIN_ATTR).is_some() {
                if last_pinned != NONE {
                    edges.push((last_pinned, i32_));
                }
                last_pinned = i32_;
            }
        }
    }

    fn finish(&mut self, mut edges: Vec<(u32, u32)>) {
        let n = self.len();
        edges.sort_unstable();
        edges.dedup();
        debug_assert!(
            edges.iter().all(|&(a, b)| a < b),
            "edges must follow program order"
        );
        let mut pred_count = vec![0u32; n + 1];
        self.succ_off = vec![0u32; n + 1];
        for &(a, b) in &edges {
            self.succ_off[a as usize + 1] += 1;
            pred_count[b as usize + 1] += 1;
        }
        for i in 0..n {
            self.succ_off[i + 1] += self.succ_off[i];
            pred_count[i + 1] += pred_count[i];
        }
        self.succs = edges.iter().map(|e| e.1).collect();
        self.preds = vec![0; edges.len()];
        let mut fill = pred_count.clone();
        for &(a, b) in &edges {
            self.preds[fill[b as usize] as usize] = a;
            fill[b as usize] += 1;
        }
        self.pred_off = pred_count;
    }
}

/// How an op is scheduled.
fn classify(ctx: &Context, op: OpId) -> NodeKind {
    let Some(def) = ctx.op_def(op) else {
        return NodeKind::Fixed;
    };
    if !ctx.op_regions(op).is_empty() || def.has_trait(Trait::Terminator) {
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
    let n = ctx.operands(op).len();
    match ctx.op_name(op) {
        // Work handle first, then the buffers it completes.
        "comm.wait" => 1.min(n)..n,
        "coll.wait_tensor" => 0..n,
        // Inputs then destinations.
        "comm.all_gather"
        | "comm.reduce_scatter"
        | "comm.all_to_all"
        | "comm.shard_dim_alltoall" => n / 2..n,
        _ if ctx.op_has_trait(op, Trait::MemWrite) || ctx.op_has_trait(op, Trait::Wait) => 0..n,
        _ => 0..0,
    }
}

/// The collective op a wait completes.
pub fn completed_collective(ctx: &Context, wait: OpId) -> Option<OpId> {
    let first = *ctx.operands(wait).first()?;
    let d = ctx.defining_op(first)?;
    ctx.op_has_trait(d, Trait::Collective).then_some(d)
}
