//! SSA value names and block labels, numbered the way mlir-opt numbers them.
//!
//! MLIR numbers region by region from a work stack: a region's blocks get `^bb0, ^bb1, ...`;
//! entry-block arguments get `%argN`; other block arguments and op results share the `%N`
//! counter (one number per op: a multi-result op defines `%N:k` and its uses are `%N#i`).
//! After a region is numbered, the regions of its ops are pushed in order and then popped
//! last-first. The two forms differ in what a popped region starts from:
//!
//! - custom form: the counters as they stood after its parent region was numbered, so
//!   sibling regions (and sibling functions) reuse the same numbers;
//! - generic form: one global counter, so every name is unique in the printed op. A reader of
//!   the generic form cannot know which unregistered ops are isolated from above, so names
//!   must never shadow.
//!
//! Numbering is a separate iterative pass (before printing), so it works at any depth.

use super::literals::push_u64;
use crate::context::{Context, ValueDef};
use crate::entity::{BlockId, OpId, RegionId, Value};
use rustc_hash::FxHashMap;

/// Marks a name as `%argN` rather than `%N`.
const ARG_FLAG: u32 = 1 << 31;
/// No name assigned (the value is defined outside the printed op).
const UNNAMED: u32 = u32::MAX;

/// A map from arena index to number: a flat vector when printing a whole top-level op (the
/// common case, and the fastest), a hash map when printing one op nested in a large IR, so
/// the cost stays proportional to what is printed.
enum SlotMap {
    Dense(Vec<u32>),
    Sparse(FxHashMap<u32, u32>),
}

impl SlotMap {
    fn new(dense: bool, slots: usize) -> Self {
        if dense {
            SlotMap::Dense(vec![UNNAMED; slots])
        } else {
            SlotMap::Sparse(FxHashMap::default())
        }
    }
    #[inline]
    fn get(&self, i: usize) -> u32 {
        match self {
            SlotMap::Dense(v) => v.get(i).copied().unwrap_or(UNNAMED),
            SlotMap::Sparse(m) => m.get(&(i as u32)).copied().unwrap_or(UNNAMED),
        }
    }
    #[inline]
    fn set(&mut self, i: usize, n: u32) {
        match self {
            SlotMap::Dense(v) => {
                if i < v.len() {
                    v[i] = n;
                }
            }
            SlotMap::Sparse(m) => {
                m.insert(i as u32, n);
            }
        }
    }
}

/// The names of every value and block nested in one printed op.
pub(crate) struct Names {
    values: SlotMap,
    blocks: SlotMap,
    /// Predecessors of each block that has some, one entry per successor use (as MLIR
    /// counts them), for the `// N preds:` comments.
    preds: FxHashMap<BlockId, Vec<BlockId>>,
    /// Number of ops numbered (nested in the root), to size the output buffer.
    pub(crate) num_ops: usize,
}

impl Names {
    /// Numbers everything nested in `root` (see the module docs for the order).
    pub(crate) fn number(ctx: &Context, root: OpId, generic: bool) -> Names {
        let dense = ctx.parent_op(root).is_none();
        let mut names = Names {
            values: SlotMap::new(dense, ctx.num_value_slots()),
            blocks: SlotMap::new(dense, ctx.blocks.len()),
            preds: FxHashMap::default(),
            num_ops: 0,
        };
        let mut next_value = 0u32;
        let mut next_arg = 0u32;
        names.number_results(ctx, root, &mut next_value);

        let mut work: Vec<(RegionId, u32, u32)> = ctx
            .op_regions(root)
            .iter()
            .map(|&r| (r, next_value, next_arg))
            .collect();
        while let Some((region, v, a)) = work.pop() {
            if !generic {
                next_value = v;
                next_arg = a;
            }
            let blocks = ctx.region_blocks(region);
            for (bi, &b) in blocks.iter().enumerate() {
                names.blocks.set(b.index(), bi as u32);
                for &arg in ctx.block_args(b) {
                    if bi == 0 {
                        names.values.set(arg.index(), next_arg | ARG_FLAG);
                        next_arg += 1;
                    } else {
                        names.values.set(arg.index(), next_value);
                        next_value += 1;
                    }
                }
                for op in ctx.block_ops(b) {
                    names.num_ops += 1;
                    names.number_results(ctx, op, &mut next_value);
                    for &s in ctx.successors(op) {
                        names.preds.entry(s).or_default().push(b);
                    }
                }
            }
            for &b in blocks {
                for op in ctx.block_ops(b) {
                    for &r in ctx.op_regions(op) {
                        work.push((r, next_value, next_arg));
                    }
                }
            }
        }
        names
    }

    fn number_results(&mut self, ctx: &Context, op: OpId, next_value: &mut u32) {
        let results = ctx.results(op);
        if results.is_empty() {
            return;
        }
        for r in results {
            self.values.set(r.index(), *next_value);
        }
        *next_value += 1;
    }

    /// Appends a use of `v`: `%3`, `%3#1` or `%arg0`.
    pub(crate) fn push_value(&self, ctx: &Context, out: &mut String, v: Value) {
        let code = self.values.get(v.index());
        if code == UNNAMED {
            out.push_str("<<UNKNOWN SSA VALUE>>");
            return;
        }
        if code & ARG_FLAG != 0 {
            out.push_str("%arg");
            push_u64(out, (code & !ARG_FLAG) as u64);
            return;
        }
        out.push('%');
        push_u64(out, code as u64);
        if let ValueDef::Result { op, index } = ctx.value_def(v) {
            if ctx.results(op).len() > 1 {
                out.push('#');
                push_u64(out, index as u64);
            }
        }
    }

    /// Appends the result list of an op's definition: `%3` or `%3:2`.
    pub(crate) fn push_results_def(&self, ctx: &Context, out: &mut String, op: OpId) {
        let results = ctx.results(op);
        let code = self.values.get(results[0].index());
        if code == UNNAMED {
            out.push_str("<<UNKNOWN SSA VALUE>>");
            return;
        }
        out.push('%');
        push_u64(out, code as u64);
        if results.len() > 1 {
            out.push(':');
            push_u64(out, results.len() as u64);
        }
    }

    /// The number of a block's `^bbN` label.
    pub(crate) fn block_number(&self, b: BlockId) -> Option<u32> {
        let n = self.blocks.get(b.index());
        (n != UNNAMED).then_some(n)
    }

    /// Appends a block label `^bbN`.
    pub(crate) fn push_block(&self, out: &mut String, b: BlockId) {
        match self.block_number(b) {
            Some(n) => {
                out.push_str("^bb");
                push_u64(out, n as u64);
            }
            None => out.push_str("^<<UNKNOWN BLOCK>>"),
        }
    }

    /// The predecessors of `b` (one per successor use), unordered.
    pub(crate) fn preds(&self, b: BlockId) -> &[BlockId] {
        self.preds.get(&b).map(Vec::as_slice).unwrap_or(&[])
    }
}
