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

use crate::analysis::buffers::{alias_of, BufferModel};
use commlir_dialects::shape::tensor_bytes;
use commlir_ir::{AttrKind, BlockId, Context, Trait};

use super::graph::{DepGraph, NONE};

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
        let func = ctx.block_parent_op(block);
        let mut base = 0i64;
        for (i, &a) in ctx.block_args(block).iter().enumerate() {
            let donated = func.is_some_and(|f| is_donated(ctx, f, i));
            let s = tensor_bytes(ctx, ctx.value_type(a)).unwrap_or(0) as i64;
            storage_of[a.index()] = size.len() as u32;
            size.push(s);
            def.push(NONE);
            counted.push(donated);
            escapes.push(false);
            if donated {
                base += s;
            }
        }
        let mut alloc = vec![0i64; n];
        let mut use_off: Vec<u32> = Vec::with_capacity(n + 1);
        let mut uses: Vec<u32> = Vec::with_capacity(n * 2);
        use_off.push(0);
        for (p, &op) in graph.ops.iter().enumerate() {
            let is_return = ctx.op_has_trait(op, Trait::ReturnLike);
            let first = uses.len();
            for &v in ctx.operands(op) {
                let s = storage_of[v.index()];
                if s != NONE {
                    if !uses[first..].contains(&s) {
                        uses.push(s);
                    }
                    if is_return {
                        escapes[s as usize] = true;
                    }
                }
            }
            use_off.push(uses.len() as u32);
            for (r, &v) in ctx.results(op).iter().enumerate() {
                if let Some(a) = alias_of(ctx, op, r) {
                    let s = storage_of[a.index()];
                    if s != NONE {
                        storage_of[v.index()] = s;
                        continue;
                    }
                }
                let s = tensor_bytes(ctx, ctx.value_type(v)).unwrap_or(0) as i64;
                storage_of[v.index()] = size.len() as u32;
                size.push(s);
                def.push(p as u32);
                counted.push(true);
                escapes.push(false);
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
        }
    }

    /// The peak when the tracker was built.
    pub fn initial_peak(&self) -> i64 {
        self.initial_peak
    }

    /// Memory right after node `n`'s allocations.
    pub fn post_alloc(&self, n: u32) -> i64 {
        self.post_alloc[n as usize]
    }

    /// Memory after node `n`'s frees.
    pub fn post_free(&self, n: u32) -> i64 {
        self.post_alloc[n as usize] - self.free[n as usize]
    }

    /// Memory at entry.
    pub fn base(&self) -> i64 {
        self.base
    }

    /// Updates the levels for swapping `a` and `b`, where `a` directly precedes `b`; after
    /// the call `b` directly precedes `a`. O(uses(a) · uses(b)). Swapping back undoes it.
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

    /// Moves `x`, directly before the contiguous run `seg`, to directly after it, if no level
    /// of the nodes involved then exceeds `limit`; returns whether it moved (the levels are
    /// left unchanged otherwise). Same result as swapping `x` with each member in turn and
    /// back when over the limit, but when no storage changes its last user (by far the
    /// common case: `x` is unrelated to the run) the new levels are one running sum over the
    /// run, computed in place and recomputed in the old order to undo.
    pub fn move_after_run(&mut self, x: u32, seg: &[u32], limit: i64) -> bool {
        // A swap of `x` with `g` moves a free only for a storage both use whose last user
        // is `g`; the last user of a storage `x` uses is one of its users.
        let transfers = self
            .uses_of(x)
            .iter()
            .any(|&s| seg.contains(&self.last_use[s as usize]));
        if transfers {
            for &g in seg {
                self.swap_adjacent(x, g);
            }
            if self.run_peak(x, seg) > limit {
                for &g in seg.iter().rev() {
                    self.swap_adjacent(g, x);
                }
                return false;
            }
            return true;
        }
        let xi = x as usize;
        let entry = self.post_alloc[xi] - self.alloc[xi];
        let level = self.relevel(entry, seg);
        let px = level + self.alloc[xi];
        if self.run_peak_with(px, seg) > limit {
            // `x`'s own level was not touched yet: the run goes back to following it.
            self.relevel(self.post_free(x), seg);
            return false;
        }
        self.post_alloc[xi] = px;
        true
    }

    /// Moves `x`, directly after the contiguous run `seg`, to directly before it, if no level
    /// of the nodes involved then exceeds `limit` (see [`MemoryTracker::move_after_run`]).
    pub fn move_before_run(&mut self, x: u32, seg: &[u32], limit: i64) -> bool {
        // A swap of `g` with `x` moves a free only for a storage both use whose last user
        // is `x`.
        let transfers = self.uses_of(x).iter().any(|&s| {
            self.last_use[s as usize] == x && seg.iter().any(|&g| self.uses_of(g).contains(&s))
        });
        if transfers {
            for &g in seg.iter().rev() {
                self.swap_adjacent(g, x);
            }
            if self.run_peak(x, seg) > limit {
                for &g in seg {
                    self.swap_adjacent(x, g);
                }
                return false;
            }
            return true;
        }
        let xi = x as usize;
        let first = seg[0] as usize;
        let entry = self.post_alloc[first] - self.alloc[first];
        let px = entry + self.alloc[xi];
        self.post_alloc[xi] = px;
        self.relevel(px - self.free[xi], seg);
        if self.run_peak_with(px, seg) > limit {
            self.post_alloc[xi] = self.relevel(entry, seg) + self.alloc[xi];
            return false;
        }
        true
    }

    /// Sets the levels of the run `seg`, in order, starting from memory `level` before it;
    /// returns the memory after it.
    fn relevel(&mut self, mut level: i64, seg: &[u32]) -> i64 {
        for &g in seg {
            let gi = g as usize;
            let p = level + self.alloc[gi];
            self.post_alloc[gi] = p;
            level = p - self.free[gi];
        }
        level
    }

    fn run_peak(&self, x: u32, seg: &[u32]) -> i64 {
        self.run_peak_with(self.post_alloc(x), seg)
    }

    fn run_peak_with(&self, px: i64, seg: &[u32]) -> i64 {
        seg.iter()
            .map(|&g| self.post_alloc[g as usize])
            .fold(px, i64::max)
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

fn is_donated(ctx: &Context, func: commlir_ir::OpId, index: usize) -> bool {
    let Some(arg_attrs) = ctx.inherent_attr(func, "arg_attrs") else {
        return false;
    };
    let AttrKind::Array(items) = ctx.attr_kind(arg_attrs) else {
        return false;
    };
    let Some(&d) = items.get(index) else {
        return false;
    };
    match ctx.attr_kind(d) {
        AttrKind::Dict(entries) => entries
            .iter()
            .any(|(k, _)| ctx.ident_str(*k) == "commlir.donated"),
        _ => false,
    }
}
