//! Incremental memory tracking for the iterative scheduling passes.
//!
//! Same semantics as [`BufferModel`](crate::analysis::BufferModel) (Inductor's alloc/free
//! model: a storage is allocated at its producer and freed after its last user; returned
//! storages are never freed; arguments count only when donated), but kept up to date under
//! *adjacent swaps* in O(deg) — the number of storages the two ops touch — instead of being
//! recomputed over the whole block after each move, which is what makes the iterative passes
//! linear rather than quadratic.
//!
//! When `a` directly precedes `b` and they swap, only the memory levels right after each of
//! the two change (everything before `a` and after `b` sees the same allocations and frees);
//! and the only storages whose last use changes are those both read, last used by `b`: after
//! the swap `a` frees them.
//!
//! The iterative passes move one node at a time across a *run* (the group a collective or
//! wait drags along). Unless a storage changes its last user, such a move shifts every
//! member's level by the mover's net allocation and puts the mover at its entry level plus
//! the run's net: the tracker keeps the run's highest level and net as scalars and the shift
//! as a lazy offset, which makes a move O(uses of the mover) whatever the run's length; a
//! move that does transfer a free falls back to one swap per member.

use crate::analysis::buffers::{is_donated, BufferModel};
use commlir_dialects::shape::tensor_bytes;
use commlir_ir::{BlockId, Context, Trait, Type};

use super::graph::{AliasRule, DepGraph, NONE};
use std::collections::VecDeque;

/// Memory levels around each node, kept current under swaps.
#[derive(Clone, Debug)]
pub struct MemoryTracker {
    /// Bytes allocated by each node.
    alloc: Vec<i64>,
    /// Bytes freed right after each node (storages it uses last).
    free: Vec<i64>,
    /// Memory right after each node's allocations.
    post_alloc: Vec<i64>,
    /// The distinct storages each node uses through its operands: node `p`'s are
    /// `uses[use_off[p]..use_off[p + 1]]` (one flat array, so a swap touches two short
    /// contiguous runs instead of chasing two heap pointers).
    use_off: Vec<u32>,
    uses: Vec<u32>,
    /// Per storage: size counted when freed (0 for storages never freed or not counted).
    free_size: Vec<i64>,
    /// Per storage: the node using it last (or defining it, when unused).
    last_use: Vec<u32>,
    /// Memory live at entry (donated arguments).
    base: i64,
    /// The peak at construction.
    initial_peak: i64,
    /// The run the current collective (or wait) drags along.
    run: Run,
}

/// The open run of [`MemoryTracker`]: a contiguous group of nodes that candidates move
/// across one at a time. While a run is open its members' `post_alloc` entries hold their
/// levels minus `offset`: a move shifts every member by the same amount, so only the offset
/// changes, and the run's highest level and net allocation stay valid scalars.
#[derive(Clone, Debug, Default)]
struct Run {
    open: bool,
    /// Identifies the open run in the stamps below (runs are numbered from 1).
    serial: u32,
    /// Per node: the serial of the last run it joined.
    in_run: Vec<u32>,
    /// Per storage: the serial of the last run one of whose members uses it.
    used: Vec<u32>,
    /// The members, in order.
    members: VecDeque<u32>,
    /// Pending shift of the members' levels.
    offset: i64,
    /// Highest stored (offset-less) level of a member.
    max: i64,
    /// Sum of `alloc - free` over the members: the run's effect on the level across it.
    net: i64,
}

impl MemoryTracker {
    /// The tracker for `block` in its current order, which must be the order `graph` was
    /// built from.
    pub fn new(ctx: &Context, block: BlockId, graph: &DepGraph) -> MemoryTracker {
        let n = graph.len();
        // Storage of each value by value index (`NONE`: not a storage of this block).
        let mut storage_of: Vec<u32> = vec![NONE; ctx.num_value_slots()];
        let mut size: Vec<i64> = Vec::with_capacity(n * 2);
        let mut def: Vec<u32> = Vec::with_capacity(n * 2);
        let mut counted: Vec<bool> = Vec::with_capacity(n * 2);
        let mut escapes: Vec<bool> = Vec::with_capacity(n * 2);
        // `seen[s] == p`: storage `s` is already among node `p`'s uses (an op may name one
        // value thousands of times, e.g. a return of every gradient: a scan would be
        // quadratic there).
        let mut seen: Vec<u32> = Vec::with_capacity(n * 2);
        let func = ctx.block_parent_op(block);
        // Sizes by type and the return-like trait by op name, each looked up once: a block
        // has thousands of values and ops but few distinct types and names.
        let mut size_of_type: Vec<Option<i64>> = Vec::new();
        let mut bytes = |t: Type| {
            let i = t.index();
            if i >= size_of_type.len() {
                size_of_type.resize(i + 1, None);
            }
            *size_of_type[i].get_or_insert_with(|| tensor_bytes(ctx, t).unwrap_or(0) as i64)
        };
        // Per op name: whether it is return-like, and which operands its results alias.
        let mut by_name: Vec<Option<(bool, AliasRule)>> = Vec::new();
        let mut base = 0i64;
        for (i, &a) in ctx.block_args(block).iter().enumerate() {
            let donated = func.is_some_and(|f| is_donated(ctx, f, i));
            let s = bytes(ctx.value_type(a));
            storage_of[a.index()] = size.len() as u32;
            size.push(s);
            def.push(NONE);
            counted.push(donated);
            escapes.push(false);
            seen.push(NONE);
            if donated {
                base += s;
            }
        }
        let mut alloc = vec![0i64; n];
        let mut use_off: Vec<u32> = Vec::with_capacity(n + 1);
        let mut uses: Vec<u32> = Vec::with_capacity(n * 2);
        use_off.push(0);
        for (p, op) in ctx.prefetched(&graph.ops).enumerate() {
            let name = ctx.op_name_ident(op).index();
            let (is_return, alias) = match by_name.get(name) {
                Some(&Some(facts)) => facts,
                _ => {
                    if name >= by_name.len() {
                        by_name.resize(name + 1, None);
                    }
                    *by_name[name].insert((
                        ctx.op_has_trait(op, Trait::ReturnLike),
                        AliasRule::of_name(ctx.op_name(op)),
                    ))
                }
            };
            let operands = ctx.operands(op);
            for &v in operands {
                let s = storage_of[v.index()];
                if s != NONE {
                    if seen[s as usize] != p as u32 {
                        seen[s as usize] = p as u32;
                        uses.push(s);
                    }
                    if is_return {
                        escapes[s as usize] = true;
                    }
                }
            }
            use_off.push(uses.len() as u32);
            for (r, &v) in ctx.results(op).iter().enumerate() {
                if let Some(a) = alias.alias(operands, r) {
                    let s = storage_of[a.index()];
                    if s != NONE {
                        storage_of[v.index()] = s;
                        continue;
                    }
                }
                let s = bytes(ctx.value_type(v));
                storage_of[v.index()] = size.len() as u32;
                size.push(s);
                def.push(p as u32);
                counted.push(true);
                escapes.push(false);
                seen.push(NONE);
                alloc[p] += s;
            }
        }
        let ns = size.len();
        let mut last_use = def.clone();
        for p in 0..n {
            for &s in &uses[use_off[p] as usize..use_off[p + 1] as usize] {
                last_use[s as usize] = p as u32;
            }
        }
        let free_size: Vec<i64> = (0..ns)
            .map(|s| {
                if counted[s] && !escapes[s] {
                    size[s]
                } else {
                    0
                }
            })
            .collect();
        let mut free = vec![0i64; n];
        for s in 0..ns {
            if last_use[s] != NONE {
                free[last_use[s] as usize] += free_size[s];
            }
        }
        let mut post_alloc = Vec::with_capacity(n);
        let mut cur = base;
        let mut peak = base;
        for p in 0..n {
            cur += alloc[p];
            post_alloc.push(cur);
            peak = peak.max(cur);
            cur -= free[p];
        }
        MemoryTracker {
            alloc,
            free,
            post_alloc,
            use_off,
            uses,
            free_size,
            last_use,
            base,
            initial_peak: peak,
            run: Run {
                in_run: vec![0; n],
                used: vec![0; ns],
                ..Run::default()
            },
        }
    }

    /// The peak when the tracker was built.
    pub fn initial_peak(&self) -> i64 {
        self.initial_peak
    }

    /// Memory right after node `n`'s allocations.
    pub fn post_alloc(&self, n: u32) -> i64 {
        let p = self.post_alloc[n as usize];
        if self.in_run(n) {
            p + self.run.offset
        } else {
            p
        }
    }

    /// Memory after node `n`'s frees.
    pub fn post_free(&self, n: u32) -> i64 {
        self.post_alloc(n) - self.free[n as usize]
    }

    /// Memory at entry.
    pub fn base(&self) -> i64 {
        self.base
    }

    /// Updates the levels for swapping `a` and `b`, where `a` directly precedes `b`; after
    /// the call `b` directly precedes `a`. O(uses(a) · uses(b)). Swapping back undoes it.
    /// Neither may be a member of an open run.
    pub fn swap_adjacent(&mut self, a: u32, b: u32) {
        let (ai, bi) = (a as usize, b as usize);
        let before = self.post_alloc[ai] - self.alloc[ai];
        let a_uses = &self.uses[self.use_off[ai] as usize..self.use_off[ai + 1] as usize];
        let b_uses = &self.uses[self.use_off[bi] as usize..self.use_off[bi + 1] as usize];
        for &s in b_uses {
            let su = s as usize;
            if self.last_use[su] == b && a_uses.contains(&s) {
                self.last_use[su] = a;
                self.free[bi] -= self.free_size[su];
                self.free[ai] += self.free_size[su];
            }
        }
        self.post_alloc[bi] = before + self.alloc[bi];
        self.post_alloc[ai] = self.post_alloc[bi] - self.free[bi] + self.alloc[ai];
    }

    /// The storages node `n` uses.
    fn uses_of(&self, n: u32) -> &[u32] {
        let n = n as usize;
        &self.uses[self.use_off[n] as usize..self.use_off[n + 1] as usize]
    }

    /// Opens a new run (the group a collective or wait drags along) holding only `n`.
    /// Any open run is closed first.
    pub fn run_start(&mut self, n: u32) {
        self.run_finish();
        self.run.serial += 1;
        self.run.open = true;
        self.run.max = i64::MIN;
        self.run.net = 0;
        self.run.members.clear();
        self.run_join(n);
        self.run.members.push_back(n);
    }

    /// Adds `n`, the node directly before the open run, to it.
    pub fn run_push_front(&mut self, n: u32) {
        debug_assert!(self.run.open);
        self.run_join(n);
        self.run.members.push_front(n);
    }

    /// Adds `n`, the node directly after the open run, to it.
    pub fn run_push_back(&mut self, n: u32) {
        debug_assert!(self.run.open);
        self.run_join(n);
        self.run.members.push_back(n);
    }

    /// The open run's nodes, in order.
    pub fn run_members(&self) -> &VecDeque<u32> {
        &self.run.members
    }

    /// Closes the open run: its members' levels are stored as they are again.
    pub fn run_finish(&mut self) {
        if self.run.open {
            self.flush_offset();
            self.run.open = false;
        }
    }

    /// Stamps `n` as a member and folds it into the run's scalars; its level is stored
    /// relative to the run's offset from now on.
    fn run_join(&mut self, n: u32) {
        let ni = n as usize;
        let serial = self.run.serial;
        self.run.in_run[ni] = serial;
        for &s in &self.uses[self.use_off[ni] as usize..self.use_off[ni + 1] as usize] {
            self.run.used[s as usize] = serial;
        }
        self.post_alloc[ni] -= self.run.offset;
        self.run.max = self.run.max.max(self.post_alloc[ni]);
        self.run.net += self.alloc[ni] - self.free[ni];
    }

    /// Whether `n` is a member of the open run.
    fn in_run(&self, n: u32) -> bool {
        self.run.open && self.run.in_run[n as usize] == self.run.serial
    }

    /// Applies the pending offset to the members' stored levels.
    fn flush_offset(&mut self) {
        let off = std::mem::take(&mut self.run.offset);
        if off != 0 {
            for &g in &self.run.members {
                self.post_alloc[g as usize] += off;
            }
        }
    }

    /// Recomputes the run's scalars from its members' levels (after a flush, when frees moved).
    fn rescan_run(&mut self) {
        debug_assert_eq!(self.run.offset, 0);
        let (mut max, mut net) = (i64::MIN, 0i64);
        for &g in &self.run.members {
            let gi = g as usize;
            max = max.max(self.post_alloc[gi]);
            net += self.alloc[gi] - self.free[gi];
        }
        self.run.max = max;
        self.run.net = net;
    }

    /// Moves `x`, directly before the open run, to directly after it, if no level of the
    /// nodes involved then exceeds `limit`; returns whether it moved (the levels are left
    /// unchanged otherwise). Same result as swapping `x` with each member in turn and back
    /// when over the limit. When no storage changes its last user (by far the common case:
    /// `x` is unrelated to the run) that is O(uses(x)): every member's level drops by `x`'s
    /// net allocation, a shift of the run's offset, the members' highest level moves with it,
    /// and `x` lands at its old entry level plus the run's net; both are scalars of the run.
    #[inline]
    pub fn move_after_run(&mut self, x: u32, limit: i64) -> bool {
        debug_assert!(self.run.open && !self.in_run(x));
        let xi = x as usize;
        // A swap of `x` with member `g` moves a free only for a storage both use whose last
        // user is `g`; the last user of a storage `x` uses is one of its users.
        let serial = self.run.serial;
        let transfers = self.uses_of(x).iter().any(|&s| {
            let l = self.last_use[s as usize];
            l != NONE && self.run.in_run[l as usize] == serial
        });
        if transfers {
            return self.move_after_run_swapping(x, limit);
        }
        let d = self.alloc[xi] - self.free[xi];
        let px = self.post_alloc[xi] + self.run.net;
        if px.max(self.run.max + self.run.offset - d) > limit {
            return false;
        }
        self.run.offset -= d;
        self.post_alloc[xi] = px;
        true
    }

    /// Moves `x`, directly after the open run, to directly before it, if no level of the
    /// nodes involved then exceeds `limit` (see [`MemoryTracker::move_after_run`]).
    #[inline]
    pub fn move_before_run(&mut self, x: u32, limit: i64) -> bool {
        debug_assert!(self.run.open && !self.in_run(x));
        let xi = x as usize;
        // A swap of member `g` with `x` moves a free only for a storage both use whose last
        // user is `x`.
        let serial = self.run.serial;
        let transfers = self
            .uses_of(x)
            .iter()
            .any(|&s| self.last_use[s as usize] == x && self.run.used[s as usize] == serial);
        if transfers {
            return self.move_before_run_swapping(x, limit);
        }
        let first = *self.run.members.front().expect("open run") as usize;
        let entry = self.post_alloc[first] + self.run.offset - self.alloc[first];
        let px = entry + self.alloc[xi];
        let d = self.alloc[xi] - self.free[xi];
        if px.max(self.run.max + self.run.offset + d) > limit {
            return false;
        }
        self.run.offset += d;
        self.post_alloc[xi] = px;
        true
    }

    /// [`MemoryTracker::move_after_run`] when frees may move: one adjacent swap per member,
    /// undone when over the limit.
    #[inline(never)]
    fn move_after_run_swapping(&mut self, x: u32, limit: i64) -> bool {
        self.flush_offset();
        let seg = std::mem::take(&mut self.run.members);
        for &g in &seg {
            self.swap_adjacent(x, g);
        }
        let moved = self.run_peak(x, &seg) <= limit;
        if !moved {
            for &g in seg.iter().rev() {
                self.swap_adjacent(g, x);
            }
        }
        self.run.members = seg;
        self.rescan_run();
        moved
    }

    /// [`MemoryTracker::move_before_run`] when frees may move.
    #[inline(never)]
    fn move_before_run_swapping(&mut self, x: u32, limit: i64) -> bool {
        self.flush_offset();
        let seg = std::mem::take(&mut self.run.members);
        for &g in seg.iter().rev() {
            self.swap_adjacent(g, x);
        }
        let moved = self.run_peak(x, &seg) <= limit;
        if !moved {
            for &g in &seg {
                self.swap_adjacent(x, g);
            }
        }
        self.run.members = seg;
        self.rescan_run();
        moved
    }

    fn run_peak(&self, x: u32, seg: &VecDeque<u32>) -> i64 {
        seg.iter()
            .map(|&g| self.post_alloc[g as usize])
            .fold(self.post_alloc[x as usize], i64::max)
    }

    /// Asserts that the tracked levels equal a full recompute by [`BufferModel`] of the block
    /// in `order` (the block must hold its ops in that order). For tests and debugging.
    pub fn assert_matches_recompute(&self, ctx: &Context, block: BlockId, order: &[u32]) {
        let prof = BufferModel::new(ctx, block).profile();
        assert_eq!(prof.base as i64, self.base, "memory base");
        for (p, &node) in order.iter().enumerate() {
            assert_eq!(
                (prof.post_alloc[p] as i64, prof.post_free[p] as i64),
                (self.post_alloc(node), self.post_free(node)),
                "incremental memory differs from a recompute at position {p} ({})",
                ctx.op_name(ctx.block_ops(block).nth(p).expect("op"))
            );
        }
    }
}
