//! Fused collective-matmul ops: the all-gather or reduce-scatter of a tensor-parallel layer
//! pipelined with its matmul, chunk by chunk (PyTorch's `fused_all_gather_matmul` and
//! `fused_matmul_reduce_scatter`, async tensor parallelism). Their value is exactly that of
//! the unfused sequence; only the schedule inside the op differs, which is what lets
//! `coll-fuse-matmul` rewrite a program without changing a single bit of its results.

use super::verify_comm_buffer_operands;
use crate::coll::group_of;
use crate::compute::fmt_shape;
use crate::shape::{int_attr, value_tensor_view};
use commlir_ir::{
    register_op, ArgDef, AttrConstraint, AttrDef, CommBufferKind, CommBufferOperand, Context,
    Diagnostic, OpDef, OpId, Trait, TypeConstraint,
};

const T: TypeConstraint = TypeConstraint::StaticTensor;
const GROUP: AttrDef = AttrDef::required("group", AttrConstraint::SymbolRef)
    .doc("The `coll.group` (with `symm_mem`) the op communicates on.");
const COST: AttrDef = AttrDef::optional("cost_ns", AttrConstraint::Integer)
    .doc("Overrides the cost model's runtime estimate for this op (nanoseconds).");
/// Blocking collectives that allocate their results; the fused matmul reads its operands.
const TRAITS: &[Trait] = &[
    Trait::Collective,
    Trait::MemRead,
    Trait::MemAlloc,
    Trait::Blocking,
];

register_op!(
    pub FUSED_ALL_GATHER_MATMUL = OpDef {
        name: "symm.fused_all_gather_matmul",
        summary: "All-gather of `a` pipelined with its matmuls (blocking)",
        description: "Gathers the shards `a` of every rank along `gather_dim` (rank order) and \
            multiplies the gathered tensor by each `bᵢ` (K×Nᵢ; `a`'s last dimension is K and is \
            never the gathered one). The gather runs in chunks while the matmuls consume the \
            chunks already present, starting with the local shard. With the unit attribute \
            `return_a` the first result is the gathered `a` (for its other users); the others \
            are `gathered(a)·bᵢ`, bit-identical to `coll.all_gather_into_tensor`, \
            `coll.wait_tensor` and `compute.matmul`.",
        operands: &[ArgDef::one("a", T), ArgDef::variadic("bs", T)],
        results: &[ArgDef::variadic("results", T)],
        attributes: &[
            GROUP,
            AttrDef::optional("gather_dim", AttrConstraint::Integer)
                .doc("The dimension of `a` gathered across ranks (default 0)."),
            AttrDef::optional("return_a", AttrConstraint::Unit)
                .doc("The first result is the gathered `a`."),
            COST,
        ],
        traits: TRAITS,
        comm_buffer_operands: &[CommBufferOperand { operand: "a", kind: CommBufferKind::SymmMem, group_attr: "group" }],
        verify: Some(verify_all_gather_matmul),
        example: "%ag, %y = symm.fused_all_gather_matmul %a, %b {group = @tp, return_a} : (tensor<4x64xbf16>, tensor<64x256xbf16>) -> (tensor<8x64xbf16>, tensor<8x256xbf16>)",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub FUSED_MATMUL_REDUCE_SCATTER = OpDef {
        name: "symm.fused_matmul_reduce_scatter",
        summary: "Matmul pipelined with the reduce-scatter of its result (blocking)",
        description: "Computes `a·b` (`b` is K×N) chunk by chunk along `scatter_dim`, sending each \
            chunk to the rank that owns it while the next is computed; rank `r` receives chunk \
            `r` reduced over all ranks in rank order. Bit-identical to `compute.matmul`, \
            `coll.reduce_scatter_tensor` and `coll.wait_tensor` (for `scatter_dim` 0).",
        operands: &[ArgDef::one("a", T), ArgDef::one("b", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[
            AttrDef::required("reduce_op", AttrConstraint::StrEnum(&["sum", "avg"]))
                .doc("The reduction: \"sum\" or \"avg\"."),
            AttrDef::optional("scatter_dim", AttrConstraint::Integer)
                .doc("The dimension of `a·b` scattered across ranks (default 0)."),
            GROUP,
            COST,
        ],
        traits: TRAITS,
        verify: Some(verify_matmul_reduce_scatter),
        example: "%y = symm.fused_matmul_reduce_scatter %a, %b {reduce_op = \"sum\", scatter_dim = 0 : i64, group = @tp} : (tensor<8x256xbf16>, tensor<256x64xbf16>) -> tensor<4x64xbf16>",
        ..OpDef::EMPTY
    }
);

/// The value of an optional dimension attribute (default 0), checked against a tensor rank.
fn dim_attr(ctx: &Context, op: OpId, name: &str, limit: usize) -> Result<usize, Diagnostic> {
    let d = int_attr(ctx, op, name).unwrap_or(0);
    usize::try_from(d)
        .ok()
        .filter(|d| *d < limit)
        .ok_or_else(|| {
            ctx.op_error(
                op,
                format!("{name} must be in [0, {limit}) (a dimension other than the contraction dimension), got {d}"),
            )
        })
}

/// Checks that `b` (operand `i`) is a K×N matrix of `a`'s element type and returns N.
fn check_b(
    ctx: &Context,
    op: OpId,
    i: usize,
    k: i64,
    elem: commlir_ir::Type,
) -> Result<i64, Diagnostic> {
    let b = value_tensor_view(ctx, ctx.operand(op, i))
        .ok_or_else(|| ctx.op_error(op, "expects tensor operands"))?;
    if b.elem != elem {
        return Err(ctx.op_error(
            op,
            format!("operand #{i} must have the element type of 'a'"),
        ));
    }
    match b.shape {
        [k2, n] if *k2 == k => Ok(*n),
        [k2, _] => Err(ctx.op_error(
            op,
            format!("contraction dims differ: 'a' has {k}, operand #{i} has {k2}"),
        )),
        s => Err(ctx.op_error(
            op,
            format!("operand #{i} must be a matrix (K×N), got {}", fmt_shape(s)),
        )),
    }
}

/// Checks result `i` against the expected shape and element type.
fn check_result(
    ctx: &Context,
    op: OpId,
    i: usize,
    want: &[i64],
    elem: commlir_ir::Type,
) -> Result<(), Diagnostic> {
    let r = value_tensor_view(ctx, ctx.result(op, i))
        .ok_or_else(|| ctx.op_error(op, "expects tensor results"))?;
    if r.shape != want || r.elem != elem {
        return Err(ctx.op_error(
            op,
            format!(
                "result #{i} must have shape {} and the element type of 'a', got {}",
                fmt_shape(want),
                fmt_shape(r.shape)
            ),
        ));
    }
    Ok(())
}

fn symm_group(ctx: &Context, op: OpId) -> Result<i64, Diagnostic> {
    let g = group_of(ctx, op)?;
    if !g.symm_mem {
        return Err(ctx.op_error(
            op,
            format!("group @{} does not enable symmetric memory", g.name),
        ));
    }
    Ok(g.size)
}

fn verify_all_gather_matmul(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let size = symm_group(ctx, op)?;
    verify_comm_buffer_operands(ctx, op)?;
    let a = value_tensor_view(ctx, ctx.operand(op, 0))
        .ok_or_else(|| ctx.op_error(op, "expects tensor operands"))?;
    if a.shape.len() < 2 {
        return Err(ctx.op_error(op, "operand 'a' must have rank at least 2"));
    }
    let dim = dim_attr(ctx, op, "gather_dim", a.shape.len() - 1)?;
    let nb = ctx.operands(op).len() - 1;
    if nb == 0 {
        return Err(ctx.op_error(op, "expects at least one 'b' operand"));
    }
    let return_a = ctx.inherent_attr(op, "return_a").is_some();
    let want_results = nb + usize::from(return_a);
    if ctx.results(op).len() != want_results {
        return Err(ctx.op_error(
            op,
            format!(
                "expects {want_results} results ({}one per 'b'), got {}",
                if return_a {
                    "the gathered 'a', then "
                } else {
                    ""
                },
                ctx.results(op).len()
            ),
        ));
    }
    let mut gathered = a.shape.to_vec();
    gathered[dim] *= size;
    let k = gathered[gathered.len() - 1];
    if return_a {
        check_result(ctx, op, 0, &gathered, a.elem)?;
    }
    for i in 0..nb {
        let n = check_b(ctx, op, i + 1, k, a.elem)?;
        let mut want = gathered.clone();
        *want.last_mut().expect("rank >= 2") = n;
        check_result(ctx, op, i + usize::from(return_a), &want, a.elem)?;
    }
    Ok(())
}

fn verify_matmul_reduce_scatter(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let size = symm_group(ctx, op)?;
    let a = value_tensor_view(ctx, ctx.operand(op, 0))
        .ok_or_else(|| ctx.op_error(op, "expects tensor operands"))?;
    if a.shape.len() < 2 {
        return Err(ctx.op_error(op, "operand 'a' must have rank at least 2"));
    }
    let dim = dim_attr(ctx, op, "scatter_dim", a.shape.len() - 1)?;
    let k = a.shape[a.shape.len() - 1];
    let n = check_b(ctx, op, 1, k, a.elem)?;
    let mut want = a.shape.to_vec();
    *want.last_mut().expect("rank >= 2") = n;
    if size < 1 || want[dim] % size != 0 {
        return Err(ctx.op_error(
            op,
            format!(
                "dim {dim} of the product ({}) must be divisible by the group size ({size})",
                want[dim]
            ),
        ));
    }
    want[dim] /= size;
    check_result(ctx, op, 0, &want, a.elem)
}
