//! The `symm` dialect: symmetric-memory collectives (PyTorch's `symm_mem` ops). Their inputs
//! must live in symmetric memory of the op's group; which operand needs it is declared on the
//! op (`comm_buffer_operands`, PR #173513's argument registration), so `coll-to-comm`
//! realizes it generically.

mod fused;

use crate::coll::group_of;
use crate::comm::buffer_encoding;
use crate::shape::{same_modulo_encoding, ty_str};
use commlir_ir::{
    register_dialect, register_op, ArgDef, AttrConstraint, AttrDef, CommBufferKind,
    CommBufferOperand, Context, Diagnostic, OpDef, OpId, Trait, TypeConstraint,
};
pub use fused::{FUSED_ALL_GATHER_MATMUL, FUSED_MATMUL_REDUCE_SCATTER};

register_dialect!(pub SYMM_DIALECT = commlir_ir::opdef::DialectDef {
    name: "symm",
    summary: "Symmetric-memory collectives.",
    description: "Blocking collectives that read peers' symmetric memory directly. Operands \
        declared as comm-buffer operands must be `#comm.buffer<symm_mem, @group>` tensors.",
});

const T: TypeConstraint = TypeConstraint::StaticTensor;
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
            AttrDef::required("reduce_op", AttrConstraint::StrEnum(&["sum"])).doc("Only \"sum\"."),
            AttrDef::required("group", AttrConstraint::SymbolRef),
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
