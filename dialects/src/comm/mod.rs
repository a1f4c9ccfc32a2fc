//! The `comm` dialect: buffer-level communication, what `coll-to-comm` lowers to.
//!
//! - A *comm buffer* is a tensor whose type carries the encoding `#comm.buffer<KIND, @group>`
//!   (KIND is `nccl` for a registered user buffer, `symm_mem` for symmetric memory), like
//!   Inductor's `CommBufferLayout`: its storage must come from the (kind, group) pool.
//! - Collectives are *start* ops taking buffers and returning a `!comm.work` handle (XLA's
//!   start/done pairs); in-place ones (`all_reduce`, `broadcast`) mutate their buffer,
//!   out-of-place ones write a destination buffer made by `comm.alloc` (destination-passing).
//! - `comm.wait` completes a work handle and yields its buffers again as new SSA values: they
//!   alias the buffers (no new memory), and readers of the collective's result read them.
//! - After `comm-plan-pools`, `comm.pool` / `comm.pool_release` bracket the function and every
//!   comm-buffer producer carries its `comm.slot` in the pool (see [`pool`]).

mod encoding;
pub mod pool;
mod verify;

pub use encoding::{
    buffer_encoding, buffer_encoding_ref, buffer_type, is_comm_buffer, is_work_type,
    kind_str as encoding_kind_str, work_type, BufferEncoding, BufferEncodingRef,
};
pub use pool::{
    is_pool_type, pool_info, pool_type, set_slot, slot_of, PoolInfo, PoolSlot, POOL, POOL_RELEASE,
    SLOT_ATTR,
};

use commlir_ir::{
    register_dialect, register_op, ArgDef, AttrConstraint, AttrDef, OpDef, Trait, TypeConstraint,
};

register_dialect!(pub COMM_DIALECT = commlir_ir::opdef::DialectDef {
    name: "comm",
    summary: "Buffer-level communication: comm buffers, start ops and waits.",
    description: "Comm buffers are tensors typed `tensor<…, #comm.buffer<KIND, @group>>` (KIND is \
        `nccl` or `symm_mem`), whose storage comes from a persistent per-(kind, group) pool. \
        Collectives start on buffers and return a `!comm.work` handle; `comm.wait` completes it \
        and yields the buffers again (aliases, no new memory). In-place collectives \
        (`all_reduce`, `broadcast`) mutate their buffer; out-of-place ones write a destination \
        made by `comm.alloc`.",
});

const T: TypeConstraint = TypeConstraint::StaticTensor;
const ANY: TypeConstraint = TypeConstraint::Any;
const GROUP: AttrDef =
    AttrDef::required("group", AttrConstraint::SymbolRef).doc("The `coll.group`.");
const REDUCE_OP: AttrDef = AttrDef::required(
    "reduce_op",
    AttrConstraint::StrEnum(&["sum", "avg", "max", "min", "product"]),
)
.doc("The reduction.");
const COST: AttrDef = AttrDef::optional("cost_ns", AttrConstraint::Integer)
    .doc("Overrides the cost model's runtime estimate for this op (nanoseconds).");
const IN_PLACE: &[Trait] = &[Trait::Collective, Trait::MemRead, Trait::MemWrite];
const OUT_OF_PLACE: &[Trait] = &[Trait::Collective, Trait::MemRead, Trait::MemWrite];

register_op!(
    pub ALLOC = OpDef {
        name: "comm.alloc",
        summary: "A new comm buffer",
        description: "Allocates an uninitialized comm buffer (a destination for an out-of-place \
            collective). The result type must carry a `#comm.buffer` encoding.",
        results: &[ArgDef::one("buffer", T)],
        attributes: &[COST],
        traits: &[Trait::MemAlloc],
        verify: Some(verify::verify_alloc),
        example: "%o = comm.alloc : tensor<16x1024xbf16, #comm.buffer<nccl, @tp>>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ALL_REDUCE = OpDef {
        name: "comm.all_reduce",
        summary: "Start an in-place all-reduce",
        description: "Reduces `buffer` across the group, in place; complete with `comm.wait`.",
        operands: &[ArgDef::one("buffer", T)],
        results: &[ArgDef::one("work", ANY)],
        attributes: &[REDUCE_OP, GROUP, COST],
        traits: IN_PLACE,
        verify: Some(verify::verify_all_reduce),
        example: "%w = comm.all_reduce %b {reduce_op = \"sum\", group = @tp} : (tensor<8x1024xbf16, #comm.buffer<nccl, @tp>>) -> !comm.work",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ALL_REDUCE_COALESCED = OpDef {
        name: "comm.all_reduce_coalesced",
        summary: "Start an in-place all-reduce of several buffers",
        description: "One launch reducing every buffer in place.",
        operands: &[ArgDef::variadic("buffers", T)],
        results: &[ArgDef::one("work", ANY)],
        attributes: &[REDUCE_OP, GROUP, COST],
        traits: IN_PLACE,
        verify: Some(verify::verify_all_reduce),
        example: "%w = comm.all_reduce_coalesced %a, %b {reduce_op = \"sum\", group = @tp} : (tensor<4xf32, #comm.buffer<nccl, @tp>>, tensor<8xf32, #comm.buffer<nccl, @tp>>) -> !comm.work",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ALL_GATHER = OpDef {
        name: "comm.all_gather",
        summary: "Start an all-gather into a destination",
        description: "Operands are the inputs then as many destinations (dim 0 multiplied by G). \
            One pair: a plain all-gather; several: the coalesced form.",
        operands: &[ArgDef::variadic("inputs_then_outputs", T)],
        results: &[ArgDef::one("work", ANY)],
        attributes: &[GROUP, COST],
        traits: OUT_OF_PLACE,
        verify: Some(verify::verify_all_gather),
        example: "%w = comm.all_gather %x, %o {group = @tp} : (tensor<4x16xf32, #comm.buffer<nccl, @tp>>, tensor<8x16xf32, #comm.buffer<nccl, @tp>>) -> !comm.work",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub REDUCE_SCATTER = OpDef {
        name: "comm.reduce_scatter",
        summary: "Start a reduce-scatter into a destination",
        description: "Operands are the inputs then as many destinations (dim 0 divided by G). \
            Several pairs: the coalesced form.",
        operands: &[ArgDef::variadic("inputs_then_outputs", T)],
        results: &[ArgDef::one("work", ANY)],
        attributes: &[REDUCE_OP, GROUP, COST, crate::coll::PRESCALE],
        traits: OUT_OF_PLACE,
        verify: Some(verify::verify_reduce_scatter),
        example: "%w = comm.reduce_scatter %x, %o {reduce_op = \"sum\", group = @tp} : (tensor<8x16xf32, #comm.buffer<nccl, @tp>>, tensor<4x16xf32, #comm.buffer<nccl, @tp>>) -> !comm.work",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ALL_TO_ALL = OpDef {
        name: "comm.all_to_all",
        summary: "Start an all-to-all into a destination",
        description: "Same split attributes as `coll.all_to_all_single`.",
        operands: &[ArgDef::one("input", T), ArgDef::one("output", T)],
        results: &[ArgDef::one("work", ANY)],
        attributes: &[
            GROUP,
            AttrDef::optional("input_split_sizes", AttrConstraint::Array),
            AttrDef::optional("output_split_sizes", AttrConstraint::Array),
            COST,
        ],
        traits: OUT_OF_PLACE,
        verify: Some(verify::verify_all_to_all),
        example: "%w = comm.all_to_all %x, %o {group = @tp} : (tensor<8x16xf32, #comm.buffer<nccl, @tp>>, tensor<8x16xf32, #comm.buffer<nccl, @tp>>) -> !comm.work",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub BROADCAST = OpDef {
        name: "comm.broadcast",
        summary: "Start an in-place broadcast",
        description: "Overwrites `buffer` with rank `src`'s buffer.",
        operands: &[ArgDef::one("buffer", T)],
        results: &[ArgDef::one("work", ANY)],
        attributes: &[AttrDef::required("src", AttrConstraint::Integer), GROUP, COST],
        traits: IN_PLACE,
        verify: Some(verify::verify_broadcast),
        example: "%w = comm.broadcast %b {src = 0 : i64, group = @tp} : (tensor<8x16xf32, #comm.buffer<nccl, @tp>>) -> !comm.work",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub SHARD_DIM_ALLTOALL = OpDef {
        name: "comm.shard_dim_alltoall",
        summary: "Blocking resharding all-to-all into a destination",
        description: "Like `coll.shard_dim_alltoall`; blocking; the result is the destination \
            (an alias), ready.",
        operands: &[ArgDef::one("input", T), ArgDef::one("output", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[
            AttrDef::required("gather_dim", AttrConstraint::Integer),
            AttrDef::required("shard_dim", AttrConstraint::Integer),
            GROUP,
            COST,
        ],
        traits: &[Trait::Collective, Trait::MemRead, Trait::MemWrite, Trait::Blocking],
        verify: Some(verify::verify_shard_dim_alltoall),
        example: "%r = comm.shard_dim_alltoall %x, %o {gather_dim = 0 : i64, shard_dim = 1 : i64, group = @tp} : (tensor<4x16xf32, #comm.buffer<nccl, @tp>>, tensor<8x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<8x8xf32, #comm.buffer<nccl, @tp>>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub WAIT = OpDef {
        name: "comm.wait",
        summary: "Complete a started collective",
        description: "Takes the work handle and the buffers the collective writes; yields those \
            buffers, now complete (aliases: no new memory).",
        operands: &[ArgDef::one("work", ANY), ArgDef::variadic("buffers", T)],
        results: &[ArgDef::variadic("results", T)],
        attributes: &[COST],
        traits: &[Trait::Wait],
        verify: Some(verify::verify_wait),
        example: "%y = comm.wait %w, %b : (!comm.work, tensor<8x1024xbf16, #comm.buffer<nccl, @tp>>) -> tensor<8x1024xbf16, #comm.buffer<nccl, @tp>>",
        ..OpDef::EMPTY
    }
);
