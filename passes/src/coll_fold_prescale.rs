//! `coll-fold-prescale`: a `compute.scale` by ± a power of two whose only reader is a
//! reduce-scatter becomes that reduce-scatter's `prescale`.
//!
//! `%s = compute.scale %x {factor = f}` followed by `coll.reduce_scatter_tensor %s
//! {reduce_op = "sum" | "avg"}` is gradient pre-division as FSDP writes it (and the backward
//! stand-in of the generated FSDP transformer). With the factor on the reduce-scatter the GPU
//! runs it as NCCL's pre-multiplied sum (`ncclRedOpCreatePreMulSum`): no scale kernel on the
//! compute stream, and no send buffer of the scaled copy. The sim defines `prescale` as the
//! scale it replaces (each input multiplied and rounded as `compute.scale` does), so results
//! are bit-identical; on the GPU a power of two makes the multiplication exact (wherever the
//! product stays in the type's normal range), so NCCL's unrounded pre-multiplication gives the
//! same bits.
//!
//! Folded only when every input of the reduce-scatter (all members of a coalesced one) is such
//! a scale with the same factor, read by nothing else, and the reduce-scatter has no
//! `prescale` yet. The scale's input then lives until the reduce-scatter's wait instead of
//! until the scale, while the scaled copy (the same size) is gone: peak memory never grows.
//! Collectives keep their order and inputs' order: the pass only removes compute ops.

use commlir_dialects::coll::prescale_ok;
use commlir_ir::pass::{Anchor, Pass, PassEnv, PassInfo, StatisticDef};
use commlir_ir::{Context, Diagnostic, OpId, TypeKind};

commlir_ir::register_pass!(
    /// The `coll-fold-prescale` pass.
    pub COLL_FOLD_PRESCALE = PassInfo {
        argument: "coll-fold-prescale",
        name: "CollFoldPrescale",
        summary: "Fold power-of-two scales into the reduce-scatters that alone read them",
        description: "Rewrites `compute.scale %x {factor = f}` read only by a sum or avg \
            `coll.reduce_scatter_tensor[_coalesced]` into that reduce-scatter's \
            `prescale = f` on `%x`, for f = ± a power of two (2^-14 to 2^15) on float tensors, \
            when every input of the reduce-scatter is such a scale with the same factor. \
            Results are unchanged (the sim's `prescale` is the scale); the GPU runs it as \
            NCCL's pre-multiplied sum, without the scale kernel or its buffer.",
        anchor: Anchor::Any,
        options: &[],
        statistics: &[
            StatisticDef::new("num-folded", "Scales folded into reduce-scatters"),
        ],
        create: |_| Ok(Box::new(CollFoldPrescale)),
    }
);

/// The `coll-fold-prescale` pass instance (stateless).
pub struct CollFoldPrescale;

impl Pass for CollFoldPrescale {
    fn info(&self) -> &'static PassInfo {
        &COLL_FOLD_PRESCALE
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let mut candidates = Vec::new();
        ctx.walk(op, |o| {
            if matches!(
                ctx.op_name(o),
                "coll.reduce_scatter_tensor" | "coll.reduce_scatter_tensor_coalesced"
            ) {
                candidates.push(o);
            }
        });
        let mut folded = 0u64;
        for rs in candidates {
            folded += fold(ctx, rs);
        }
        env.add_stat("num-folded", folded);
        Ok(())
    }
}

/// The factor of `scale` when it may become a `prescale` ([`prescale_ok`]), on a float tensor.
fn foldable_factor(ctx: &Context, scale: OpId) -> Option<f64> {
    let f = ctx
        .inherent_attr(scale, "factor")
        .and_then(|a| ctx.attr_as_f64(a))?;
    let t = commlir_dialects::shape::value_tensor(ctx, ctx.result(scale, 0))?;
    (prescale_ok(f) && matches!(ctx.type_kind(t.elem), TypeKind::Float(_))).then_some(f)
}

/// Folds the scales of reduce-scatter `rs` into it when all of them qualify; how many.
fn fold(ctx: &mut Context, rs: OpId) -> u64 {
    let reduce = ctx
        .inherent_attr(rs, "reduce_op")
        .and_then(|a| ctx.attr_as_str(a));
    if !matches!(reduce, Some("sum" | "avg")) || ctx.inherent_attr(rs, "prescale").is_some() {
        return 0;
    }
    let mut scales = Vec::new();
    let mut factor = None;
    for &x in ctx.operands(rs) {
        let Some(s) = ctx
            .defining_op(x)
            .filter(|&s| ctx.op_name(s) == "compute.scale")
        else {
            return 0;
        };
        // One reader: this reduce-scatter, once (a coalesced op could take it twice).
        if ctx.uses(x).len() != 1 || scales.contains(&s) {
            return 0;
        }
        let Some(f) = foldable_factor(ctx, s) else {
            return 0;
        };
        if factor.is_some_and(|g: f64| g != f) {
            return 0;
        }
        factor = Some(f);
        scales.push(s);
    }
    if factor.is_none() {
        return 0;
    }
    for (i, &s) in scales.iter().enumerate() {
        let input = ctx.operand(s, 0);
        ctx.set_operand(rs, i, input);
    }
    let fa = ctx
        .inherent_attr(scales[0], "factor")
        .expect("checked above");
    ctx.set_attr(rs, "prescale", fa);
    for s in &scales {
        ctx.erase_op(*s);
    }
    scales.len() as u64
}
