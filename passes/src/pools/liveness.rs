//! Live ranges of the comm buffers of a function body, as pool planning needs them.
//!
//! A comm buffer is live from the op producing it through its last reader, where a reader
//! is any op using the buffer or one of its aliases (`comm.wait` results, the result of
//! `comm.shard_dim_alltoall`). One rule goes further than [`BufferModel`]'s
//! free-after-last-use: a collective started on a buffer keeps reading or writing it
//! asynchronously until the `comm.wait` of its work handle, so every buffer operand of a
//! start op stays live until that wait even when the wait does not list it (the inputs of
//! an out-of-place all-gather, say). Reusing such a buffer's bytes before the wait would be
//! a race with NCCL that no sim digest shows, since the sim snapshots inputs at issue.
//!
//! Positions are indices of the body's top-level ops; intervals are inclusive at both ends,
//! so a buffer read by an op never shares bytes with a buffer that op produces.
//!
//! [`BufferModel`]: crate::analysis::buffers::BufferModel

use crate::analysis::buffers::alias_of;
use commlir_dialects::comm::{buffer_encoding, is_work_type, BufferEncoding};
use commlir_dialects::shape::tensor_bytes;
use commlir_ir::{BlockId, CommBufferKind, Context, Diagnostic, OpId, Trait, Type, Value};
use rustc_hash::FxHashMap;

/// One comm buffer of the body: what pool it belongs to and when it is live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommSlot {
    /// The buffer as produced (aliases map to it).
    pub value: Value,
    /// The op producing it, which carries its `comm.slot` once planned.
    pub producer: OpId,
    pub kind: CommBufferKind,
    pub group: String,
    /// Bytes of the buffer.
    pub size: u64,
    /// Position of the producer.
    pub start: usize,
    /// Position of the last op reading it (or of the wait ending the last collective on it).
    pub end: usize,
}

impl CommSlot {
    /// Whether the two buffers are live at a common position.
    pub fn overlaps_in_time(&self, other: &CommSlot) -> bool {
        self.start <= other.end && other.start <= self.end
    }
}

/// The comm buffers of one body and what stands in the way of planning them.
#[derive(Clone, Debug, Default)]
pub struct SlotLiveness {
    /// In order of their producers.
    pub slots: Vec<CommSlot>,
    /// Buffers that cannot get a slot: returned from the function (a pool is released before
    /// the function exits), defined inside a nested region, or several comm buffers from one
    /// op (a slot attribute names one range). The report tolerates them; the pass fails.
    pub problems: Vec<Diagnostic>,
}

/// What a result type means to the analysis, decided once per distinct type.
#[derive(Clone)]
enum TypeClass {
    /// `!comm.work`: a started collective's handle.
    Work,
    /// A comm buffer: its encoding and size in bytes.
    Buffer(BufferEncoding, u64),
    Other,
}

fn classify(ctx: &Context, t: Type) -> TypeClass {
    if is_work_type(ctx, t) {
        TypeClass::Work
    } else if let Some(enc) = buffer_encoding(ctx, t) {
        TypeClass::Buffer(enc, tensor_bytes(ctx, t).unwrap_or(0))
    } else {
        TypeClass::Other
    }
}

/// No slot: a value that names no planned buffer.
const NO_SLOT: u32 = u32::MAX;

/// Computes the comm buffers of `block` (a function body) and their live ranges.
pub fn analyze(ctx: &Context, block: BlockId) -> SlotLiveness {
    let ops: Vec<OpId> = ctx.block_op_list(block);
    let last = ops.len().saturating_sub(1);
    let mut out = SlotLiveness::default();
    // Every value naming a planned buffer (the buffer itself and its aliases) → its slot,
    // by value index.
    let mut slot_of: Vec<u32> = vec![NO_SLOT; ctx.num_value_slots()];
    let slot = |slot_of: &[u32], v: Value| {
        slot_of
            .get(v.index())
            .and_then(|&s| (s != NO_SLOT).then_some(s as usize))
    };
    // Work handles of started collectives → the slots they keep busy until their wait.
    let mut in_flight: FxHashMap<Value, Vec<usize>> = FxHashMap::default();
    // A program has thousands of results over a few dozen types.
    let mut classes: FxHashMap<Type, TypeClass> = FxHashMap::default();
    let mut used = Vec::new();
    let mut nested_defs = Vec::new();
    for (p, op) in ctx.prefetched(&ops).enumerate() {
        // What the op and everything nested in it reads; buffers defined inside it.
        let used: &[Value] = if ctx.op_regions(op).is_empty() {
            ctx.operands(op)
        } else {
            used.clear();
            ctx.walk(op, |o| {
                used.extend_from_slice(ctx.operands(o));
                if o != op {
                    nested_defs.extend(
                        ctx.results(o)
                            .iter()
                            .copied()
                            .filter(|r| buffer_encoding(ctx, ctx.value_type(*r)).is_some()),
                    );
                }
            });
            &used
        };
        for v in used {
            if let Some(s) = slot(&slot_of, *v) {
                out.slots[s].end = p;
            }
        }
        if ctx.op_name(op) == "comm.wait" {
            if let Some(busy) = ctx.operands(op).first().and_then(|w| in_flight.remove(w)) {
                for s in busy {
                    out.slots[s].end = p;
                }
            }
        }
        if ctx.op_has_trait(op, Trait::ReturnLike) {
            for v in ctx.operands(op) {
                if let Some(s) = slot(&slot_of, *v) {
                    out.problems.push(
                        ctx.op_error(op, "returns a comm buffer: comm buffers must not escape the function (their pool is released before it returns)")
                            .with_note(ctx.op_loc(out.slots[s].producer), "the buffer is produced here"),
                    );
                }
            }
        }
        for d in nested_defs.drain(..) {
            let at = ctx.defining_op(d).unwrap_or(op);
            out.problems.push(ctx.op_error(at, "produces a comm buffer inside a nested region; pools are planned for function bodies only"));
        }
        // Results: aliases join their buffer; other comm-buffer results are new buffers.
        let mut fresh = 0;
        for (i, &r) in ctx.results(op).iter().enumerate() {
            if let Some(src) = alias_of(ctx, op, i) {
                if let Some(s) = slot(&slot_of, src) {
                    slot_of[r.index()] = s as u32;
                }
                continue;
            }
            let t = ctx.value_type(r);
            let class = classes.entry(t).or_insert_with(|| classify(ctx, t));
            let (enc, size) = match class {
                TypeClass::Work => {
                    let busy: Vec<usize> = ctx
                        .operands(op)
                        .iter()
                        .filter_map(|v| slot(&slot_of, *v))
                        .collect();
                    if !busy.is_empty() {
                        in_flight.insert(r, busy);
                    }
                    continue;
                }
                TypeClass::Other => continue,
                TypeClass::Buffer(enc, size) => (enc, *size),
            };
            fresh += 1;
            if fresh > 1 {
                out.problems.push(ctx.op_error(
                    op,
                    "produces several comm buffers; a 'comm.slot' places one",
                ));
                continue;
            }
            slot_of[r.index()] = out.slots.len() as u32;
            out.slots.push(CommSlot {
                value: r,
                producer: op,
                kind: enc.kind,
                group: enc.group.clone(),
                size,
                start: p,
                end: p,
            });
        }
    }
    // A collective never waited for may touch its buffers until the function ends.
    for busy in in_flight.into_values() {
        for s in busy {
            out.slots[s].end = last;
        }
    }
    out
}
