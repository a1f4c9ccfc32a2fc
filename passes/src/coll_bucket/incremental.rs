//! The incremental evaluation of trial merges (the parent module's docs, "Evaluation in
//! near-linear time", say what it keeps and why it is exact).
//!
//! Vocabulary: a *node* is an op of the block, a bucket of two or more members laid out as
//! one merged collective, or the bucket's waits (laid out together, one node: the first
//! waits for the merged op, the others then wait for nothing). Each order (traced,
//! scheduled) is a [`View`]: a linked list of nodes split into *slots* (the positions of the
//! order at the start; a moved node joins the slot of the node it is placed next to, so a
//! slot holds a *bundle* of nodes). Stream classes: `Compute` (kernels and waits: the
//! compute stream), `Comm` (asynchronous collectives), `Both` (blocking collectives), `Free`
//! (no stream). An op's inputs from its own stream are never later than that stream is
//! free, so only inputs from the other stream (its *cross* producers, looked through free
//! ops such as views) can delay it; and as each stream runs its nodes in order, the latest of
//! a node's cross producers is the one that matters (a bucket keeps only that one).
//!
//! Every step of a trial costs O(log n) or O(what moves), never O(bucket size): a bucket's
//! merged node and its waits' node are single nodes, its latest input is kept per order, and
//! the memory of its waits is kept folded (a wait added at the end extends the fold).

use super::{
    layout_levels, layout_peak, merged_ns, Bucket, BucketOptions, Member, Refusal, Trials,
};
use crate::analysis::buffers::BufferModel;
use crate::analysis::cost::{coll_kind, CollKind, OpCost};
use crate::analysis::timeline::Overlap;
use crate::schedule::{apply_op_order, within_budget, CostTable};
use commlir_dialects::shape::tensor_bytes;
use commlir_ir::{BlockId, Context, OpId, Trait};

const NONE: u32 = u32::MAX;
/// "Plus infinity" and "minus infinity" for slacks and levels, far enough from `i64`'s ends
/// that time shifts added to them never overflow.
const INF: i64 = i64::MAX / 4;
const NEG: i64 = i64::MIN / 4;

/// Integer time, in 2⁻¹⁶ ns: sums and shifts are exact.
fn q(ns: f64) -> i64 {
    (ns * 65536.0).round() as i64
}

/// Whether the incremental evaluation models `ops` exactly as the simulator does: no overlap
/// slowdown (the event-driven simulator) and no in-place collective (a wait on its operand
/// waits for it, an edge the node model does not have).
pub(super) fn applies(ctx: &Context, ops: &[OpId], costs: &CostTable) -> bool {
    Overlap::of(&costs.machine).is_none()
        && !ops.iter().any(|&op| {
            matches!(costs.get(op), OpCost::Collective(_))
                && !ctx.op_has_trait(op, Trait::Wait)
                && ctx.op_has_trait(op, Trait::MemWrite)
        })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Free,
    Compute,
    Comm,
    Both,
}

/// A bucket of two or more members.
#[derive(Clone, Debug, Default)]
struct Group {
    /// Members in joining order (ops).
    members: Vec<u32>,
    /// Their waits in laid-out order (ops).
    waits: Vec<u32>,
    /// The compute-stream ops the members read.
    producers: Vec<u32>,
    /// Some producer is a wait, which may move: every producer is looked at, not only the
    /// latest one kept.
    wait_producers: bool,
    /// Comm-stream ops reading a wait's result.
    wait_users: Vec<u32>,
}

/// The nodes: ops (numbered densely in block order), then per bucket its merged node
/// (`n + 2k`) and its waits' node (`n + 2k + 1`).
struct Graph {
    n: usize,
    ops: Vec<OpId>,
    /// By `OpId::index()`: the op's dense number, `NONE` outside the block.
    dense: Vec<u32>,
    /// By node.
    class: Vec<Class>,
    cost: Vec<i64>,
    /// By op.
    is_wait: Vec<bool>,
    /// The stream ops its operands come from (through free ops), deduplicated.
    eff_in: Vec<Vec<u32>>,
    /// Its cross producers (`eff_in` of the other stream), and the ops it is one of.
    cross: Vec<Vec<u32>>,
    cross_users: Vec<Vec<u32>>,
    /// The node holding it (itself, or its bucket's nodes).
    node_of: Vec<u32>,
    /// A bucket's wait: its index among the bucket's waits.
    wait_idx: Vec<u32>,
    /// A bucket's wait: the cost of the bucket's waits up to it, itself included (the waits
    /// run in order after the merged op: a wait's result is ready this long after its node
    /// starts).
    wait_prefix: Vec<i64>,
    groups: Vec<Group>,
}

impl Graph {
    fn new(ctx: &Context, ops: &[OpId], costs: &CostTable) -> Graph {
        let n = ops.len();
        let mut dense = vec![NONE; ctx.num_op_slots()];
        for (i, &op) in ops.iter().enumerate() {
            dense[op.index()] = i as u32;
        }
        let cap = 2 * n + 2;
        let mut class = vec![Class::Free; cap];
        let mut cost = vec![0i64; cap];
        let mut is_wait = vec![false; n];
        for (i, &op) in ops.iter().enumerate() {
            let c = costs.get(op);
            is_wait[i] = ctx.op_has_trait(op, Trait::Wait);
            class[i] = if is_wait[i] {
                Class::Compute
            } else {
                match c {
                    OpCost::Compute(_) | OpCost::Fused { .. } => Class::Compute,
                    OpCost::Collective(_) if ctx.op_has_trait(op, Trait::Blocking) => Class::Both,
                    OpCost::Collective(_) => Class::Comm,
                    OpCost::Free => Class::Free,
                }
            };
            cost[i] = q(c.ns());
        }
        // Effective producers: a free op's result is ready when its inputs are, so it
        // stands for their producers.
        let mut eff_in: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, &op) in ops.iter().enumerate() {
            let mut e: Vec<u32> = Vec::new();
            for &v in ctx.operands(op) {
                let Some(d) = ctx.defining_op(v) else {
                    continue;
                };
                let dn = dense.get(d.index()).copied().unwrap_or(NONE);
                if dn == NONE || dn as usize >= i {
                    continue;
                }
                if class[dn as usize] == Class::Free {
                    e.extend_from_slice(&eff_in[dn as usize]);
                } else {
                    e.push(dn);
                }
            }
            e.sort_unstable();
            e.dedup();
            eff_in[i] = e;
        }
        let mut cross: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut cross_users: Vec<Vec<u32>> = vec![Vec::new(); n];
        for i in 0..n {
            let other = match class[i] {
                Class::Compute => Class::Comm,
                Class::Comm => Class::Compute,
                _ => continue,
            };
            let c: Vec<u32> = eff_in[i]
                .iter()
                .copied()
                .filter(|&p| class[p as usize] == other)
                .collect();
            for &p in &c {
                cross_users[p as usize].push(i as u32);
            }
            cross[i] = c;
        }
        Graph {
            n,
            ops: ops.to_vec(),
            dense,
            class,
            cost,
            is_wait,
            eff_in,
            cross,
            cross_users,
            node_of: (0..n as u32).collect(),
            wait_idx: vec![0; n],
            wait_prefix: vec![0; n],
            groups: Vec::new(),
        }
    }

    fn d(&self, op: OpId) -> u32 {
        self.dense.get(op.index()).copied().unwrap_or(NONE)
    }

    /// The bucket of a merged node or waits' node.
    fn group(&self, node: u32) -> Option<usize> {
        (node as usize >= self.n).then(|| (node as usize - self.n) / 2)
    }

    fn is_waits_node(&self, node: u32) -> bool {
        node as usize >= self.n && (node as usize - self.n) % 2 == 1
    }

    /// The compute-stream ops a member reads (the merged node's cross producers).
    fn member_producers(&self, op: u32) -> impl Iterator<Item = u32> + '_ {
        self.eff_in[op as usize]
            .iter()
            .copied()
            .filter(|&p| self.class[p as usize] == Class::Compute)
    }
}

/// One trial merge, the same in every order.
struct Trial {
    /// The bucket's node (its merged node, or its only member's op) and waits' node.
    g_old: u32,
    wg_old: u32,
    /// The nodes the trial makes.
    g_new: u32,
    wg_new: u32,
    /// The bucket's first member and the new one (ops).
    m0: u32,
    m: u32,
    /// The waits that join the waits' node: the only member's (first merge) and `m`'s.
    old_waits: Vec<u32>,
    m_waits: Vec<u32>,
    class: Class,
    cost: i64,
    wg_cost: i64,
}

impl Trial {
    /// The node op `p` is part of in the trial.
    fn node(&self, g: &Graph, p: u32) -> u32 {
        if p == self.m || p == self.m0 {
            return self.g_new;
        }
        let nd = g.node_of[p as usize];
        if nd == self.g_old {
            self.g_new
        } else if (nd == self.wg_old && nd != NONE)
            || self.m_waits.contains(&p)
            || self.old_waits.contains(&p)
        {
            self.wg_new
        } else {
            nd
        }
    }

    /// The cost of the trial's waits up to `p` (one of them), itself included.
    fn wait_prefix(&self, g: &Graph, p: u32) -> i64 {
        if self.wg_old != NONE && g.node_of[p as usize] == self.wg_old {
            return g.wait_prefix[p as usize];
        }
        let mut acc = if self.wg_old != NONE {
            g.cost[self.wg_old as usize]
        } else {
            0
        };
        for &w in self.old_waits.iter().chain(&self.m_waits) {
            acc += g.cost[w as usize];
            if w == p {
                break;
            }
        }
        acc
    }

    /// The waits of the trial's waits' node (ops, in order).
    fn waits(&self, g: &Graph) -> Vec<u32> {
        let mut w = match g.group(self.g_old) {
            Some(k) => g.groups[k].waits.clone(),
            None => self.old_waits.clone(),
        };
        w.extend_from_slice(&self.m_waits);
        w
    }

    /// The members of the trial's merged node (ops, joining order).
    fn members(&self, g: &Graph) -> Vec<u32> {
        let mut v = match g.group(self.g_old) {
            Some(k) => g.groups[k].members.clone(),
            None => vec![self.m0],
        };
        v.push(self.m);
        v
    }
}

/// Range add, point query.
struct Fenwick {
    t: Vec<i64>,
}

impl Fenwick {
    fn new(n: usize) -> Self {
        Fenwick { t: vec![0; n + 1] }
    }
    fn add_from(&mut self, i: usize, v: i64) {
        let mut i = i + 1;
        while i < self.t.len() {
            self.t[i] += v;
            i += i & i.wrapping_neg();
        }
    }
    /// Adds `v` to every index in `l..r`.
    fn range_add(&mut self, l: usize, r: usize, v: i64) {
        if l < r && v != 0 {
            self.add_from(l, v);
            self.add_from(r, -v);
        }
    }
    fn get(&self, i: usize) -> i64 {
        let mut i = i + 1;
        let mut s = 0;
        while i > 0 {
            s += self.t[i];
            i -= i & i.wrapping_neg();
        }
        s
    }
}

/// Minimum over slots with range adds: each node holds the minimum of its children plus
/// the adds made to it as a whole (so nothing is pushed down).
struct LazyMin {
    size: usize,
    t: Vec<i64>,
    ad: Vec<i64>,
}

impl LazyMin {
    fn new(n: usize) -> Self {
        let size = n.max(1).next_power_of_two();
        LazyMin {
            size,
            t: vec![INF; 2 * size],
            ad: vec![0; 2 * size],
        }
    }
    fn from_leaves(leaves: &[i64]) -> Self {
        let mut t = LazyMin::new(leaves.len());
        t.t[t.size..t.size + leaves.len()].copy_from_slice(leaves);
        for k in (1..t.size).rev() {
            t.t[k] = t.t[2 * k].min(t.t[2 * k + 1]);
        }
        t
    }
    fn pull(&mut self, mut k: usize) {
        while k > 1 {
            k /= 2;
            self.t[k] = self.t[2 * k].min(self.t[2 * k + 1]) + self.ad[k];
        }
    }
    /// Adds `v` to every slot in `l..r`.
    fn add(&mut self, l: usize, r: usize, v: i64) {
        if l >= r || v == 0 {
            return;
        }
        let (mut a, mut b) = (l + self.size, r + self.size);
        while a < b {
            if a & 1 == 1 {
                self.t[a] += v;
                self.ad[a] += v;
                a += 1;
            }
            if b & 1 == 1 {
                b -= 1;
                self.t[b] += v;
                self.ad[b] += v;
            }
            a /= 2;
            b /= 2;
        }
        self.pull(l + self.size);
        self.pull(r - 1 + self.size);
    }
    /// A slot's value (its own and the adds made above it).
    fn get(&self, i: usize) -> i64 {
        let mut k = i + self.size;
        let mut v = self.t[k];
        while k > 1 {
            k /= 2;
            v += self.ad[k];
        }
        v
    }
    fn assign(&mut self, i: usize, v: i64) {
        let cur = self.get(i);
        if cur != v {
            self.t[i + self.size] += v - cur;
            self.pull(i + self.size);
        }
    }
    /// The first slot in `l..r` whose value is below `thr`.
    fn first_below(&self, l: usize, r: usize, thr: i64) -> Option<usize> {
        if l >= r {
            return None;
        }
        self.first_rec(1, 0, self.size, l, r, thr, 0)
    }
    /// `acc`: the adds made above node `k`.
    #[allow(clippy::too_many_arguments)]
    fn first_rec(
        &self,
        k: usize,
        lo: usize,
        hi: usize,
        l: usize,
        r: usize,
        thr: i64,
        acc: i64,
    ) -> Option<usize> {
        if r <= lo || hi <= l || self.t[k] + acc >= thr {
            return None;
        }
        if hi - lo == 1 {
            return Some(lo);
        }
        let mid = (lo + hi) / 2;
        let acc = acc + self.ad[k];
        self.first_rec(2 * k, lo, mid, l, r, thr, acc)
            .or_else(|| self.first_rec(2 * k + 1, mid, hi, l, r, thr, acc))
    }
}

/// Minimum over slots (point updates), bottom-up.
struct MinTree {
    size: usize,
    mn: Vec<u32>,
}

impl MinTree {
    fn new(n: usize) -> Self {
        let size = n.max(1).next_power_of_two();
        MinTree {
            size,
            mn: vec![NONE; 2 * size],
        }
    }
    fn from_leaves(leaves: &[u32]) -> Self {
        let mut t = MinTree::new(leaves.len());
        t.mn[t.size..t.size + leaves.len()].copy_from_slice(leaves);
        for k in (1..t.size).rev() {
            t.mn[k] = t.mn[2 * k].min(t.mn[2 * k + 1]);
        }
        t
    }
    fn assign(&mut self, i: usize, v: u32) {
        let mut k = self.size + i;
        if self.mn[k] == v {
            return;
        }
        self.mn[k] = v;
        while k > 1 {
            k /= 2;
            self.mn[k] = self.mn[2 * k].min(self.mn[2 * k + 1]);
        }
    }
    fn min(&self, l: usize, r: usize) -> u32 {
        let (mut l, mut r) = (l + self.size, r + self.size);
        let mut m = NONE;
        while l < r {
            if l & 1 == 1 {
                m = m.min(self.mn[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                m = m.min(self.mn[r]);
            }
            l /= 2;
            r /= 2;
        }
        m
    }
}

/// Maximum prefix sum over slots: each leaf is a slot's (net change, highest level reached
/// relative to its start); bottom-up, the order kept by the indices.
struct PrefixTree {
    size: usize,
    n: usize,
    net: Vec<i64>,
    mx: Vec<i64>,
}

impl PrefixTree {
    fn new(n: usize) -> Self {
        let size = n.max(1).next_power_of_two();
        PrefixTree {
            size,
            n,
            net: vec![0; 2 * size],
            mx: vec![NEG; 2 * size],
        }
    }
    fn from_leaves(leaves: &[(i64, i64)]) -> Self {
        let mut t = PrefixTree::new(leaves.len());
        for (i, &(net, mx)) in leaves.iter().enumerate() {
            t.net[t.size + i] = net;
            t.mx[t.size + i] = mx;
        }
        for k in (1..t.size).rev() {
            let (l, r) = (2 * k, 2 * k + 1);
            t.net[k] = t.net[l] + t.net[r];
            t.mx[k] = t.mx[l].max(t.net[l] + t.mx[r]);
        }
        t
    }
    fn leaf(&self, i: usize) -> (i64, i64) {
        (self.net[self.size + i], self.mx[self.size + i])
    }
    fn assign(&mut self, i: usize, v: (i64, i64)) {
        let mut k = self.size + i;
        if (self.net[k], self.mx[k]) == v {
            return;
        }
        self.net[k] = v.0;
        self.mx[k] = v.1;
        while k > 1 {
            k /= 2;
            let (l, r) = (2 * k, 2 * k + 1);
            self.net[k] = self.net[l] + self.net[r];
            self.mx[k] = self.mx[l].max(self.net[l] + self.mx[r]);
        }
    }
    fn max_prefix(&self) -> i64 {
        self.mx[1]
    }
}

/// A run of unchanged slots `a..b` that a trial crosses with its streams shifted by `sc`
/// (compute) and `sm` (comm) against the current layout.
#[derive(Clone, Copy, Debug)]
struct Seg {
    a: u32,
    b: u32,
    sc: i64,
    sm: i64,
    /// What the slacks of its compute and comm consumers gain at least.
    add_c: i64,
    add_m: i64,
}

/// A slot a trial simulates: its nodes (in the trial's order), their ends, and the stream
/// times after it.
struct Explicit {
    slot: u32,
    nodes: Vec<u32>,
    ends: Vec<i64>,
    after: (i64, i64),
}

/// What a trial's timeline came to.
struct Sweep {
    makespan: i64,
    trailing: usize,
    segs: Vec<Seg>,
    explicit: Vec<Explicit>,
    /// Consumers in crossed runs checked one by one (their slacks are recomputed).
    crossing: Vec<u32>,
}

/// A trial's layout in one order.
struct Layout {
    /// The merged node goes right after this node (else where the bucket is).
    after: Option<u32>,
    /// The nodes whose waits join the trial's waits' node, and the first of them (where
    /// that node goes).
    waits: Vec<u32>,
    f_node: u32,
    /// The merged node's cross producers to look at: its latest one, or all of them when
    /// some may move.
    inputs: Vec<u32>,
    /// Slots whose bundles change (sorted), and their bundles in the trial.
    changed: Vec<u32>,
    bundles: Vec<Vec<u32>>,
    /// Unchanged slots holding a consumer of a moved wait.
    extra: Vec<u32>,
}

/// Per-node scratch space of one order's trial, valid where stamped with the current epoch.
struct Scratch {
    epoch: u32,
    end_stamp: Vec<u32>,
    end: Vec<i64>,
    lab_stamp: Vec<u32>,
    lab: Vec<u64>,
    /// Consumers (slot, node) of the nodes a trial simulated, to check one by one.
    ex_users: Vec<(u32, u32)>,
}

impl Scratch {
    fn new(nodes: usize) -> Self {
        Scratch {
            epoch: 0,
            end_stamp: vec![0; nodes],
            end: vec![0; nodes],
            lab_stamp: vec![0; nodes],
            lab: vec![0; nodes],
            ex_users: Vec::new(),
        }
    }
}

/// The cross producers of a node to look at.
enum Inputs<'a> {
    Ops(&'a [u32]),
    One(u32),
}

impl Inputs<'_> {
    fn for_each(&self, mut f: impl FnMut(u32)) {
        match self {
            Inputs::Ops(v) => v.iter().for_each(|&p| f(p)),
            Inputs::One(p) if *p != NONE => f(*p),
            Inputs::One(_) => {}
        }
    }
}

/// One order of the function with the timeline of its current layout.
struct View {
    nslots: usize,
    next: Vec<u32>,
    prev: Vec<u32>,
    slot: Vec<u32>,
    sub: Vec<u32>,
    head: Vec<u32>,
    /// Node ends and stream times after each slot, relative to the offsets of their slot.
    end_rel: Vec<i64>,
    aft_c: Vec<i64>,
    aft_m: Vec<i64>,
    off_c: Fenwick,
    off_m: Fenwick,
    /// A lower bound of the slack of each consumer (its stream's free time before it minus
    /// its latest cross input), relative to the adds its slot's tree leaf received (`acc_*`).
    slack_rel: Vec<i64>,
    acc_c: Fenwick,
    acc_m: Fenwick,
    slack_c: LazyMin,
    slack_m: LazyMin,
    /// By node: the smallest slot of its cross producers.
    minprod: Vec<u32>,
    prod_c: MinTree,
    prod_m: MinTree,
    /// By merged node: its latest cross producer (op) in this order.
    g_last: Vec<u32>,
    /// Slots from here on hold only nodes of no cost (their timeline is not kept).
    trailing: usize,
    makespan: i64,
}

/// The nodes of a slot, in order.
struct Bundle<'a> {
    v: &'a View,
    cur: u32,
    slot: u32,
}

impl Iterator for Bundle<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        let c = self.cur;
        if c == NONE || self.v.slot[c as usize] != self.slot {
            return None;
        }
        self.cur = self.v.next[c as usize];
        Some(c)
    }
}

/// A trial and its layout in the order being simulated.
type TrialIn<'a> = Option<(&'a Trial, &'a Layout)>;

impl View {
    fn new(g: &Graph, order: &[u32], track: bool) -> View {
        let ns = order.len();
        let cap = g.class.len();
        let mut v = View {
            nslots: ns,
            next: vec![NONE; cap],
            prev: vec![NONE; cap],
            slot: vec![NONE; cap],
            sub: vec![0; cap],
            head: vec![NONE; ns],
            end_rel: vec![0; cap],
            aft_c: vec![0; ns],
            aft_m: vec![0; ns],
            off_c: Fenwick::new(ns),
            off_m: Fenwick::new(ns),
            slack_rel: vec![INF; cap],
            acc_c: Fenwick::new(ns),
            acc_m: Fenwick::new(ns),
            slack_c: LazyMin::new(ns),
            slack_m: LazyMin::new(ns),
            minprod: vec![NONE; cap],
            prod_c: MinTree::new(ns),
            prod_m: MinTree::new(ns),
            g_last: vec![NONE; cap],
            trailing: 0,
            makespan: 0,
        };
        for (i, &d) in order.iter().enumerate() {
            let d = d as usize;
            v.slot[d] = i as u32;
            v.head[i] = d as u32;
            if i > 0 {
                v.prev[d] = order[i - 1];
            }
            if i + 1 < ns {
                v.next[d] = order[i + 1];
            }
        }
        if track {
            let (mut cf, mut mf) = (0i64, 0i64);
            for x in 0..ns {
                let nodes: Vec<u32> = v.bundle(x).collect();
                for &node in &nodes {
                    let (end, _) = v.step(g, None, node, &mut cf, &mut mf, &mut |q| v.ready(g, q));
                    v.end_rel[node as usize] = end;
                }
                v.aft_c[x] = cf;
                v.aft_m[x] = mf;
            }
            v.trailing = (0..ns)
                .rev()
                .find(|&x| v.bundle(x).any(|n| g.cost[n as usize] > 0))
                .map_or(0, |x| x + 1);
            v.makespan = v.stream_max(v.trailing);
            let (mut lc, mut lm, mut pc, mut pm) =
                (vec![INF; ns], vec![INF; ns], vec![NONE; ns], vec![NONE; ns]);
            for x in 0..v.trailing {
                (lc[x], lm[x], pc[x], pm[x]) = v.slot_leaves(g, x);
            }
            v.slack_c = LazyMin::from_leaves(&lc);
            v.slack_m = LazyMin::from_leaves(&lm);
            v.prod_c = MinTree::from_leaves(&pc);
            v.prod_m = MinTree::from_leaves(&pm);
        }
        v
    }

    fn bundle(&self, x: usize) -> Bundle<'_> {
        Bundle {
            v: self,
            cur: self.head[x],
            slot: x as u32,
        }
    }

    fn label(&self, node: u32) -> u64 {
        ((self.slot[node as usize] as u64) << 32) | self.sub[node as usize] as u64
    }

    /// The current end of a stream node.
    fn end(&self, g: &Graph, node: u32) -> i64 {
        let x = self.slot[node as usize] as usize;
        let off = match g.class[node as usize] {
            Class::Comm => self.off_m.get(x),
            _ => self.off_c.get(x),
        };
        self.end_rel[node as usize] + off
    }

    /// The current time op `p`'s result is ready (a stream op's, through its node).
    fn ready(&self, g: &Graph, p: u32) -> i64 {
        let node = g.node_of[p as usize];
        let end = self.end(g, node);
        if g.is_waits_node(node) {
            end - g.cost[node as usize] + g.wait_prefix[p as usize]
        } else {
            end
        }
    }

    /// The stream times before slot `x`.
    fn cut(&self, x: usize) -> (i64, i64) {
        if x == 0 {
            (0, 0)
        } else {
            (
                self.aft_c[x - 1] + self.off_c.get(x - 1),
                self.aft_m[x - 1] + self.off_m.get(x - 1),
            )
        }
    }

    /// The makespan when slots from `t` on cost nothing: the later stream where they start
    /// (a wait there waits at most for the last collective, which the comm stream's time
    /// covers).
    fn stream_max(&self, t: usize) -> i64 {
        let (c, m) = self.cut(t);
        c.max(m)
    }

    /// A node's class and cost (the trial's nodes included).
    fn info(g: &Graph, tr: TrialIn, node: u32) -> (Class, i64) {
        if let Some((t, _)) = tr {
            if node == t.g_new {
                return (t.class, t.cost);
            }
            if node == t.wg_new {
                return (Class::Compute, t.wg_cost);
            }
        }
        (g.class[node as usize], g.cost[node as usize])
    }

    /// The cross producers (ops) of a node to look at (the trial's nodes included).
    fn inputs<'a>(&'a self, g: &'a Graph, tr: TrialIn<'a>, node: u32) -> Inputs<'a> {
        if let Some((t, lay)) = tr {
            if node == t.g_new {
                return Inputs::Ops(&lay.inputs);
            }
            if node == t.wg_new {
                return Inputs::One(t.m0);
            }
        }
        let i = node as usize;
        if i < g.n {
            return Inputs::Ops(&g.cross[i]);
        }
        let k = (i - g.n) / 2;
        let grp = &g.groups[k];
        if g.is_waits_node(node) {
            Inputs::One(grp.members[0])
        } else if grp.wait_producers {
            Inputs::Ops(&grp.producers)
        } else {
            Inputs::One(self.g_last[i])
        }
    }

    /// Simulates one node from the stream times `cf`, `mf` (`ready` gives an input's time by
    /// its producer op); returns its end and slack (`INF` when it has no cross input, `NEG`
    /// for a blocking collective).
    fn step(
        &self,
        g: &Graph,
        tr: TrialIn,
        node: u32,
        cf: &mut i64,
        mf: &mut i64,
        ready: &mut dyn FnMut(u32) -> i64,
    ) -> (i64, i64) {
        let (class, cost) = Self::info(g, tr, node);
        let mut latest: Option<i64> = None;
        if matches!(class, Class::Compute | Class::Comm) {
            self.inputs(g, tr, node).for_each(|p| {
                let r = ready(p);
                latest = Some(latest.map_or(r, |l| l.max(r)));
            });
        }
        match class {
            Class::Free => (0, INF),
            Class::Compute => {
                let free = *cf;
                let start = latest.map_or(free, |r| r.max(free));
                *cf = start + cost;
                (*cf, latest.map_or(INF, |r| free - r))
            }
            Class::Comm => {
                let free = *mf;
                let start = latest.map_or(free, |r| r.max(free));
                *mf = start + cost;
                (*mf, latest.map_or(INF, |r| free - r))
            }
            Class::Both => {
                let start = (*cf).max(*mf);
                *cf = start + cost;
                *mf = *cf;
                (*cf, NEG)
            }
        }
    }

    /// Recomputes the slack and earliest producer slot of every node of slot `x` from the
    /// current layout, and the slot's tree leaves.
    fn refresh_slot(&mut self, g: &Graph, x: usize) {
        let (min_c, min_m, min_pc, min_pm) = self.slot_leaves(g, x);
        self.slack_c.assign(x, min_c);
        self.slack_m.assign(x, min_m);
        self.prod_c.assign(x, min_pc);
        self.prod_m.assign(x, min_pm);
    }

    /// [`View::refresh_slot`] but for the trees: the slot's leaves.
    fn slot_leaves(&mut self, g: &Graph, x: usize) -> (i64, i64, u32, u32) {
        let (mut cf, mut mf) = self.cut(x);
        let nodes: Vec<u32> = self.bundle(x).collect();
        let acc_c = self.acc_c.get(x);
        let acc_m = self.acc_m.get(x);
        let (mut min_c, mut min_m, mut min_pc, mut min_pm) = (INF, INF, NONE, NONE);
        for &node in &nodes {
            let (end, slack) = {
                let this = &*self;
                this.step(g, None, node, &mut cf, &mut mf, &mut |q| this.ready(g, q))
            };
            let i = node as usize;
            debug_assert!(
                g.class[i] == Class::Free || end == self.end(g, node),
                "slot {x}: node {node} ends at {end}, kept {}",
                self.end(g, node)
            );
            let mut mp = NONE;
            if matches!(g.class[i], Class::Compute | Class::Comm) {
                self.inputs(g, None, node)
                    .for_each(|p| mp = mp.min(self.slot[g.node_of[p as usize] as usize]));
            }
            self.minprod[i] = mp;
            match g.class[i] {
                Class::Compute => {
                    self.slack_rel[i] = slack - acc_c;
                    min_c = min_c.min(slack);
                    min_pc = min_pc.min(mp);
                }
                Class::Comm => {
                    self.slack_rel[i] = slack - acc_m;
                    min_m = min_m.min(slack);
                    min_pm = min_pm.min(mp);
                }
                Class::Both => {
                    min_c = NEG;
                    min_m = NEG;
                }
                Class::Free => {}
            }
        }
        (min_c, min_m, min_pc, min_pm)
    }

    /// The layout of a trial in this order: where the merged node and the waits' node go,
    /// and the slots that change. `None` when an input of the new member comes after a wait.
    fn layout(
        &self,
        g: &Graph,
        ctx: &Context,
        t: &Trial,
        m: &Member,
        s: &mut Scratch,
    ) -> Option<Layout> {
        let g_old = t.g_old;
        if self.slot[g_old as usize] == NONE || self.slot[t.m as usize] == NONE {
            return None;
        }
        let start = self.label(g_old);
        if self.label(t.m) < start {
            return None;
        }
        let mut last_def: Option<u32> = None;
        for &v in ctx.operands(m.op) {
            if let Some(d) = ctx.defining_op(v) {
                let dn = g.d(d);
                if dn == NONE {
                    return None;
                }
                let node = g.node_of[dn as usize];
                if last_def.is_none_or(|l| self.label(node) > self.label(l)) {
                    last_def = Some(node);
                }
            }
        }
        let after = last_def.filter(|&d| self.label(d) >= start);
        let mut waits: Vec<u32> = Vec::new();
        if t.wg_old != NONE {
            waits.push(t.wg_old);
        }
        waits.extend_from_slice(&t.old_waits);
        waits.extend_from_slice(&t.m_waits);
        let f_node = *waits.iter().min_by_key(|&&w| self.label(w))?;
        if after.is_some_and(|d| self.label(f_node) <= self.label(d)) {
            return None;
        }
        // The merged node's inputs: the latest of the bucket's and m's, unless some may move.
        let old: Vec<u32> = match g.group(g_old) {
            Some(k) if g.groups[k].wait_producers => g.groups[k].producers.clone(),
            Some(_) => vec![self.g_last[g_old as usize]],
            None => g.member_producers(t.m0).collect(),
        };
        let mut all: Vec<u32> = old.into_iter().filter(|&p| p != NONE).collect();
        all.extend(g.member_producers(t.m));
        let inputs = if all.iter().any(|&p| g.is_wait[p as usize]) {
            all
        } else {
            all.iter()
                .copied()
                .max_by_key(|&p| self.label(g.node_of[p as usize]))
                .into_iter()
                .collect()
        };
        let mut changed: Vec<u32> = vec![self.slot[g_old as usize], self.slot[t.m as usize]];
        changed.extend(waits.iter().map(|&w| self.slot[w as usize]));
        if let Some(d) = after {
            changed.push(self.slot[d as usize]);
        }
        changed.sort_unstable();
        changed.dedup();
        s.epoch += 1;
        let e = s.epoch;
        let mut bundles = Vec::with_capacity(changed.len());
        for &x in &changed {
            let mut out: Vec<u32> = Vec::new();
            for node in self.bundle(x as usize) {
                if node == f_node {
                    out.push(t.wg_new);
                }
                if node == g_old {
                    if after.is_none() {
                        out.push(t.g_new);
                    }
                    continue;
                }
                if node == t.m || waits.contains(&node) {
                    continue;
                }
                out.push(node);
                if after == Some(node) {
                    out.push(t.g_new);
                }
            }
            for (i, &node) in out.iter().enumerate() {
                s.lab_stamp[node as usize] = e;
                s.lab[node as usize] = ((x as u64) << 32) | i as u64;
            }
            bundles.push(out);
        }
        // Consumers of a moved wait's result on the comm stream: their input moves.
        let mut users: Vec<u32> = t
            .old_waits
            .iter()
            .chain(&t.m_waits)
            .flat_map(|&w| g.cross_users[w as usize].iter().copied())
            .collect();
        if t.wg_old != NONE && f_node != t.wg_old {
            if let Some(k) = g.group(t.wg_old) {
                users.extend_from_slice(&g.groups[k].wait_users);
            }
        }
        let mut extra: Vec<u32> = users
            .iter()
            .map(|&u| self.slot[t.node(g, u) as usize])
            .filter(|&x| x != NONE && changed.binary_search(&x).is_err())
            .collect();
        extra.sort_unstable();
        extra.dedup();
        Some(Layout {
            after,
            waits,
            f_node,
            inputs,
            changed,
            bundles,
            extra,
        })
    }

    /// The timeline of a trial (see the module docs).
    fn sweep(&mut self, g: &Graph, t: &Trial, lay: &Layout, s: &mut Scratch) -> Sweep {
        let mut end = self.trailing;
        if t.cost > 0 {
            let gslot = match lay.after {
                Some(d) => self.slot[d as usize],
                None => self.slot[t.g_old as usize],
            } as usize;
            end = end.max(gslot + 1);
        }
        // The slots to simulate, with their trial bundles (a changed slot sorts first among
        // equal ones).
        let mut ex: Vec<(u32, Option<usize>)> = Vec::new();
        for (i, &x) in lay.changed.iter().enumerate() {
            if (x as usize) < end {
                ex.push((x, Some(i)));
            }
        }
        for &x in &lay.extra {
            if (x as usize) < end {
                ex.push((x, None));
            }
        }
        for x in self.trailing..end {
            ex.push((x as u32, None));
        }
        ex.sort_unstable_by_key(|p| (p.0, p.1.is_none()));
        ex.dedup_by_key(|p| p.0);
        let mut out = Sweep {
            makespan: self.makespan,
            trailing: end,
            segs: Vec::new(),
            explicit: Vec::new(),
            crossing: Vec::new(),
        };
        s.ex_users.clear();
        let Some(&(a0, _)) = ex.first() else {
            return out;
        };
        let a0 = a0 as usize;
        let (mut cf, mut mf) = self.cut(a0);
        let mut x = a0;
        let mut i = 0;
        while x < end {
            if i < ex.len() && ex[i].0 as usize == x {
                let nodes: Vec<u32> = match ex[i].1 {
                    Some(k) => lay.bundles[k].clone(),
                    None => self.bundle(x).collect(),
                };
                self.simulate_slot(
                    g,
                    t,
                    lay,
                    s,
                    a0,
                    &out.segs,
                    x,
                    nodes,
                    &mut cf,
                    &mut mf,
                    &mut out.explicit,
                );
                x += 1;
                i += 1;
                continue;
            }
            let nx = if i < ex.len() { ex[i].0 as usize } else { end };
            // Cross the unchanged slots x..nx.
            while x < nx {
                let (bc, bm) = self.cut(x);
                let (sc, sm) = (cf - bc, mf - bm);
                let mut y = nx;
                // Per consumer class: the shifts its inputs may have (the run's own, and
                // those of the pieces before x its earliest input comes from); a consumer
                // keeps its start shifted as its stream when each input moved as its
                // stream did, or was not the later one and stays so: a slack (kept as a
                // lower bound) of at least `thr`.
                let mut need = [false, false];
                let mut thr = [0i64, 0];
                let mut maxd = [0i64, 0];
                for (k, cls) in [Class::Compute, Class::Comm].into_iter().enumerate() {
                    let (s_cons, s_run) = if cls == Class::Compute {
                        (sc, sm)
                    } else {
                        (sm, sc)
                    };
                    let tree = if cls == Class::Compute {
                        &self.prod_c
                    } else {
                        &self.prod_m
                    };
                    let p = tree.min(x, y) as usize;
                    let mut ds = vec![s_run];
                    if p < x {
                        piece_shifts(p, x, a0, &out.segs, cls, &mut ds);
                    }
                    maxd[k] = ds.iter().copied().max().unwrap_or(s_run);
                    for &d in &ds {
                        if d != s_cons {
                            need[k] = true;
                            thr[k] = thr[k].max((d - s_cons).max(0));
                        }
                    }
                }
                s.ex_users.retain(|&(w, _)| w as usize >= x);
                s.ex_users.sort_unstable();
                s.ex_users.dedup();
                let mut z = x;
                let mut k_user = 0;
                let mut checked: Vec<u32> = Vec::new();
                while z < y {
                    // The next slot that may break the shift.
                    while k_user < s.ex_users.len() && (s.ex_users[k_user].0 as usize) < z {
                        k_user += 1;
                    }
                    let mut w = y;
                    if k_user < s.ex_users.len() {
                        w = w.min(s.ex_users[k_user].0 as usize);
                    }
                    if need[0] {
                        if let Some(v) = self.slack_c.first_below(z, w, thr[0]) {
                            w = v;
                        }
                    }
                    if need[1] {
                        if let Some(v) = self.slack_m.first_below(z, w, thr[1]) {
                            w = v;
                        }
                    }
                    if w >= y {
                        break;
                    }
                    // Its slacks may be low only as bounds: make them exact first.
                    self.refresh_slot(g, w);
                    let users_here: Vec<u32> = s.ex_users[k_user..]
                        .iter()
                        .take_while(|&&(v, _)| v as usize == w)
                        .map(|&(_, nd)| nd)
                        .collect();
                    let (acc_c, acc_m) = (self.acc_c.get(w), self.acc_m.get(w));
                    let (mut fc, mut fm) = self.cut(w);
                    let mut ok = true;
                    let nodes: Vec<u32> = self.bundle(w).collect();
                    for &node in &nodes {
                        let i_n = node as usize;
                        let cls = g.class[i_n];
                        let user = users_here.contains(&node);
                        let check = match cls {
                            Class::Compute => {
                                user || (need[0] && self.slack_rel[i_n] + acc_c < thr[0])
                            }
                            Class::Comm => {
                                user || (need[1] && self.slack_rel[i_n] + acc_m < thr[1])
                            }
                            // Two different shifts: a blocking collective takes the later.
                            Class::Both => sc != sm,
                            Class::Free => false,
                        };
                        if check {
                            if cls == Class::Both {
                                ok = false;
                                break;
                            }
                            if user {
                                checked.push(node);
                            }
                            let (free, sp) = if cls == Class::Compute {
                                (fc, sc)
                            } else {
                                (fm, sm)
                            };
                            let mut each = true;
                            self.inputs(g, None, node).for_each(|p| {
                                if !each {
                                    return;
                                }
                                let r = self.ready(g, p);
                                let r2 =
                                    self.trial_ready(g, t, s, a0, &out.segs, Some((x, sc, sm)), p);
                                each = r2 - r == sp || (r <= free && r2 <= free + sp);
                            });
                            if !each {
                                ok = false;
                                break;
                            }
                        }
                        match cls {
                            Class::Compute => fc = self.end(g, node),
                            Class::Comm => fm = self.end(g, node),
                            Class::Both => {
                                fc = self.end(g, node);
                                fm = fc;
                            }
                            Class::Free => {}
                        }
                    }
                    if !ok {
                        y = w;
                        break;
                    }
                    z = w + 1;
                }
                if y > x {
                    out.segs.push(Seg {
                        a: x as u32,
                        b: y as u32,
                        sc,
                        sm,
                        add_c: sc - maxd[0],
                        add_m: sm - maxd[1],
                    });
                    out.crossing.extend(
                        checked
                            .iter()
                            .filter(|&&nd| (self.slot[nd as usize] as usize) < y),
                    );
                    let (ec, em) = self.cut(y);
                    cf = ec + sc;
                    mf = em + sm;
                }
                if y >= nx {
                    break;
                }
                let nodes: Vec<u32> = self.bundle(y).collect();
                self.simulate_slot(
                    g,
                    t,
                    lay,
                    s,
                    a0,
                    &out.segs,
                    y,
                    nodes,
                    &mut cf,
                    &mut mf,
                    &mut out.explicit,
                );
                x = y + 1;
            }
            x = nx;
        }
        out.makespan = cf.max(mf);
        out
    }

    /// The time an input produced by op `p` is ready in the trial.
    #[allow(clippy::too_many_arguments)]
    fn trial_ready(
        &self,
        g: &Graph,
        t: &Trial,
        s: &Scratch,
        a0: usize,
        segs: &[Seg],
        cur: Option<(usize, i64, i64)>,
        p: u32,
    ) -> i64 {
        let node = t.node(g, p);
        // A wait of a waits' node is ready as far into it as the waits up to it cost.
        let into = if node == t.wg_new {
            t.wait_prefix(g, p) - t.wg_cost
        } else if g.is_waits_node(node) {
            g.wait_prefix[p as usize] - g.cost[node as usize]
        } else {
            0
        };
        if s.end_stamp[node as usize] == s.epoch {
            return s.end[node as usize] + into;
        }
        let base = self.end(g, node) + into;
        let x = self.slot[node as usize] as usize;
        if x < a0 {
            return base;
        }
        let shift = |sc: i64, sm: i64| match g.class[node as usize] {
            Class::Comm => sm,
            _ => sc,
        };
        if let Some((a, sc, sm)) = cur {
            if x >= a {
                return base + shift(sc, sm);
            }
        }
        let k = segs.partition_point(|sg| (sg.b as usize) <= x);
        match segs.get(k) {
            Some(sg) if (sg.a as usize) <= x => base + shift(sg.sc, sg.sm),
            _ => {
                debug_assert!(false, "input of slot {x} neither simulated nor crossed");
                base
            }
        }
    }

    /// Simulates the trial bundle `nodes` of slot `x`.
    #[allow(clippy::too_many_arguments)]
    fn simulate_slot(
        &self,
        g: &Graph,
        t: &Trial,
        lay: &Layout,
        s: &mut Scratch,
        a0: usize,
        segs: &[Seg],
        x: usize,
        nodes: Vec<u32>,
        cf: &mut i64,
        mf: &mut i64,
        explicit: &mut Vec<Explicit>,
    ) {
        let mut ends = Vec::with_capacity(nodes.len());
        for &node in &nodes {
            let (end, _) = {
                let sref = &*s;
                self.step(g, Some((t, lay)), node, cf, mf, &mut |p| {
                    self.trial_ready(g, t, sref, a0, segs, None, p)
                })
            };
            s.end_stamp[node as usize] = s.epoch;
            s.end[node as usize] = end;
            ends.push(end);
            // Its consumers in later slots no longer see it shifted as its stream.
            let i = node as usize;
            let mut push = |u: u32| {
                let w = self.slot[u as usize];
                if w != NONE && (w as usize) > x {
                    s.ex_users.push((w, u));
                }
            };
            if node == t.g_new || node == t.wg_new {
                // Their consumers are the trial's waits' node and the moved waits' users,
                // simulated anyway.
            } else if i < g.n {
                for &u in &g.cross_users[i] {
                    push(t.node(g, u));
                }
            } else if g.is_waits_node(node) {
                for &u in &g.groups[(i - g.n) / 2].wait_users {
                    push(t.node(g, u));
                }
            } else {
                push(node + 1);
            }
        }
        explicit.push(Explicit {
            slot: x as u32,
            nodes,
            ends,
            after: (*cf, *mf),
        });
    }

    fn unlink(&mut self, node: u32) {
        let i = node as usize;
        let (p, nx) = (self.prev[i], self.next[i]);
        let x = self.slot[i] as usize;
        if p != NONE {
            self.next[p as usize] = nx;
        }
        if nx != NONE {
            self.prev[nx as usize] = p;
        }
        if self.head[x] == node {
            self.head[x] = if nx != NONE && self.slot[nx as usize] as usize == x {
                nx
            } else {
                NONE
            };
        }
        self.prev[i] = NONE;
        self.next[i] = NONE;
        self.slot[i] = NONE;
    }

    fn insert_after(&mut self, node: u32, at: u32) {
        let (i, a) = (node as usize, at as usize);
        let nx = self.next[a];
        self.prev[i] = at;
        self.next[i] = nx;
        self.next[a] = node;
        if nx != NONE {
            self.prev[nx as usize] = node;
        }
        self.slot[i] = self.slot[a];
    }

    fn insert_before(&mut self, node: u32, at: u32) {
        let (i, a) = (node as usize, at as usize);
        let p = self.prev[a];
        self.next[i] = at;
        self.prev[i] = p;
        self.prev[a] = node;
        if p != NONE {
            self.next[p as usize] = node;
        }
        let x = self.slot[a];
        self.slot[i] = x;
        if self.head[x as usize] == at {
            self.head[x as usize] = node;
        }
    }

    /// Puts the trial's layout in place.
    fn commit_layout(&mut self, t: &Trial, lay: &Layout) {
        for &w in &lay.waits {
            if w != lay.f_node {
                self.unlink(w);
            }
        }
        if lay.f_node != t.wg_new {
            self.insert_before(t.wg_new, lay.f_node);
            self.unlink(lay.f_node);
        }
        self.unlink(t.m);
        match lay.after {
            Some(d) => {
                self.unlink(t.g_old);
                self.insert_after(t.g_new, d);
            }
            None if t.g_new != t.g_old => {
                self.insert_after(t.g_new, t.g_old);
                self.unlink(t.g_old);
            }
            None => {}
        }
        for (x, bundle) in lay.changed.iter().zip(&lay.bundles) {
            debug_assert_eq!(
                &self.bundle(*x as usize).collect::<Vec<_>>(),
                bundle,
                "slot {x} is not laid out as the trial was"
            );
            for (i, &node) in bundle.iter().enumerate() {
                self.sub[node as usize] = i as u32;
            }
        }
        // With several inputs kept (some may move) every one is looked at instead.
        self.g_last[t.g_new as usize] = match lay.inputs[..] {
            [p] => p,
            _ => NONE,
        };
    }

    /// Keeps a trial's timeline (after its layout is in place and the graph knows the
    /// merged nodes).
    fn commit_timeline(&mut self, g: &Graph, sw: Sweep) {
        for sg in &sw.segs {
            let (a, b) = (sg.a as usize, sg.b as usize);
            self.off_c.range_add(a, b, sg.sc);
            self.off_m.range_add(a, b, sg.sm);
            self.acc_c.range_add(a, b, sg.add_c);
            self.slack_c.add(a, b, sg.add_c);
            self.acc_m.range_add(a, b, sg.add_m);
            self.slack_m.add(a, b, sg.add_m);
        }
        for ex in &sw.explicit {
            let x = ex.slot as usize;
            let (oc, om) = (self.off_c.get(x), self.off_m.get(x));
            for (&node, &end) in ex.nodes.iter().zip(&ex.ends) {
                self.end_rel[node as usize] = end
                    - match g.class[node as usize] {
                        Class::Comm => om,
                        _ => oc,
                    };
            }
            self.aft_c[x] = ex.after.0 - oc;
            self.aft_m[x] = ex.after.1 - om;
        }
        self.trailing = sw.trailing;
        self.makespan = sw.makespan;
        let mut slots: Vec<usize> = sw.explicit.iter().map(|ex| ex.slot as usize).collect();
        slots.extend(
            sw.crossing
                .iter()
                .map(|&nd| self.slot[nd as usize] as usize),
        );
        slots.sort_unstable();
        slots.dedup();
        for x in slots {
            if x < self.trailing {
                self.refresh_slot(g, x);
            }
        }
    }

    /// The order as ops, with a trial's changed slots when given: merged nodes expand to
    /// their members laid out (the later ones, then the first), waits' nodes to their waits.
    fn ops(&self, g: &Graph, tr: Option<(&Trial, &Layout)>) -> Vec<OpId> {
        self.ops_slots(g, tr).0
    }

    /// [`View::ops`] with each op's slot.
    fn ops_slots(&self, g: &Graph, tr: Option<(&Trial, &Layout)>) -> (Vec<OpId>, Vec<u32>) {
        let mut slots = Vec::with_capacity(g.n);
        let mut out = Vec::with_capacity(g.n);
        let expand = |node: u32, out: &mut Vec<OpId>| {
            let i = node as usize;
            if let Some((t, _)) = tr {
                if node == t.g_new {
                    let ms = t.members(g);
                    out.extend(ms[1..].iter().map(|&d| g.ops[d as usize]));
                    out.push(g.ops[ms[0] as usize]);
                    return;
                }
                if node == t.wg_new {
                    out.extend(t.waits(g).iter().map(|&d| g.ops[d as usize]));
                    return;
                }
            }
            if i < g.n {
                out.push(g.ops[i]);
            } else {
                let grp = &g.groups[(i - g.n) / 2];
                if g.is_waits_node(node) {
                    out.extend(grp.waits.iter().map(|&d| g.ops[d as usize]));
                } else {
                    out.extend(grp.members[1..].iter().map(|&d| g.ops[d as usize]));
                    out.push(g.ops[grp.members[0] as usize]);
                }
            }
        };
        for x in 0..self.nslots {
            match tr.and_then(|(_, l)| l.changed.binary_search(&(x as u32)).ok()) {
                Some(k) => {
                    for &node in &tr.expect("a trial").1.bundles[k] {
                        expand(node, &mut out);
                    }
                }
                None => {
                    for node in self.bundle(x) {
                        expand(node, &mut out);
                    }
                }
            }
            slots.resize(out.len(), x as u32);
        }
        (out, slots)
    }
}

/// Adds to `out` the shifts of the inputs made in slots `p..x` of a trial for consumers of
/// class `cls` (the other stream's producers): nothing moved before `a0`; a crossed run moved
/// them by its offset (simulated slots' nodes are checked consumer by consumer instead).
fn piece_shifts(p: usize, x: usize, a0: usize, segs: &[Seg], cls: Class, out: &mut Vec<i64>) {
    if p < a0 && !out.contains(&0) {
        out.push(0);
    }
    let from = p.max(a0);
    let k = segs.partition_point(|sg| (sg.b as usize) <= from);
    for sg in segs[k..].iter().take_while(|sg| (sg.a as usize) < x) {
        // Compute consumers read comm results and the other way round.
        let d = if cls == Class::Compute { sg.sm } else { sg.sc };
        if !out.contains(&d) {
            out.push(d);
        }
    }
}

/// The full integer simulation of an op order with buckets (members, merged time) as their
/// merged nodes (checks).
fn simulate_order(g: &Graph, ops: &[OpId], groups: &[(Vec<u32>, i64)]) -> i64 {
    let mut class: Vec<Class> = g.class[..g.n].to_vec();
    let mut cost: Vec<i64> = g.cost[..g.n].to_vec();
    let mut cross = g.cross.clone();
    for (ms, c) in groups {
        let lead = ms[0] as usize;
        let mut gc: Vec<u32> = ms.iter().flat_map(|&d| g.member_producers(d)).collect();
        gc.sort_unstable();
        gc.dedup();
        let cls = if g.class[lead] == Class::Both {
            Class::Both
        } else {
            Class::Comm
        };
        for &d in ms {
            class[d as usize] = cls;
            cost[d as usize] = 0;
            cross[d as usize] = gc.clone();
        }
        cost[lead] = *c;
    }
    // Every other op's cross producers under the members' class.
    let in_group: Vec<bool> = {
        let mut v = vec![false; g.n];
        for (ms, _) in groups {
            for &d in ms {
                v[d as usize] = true;
            }
        }
        v
    };
    for i in 0..g.n {
        if in_group[i] {
            continue;
        }
        let other = match class[i] {
            Class::Compute => Class::Comm,
            Class::Comm => Class::Compute,
            _ => continue,
        };
        cross[i] = g.eff_in[i]
            .iter()
            .copied()
            .filter(|&p| class[p as usize] == other)
            .collect();
    }
    let mut end = vec![0i64; g.n];
    let (mut cf, mut mf) = (0i64, 0i64);
    for &op in ops {
        let i = g.d(op) as usize;
        let r = cross[i].iter().map(|&p| end[p as usize]).max();
        match class[i] {
            Class::Free => {}
            Class::Compute => {
                cf = r.map_or(cf, |r| r.max(cf)) + cost[i];
                end[i] = cf;
            }
            Class::Comm => {
                mf = r.map_or(mf, |r| r.max(mf)) + cost[i];
                end[i] = mf;
            }
            Class::Both => {
                cf = cf.max(mf) + cost[i];
                mf = cf;
                end[i] = cf;
            }
        }
    }
    cf.max(mf)
}

/// Event kinds of a memory unit: allocated and freed bytes, without and with the staging
/// copies of `coll-to-comm`.
const AP: usize = 0;
const FP: usize = 1;
const AS: usize = 2;
const FS: usize = 3;

/// A stretch's memory: (net change, highest level above its start) without and with the
/// staging copies.
type Fold = [(i64, i64); 2];

const EMPTY: Fold = [(0, NEG), (0, NEG)];

fn add4(a: &mut [i64; 4], b: [i64; 4]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

fn fold_push(f: &mut Fold, e: [i64; 4]) {
    for (k, (a, fr)) in [(AP, FP), (AS, FS)].into_iter().enumerate() {
        let (net, mx) = &mut f[k];
        *mx = (*mx).max(*net + e[a]);
        *net += e[a] - e[fr];
    }
}

fn fold_then(f: &mut Fold, g: Fold) {
    for (a, b) in f.iter_mut().zip(g) {
        a.1 = a.1.max(a.0 + b.1);
        a.0 += b.0;
    }
}

/// The memory profile of the traced order's layout (the model of [`layout_peak`]). Events
/// sit on *units*: a bucket's members on its merged node, every other op (a bucket's waits
/// included, in their order) on itself.
struct Memory {
    size: Vec<i64>,
    def: Vec<u32>,
    users: Vec<Vec<u32>>,
    root_users: Vec<Vec<u32>>,
    escapes: Vec<bool>,
    counted: Vec<bool>,
    coll_def: Vec<bool>,
    /// By storage: its last user (its definition when unused; `NONE` for an unused
    /// argument), and for a returned collective result its first user (the wait).
    last_use: Vec<u32>,
    first_use: Vec<u32>,
    /// By op: the counted storages it defines or uses.
    touches: Vec<Vec<u32>>,
    /// By unit: its events.
    ev: Vec<[i64; 4]>,
    /// By bucket: its waits' fold, and the storages its members read that other ops read too
    /// (their last use may change when the bucket moves).
    wg_fold: Vec<Fold>,
    shared: Vec<Vec<u32>>,
    init: i64,
    plain: PrefixTree,
    staged: PrefixTree,
    base_peak: i64,
    base_lowered: i64,
    stamp: Vec<u32>,
    epoch: u32,
    /// By unit: the trial's event changes (where stamped with `epoch`).
    delta_stamp: Vec<u32>,
    delta_index: Vec<u32>,
}

/// What a trial did to the memory profile (kept if it is accepted).
struct MemTrial {
    peak: i64,
    lowered: i64,
    /// With checks: each slot's highest level, without and with staging (`NEG`: none).
    levels: Vec<[i64; 2]>,
    storages: Vec<(u32, u32, u32)>,
    deltas: Vec<(u32, [i64; 4])>,
    /// The leaves the trial replaced (the tree holds the trial's).
    old: Vec<(usize, Fold)>,
    wg_fold: Fold,
    other_folds: Vec<(usize, Fold)>,
}

impl Memory {
    fn new(ctx: &Context, block: BlockId, g: &Graph, view: &View) -> Memory {
        let model = BufferModel::new(ctx, block);
        let ns = model.storages.len();
        let cap = g.class.len();
        let mut m = Memory {
            size: Vec::with_capacity(ns),
            def: Vec::with_capacity(ns),
            users: vec![Vec::new(); ns],
            root_users: vec![Vec::new(); ns],
            escapes: Vec::with_capacity(ns),
            counted: Vec::with_capacity(ns),
            coll_def: Vec::with_capacity(ns),
            last_use: vec![NONE; ns],
            first_use: vec![NONE; ns],
            touches: vec![Vec::new(); g.n],
            ev: vec![[0; 4]; cap],
            wg_fold: Vec::new(),
            shared: Vec::new(),
            init: 0,
            plain: PrefixTree::new(g.n),
            staged: PrefixTree::new(g.n),
            base_peak: 0,
            base_lowered: 0,
            stamp: vec![0; ns],
            epoch: 0,
            delta_stamp: vec![0; cap],
            delta_index: vec![0; cap],
        };
        for (si, s) in model.storages.iter().enumerate() {
            m.size.push(s.size as i64);
            let def = s.def.map_or(NONE, |p| g.d(model.ops[p]));
            m.def.push(def);
            m.escapes.push(s.escapes);
            m.counted.push(s.counted());
            m.coll_def
                .push(def != NONE && coll_kind(ctx.op_name(g.ops[def as usize])).is_some());
            if def != NONE && s.counted() {
                m.touches[def as usize].push(si as u32);
            }
            if s.def.is_none() && s.counted() {
                // A donated argument: live from entry.
                m.init += s.size as i64;
            }
            if s.escapes && m.coll_def[si] {
                m.root_users[si] = ctx
                    .uses(s.root)
                    .iter()
                    .map(|u| g.d(u.op))
                    .filter(|&d| d != NONE)
                    .collect();
            }
        }
        for (d, &op) in g.ops.iter().enumerate() {
            for &v in ctx.operands(op) {
                if let Some(si) = model.storage(v) {
                    let u = &mut m.users[si];
                    if u.last() != Some(&(d as u32)) {
                        u.push(d as u32);
                    }
                    let t = &mut m.touches[d];
                    if m.counted[si] && !t.contains(&(si as u32)) {
                        t.push(si as u32);
                    }
                }
            }
        }
        let pos = |d: u32| view.label(d) as u128;
        for si in 0..ns {
            m.last_use[si] = m.last_user(si, pos);
            m.first_use[si] = m.first_root_user(si, pos);
            for (unit, k, a) in m.contributions(si, |d| d, m.last_use[si], m.first_use[si]) {
                m.ev[unit as usize][k] += a;
            }
        }
        // Staging copies of the inputs no compute op writes in place.
        for (d, &op) in g.ops.iter().enumerate() {
            if coll_kind(ctx.op_name(op))
                .is_none_or(|k| matches!(k, CollKind::AllReduce | CollKind::Broadcast))
            {
                continue;
            }
            let mut c = 0i64;
            for &v in ctx.operands(op) {
                let written_in_place = ctx.defining_op(v).is_some_and(|dop| {
                    ctx.op_name(dop).starts_with("compute.")
                        && ctx.op_has_trait(dop, Trait::MemAlloc)
                });
                if !written_in_place {
                    c += tensor_bytes(ctx, ctx.value_type(v)).unwrap_or(0) as i64;
                }
            }
            m.ev[d][AS] += c;
            m.ev[d][FS] += c;
        }
        let (mut lp, mut ls) = (Vec::with_capacity(g.n), Vec::with_capacity(g.n));
        for x in 0..view.nslots {
            let mut f = EMPTY;
            for node in view.bundle(x) {
                fold_push(&mut f, m.ev[node as usize]);
            }
            lp.push(f[0]);
            ls.push(f[1]);
        }
        m.plain = PrefixTree::from_leaves(&lp);
        m.staged = PrefixTree::from_leaves(&ls);
        m.base_peak = m.peak(false);
        m.base_lowered = m.peak(true);
        m
    }

    /// Each slot's highest level (checks).
    fn slot_levels(&self) -> Vec<[i64; 2]> {
        let (mut np, mut ns) = (self.init, self.init);
        (0..self.plain.n)
            .map(|x| {
                let (p, s) = (self.plain.leaf(x), self.staged.leaf(x));
                let l = [
                    if p.1 == NEG { NEG } else { np + p.1 },
                    if s.1 == NEG { NEG } else { ns + s.1 },
                ];
                np += p.0;
                ns += s.0;
                l
            })
            .collect()
    }

    fn peak(&self, staged: bool) -> i64 {
        let t = if staged { &self.staged } else { &self.plain };
        self.init + t.max_prefix().max(0)
    }

    fn last_user(&self, si: usize, pos: impl Fn(u32) -> u128) -> u32 {
        self.users[si]
            .iter()
            .copied()
            .max_by_key(|&u| pos(u))
            .unwrap_or(self.def[si])
    }

    fn first_root_user(&self, si: usize, pos: impl Fn(u32) -> u128) -> u32 {
        if !(self.escapes[si] && self.coll_def[si]) {
            return NONE;
        }
        self.root_users[si]
            .iter()
            .copied()
            .min_by_key(|&u| pos(u))
            .unwrap_or(NONE)
    }

    /// The storages op `d` reads that other ops read too.
    fn shared_of(&self, d: u32) -> impl Iterator<Item = u32> + '_ {
        self.touches[d as usize]
            .iter()
            .copied()
            .filter(move |&si| self.def[si as usize] != d && self.users[si as usize].len() > 1)
    }

    /// The events storage `si` puts on units.
    fn contributions(
        &self,
        si: usize,
        unit: impl Fn(u32) -> u32,
        last: u32,
        first: u32,
    ) -> Vec<(u32, usize, i64)> {
        let mut out = Vec::new();
        if !self.counted[si] {
            return out;
        }
        let z = self.size[si];
        let def = self.def[si];
        if def != NONE {
            out.push((unit(def), AP, z));
        }
        if !self.escapes[si] && last != NONE {
            out.push((unit(last), FP, z));
        }
        if self.escapes[si] && self.coll_def[si] && first != NONE && def != NONE {
            out.push((unit(def), AS, z));
            out.push((unit(first), FS, z));
            out.push((unit(first), AS, z));
        } else {
            if def != NONE {
                out.push((unit(def), AS, z));
            }
            if !self.escapes[si] && last != NONE {
                out.push((unit(last), FS, z));
            }
        }
        out
    }

    /// The peaks of a trial laid out as `lay` in the traced view.
    fn trial(
        &mut self,
        g: &Graph,
        view: &View,
        t: &Trial,
        lay: &Layout,
        s: &Scratch,
        check: bool,
    ) -> MemTrial {
        let e = s.epoch;
        let k_old = g.group(t.g_old);
        let old_len = match k_old {
            Some(k) => g.groups[k].waits.len(),
            None => t.old_waits.len(),
        };
        // Units: members on the merged node, everything else on itself.
        let unit_base = |d: u32| {
            let nd = g.node_of[d as usize];
            if nd as usize >= g.n && !g.is_waits_node(nd) {
                nd
            } else {
                d
            }
        };
        let unit_trial = |d: u32| {
            let nd = t.node(g, d);
            if nd == t.g_new || (nd as usize >= g.n && nd != t.wg_new && !g.is_waits_node(nd)) {
                nd
            } else {
                d
            }
        };
        // The old events of the bucket and of m are the merged node's.
        let merge = |u: u32| if u == t.g_old || u == t.m { t.g_new } else { u };
        let trial_label = |node: u32| {
            if s.lab_stamp[node as usize] == e {
                s.lab[node as usize]
            } else {
                view.label(node)
            }
        };
        let trial_pos = |d: u32| {
            let node = t.node(g, d);
            let idx = if node == t.wg_new {
                if g.node_of[d as usize] == t.wg_old && t.wg_old != NONE {
                    g.wait_idx[d as usize] as usize
                } else if let Some(i) = t.old_waits.iter().position(|&w| w == d) {
                    i
                } else {
                    old_len + t.m_waits.iter().position(|&w| w == d).unwrap_or(0)
                }
            } else if g.is_waits_node(node) {
                g.wait_idx[d as usize] as usize
            } else {
                0
            };
            ((trial_label(node) as u128) << 32) | idx as u128
        };
        self.epoch += 1;
        let me = self.epoch;
        let mut affected: Vec<u32> = Vec::new();
        let mut note = |stamp: &mut Vec<u32>, si: u32| {
            if stamp[si as usize] != me {
                stamp[si as usize] = me;
                affected.push(si);
            }
        };
        for &d in std::iter::once(&t.m).chain(&t.old_waits).chain(&t.m_waits) {
            for &si in &self.touches[d as usize] {
                note(&mut self.stamp, si);
            }
        }
        if lay.after.is_some() {
            // The bucket moves: storages its members read are freed at it unless another op
            // reads them later, which may now change.
            match k_old {
                Some(k) => {
                    for &si in &self.shared[k] {
                        note(&mut self.stamp, si);
                    }
                }
                None => {
                    let v: Vec<u32> = self.shared_of(t.m0).collect();
                    for si in v {
                        note(&mut self.stamp, si);
                    }
                }
            }
        }
        if let Some(k) = k_old {
            if lay.f_node != t.wg_old {
                // The bucket's waits move to an earlier wait of m.
                for &w in &g.groups[k].waits {
                    for &si in &self.touches[w as usize] {
                        note(&mut self.stamp, si);
                    }
                }
            }
        }
        let mut deltas: Vec<(u32, [i64; 4])> = Vec::new();
        let mut dstamp = std::mem::take(&mut self.delta_stamp);
        let mut dindex = std::mem::take(&mut self.delta_index);
        let mut add = |deltas: &mut Vec<(u32, [i64; 4])>, unit: u32, k: usize, a: i64| {
            let i = unit as usize;
            if dstamp[i] != me {
                dstamp[i] = me;
                dindex[i] = deltas.len() as u32;
                deltas.push((unit, [0; 4]));
            }
            deltas[dindex[i] as usize].1[k] += a;
        };
        let mut storages = Vec::with_capacity(affected.len());
        for &si in &affected {
            let i = si as usize;
            for (u, k, a) in self.contributions(
                i,
                |d| merge(unit_base(d)),
                self.last_use[i],
                self.first_use[i],
            ) {
                add(&mut deltas, u, k, -a);
            }
            let lu = self.last_user(i, trial_pos);
            let fu = self.first_root_user(i, trial_pos);
            for (u, k, a) in self.contributions(i, unit_trial, lu, fu) {
                add(&mut deltas, u, k, a);
            }
            storages.push((si, lu, fu));
        }
        self.delta_stamp = dstamp;
        self.delta_index = dindex;
        let merged = {
            let mut v = self.ev[t.g_old as usize];
            add4(&mut v, self.ev[t.m as usize]);
            v
        };
        let trial_ev = |u: u32| {
            let i = u as usize;
            let mut v = if u == t.g_new { merged } else { self.ev[i] };
            if self.delta_stamp[i] == me {
                let d = deltas[self.delta_index[i] as usize].1;
                add4(&mut v, d);
            }
            v
        };
        // The buckets whose waits' events change: their folds are made again.
        let mut refold: Vec<usize> = Vec::new();
        for &(u, d) in &deltas {
            if (u as usize) < g.n && d.iter().any(|&v| v != 0) {
                let nd = g.node_of[u as usize];
                if g.is_waits_node(nd) {
                    let k = (nd as usize - g.n) / 2;
                    if !refold.contains(&k) {
                        refold.push(k);
                    }
                }
            }
        }
        let touched_old = k_old.is_some_and(|k| refold.contains(&k));
        let other_folds: Vec<(usize, Fold)> = refold
            .iter()
            .filter(|&&k| Some(k) != k_old)
            .map(|&k| {
                let mut f = EMPTY;
                for &w in &g.groups[k].waits {
                    fold_push(&mut f, trial_ev(w));
                }
                (k, f)
            })
            .collect();
        let wg_fold = match k_old {
            Some(k) if !touched_old => {
                let mut f = self.wg_fold[k];
                let mut tail = EMPTY;
                for &w in &t.m_waits {
                    fold_push(&mut tail, trial_ev(w));
                }
                fold_then(&mut f, tail);
                f
            }
            _ => {
                let mut f = EMPTY;
                for w in t.waits(g) {
                    fold_push(&mut f, trial_ev(w));
                }
                f
            }
        };
        let node_fold = |node: u32| -> Fold {
            if node == t.wg_new {
                return wg_fold;
            }
            if g.is_waits_node(node) {
                let k = (node as usize - g.n) / 2;
                return other_folds
                    .iter()
                    .find(|(j, _)| *j == k)
                    .map_or(self.wg_fold[k], |&(_, f)| f);
            }
            let mut f = EMPTY;
            fold_push(&mut f, trial_ev(node));
            f
        };
        let mut slots: Vec<u32> = lay.changed.clone();
        for &(u, d) in &deltas {
            if d.iter().all(|&v| v == 0) {
                continue;
            }
            let node = if u as usize >= g.n {
                if u == t.g_old {
                    t.g_new
                } else {
                    u
                }
            } else {
                t.node(g, u)
            };
            let x = if s.lab_stamp[node as usize] == e {
                (s.lab[node as usize] >> 32) as u32
            } else {
                view.slot[node as usize]
            };
            slots.push(x);
        }
        slots.sort_unstable();
        slots.dedup();
        let mut leaves: Vec<(usize, Fold)> = Vec::with_capacity(slots.len());
        for &x in &slots {
            let mut f = EMPTY;
            match lay.changed.binary_search(&x) {
                Ok(k) => lay.bundles[k]
                    .iter()
                    .for_each(|&n| fold_then(&mut f, node_fold(n))),
                Err(_) => view
                    .bundle(x as usize)
                    .for_each(|n| fold_then(&mut f, node_fold(n))),
            }
            leaves.push((x as usize, f));
        }
        let old: Vec<((i64, i64), (i64, i64))> = leaves
            .iter()
            .map(|&(x, f)| {
                let o = (self.plain.leaf(x), self.staged.leaf(x));
                self.plain.assign(x, f[0]);
                self.staged.assign(x, f[1]);
                o
            })
            .collect();
        let peak = self.peak(false);
        let lowered = self.peak(true);
        let levels = if check {
            self.slot_levels()
        } else {
            Vec::new()
        };
        // The leaves stay the trial's until it is kept or undone.
        let old: Vec<(usize, Fold)> = leaves
            .iter()
            .zip(old)
            .map(|(&(x, _), (p, st))| (x, [p, st]))
            .collect();
        MemTrial {
            peak,
            lowered,
            levels,
            storages,
            deltas,
            old,
            wg_fold,
            other_folds,
        }
    }

    /// Puts back the leaves a refused trial replaced.
    fn undo(&mut self, mt: &MemTrial) {
        for &(x, f) in &mt.old {
            self.plain.assign(x, f[0]);
            self.staged.assign(x, f[1]);
        }
    }

    fn commit(&mut self, g: &Graph, t: &Trial, mt: MemTrial) {
        let mut merged = self.ev[t.g_old as usize];
        add4(&mut merged, self.ev[t.m as usize]);
        self.ev[t.g_old as usize] = [0; 4];
        self.ev[t.m as usize] = [0; 4];
        self.ev[t.g_new as usize] = merged;
        for (u, d) in mt.deltas {
            add4(&mut self.ev[u as usize], d);
        }
        for (si, lu, fu) in mt.storages {
            self.last_use[si as usize] = lu;
            self.first_use[si as usize] = fu;
        }
        for (k, f) in mt.other_folds {
            self.wg_fold[k] = f;
        }
        let k = g.group(t.g_new).expect("a bucket node");
        if k == self.wg_fold.len() {
            let first: Vec<u32> = self.shared_of(t.m0).collect();
            self.wg_fold.push(EMPTY);
            self.shared.push(first);
        }
        self.wg_fold[k] = mt.wg_fold;
        let more: Vec<u32> = self.shared_of(t.m).collect();
        self.shared[k].extend(more);
    }
}

/// The incremental evaluation of trial merges.
pub(super) struct Incremental<'a> {
    block: BlockId,
    opts: &'a BucketOptions,
    costs: &'a CostTable,
    g: Graph,
    traced: View,
    scheduled: Option<View>,
    mem: Memory,
    scratch: Scratch,
    scratch_sched: Scratch,
    /// Check every trial against the full simulation and memory model (tests).
    check: bool,
    input: Vec<OpId>,
}

impl<'a> Incremental<'a> {
    pub(super) fn new(
        ctx: &Context,
        block: BlockId,
        costs: &'a CostTable,
        scheduled: Option<&[OpId]>,
        opts: &'a BucketOptions,
        check: bool,
    ) -> Self {
        let input = ctx.block_op_list(block);
        let g = Graph::new(ctx, &input, costs);
        let track = !opts.ignore_cost;
        let order: Vec<u32> = (0..g.n as u32).collect();
        let traced = View::new(&g, &order, track);
        let scheduled = scheduled.filter(|_| track).map(|s| {
            let order: Vec<u32> = s.iter().map(|&op| g.d(op)).collect();
            View::new(&g, &order, true)
        });
        let mem = Memory::new(ctx, block, &g, &traced);
        let nodes = g.class.len();
        let inc = Incremental {
            block,
            opts,
            costs,
            g,
            traced,
            scheduled,
            mem,
            scratch: Scratch::new(nodes),
            scratch_sched: Scratch::new(nodes),
            check,
            input,
        };
        if check {
            let model = BufferModel::new(ctx, block);
            let span: Vec<(usize, usize)> = (0..model.ops.len()).map(|p| (p, p)).collect();
            assert_eq!(inc.mem.base_peak, layout_peak(ctx, &model, &span, false));
            assert_eq!(inc.mem.base_lowered, layout_peak(ctx, &model, &span, true));
            if track {
                for v in std::iter::once(&inc.traced).chain(&inc.scheduled) {
                    let ops = v.ops(&inc.g, None);
                    assert_eq!(v.makespan, simulate_order(&inc.g, &ops, &[]));
                }
            }
        }
        inc
    }

    /// The trial of adding `m` to `bucket`.
    fn trial(&self, ctx: &Context, bucket: &Bucket, m: &Member) -> Trial {
        let g = &self.g;
        let m0 = g.d(bucket.members[0].op);
        let g_old = g.node_of[m0 as usize];
        let (wg_old, g_new, wg_new, old_waits) = match g.group(g_old) {
            Some(_) => (g_old + 1, g_old, g_old + 1, Vec::new()),
            None => {
                let id = (g.n + 2 * g.groups.len()) as u32;
                let waits: Vec<u32> = bucket.members[0].waits.iter().map(|&w| g.d(w)).collect();
                (NONE, id, id + 1, waits)
            }
        };
        let m_waits: Vec<u32> = m.waits.iter().map(|&w| g.d(w)).collect();
        let ns = merged_ns(
            ctx,
            &self.costs.machine,
            bucket.key,
            bucket.bytes + m.bytes,
            bucket.members[0].op,
        );
        let wg_cost = if wg_old != NONE {
            g.cost[wg_old as usize]
        } else {
            old_waits.iter().map(|&w| g.cost[w as usize]).sum()
        } + m_waits.iter().map(|&w| g.cost[w as usize]).sum::<i64>();
        Trial {
            g_old,
            wg_old,
            g_new,
            wg_new,
            m0,
            m: g.d(m.op),
            old_waits,
            m_waits,
            class: if g.class[m0 as usize] == Class::Both {
                Class::Both
            } else {
                Class::Comm
            },
            cost: q(ns),
            wg_cost,
        }
    }

    /// The buckets laid out so far but the one the trial grows, and the trial's (checks).
    fn trial_groups(&self, t: &Trial) -> Vec<(Vec<u32>, i64)> {
        let g = &self.g;
        let mut groups: Vec<(Vec<u32>, i64)> = (0..g.groups.len())
            .filter(|&k| (g.n + 2 * k) as u32 != t.g_new)
            .map(|k| (g.groups[k].members.clone(), g.cost[g.n + 2 * k]))
            .collect();
        groups.push((t.members(g), t.cost));
        groups
    }

    /// Checks a trial's makespan against the full simulation (tests).
    fn check_makespan(&self, view: &View, t: &Trial, lay: &Layout, ms: i64) {
        let ops = view.ops(&self.g, Some((t, lay)));
        let full = simulate_order(&self.g, &ops, &self.trial_groups(t));
        assert_eq!(ms, full, "trial makespan differs from the full simulation");
    }

    /// Checks a trial's peaks against the buffer model (tests).
    fn check_peaks(
        &self,
        ctx: &mut Context,
        t: &Trial,
        lay: &Layout,
        peaks: (i64, i64),
        levels: &[[i64; 2]],
    ) {
        let (ops, slots) = self.traced.ops_slots(&self.g, Some((t, lay)));
        apply_op_order(ctx, ops.iter().copied());
        let model = BufferModel::new(ctx, self.block);
        let mut span: Vec<(usize, usize)> = (0..model.ops.len()).map(|p| (p, p)).collect();
        for (ms, _) in &self.trial_groups(t) {
            let start = ms
                .iter()
                .filter_map(|&d| model.pos(self.g.ops[d as usize]))
                .min()
                .expect("members in the block");
            let end = start + ms.len() - 1;
            for sp in span.iter_mut().take(end + 1).skip(start) {
                *sp = (start, end);
            }
        }
        let full = (
            layout_peak(ctx, &model, &span, false),
            layout_peak(ctx, &model, &span, true),
        );
        // Every slot's highest level, not only the peak.
        for (k, staged) in [false, true].into_iter().enumerate() {
            let (_, lv) = layout_levels(ctx, &model, &span, staged);
            let mut want = vec![NEG; levels.len()];
            for (p, &l) in lv.iter().enumerate() {
                let x = slots[p] as usize;
                want[x] = want[x].max(l as i64);
            }
            let got: Vec<i64> = levels.iter().map(|l| l[k]).collect();
            assert_eq!(
                got, want,
                "trial memory levels differ from the buffer model (staged: {staged})"
            );
        }
        apply_op_order(ctx, self.input.iter().copied());
        assert_eq!(peaks, full, "trial peaks differ from the buffer model");
    }

    /// The graph learns an accepted trial's nodes.
    fn commit_graph(&mut self, t: &Trial) {
        let g = &mut self.g;
        let k = g.group(t.g_new).expect("a bucket node");
        if k == g.groups.len() {
            let mut grp = Group {
                members: vec![t.m0],
                ..Group::default()
            };
            grp.producers = g.member_producers(t.m0).collect();
            g.groups.push(grp);
            g.node_of[t.m0 as usize] = t.g_new;
        }
        let new_waits: Vec<u32> = t.old_waits.iter().chain(&t.m_waits).copied().collect();
        let producers: Vec<u32> = g.member_producers(t.m).collect();
        let users: Vec<u32> = new_waits
            .iter()
            .flat_map(|&w| g.cross_users[w as usize].iter().copied())
            .collect();
        let base = g.groups[k].waits.len();
        let mut acc = g.groups[k]
            .waits
            .last()
            .map_or(0, |&w| g.wait_prefix[w as usize]);
        for (i, &w) in new_waits.iter().enumerate() {
            g.node_of[w as usize] = t.wg_new;
            g.wait_idx[w as usize] = (base + i) as u32;
            acc += g.cost[w as usize];
            g.wait_prefix[w as usize] = acc;
        }
        g.node_of[t.m as usize] = t.g_new;
        let is_wait = &g.is_wait;
        let grp = &mut g.groups[k];
        grp.members.push(t.m);
        grp.waits.extend_from_slice(&new_waits);
        grp.producers.extend(producers);
        grp.wait_producers = grp.producers.iter().any(|&p| is_wait[p as usize]);
        grp.wait_users.extend(users);
        g.class[t.g_new as usize] = t.class;
        g.cost[t.g_new as usize] = t.cost;
        g.class[t.wg_new as usize] = Class::Compute;
        g.cost[t.wg_new as usize] = t.wg_cost;
    }
}

impl Trials for Incremental<'_> {
    fn try_extend(
        &mut self,
        ctx: &mut Context,
        bucket: &Bucket,
        m: &Member,
    ) -> Result<(), Refusal> {
        let t = self.trial(ctx, bucket, m);
        let lay_t = self
            .traced
            .layout(&self.g, ctx, &t, m, &mut self.scratch)
            .ok_or(Refusal::Dependency)?;
        let mut sweep_t: Option<Sweep> = None;
        let mut sweep_s: Option<(Layout, Sweep)> = None;
        if !self.opts.ignore_cost {
            let sw = self.traced.sweep(&self.g, &t, &lay_t, &mut self.scratch);
            if self.check {
                self.check_makespan(&self.traced, &t, &lay_t, sw.makespan);
            }
            if sw.makespan > self.traced.makespan {
                return Err(Refusal::Cost);
            }
            sweep_t = Some(sw);
            if let Some(view) = self.scheduled.as_mut() {
                let lay = view
                    .layout(&self.g, ctx, &t, m, &mut self.scratch_sched)
                    .ok_or(Refusal::Schedule)?;
                let sw = view.sweep(&self.g, &t, &lay, &mut self.scratch_sched);
                let slower = sw.makespan > view.makespan;
                if self.check {
                    let view = self.scheduled.as_ref().expect("scheduled view");
                    self.check_makespan(view, &t, &lay, sw.makespan);
                }
                if slower {
                    return Err(Refusal::Schedule);
                }
                sweep_s = Some((lay, sw));
            }
        }
        let mt = self
            .mem
            .trial(&self.g, &self.traced, &t, &lay_t, &self.scratch, self.check);
        if self.check {
            self.check_peaks(ctx, &t, &lay_t, (mt.peak, mt.lowered), &mt.levels);
        }
        let budget = self.opts.peak_memory_budget;
        if !within_budget(mt.peak, self.mem.base_peak, budget)
            || !within_budget(mt.lowered, self.mem.base_lowered, budget)
        {
            self.mem.undo(&mt);
            return Err(Refusal::Memory);
        }
        // Accepted: the memory keeps the trial's events, the graph learns the merged nodes,
        // then each view keeps the trial's layout and timeline.
        self.mem.commit(&self.g, &t, mt);
        self.commit_graph(&t);
        self.traced.commit_layout(&t, &lay_t);
        if let Some(sw) = sweep_t {
            self.traced.commit_timeline(&self.g, sw);
        }
        if let (Some(view), Some((lay, sw))) = (self.scheduled.as_mut(), sweep_s) {
            view.commit_layout(&t, &lay);
            view.commit_timeline(&self.g, sw);
        }
        Ok(())
    }

    fn order(&self, _ctx: &Context) -> Vec<OpId> {
        self.traced.ops(&self.g, None)
    }
}
