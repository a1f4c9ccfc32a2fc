//! The `symm` dialect: symmetric-memory collectives (PyTorch's `symm_mem` ops). Their inputs
//! must live in symmetric memory of the op's group; which operand needs it is declared on the
//! op (`comm_buffer_operands`, PR #173513's argument registration), so `coll-to-comm`
//! realizes it generically.

mod fused;

use crate::coll::{check_gather_shape, group_ref};
use crate::comm::buffer_encoding;
use crate::shape::{same_modulo_encoding, ty_str, value_tensor_view};
use commlir_ir::{
    register_dialect, register_op, ArgDef, AttrConstraint, AttrDef, CommBufferKind,
    CommBufferOperand, Context, Diagnostic, OpDef, OpId, Trait, TypeConstraint, TypeKind,
};
pub use fused::{FUSED_ALL_GATHER_MATMUL, FUSED_MATMUL_REDUCE_SCATTER};

register_dialect!(pub SYMM_DIALECT = commlir_ir::opdef::DialectDef {
    name: "symm",
    summary: "Symmetric-memory collectives.",
    description: "Blocking collectives that read (and, for two-shot, write) peers' symmetric \
        memory directly; they run on the compute stream and no wait follows them. Operands \
        declared as comm-buffer operands must be `#comm.buffer<symm_mem, @group>` tensors at \
        the lowered level; at the input level they may be plain tensors, which `coll-to-comm` \
        realizes. Reductions fold contributions in rank order, exactly like `coll.all_reduce`.",
});

const T: TypeConstraint = TypeConstraint::StaticTensor;
const GROUP: AttrDef = AttrDef::required("group", AttrConstraint::SymbolRef)
    .doc("The `coll.group` the collective runs on; it must enable `symm_mem`.");
/// The reductions of `coll.all_reduce`, so that every all-reduce can take a symm path.
const REDUCE_OP: AttrDef = AttrDef::required(
    "reduce_op",
    AttrConstraint::StrEnum(&["sum", "avg", "max", "min", "product"]),
)
.doc("The reduction, folded in rank order; `sum` and `avg` are rejected on `i1`.");
const COST: AttrDef = AttrDef::optional("cost_ns", AttrConstraint::Integer)
    .doc("Overrides the cost model's runtime estimate for this op (nanoseconds).");
/// The input is read from every peer's symmetric memory.
const SYMM_INPUT: &[CommBufferOperand] = &[CommBufferOperand {
    operand: "input",
    kind: CommBufferKind::SymmMem,
    group_attr: "group",
}];
/// Out of place: reads its input (and the peers'), allocates its result.
const OUT_OF_PLACE: &[Trait] = &[
    Trait::Collective,
    Trait::MemRead,
    Trait::MemAlloc,
    Trait::Blocking,
];

register_op!(
    pub ONE_SHOT_ALL_REDUCE = OpDef {
        name: "symm.one_shot_all_reduce",
        summary: "One-shot all-reduce through symmetric memory (blocking)",
        description: "Every rank reads all peers' `input` buffers and reduces them in rank \
            order into a new tensor: one step, lowest latency for small messages. Blocking: \
            no wait follows.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[REDUCE_OP, GROUP, COST],
        traits: OUT_OF_PLACE,
        comm_buffer_operands: SYMM_INPUT,
        verify: Some(verify_one_shot),
        example: "%y = symm.one_shot_all_reduce %b {reduce_op = \"sum\", group = @tp} : (tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>) -> tensor<8x1024xbf16>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub TWO_SHOT_ALL_REDUCE = OpDef {
        name: "symm.two_shot_all_reduce",
        summary: "Two-shot all-reduce in place on symmetric memory (blocking)",
        description: "Reduce-scatter then all-gather through peer memory: rank `r` reduces \
            chunk `r` of every rank's `input` (in rank order) and stores it into chunk `r` of \
            every rank's buffer. Each rank moves `2·(G-1)/G` of the buffer instead of \
            one-shot's `G-1` times it, so it wins for larger messages. On a comm buffer it \
            runs in place: `result` is `input`'s storage (an alias, same type) and the old \
            value of `input` is gone. On a plain tensor (the input level) it has value \
            semantics like every input-level op; `coll-to-comm` realizes the input as a symm \
            buffer nobody else reads (a clone when it has other readers). Blocking: no wait \
            follows.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[REDUCE_OP, GROUP, COST],
        traits: &[Trait::Collective, Trait::MemRead, Trait::MemWrite, Trait::Blocking],
        comm_buffer_operands: SYMM_INPUT,
        verify: Some(verify_two_shot),
        example: "%y = symm.two_shot_all_reduce %b {reduce_op = \"sum\", group = @tp} : tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ALL_GATHER = OpDef {
        name: "symm.all_gather",
        summary: "All-gather along dimension 0 through symmetric memory (blocking)",
        description: "`input: d0×…` → `result: (G·d0)×…`, a new tensor: every rank copies \
            each peer's `input` into rows `[p·d0, (p+1)·d0)`, starting with its own and \
            rotating through the peers so that no two ranks read the same peer at once \
            (low contention). Blocking: no wait follows.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[GROUP, COST],
        traits: OUT_OF_PLACE,
        comm_buffer_operands: SYMM_INPUT,
        verify: Some(verify_all_gather),
        example: "%y = symm.all_gather %b {group = @tp} : (tensor<4x16xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<8x16xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub REDUCE_SCATTER = OpDef {
        name: "symm.reduce_scatter",
        summary: "Reduce-scatter along dimension 0 through symmetric memory (blocking)",
        description: "`input: (G·d0)×…` → `result: d0×…`, a new tensor: rank `r` reduces rows \
            `[r·d0, (r+1)·d0)` of every rank's `input`, in rank order. Blocking: no wait \
            follows.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[REDUCE_OP, GROUP, COST],
        traits: OUT_OF_PLACE,
        comm_buffer_operands: SYMM_INPUT,
        verify: Some(verify_reduce_scatter),
        example: "%y = symm.reduce_scatter %b {reduce_op = \"sum\", group = @tp} : (tensor<8x16xf32, #comm.buffer<symm_mem, @tp>>) -> tensor<4x16xf32>",
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

/// What every symm op checks: its group enables symmetric memory, its input is (or will be)
/// a symm_mem buffer of that group, and its reduction exists for the element type.
fn verify_common(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    if ctx.inherent_attr(g.op, "symm_mem").is_none() {
        return Err(ctx.op_error(
            op,
            format!("group @{} does not enable symmetric memory", g.name),
        ));
    }
    verify_comm_buffer_operands(ctx, op)?;
    check_i1_reduce(ctx, op)
}

/// Rejects `sum`/`avg` of `i1`: the sim adds `i1` modulo 2 (xor), which neither the
/// generated kernels nor NCCL's fallback on the `u8` bytes reproduce (1 + 1 gives 2). `max`
/// (or), `min` (and) and `product` (and) are exact on 0/1 bytes. The same rule as the
/// lowering to the runtime applies to `comm` reductions.
fn check_i1_reduce(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let reduce = ctx
        .inherent_attr(op, "reduce_op")
        .and_then(|a| ctx.attr_as_str(a));
    if !matches!(reduce, Some("sum" | "avg")) {
        return Ok(());
    }
    let is_i1 = value_tensor_view(ctx, ctx.operand(op, 0))
        .is_some_and(|t| matches!(ctx.type_kind(t.elem), TypeKind::Integer { width: 1, .. }));
    if is_i1 {
        return Err(ctx.op_error(
            op,
            format!(
                "reduce_op \"{}\" is not supported on i1 (use \"max\" for a logical or, \"min\" for a logical and)",
                reduce.unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

fn verify_one_shot(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_common(ctx, op)?;
    if !same_modulo_encoding(
        ctx,
        ctx.value_type(ctx.operand(op, 0)),
        ctx.value_type(ctx.result(op, 0)),
    ) {
        return Err(ctx.op_error(op, "result must have the input's shape and element type"));
    }
    Ok(())
}

fn verify_two_shot(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_common(ctx, op)?;
    let (x, r) = (
        ctx.value_type(ctx.operand(op, 0)),
        ctx.value_type(ctx.result(op, 0)),
    );
    // The result is the input's storage, so it has the input's type, encoding included.
    if x != r {
        return Err(ctx.op_error(
            op,
            format!(
                "result must have the input's type {} (it is the input's storage), got {}",
                ty_str(ctx, x),
                ty_str(ctx, r)
            ),
        ));
    }
    Ok(())
}

fn verify_all_gather(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_common(ctx, op)?;
    check_gather_shape(ctx, op, 0, &group_ref(ctx, op)?, true)
}

fn verify_reduce_scatter(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_common(ctx, op)?;
    check_gather_shape(ctx, op, 0, &group_ref(ctx, op)?, false)
}
