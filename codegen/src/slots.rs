//! Argument and result **slots**: where an rt function copies a whole argument into a
//! comm-pool slot (the clone `coll-to-comm` inserts before a collective on an argument) or
//! copies a pool slot out into a fresh result buffer (the clone before `return`), the caller
//! may place the argument in the slot itself, or accept the result in the slot, and the copy
//! is skipped. The host program tests at run time: an argument copy is skipped when
//! `args[i]` already *is* the slot's address; a result copy (and its allocation) is skipped
//! when the caller passed the slot's address in `results[j]` on entry. A runner that knows
//! nothing of slots passes its own buffers and null results, and gets the copies, as before.
//!
//! The manifest lists, per function, its pools (in `pool_alloc` order, so a runner can
//! allocate them ahead of the first call: pools are persistent, `pool_alloc` of the same
//! kind, group and size returns the same buffer) and the slots. A slot is only offered when
//! skipping the copy cannot change what the program computes:
//! - argument: the clone into the slot is the argument's only reader, and no op before the
//!   clone reads or writes the pool except `pool_alloc`, `pool_view` and other argument
//!   clones (so the slot still holds the argument when the program would have copied it);
//! - result: the returned buffer is a fresh `rt.alloc` whose only other use is one clone
//!   from a pool slot, and no op after that clone touches the pool except `pool_free`, other
//!   result clones, events and waits (so the slot still holds the result at return).
//!
//! The caller owns the placement: an argument slot is the program's input only for the call
//! it was written for (the program may overwrite it, e.g. an in-place all-reduce), and a
//! result in a slot is valid until the next call of the function.

use commlir_ir::{Context, OpId, Value};

/// A pool of a function, in `pool_alloc` order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolInfo {
    /// "nccl" or "symm_mem".
    pub kind: String,
    /// Index in the module's group table.
    pub group: usize,
    pub size: i64,
    pub alignment: i64,
}

/// An argument (or result) that may live in a pool slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Argument or result index.
    pub index: usize,
    /// Pool ordinal (position in [`FnSlots::pools`]).
    pub pool: usize,
    pub offset: i64,
    pub bytes: i64,
    /// The clone launch that becomes conditional.
    pub launch: OpId,
    /// The slot's `pool_view` value (the address compared at run time).
    pub view: Value,
    /// Results only: the `rt.alloc` of the returned buffer (skipped with the copy).
    pub alloc: Option<OpId>,
}

/// Pools and slots of one rt function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FnSlots {
    pub pools: Vec<PoolInfo>,
    pub args: Vec<Slot>,
    pub results: Vec<Slot>,
}

/// Whether `launch` runs a kernel that is exactly one `compute.clone` (a bit copy).
fn is_clone_launch(ctx: &Context, launch: OpId) -> bool {
    if ctx.op_name(launch) != "rt.launch" || ctx.operands(launch).len() != 2 {
        return false;
    }
    let Some(k) = ctx
        .inherent_attr(launch, "kernel")
        .and_then(|a| ctx.attr_as_symbol(a))
    else {
        return false;
    };
    let Some(kop) = ctx.lookup_symbol(launch, k) else {
        return false;
    };
    let Some(&region) = ctx.op_regions(kop).first() else {
        return false;
    };
    let Some(&block) = ctx.region_blocks(region).first() else {
        return false;
    };
    let ops: Vec<OpId> = ctx.block_ops(block).collect();
    ops.len() == 2 && ctx.op_name(ops[0]) == "compute.clone" && ctx.op_name(ops[1]) == "rt.yield"
}

/// The pool value and offset of a `pool_view` result.
fn view_of(ctx: &Context, v: Value) -> Option<(Value, i64)> {
    let d = ctx.defining_op(v)?;
    if ctx.op_name(d) != "rt.pool_view" {
        return None;
    }
    let off = ctx
        .inherent_attr(d, "offset")
        .and_then(|a| ctx.attr_as_i64(a))?;
    Some((ctx.operand(d, 0), off))
}

fn memref_bytes(ctx: &Context, v: Value) -> Option<i64> {
    let (shape, elem) = commlir_dialects::rt::memref_info(ctx, ctx.value_type(v))?;
    let n: i64 = shape.iter().product();
    Some(n.saturating_mul(commlir_dialects::shape::elem_bytes(ctx, elem) as i64))
}

/// Whether `op` has the pool or one of its views as an operand.
fn touches(ctx: &Context, op: OpId, pool: Value) -> bool {
    ctx.operands(op)
        .iter()
        .any(|&v| v == pool || view_of(ctx, v).is_some_and(|(p, _)| p == pool))
}

/// The pools and slots of the rt function `f` (body `ops`, arguments `args`).
pub fn analyze(ctx: &Context, ops: &[OpId], args: &[Value], group_names: &[String]) -> FnSlots {
    let mut out = FnSlots::default();
    let mut pool_index: Vec<(Value, usize)> = Vec::new();
    for &op in ops {
        if ctx.op_name(op) != "rt.pool_alloc" {
            continue;
        }
        let s = |n: &str| ctx.inherent_attr(op, n).and_then(|a| ctx.attr_as_str(a));
        let i = |n: &str| {
            ctx.inherent_attr(op, n)
                .and_then(|a| ctx.attr_as_i64(a))
                .unwrap_or(0)
        };
        let g = ctx
            .inherent_attr(op, "group")
            .and_then(|a| ctx.attr_as_symbol(a))
            .and_then(|g| group_names.iter().position(|n| n == g))
            .unwrap_or(0);
        pool_index.push((ctx.result(op, 0), out.pools.len()));
        out.pools.push(PoolInfo {
            kind: s("kind").unwrap_or("nccl").to_string(),
            group: g,
            size: i("size"),
            alignment: i("alignment"),
        });
    }
    let pos = |op: OpId| ops.iter().position(|o| *o == op);
    let pool_ord = |p: Value| pool_index.iter().find(|(v, _)| *v == p).map(|(_, i)| *i);
    // Argument clones: candidates first, then the "nothing before touches the pool" test.
    let mut cands: Vec<(usize, OpId, Value, Value, i64)> = Vec::new();
    for (i, &a) in args.iter().enumerate() {
        let uses = ctx.uses(a);
        if uses.len() != 1 || uses[0].index != 0 {
            continue;
        }
        let l = uses[0].op;
        if !is_clone_launch(ctx, l) {
            continue;
        }
        let dst = ctx.operand(l, 1);
        let Some((pool, off)) = view_of(ctx, dst) else {
            continue;
        };
        if pool_ord(pool).is_none() || memref_bytes(ctx, a) != memref_bytes(ctx, dst) {
            continue;
        }
        cands.push((i, l, pool, dst, off));
    }
    for &(i, l, pool, dst, off) in &cands {
        let Some(at) = pos(l) else { continue };
        let clean = ops[..at].iter().all(|&o| match ctx.op_name(o) {
            "rt.pool_alloc" | "rt.pool_view" => true,
            _ => !touches(ctx, o, pool) || cands.iter().any(|c| c.1 == o),
        });
        if clean {
            out.args.push(Slot {
                index: i,
                pool: pool_ord(pool).unwrap_or(0),
                offset: off,
                bytes: memref_bytes(ctx, dst).unwrap_or(0),
                launch: l,
                view: dst,
                alloc: None,
            });
        }
    }
    // Result clones.
    let Some(&ret) = ops.last() else { return out };
    if ctx.op_name(ret) != "func.return" {
        return out;
    }
    let rets = ctx.operands(ret).to_vec();
    let mut rcands: Vec<(usize, OpId, OpId, Value, Value, i64)> = Vec::new();
    for (j, &r) in rets.iter().enumerate() {
        if rets.iter().filter(|&&x| x == r).count() != 1 {
            continue;
        }
        let Some(alloc) = ctx.defining_op(r) else {
            continue;
        };
        if ctx.op_name(alloc) != "rt.alloc" {
            continue;
        }
        let others: Vec<OpId> = ctx
            .uses(r)
            .iter()
            .map(|u| u.op)
            .filter(|o| *o != ret)
            .collect();
        if others.len() != 1 || !is_clone_launch(ctx, others[0]) {
            continue;
        }
        let l = others[0];
        if ctx.operand(l, 1) != r {
            continue;
        }
        let src = ctx.operand(l, 0);
        let Some((pool, off)) = view_of(ctx, src) else {
            continue;
        };
        let (Some(pa), Some(pv), Some(pl)) =
            (pos(alloc), ctx.defining_op(src).and_then(&pos), pos(l))
        else {
            continue;
        };
        if pool_ord(pool).is_none() || pv > pa || pa > pl {
            continue;
        }
        rcands.push((j, alloc, l, pool, src, off));
    }
    for &(j, alloc, l, pool, src, off) in &rcands {
        let Some(at) = pos(l) else { continue };
        let clean = ops[at + 1..].iter().all(|&o| match ctx.op_name(o) {
            "rt.pool_free" | "rt.event_record" | "rt.stream_wait" | "func.return" => true,
            _ => !touches(ctx, o, pool) || rcands.iter().any(|c| c.2 == o),
        });
        if clean {
            out.results.push(Slot {
                index: j,
                pool: pool_ord(pool).unwrap_or(0),
                offset: off,
                bytes: memref_bytes(ctx, src).unwrap_or(0),
                launch: l,
                view: src,
                alloc: Some(alloc),
            });
        }
    }
    out
}
