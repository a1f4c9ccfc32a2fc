//! Which compute work each collective really waits for.
//!
//! A collective runs on the comm stream; the compute stream produced the buffers it reads and
//! may still read or write the pool bytes it overwrites. Waiting for *all* compute issued
//! before the collective is always safe, but it serializes a collective behind every kernel the
//! scheduler happened to place in front of it: a reduce-scatter placed after the forward's last
//! GEMM waits for that GEMM even when its inputs were gathered long before. That is not the
//! timing the scheduler's simulator assumes (a collective starts when its inputs are ready).
//!
//! This analysis finds, per collective, the last compute op that touches the same pool bytes
//! with a hazard (the op writes what the collective reads or writes, or reads what the
//! collective writes), and the comm stream then waits only for an event recorded right after
//! that op. One stream runs in order, so that event also covers every earlier kernel. Every
//! collective waits at least for an event at the function's entry, which orders it after the
//! caller's work (and after an earlier call's readers of the same pool).
//!
//! The analysis is exact only where it knows every op's memory: plain compute ops, pools,
//! NCCL collectives and their waits. A function with anything else (symm ops, calls, views
//! the lowering creates across pools, copy-engine pushes) keeps the conservative rule.

use crate::fusion::FusionPlan;
use commlir_dialects::comm::{buffer_encoding_ref, slot_of};
use commlir_ir::{Context, OpId, Value, ValueDef};
use std::collections::{BTreeSet, HashMap, HashSet};

/// Per collective, where the compute event it waits for is recorded.
#[derive(Debug, Default)]
pub(super) struct CommDeps {
    /// Collective → position `k`: record the event before `ops[k]` (after `ops[k - 1]` is
    /// lowered); 0 is the function's entry.
    pub anchor: HashMap<OpId, usize>,
    /// Every position an event is recorded at.
    pub record_at: BTreeSet<usize>,
}

/// Where a value's bytes live, as far as hazards go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    /// Bytes `[off, off + size)` of pool number `pool`.
    Slot { pool: usize, off: u64, size: u64 },
    /// A comm buffer whose slot this analysis cannot name: conflicts with every pool byte.
    Unknown,
}

/// Last compute readers and writers of one slot range.
#[derive(Debug)]
struct Entry {
    off: u64,
    size: u64,
    last_read: usize,
    last_write: usize,
}

/// The collectives whose reads and writes this analysis tells apart.
fn split_collective(name: &str) -> Option<bool> {
    match name {
        // Inputs first, then outputs.
        "comm.all_gather" | "comm.reduce_scatter" => Some(true),
        // In place, or outputs this analysis treats as written wholesale.
        "comm.all_reduce" | "comm.all_reduce_coalesced" | "comm.broadcast" | "comm.all_to_all" => {
            Some(false)
        }
        _ => None,
    }
}

/// The analysis of one function body `ops`, or `None` where it does not apply.
pub(super) fn plan(
    ctx: &Context,
    ops: &[OpId],
    plan: &FusionPlan,
    gemm_transposed: &HashSet<OpId>,
    pushing: bool,
) -> Option<CommDeps> {
    if pushing || !plan.epilogues.is_empty() {
        return None;
    }
    let mut pools: HashMap<(&'static str, String), usize> = HashMap::new();
    let mut loc_of = |v: Value| -> Option<Loc> { value_loc(ctx, v, gemm_transposed, &mut pools) };
    // Per pool: its slot ranges, keyed by (offset, size).
    let mut entries: Vec<Vec<Entry>> = Vec::new();
    let mut index: HashMap<(usize, u64, u64), usize> = HashMap::new();
    // Compute ops that touched an unknown comm buffer.
    let (mut unknown_read, mut unknown_write) = (0usize, 0usize);
    // The position after the latest compute op.
    let mut last_compute = 0usize;
    let mut deps = CommDeps::default();
    let mut waited: Option<usize> = None;
    for (i, &op) in ops.iter().enumerate() {
        let name = ctx.op_name(op);
        if let Some(split) = split_collective(name) {
            let operands = ctx.operands(op);
            let half = if split { operands.len() / 2 } else { 0 };
            let mut anchor = 0usize;
            for (j, &v) in operands.iter().enumerate() {
                let writes = j >= half;
                match loc_of(v) {
                    Some(Loc::Slot { pool, off, size }) => {
                        anchor = anchor.max(unknown_write);
                        if writes {
                            anchor = anchor.max(unknown_read);
                        }
                        for e in entries.get(pool).into_iter().flatten() {
                            if e.off < off + size && off < e.off + e.size {
                                anchor = anchor.max(e.last_write);
                                if writes {
                                    anchor = anchor.max(e.last_read);
                                }
                            }
                        }
                    }
                    // Not a pool buffer, or one this analysis cannot place: wait for all.
                    _ => anchor = last_compute,
                }
            }
            deps.anchor.insert(op, anchor);
            // An anchor at or before one the comm stream already waited for needs no event.
            if waited.is_none_or(|w| w < anchor) {
                deps.record_at.insert(anchor);
                waited = Some(anchor);
            }
            continue;
        }
        match name {
            "comm.pool" | "comm.alloc" | "comm.wait" | "comm.pool_release" | "func.return" => {
                continue
            }
            n if n.starts_with("compute.") => {}
            _ => return None,
        }
        if plan.absorbed.contains_key(&op)
            || plan.fused_into.contains_key(&op)
            || gemm_transposed.contains(&op)
        {
            continue; // emits nothing here
        }
        let reads: Vec<Value> = match plan.root_group.get(&op) {
            Some(&g) => plan.groups[g].inputs.clone(),
            None => ctx.operands(op).to_vec(),
        };
        let pos = i + 1;
        last_compute = pos;
        let touched = reads
            .into_iter()
            .map(|v| (v, false))
            .chain(ctx.results(op).iter().map(|&r| (r, true)));
        for (v, writes) in touched {
            match loc_of(v) {
                None => {}
                Some(Loc::Unknown) => {
                    if writes {
                        unknown_write = pos;
                    } else {
                        unknown_read = pos;
                    }
                }
                Some(Loc::Slot { pool, off, size }) => {
                    if entries.len() <= pool {
                        entries.resize_with(pool + 1, Vec::new);
                    }
                    let k = *index.entry((pool, off, size)).or_insert_with(|| {
                        entries[pool].push(Entry {
                            off,
                            size,
                            last_read: 0,
                            last_write: 0,
                        });
                        entries[pool].len() - 1
                    });
                    let e = &mut entries[pool][k];
                    if writes {
                        e.last_write = pos;
                    } else {
                        e.last_read = pos;
                    }
                }
            }
        }
    }
    Some(deps)
}

/// The pool bytes `v` occupies: `None` for a buffer of its own (an argument, an allocation).
fn value_loc(
    ctx: &Context,
    v: Value,
    gemm_transposed: &HashSet<OpId>,
    pools: &mut HashMap<(&'static str, String), usize>,
) -> Option<Loc> {
    let mut v = v;
    // Waits and transposes read in place are aliases; the chain is short but bounded anyway.
    for _ in 0..64 {
        let (def, index) = match ctx.value_def(v) {
            ValueDef::Result { op, index } => (op, index as usize),
            ValueDef::BlockArg { .. } => {
                return buffer_encoding_ref(ctx, ctx.value_type(v)).map(|_| Loc::Unknown);
            }
        };
        let Some(enc) = buffer_encoding_ref(ctx, ctx.value_type(v)) else {
            if gemm_transposed.contains(&def) {
                v = ctx.operand(def, 0);
                continue;
            }
            return None;
        };
        if ctx.op_name(def) == "comm.wait" {
            v = ctx.operand(def, index + 1);
            continue;
        }
        let Some(slot) = slot_of(ctx, def).filter(|_| ctx.results(def).len() == 1) else {
            return Some(Loc::Unknown);
        };
        let n = pools.len();
        let pool = *pools
            .entry((
                commlir_dialects::comm::encoding_kind_str(enc.kind),
                enc.group.to_string(),
            ))
            .or_insert(n);
        return Some(Loc::Slot {
            pool,
            off: slot.offset,
            size: slot.size,
        });
    }
    Some(Loc::Unknown)
}
