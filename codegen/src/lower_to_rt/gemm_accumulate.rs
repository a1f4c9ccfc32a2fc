//! A residual add folded into the GEMM that produces one of its operands.
//!
//! `y = x + A·B`, where the product is read only by the add and `x` is a buffer of the
//! function's own that nothing reads after the GEMM but the add, is one cuBLAS call with
//! β = 1 writing into `x`'s buffer (`C = A·B + C`): no add kernel, no buffer for the product,
//! and `y` lives on in `x`'s allocation. A transformer's residual connections are exactly this
//! (`h = x + attn(x)`, `out = h + mlp(h)`), each an add kernel that reads and writes three
//! activations' worth of memory.
//!
//! It runs on the lowered `rt` body, after the frees are placed, so that every reader of a
//! buffer is visible: the accumulated buffer must be an `rt.alloc` with no views, not read by
//! the GEMM itself and not used between the GEMM and the add. The rounding differs from the
//! two-kernel form in the last bit at most (one rounding of `x + A·B` in f32 instead of two).

use commlir_ir::{BlockId, Context, OpId, Value};
use std::collections::{HashMap, HashSet};

/// Folds each add of `adds` (launches of a plain two-input add kernel, operands `(u, v, y)`)
/// into the GEMM that produces `u` or `v`, where that is safe. Returns how many were folded.
pub(super) fn fold(ctx: &mut Context, block: BlockId, adds: &HashSet<OpId>) -> usize {
    if adds.is_empty() {
        return 0;
    }
    let ops: Vec<OpId> = ctx.block_ops(block).collect();
    let pos: HashMap<OpId, usize> = ops.iter().enumerate().map(|(i, o)| (*o, i)).collect();
    let mut folded = 0;
    for &launch in ops.iter().filter(|o| adds.contains(o)) {
        let [u, v, y] = ctx.operands(launch)[..] else {
            continue;
        };
        let t = ctx.value_type(y);
        if ctx.value_type(u) != t || ctx.value_type(v) != t || !is_alloc(ctx, y) {
            continue;
        }
        for (acc, prod) in [(u, v), (v, u)] {
            let Some(plan) = plan_fold(ctx, &pos, launch, acc, prod) else {
                continue;
            };
            apply(ctx, launch, acc, y, plan);
            folded += 1;
            break;
        }
    }
    folded
}

/// What a fold removes besides the add: the GEMM to redirect and the ops to erase.
struct Fold {
    gemm: OpId,
    prod_alloc: OpId,
    prod_free: OpId,
    acc_free: OpId,
}

fn is_alloc(ctx: &Context, b: Value) -> bool {
    ctx.defining_op(b)
        .is_some_and(|d| ctx.op_name(d) == "rt.alloc")
}

/// The single `rt.free` of `b` among its users, if that is its only other kind of use.
fn free_of(ctx: &Context, b: Value) -> Option<OpId> {
    let mut frees = ctx
        .uses(b)
        .iter()
        .filter(|u| ctx.op_name(u.op) == "rt.free")
        .map(|u| u.op);
    let f = frees.next()?;
    frees.next().is_none().then_some(f)
}

fn plan_fold(
    ctx: &Context,
    pos: &HashMap<OpId, usize>,
    launch: OpId,
    acc: Value,
    prod: Value,
) -> Option<Fold> {
    if acc == prod || !is_alloc(ctx, acc) || !is_alloc(ctx, prod) {
        return None;
    }
    // The product: written by one plain GEMM (as its C), read by the add, freed.
    let mut gemm = None;
    for u in ctx.uses(prod) {
        match ctx.op_name(u.op) {
            "rt.gemm" if u.index == 2 && gemm.is_none() => gemm = Some(u.op),
            "rt.free" => {}
            _ if u.op == launch => {}
            _ => return None,
        }
    }
    let gemm = gemm?;
    if ["out_dtype", "offset_c", "accumulate"]
        .iter()
        .any(|a| ctx.get_attr(gemm, a).is_some())
        || ctx.operands(gemm)[..2].contains(&acc)
    {
        return None;
    }
    let (gp, lp) = (*pos.get(&gemm)?, *pos.get(&launch)?);
    // The accumulated buffer: no views, no reader or writer from the GEMM on but the add and
    // its free.
    let acc_free = free_of(ctx, acc)?;
    for u in ctx.uses(acc) {
        if u.op == launch || u.op == acc_free {
            continue;
        }
        if matches!(ctx.op_name(u.op), "rt.view" | "rt.rank_view") || *pos.get(&u.op)? >= gp {
            return None;
        }
    }
    if *pos.get(&acc_free)? < lp || gp > lp {
        return None;
    }
    Some(Fold {
        gemm,
        prod_alloc: ctx.defining_op(prod)?,
        prod_free: free_of(ctx, prod)?,
        acc_free,
    })
}

fn apply(ctx: &mut Context, launch: OpId, acc: Value, y: Value, f: Fold) {
    ctx.set_operand(f.gemm, 2, acc);
    let unit = ctx.unit_attr();
    ctx.set_attr(f.gemm, "accumulate", unit);
    let y_alloc = ctx.defining_op(y);
    ctx.erase_op(launch);
    ctx.erase_op(f.prod_free);
    ctx.erase_op(f.acc_free);
    ctx.erase_op(f.prod_alloc);
    // `y` is `acc` from here on; its free (or its return) now ends `acc`'s allocation.
    ctx.replace_all_uses(y, acc);
    if let Some(a) = y_alloc {
        ctx.erase_op(a);
    }
}
