//! The `coll` dialect: functional collectives with value semantics, as PyTorch traces them
//! (`_c10d_functional`). Every collective result is an in-flight value that only
//! `coll.wait_tensor` may consume; `coll.group` names a process group.

mod all_slice;
pub(crate) mod verify;

pub use all_slice::{replicated_arg_group, ALL_SLICE, REPLICATED_ARG_ATTR};
use commlir_ir::{
    register_dialect, register_op, ArgDef, AttrConstraint, AttrDef, OpDef, Trait, TypeConstraint,
};
pub(crate) use verify::{check_gather_shape, group_ref, GroupRef};
pub use verify::{group_of, prescale_of, prescale_ok, verify_prescale, GroupInfo};

register_dialect!(pub COLL_DIALECT = commlir_ir::opdef::DialectDef {
    name: "coll",
    summary: "Functional collectives (PyTorch's `_c10d_functional`).",
    description: "Collectives with value semantics over a named group (`coll.group`). A \
        collective's result is in flight until a `coll.wait_tensor` consumes it; nothing else \
        may read it. `G` below is the size of the op's group.",
});

const T: TypeConstraint = TypeConstraint::StaticTensor;
const GROUP: AttrDef = AttrDef::required("group", AttrConstraint::SymbolRef)
    .doc("The `coll.group` the collective runs on.");
const REDUCE_OP: AttrDef = AttrDef::required(
    "reduce_op",
    AttrConstraint::StrEnum(&["sum", "avg", "max", "min", "product"]),
)
.doc("The reduction.");
const COST: AttrDef = AttrDef::optional("cost_ns", AttrConstraint::Integer)
    .doc("Overrides the cost model's runtime estimate for this op (nanoseconds).");
const COLLECTIVE: &[Trait] = &[Trait::Collective, Trait::MemRead];
/// `prescale` of a reduce-scatter (coll and comm level): [`verify::verify_prescale`].
pub const PRESCALE: AttrDef = AttrDef::optional("prescale", AttrConstraint::Float).doc(
    "Each rank's input is first multiplied by this factor and rounded to its element type, \
     as `compute.scale` does; ± a power of two (exact in every float type), with `sum` or \
     `avg` on float tensors. `coll-fold-prescale` folds a scale into its reduce-scatter \
     this way, and the GPU runs it as NCCL's pre-multiplied sum.",
);

register_op!(
    pub GROUP_OP = OpDef {
        name: "coll.group",
        summary: "A process group",
        description: "Declares a group of `size` ranks. `ranks` optionally lists the global \
            ranks (an array of i64), or a family of equal disjoint subgroups (an array of \
            arrays, each of length `size`). The unit attribute `symm_mem` enables symmetric \
            memory for the group.",
        attributes: &[
            AttrDef::required("sym_name", AttrConstraint::SymbolName),
            AttrDef::required("size", AttrConstraint::Integer).doc("Number of ranks in the group."),
            AttrDef::optional("ranks", AttrConstraint::Array).doc("Global ranks, or a family of subgroups."),
            AttrDef::optional("symm_mem", AttrConstraint::Unit).doc("Symmetric memory is enabled."),
        ],
        traits: &[Trait::Symbol],
        verify: Some(verify::verify_group),
        example: "coll.group @tp {size = 2 : i64, symm_mem}",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ALL_REDUCE = OpDef {
        name: "coll.all_reduce",
        summary: "All-reduce",
        description: "Every rank receives the reduction of all ranks' `x`.",
        operands: &[ArgDef::one("x", T)],
        results: &[ArgDef::one("r", T)],
        attributes: &[REDUCE_OP, GROUP, COST],
        traits: COLLECTIVE,
        verify: Some(verify::verify_all_reduce),
        example: "%r = coll.all_reduce %x {reduce_op = \"sum\", group = @tp} : tensor<8x1024xbf16>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ALL_REDUCE_COALESCED = OpDef {
        name: "coll.all_reduce_coalesced",
        summary: "All-reduce of several tensors at once",
        description: "`rᵢ` is the all-reduce of `xᵢ`; one launch for all.",
        operands: &[ArgDef::variadic("xs", T)],
        results: &[ArgDef::variadic("rs", T)],
        attributes: &[REDUCE_OP, GROUP, COST],
        traits: COLLECTIVE,
        verify: Some(verify::verify_all_reduce_coalesced),
        example: "%r:2 = coll.all_reduce_coalesced %a, %b {reduce_op = \"sum\", group = @tp} : (tensor<4xf32>, tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>)",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ALL_GATHER = OpDef {
        name: "coll.all_gather_into_tensor",
        summary: "All-gather along dimension 0",
        description: "`x: d0×…` → `r: (G·d0)×…`; rank `i`'s `x` lands in rows `[i·d0, (i+1)·d0)`.",
        operands: &[ArgDef::one("x", T)],
        results: &[ArgDef::one("r", T)],
        attributes: &[GROUP, COST],
        traits: COLLECTIVE,
        verify: Some(verify::verify_all_gather),
        example: "%r = coll.all_gather_into_tensor %x {group = @tp} : (tensor<4x16xf32>) -> tensor<8x16xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ALL_GATHER_COALESCED = OpDef {
        name: "coll.all_gather_into_tensor_coalesced",
        summary: "All-gather of several tensors at once",
        description: "`rᵢ` is the all-gather of `xᵢ` along dimension 0.",
        operands: &[ArgDef::variadic("xs", T)],
        results: &[ArgDef::variadic("rs", T)],
        attributes: &[GROUP, COST],
        traits: COLLECTIVE,
        verify: Some(verify::verify_all_gather_coalesced),
        example: "%r:2 = coll.all_gather_into_tensor_coalesced %a, %b {group = @tp} : (tensor<4xf32>, tensor<2xf32>) -> (tensor<8xf32>, tensor<4xf32>)",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub REDUCE_SCATTER = OpDef {
        name: "coll.reduce_scatter_tensor",
        summary: "Reduce-scatter along dimension 0",
        description: "`x: (G·d0)×…` → `r: d0×…`; rank `i` receives rows `[i·d0, (i+1)·d0)` of the reduction.",
        operands: &[ArgDef::one("x", T)],
        results: &[ArgDef::one("r", T)],
        attributes: &[REDUCE_OP, GROUP, COST, PRESCALE],
        traits: COLLECTIVE,
        verify: Some(verify::verify_reduce_scatter),
        example: "%r = coll.reduce_scatter_tensor %x {reduce_op = \"sum\", group = @tp} : (tensor<8x16xf32>) -> tensor<4x16xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub REDUCE_SCATTER_COALESCED = OpDef {
        name: "coll.reduce_scatter_tensor_coalesced",
        summary: "Reduce-scatter of several tensors at once",
        description: "`rᵢ` is the reduce-scatter of `xᵢ` along dimension 0.",
        operands: &[ArgDef::variadic("xs", T)],
        results: &[ArgDef::variadic("rs", T)],
        attributes: &[REDUCE_OP, GROUP, COST, PRESCALE],
        traits: COLLECTIVE,
        verify: Some(verify::verify_reduce_scatter_coalesced),
        example: "%r:2 = coll.reduce_scatter_tensor_coalesced %a, %b {reduce_op = \"sum\", group = @tp} : (tensor<8xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<2xf32>)",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ALL_TO_ALL = OpDef {
        name: "coll.all_to_all_single",
        summary: "All-to-all along dimension 0",
        description: "Rank `r` sends rows to every rank `j`. `input_split_sizes[r][j]` is the number \
            of rows rank `r` sends to rank `j`, `output_split_sizes[r][j]` the number rank `r` \
            receives from rank `j` (one array per rank, rank-major); they must agree \
            (`output[r][j] == input[j][r]`) and each row sums to dimension 0. Absent: equal splits.",
        operands: &[ArgDef::one("x", T)],
        results: &[ArgDef::one("r", T)],
        attributes: &[
            GROUP,
            AttrDef::optional("input_split_sizes", AttrConstraint::Array).doc("Rows sent, per rank and peer."),
            AttrDef::optional("output_split_sizes", AttrConstraint::Array).doc("Rows received, per rank and peer."),
            COST,
        ],
        traits: COLLECTIVE,
        verify: Some(verify::verify_all_to_all),
        example: "%r = coll.all_to_all_single %x {group = @tp} : tensor<8x16xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub BROADCAST = OpDef {
        name: "coll.broadcast",
        summary: "Broadcast from one rank",
        description: "Every rank receives rank `src`'s `x` (`src` is a rank within the group).",
        operands: &[ArgDef::one("x", T)],
        results: &[ArgDef::one("r", T)],
        attributes: &[AttrDef::required("src", AttrConstraint::Integer).doc("The source rank, in the group."), GROUP, COST],
        traits: COLLECTIVE,
        verify: Some(verify::verify_broadcast),
        example: "%r = coll.broadcast %x {src = 0 : i64, group = @tp} : tensor<8x16xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub SHARD_DIM_ALLTOALL = OpDef {
        name: "coll.shard_dim_alltoall",
        summary: "Reshard from one dimension to another (blocking)",
        description: "DTensor's resharding all-to-all: the input is sharded on `gather_dim` and the \
            result on `shard_dim`: `r[gather_dim] = G·x[gather_dim]`, `r[shard_dim] = x[shard_dim]/G` \
            (unchanged when the two are equal). Blocking, like DTensor's: its result is an \
            ordinary tensor and needs no wait.",
        operands: &[ArgDef::one("x", T)],
        results: &[ArgDef::one("r", T)],
        attributes: &[
            AttrDef::required("gather_dim", AttrConstraint::Integer),
            AttrDef::required("shard_dim", AttrConstraint::Integer),
            GROUP,
            COST,
        ],
        traits: &[Trait::Collective, Trait::MemRead, Trait::Blocking],
        verify: Some(verify::verify_shard_dim_alltoall),
        example: "%r = coll.shard_dim_alltoall %x {gather_dim = 0 : i64, shard_dim = 1 : i64, group = @tp} : (tensor<4x16xf32>) -> tensor<8x8xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub WAIT_TENSOR = OpDef {
        name: "coll.wait_tensor",
        summary: "Completes an in-flight collective",
        description: "Its operand must be a result of a non-blocking `coll` collective; its result \
            is that tensor, ready (an alias: no new buffer).",
        operands: &[ArgDef::one("r", T)],
        results: &[ArgDef::one("y", T)],
        attributes: &[COST],
        traits: &[Trait::Wait],
        verify: Some(verify::verify_wait),
        example: "%y = coll.wait_tensor %r : tensor<8x1024xbf16>",
        ..OpDef::EMPTY
    }
);
