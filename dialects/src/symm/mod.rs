//! The `symm` dialect: symmetric-memory collectives (PyTorch's `symm_mem` ops). Their inputs
//! must live in symmetric memory of the op's group; which operand needs it is declared on the
//! op (`comm_buffer_operands`, PR #173513's argument registration), so `coll-to-comm`
//! realizes it generically.

use crate::coll::group_of;
use crate::comm::buffer_encoding;
use crate::shape::{same_modulo_encoding, ty_str};
use commlir_ir::{
    register_dialect, register_op, ArgDef, AttrConstraint, AttrDef, CommBufferKind,
    CommBufferOperand, Context, Diagnostic, OpDef, OpId, Trait, TypeConstraint,
};

register_dialect!(pub SYMM_DIALECT = commlir_ir::opdef::DialectDef {
    name: "symm",
    summary: "Symmetric-memory collectives.",
    description: "Blocking collectives that read peers' symmetric memory directly. Operands \
        declared as comm-buffer operands must be `#comm.buffer<symm_mem, @group>` tensors.",
});

const T: TypeConstraint = TypeConstraint::StaticTensor;
const REDUCE_OPS: &[&str] = &["sum", "avg", "max", "min", "product"];
const REDUCE: AttrDef = AttrDef::required("reduce_op", AttrConstraint::StrEnum(REDUCE_OPS))
    .doc("The reduction, as on `coll.all_reduce`; folded in rank order.");
const GROUP: AttrDef = AttrDef::required("group", AttrConstraint::SymbolRef);
const INPUT_SYMM: &[CommBufferOperand] = &[CommBufferOperand {
    operand: "input",
    kind: CommBufferKind::SymmMem,
    group_attr: "group",
}];
const COST: AttrDef = AttrDef::optional("cost_ns", AttrConstraint::Integer)
    .doc("Overrides the cost model's runtime estimate for this op (nanoseconds).");

register_op!(
    pub ONE_SHOT_ALL_REDUCE = OpDef {
        name: "symm.one_shot_all_reduce",
        summary: "One-shot all-reduce through symmetric memory (blocking)",
        description: "Every rank reads all peers' `input` buffers and reduces locally into a new \
            tensor: one step, lowest latency for small messages. Blocking: no wait follows.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[
            REDUCE,
            GROUP,
            COST,
        ],
        traits: &[Trait::Collective, Trait::MemRead, Trait::MemAlloc, Trait::Blocking],
        comm_buffer_operands: &[CommBufferOperand { operand: "input", kind: CommBufferKind::SymmMem, group_attr: "group" }],
        verify: Some(verify_one_shot),
        example: "%y = symm.one_shot_all_reduce %b {reduce_op = \"sum\", group = @tp} : (tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8x1024xbf16>",
        ..OpDef::EMPTY
    }
);

/// Checks the declared comm-buffer operands of any op: each is either a plain tensor (which
/// `coll-to-comm` will realize as a comm buffer) or already a comm buffer of the declared kind
/// and of the group named by the declared attribute.
pub fn verify_comm_buffer_operands(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let Some(def) = ctx.op_def(op) else {
        return Ok(());
    };
    for cb in def.comm_buffer_operands {
        let Some(idx) = def.operands.iter().position(|a| a.name == cb.operand) else {
            continue;
        };
        let Some(&v) = ctx.operands(op).get(idx) else {
            continue;
        };
        let group = ctx
            .inherent_attr(op, cb.group_attr)
            .and_then(|a| ctx.attr_as_symbol(a))
            .unwrap_or("");
        let t = ctx.value_type(v);
        match buffer_encoding(ctx, t) {
            None => {}
            Some(enc) if enc.kind == cb.kind && enc.group == group => {}
            Some(_) => {
                return Err(ctx.op_error(
                    op,
                    format!(
                        "operand '{}' must be a #comm.buffer<{}, @{group}> tensor, got {}",
                        cb.operand,
                        crate::comm::encoding_kind_str(cb.kind),
                        ty_str(ctx, t)
                    ),
                ));
            }
        }
    }
    Ok(())
}

register_op!(
    pub TWO_SHOT_ALL_REDUCE = OpDef {
        name: "symm.two_shot_all_reduce",
        summary: "Two-shot all-reduce through symmetric memory (blocking, in place)",
        description: "Reduce-scatter then all-gather through peer memory: rank r reduces chunk \
            r of every rank's `input` and stores it into chunk r of every rank's buffer. In \
            place once lowered: the result is the input's storage. Blocking: no wait follows.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[REDUCE, GROUP, COST],
        traits: &[Trait::Collective, Trait::MemRead, Trait::MemWrite, Trait::Blocking],
        comm_buffer_operands: INPUT_SYMM,
        verify: Some(verify_one_shot),
        example: "%y = symm.two_shot_all_reduce %b {reduce_op = \"sum\", group = @tp} : (tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ALL_GATHER = OpDef {
        name: "symm.all_gather",
        summary: "Low-contention all-gather through symmetric memory (blocking)",
        description: "Every rank copies each peer's `input` (d0×…) into block p of a new \
            (G·d0)×… tensor, visiting the peers in rotated order so that no rank is read by \
            all the others at once. Blocking: no wait follows.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[GROUP, COST],
        traits: &[Trait::Collective, Trait::MemRead, Trait::MemAlloc, Trait::Blocking],
        comm_buffer_operands: INPUT_SYMM,
        verify: Some(|ctx, op| verify_dim0(ctx, op, true)),
        example: "%y = symm.all_gather %b {group = @tp} : (tensor<4x1024xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8x1024xbf16>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub REDUCE_SCATTER = OpDef {
        name: "symm.reduce_scatter",
        summary: "Low-contention reduce-scatter through symmetric memory (blocking)",
        description: "Rank r reduces block r of every rank's (G·d0)×… `input`, in rank order, \
            into a new d0×… tensor. Blocking: no wait follows.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[REDUCE, GROUP, COST],
        traits: &[Trait::Collective, Trait::MemRead, Trait::MemAlloc, Trait::Blocking],
        comm_buffer_operands: INPUT_SYMM,
        verify: Some(|ctx, op| verify_dim0(ctx, op, false)),
        example: "%y = symm.reduce_scatter %b {reduce_op = \"sum\", group = @tp} : (tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<4x1024xbf16>",
        ..OpDef::EMPTY
    }
);

/// All-gather (`gather`) or reduce-scatter: the result's dim 0 is G times the input's, or
/// the input's G times the result's; every other dim and the element type are the same.
fn verify_dim0(ctx: &Context, op: OpId, gather: bool) -> Result<(), Diagnostic> {
    let g = group_of(ctx, op)?;
    if !g.symm_mem {
        return Err(ctx.op_error(
            op,
            format!("group @{} does not enable symmetric memory", g.name),
        ));
    }
    verify_comm_buffer_operands(ctx, op)?;
    let x = crate::shape::value_tensor(ctx, ctx.operand(op, 0));
    let r = crate::shape::value_tensor(ctx, ctx.result(op, 0));
    let (Some(x), Some(r)) = (x, r) else {
        return Ok(());
    };
    let (small, big) = if gather { (&x, &r) } else { (&r, &x) };
    let ok = x.elem == r.elem
        && !small.shape.is_empty()
        && small.shape.len() == big.shape.len()
        && small.shape[1..] == big.shape[1..]
        && small.shape[0].checked_mul(g.size) == Some(big.shape[0]);
    if !ok {
        return Err(ctx.op_error(
            op,
            format!(
                "{} dim 0 must be {} times the {}'s (group @{} has size {}), other dims and the \
                 element type equal",
                if gather { "result" } else { "input" },
                g.size,
                if gather { "input" } else { "result" },
                g.name,
                g.size
            ),
        ));
    }
    Ok(())
}

fn verify_one_shot(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_of(ctx, op)?;
    if !g.symm_mem {
        return Err(ctx.op_error(
            op,
            format!("group @{} does not enable symmetric memory", g.name),
        ));
    }
    verify_comm_buffer_operands(ctx, op)?;
    if !same_modulo_encoding(
        ctx,
        ctx.value_type(ctx.operand(op, 0)),
        ctx.value_type(ctx.result(op, 0)),
    ) {
        return Err(ctx.op_error(op, "result must have the input's shape and element type"));
    }
    Ok(())
}
