//! The `rt` dialect: explicit runtime calls, what `comm-to-rt` (in `commlir-codegen`) lowers
//! planned comm-level IR to, and what the host program and the NVPTX kernels are generated from.
//!
//! Values are device buffers typed `memref<SHAPE x ELEM>` (row-major, contiguous), pools
//! (`!rt.pool`) and events (`!rt.event`). Every op is one call of the runtime's C ABI
//! (`codegen/include/commlir_rt.h`), in program order, on one of two streams: *compute*
//! (allocation, kernels, GEMMs, symmetric-memory collectives, frees) and *comm* (NCCL
//! collectives). The only cross-stream ordering is what `rt.event_record` / `rt.stream_wait`
//! state, so the lowering makes every dependency between the streams explicit.
//!
//! Kernels are `rt.kernel` symbols whose region holds the `compute` ops they evaluate, on
//! tensors (element values, not buffers): a fused elementwise chain is several ops in one
//! kernel. `rt.launch` binds buffers to the kernel's arguments and its one result.

pub mod abi;
mod fused;
pub use fused::{accumulate_parts, ACCUMULATE_MIN_PART_ELEMS};

use crate::shape::{elem_bytes, ty_str};
use commlir_ir::{
    register_dialect, register_op, ArgDef, AttrConstraint, AttrDef, Context, Diagnostic, OpDef,
    OpId, Trait, Type, TypeConstraint, TypeKind, Value,
};

register_dialect!(pub RT_DIALECT = commlir_ir::opdef::DialectDef {
    name: "rt",
    summary: "Runtime calls: buffers, pools, kernel launches, cuBLAS GEMMs, NCCL collectives, events.",
    description: "The last level before LLVM. Buffers are `memref` values (row-major, \
        contiguous device memory); `!rt.pool` is one persistent comm-buffer allocation; \
        `!rt.event` a recorded stream event. Each op is one call of the runtime C ABI \
        (`codegen/include/commlir_rt.h`, see docs/codegen.md) on the *compute* stream, except \
        the `rt.nccl_*` collectives, which run on the *comm* stream. Cross-stream order is only \
        what `rt.event_record` / `rt.stream_wait` state. Collectives address their buffers as \
        (base, byte offset), the base being the pool (registered and symmetric buffers are \
        found by the pool they belong to) or, for staging buffers, a plain buffer.",
});

const ANY: TypeConstraint = TypeConstraint::Any;
const GROUP: AttrDef = AttrDef::required("group", AttrConstraint::SymbolRef)
    .doc("The `coll.group` the collective runs on.");
const DTYPES: &[&str] = &[
    "i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16",
];
const DTYPE: AttrDef = AttrDef::required("dtype", AttrConstraint::StrEnum(DTYPES))
    .doc("Element type of the transferred data (NCCL's `ncclDataType_t`).");
const REDUCE_OP: AttrDef = AttrDef::required(
    "reduce_op",
    AttrConstraint::StrEnum(&["sum", "product", "max", "min", "avg"]),
)
.doc("The reduction (NCCL's `ncclRedOp_t`).");
const STREAM: AttrDef =
    AttrDef::required("stream", AttrConstraint::StrEnum(&["compute", "comm"])).doc("The stream.");
const COMM: &[Trait] = &[Trait::Collective, Trait::MemRead, Trait::MemWrite];

/// The `!rt.pool` type.
pub fn pool_type(ctx: &mut Context) -> Type {
    dialect_type(ctx, "rt.pool")
}

/// The `!rt.event` type.
pub fn event_type(ctx: &mut Context) -> Type {
    dialect_type(ctx, "rt.event")
}

fn dialect_type(ctx: &mut Context, text: &str) -> Type {
    let dialect = ctx.ident("rt");
    ctx.ty(TypeKind::Dialect {
        dialect,
        text: text.into(),
    })
}

fn is_dialect_type(ctx: &Context, t: Type, text: &str) -> bool {
    matches!(ctx.type_kind(t), TypeKind::Dialect { text: x, .. } if x == text)
}

/// Shape and element type of a statically shaped `memref`.
pub fn memref_info(ctx: &Context, t: Type) -> Option<(Vec<i64>, Type)> {
    match ctx.type_kind(t) {
        TypeKind::MemRef {
            shape, elem, rest, ..
        } if rest.is_none() && shape.iter().all(|d| *d >= 0) => Some((shape.clone(), *elem)),
        _ => None,
    }
}

fn expect_memref(ctx: &Context, op: OpId, v: Value, what: &str) -> Result<(), Diagnostic> {
    if memref_info(ctx, ctx.value_type(v)).is_none() {
        return Err(ctx.op_error(
            op,
            format!(
                "{what} must be a statically shaped memref without layout, got {}",
                ty_str(ctx, ctx.value_type(v))
            ),
        ));
    }
    Ok(())
}

fn expect_type(
    ctx: &Context,
    op: OpId,
    v: Value,
    text: &str,
    what: &str,
) -> Result<(), Diagnostic> {
    if !is_dialect_type(ctx, ctx.value_type(v), text) {
        return Err(ctx.op_error(
            op,
            format!(
                "{what} must be !{text}, got {}",
                ty_str(ctx, ctx.value_type(v))
            ),
        ));
    }
    Ok(())
}

fn int(ctx: &Context, op: OpId, name: &str) -> Option<i64> {
    ctx.inherent_attr(op, name).and_then(|a| ctx.attr_as_i64(a))
}

fn nonneg(ctx: &Context, op: OpId, names: &[&str]) -> Result<(), Diagnostic> {
    for n in names {
        if int(ctx, op, n).is_some_and(|v| v < 0) {
            return Err(ctx.op_error(op, format!("'{n}' must be non-negative")));
        }
    }
    Ok(())
}

/// `world` of a symm or fused kernel: a group the descriptor can address.
fn verify_world(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let w = int(ctx, op, "world").unwrap_or(0);
    if !(1..=abi::SYMM_MAX_PEERS as i64).contains(&w) {
        return Err(ctx.op_error(
            op,
            format!("'world' must be in [1, {}]", abi::SYMM_MAX_PEERS),
        ));
    }
    Ok(())
}

/// `grid` and `block` of a symm or fused op's kernel launches.
fn verify_launch_shape(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let grid = int(ctx, op, "grid").unwrap_or(0);
    if !(1..=abi::SYMM_MAX_BLOCKS as i64).contains(&grid) {
        return Err(ctx.op_error(
            op,
            format!("'grid' must be in [1, {}]", abi::SYMM_MAX_BLOCKS),
        ));
    }
    let block = int(ctx, op, "block").unwrap_or(0);
    if !(32..=1024).contains(&block) {
        return Err(ctx.op_error(op, "'block' must be in [32, 1024]"));
    }
    Ok(())
}

register_op!(
    pub KERNEL = OpDef {
        name: "rt.kernel",
        summary: "A device kernel, defined by the compute ops it evaluates",
        description: "Module-level symbol. Its single block's arguments are the kernel's \
            inputs (tensors: element values) and `rt.yield` names its result; the body is one \
            `compute` op, or a chain of elementwise ones (a fused kernel, whose intermediate \
            results never reach memory). The code generator turns it into one NVPTX entry of \
            the same name, taking one global pointer per argument and one for the result.",
        attributes: &[AttrDef::required("sym_name", AttrConstraint::SymbolName)],
        regions: Some(1),
        // `verify_kernel` reads which op ends the body.
        traits: &[
            Trait::IsolatedFromAbove,
            Trait::Symbol,
            Trait::SingleBlock,
            Trait::OrderSensitiveVerifier,
        ],
        verify: Some(verify_kernel),
        example: "rt.kernel @k0 ({\n^bb0(%a: tensor<8x16xbf16>):\n  %0 = compute.gelu %a : tensor<8x16xbf16>\n  rt.yield %0 : tensor<8x16xbf16>\n})",
        ..OpDef::EMPTY
    }
);

fn verify_kernel(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let r = ctx.op_regions(op)[0];
    let Some(&b) = ctx.region_blocks(r).first() else {
        return Err(ctx.op_error(op, "requires a body"));
    };
    match ctx.block_last(b) {
        Some(t) if ctx.op_name(t) == "rt.yield" => Ok(()),
        _ => Err(ctx.op_error(op, "body must end with 'rt.yield'")),
    }
}

register_op!(
    pub YIELD = OpDef {
        name: "rt.yield",
        summary: "The result of an `rt.kernel`",
        description: "Names the one value the kernel stores to its result buffer.",
        operands: &[ArgDef::one("value", TypeConstraint::StaticTensor)],
        traits: &[Trait::Pure, Trait::Terminator, Trait::HasParent("rt.kernel")],
        example: "rt.yield %0 : tensor<8x16xbf16>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ALLOC = OpDef {
        name: "rt.alloc",
        summary: "Allocate a device buffer (compute stream)",
        description: "Stream-ordered allocation (`cudaMallocAsync` semantics) of the result \
            type's bytes; freed by `rt.free`, or handed to the caller when returned.",
        results: &[ArgDef::one("buffer", ANY)],
        traits: &[Trait::MemAlloc],
        verify: Some(verify_alloc),
        example: "%b = rt.alloc : memref<8x16xbf16>",
        ..OpDef::EMPTY
    }
);

fn verify_alloc(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    expect_memref(ctx, op, ctx.result(op, 0), "result")
}

register_op!(
    pub FREE = OpDef {
        name: "rt.free",
        summary: "Free a buffer of `rt.alloc` (compute stream)",
        description: "Stream-ordered free after every earlier compute-stream use.",
        operands: &[ArgDef::one("buffer", ANY)],
        traits: &[Trait::MemWrite],
        verify: Some(|ctx, op| expect_memref(ctx, op, ctx.operand(op, 0), "operand")),
        example: "rt.free %b : memref<8x16xbf16>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub POOL_ALLOC = OpDef {
        name: "rt.pool_alloc",
        summary: "Allocate a comm-buffer pool and register it with the group",
        description: "One allocation of `size` bytes for the comm buffers of (`kind`, `group`): \
            `ncclMemAlloc` + `ncclCommRegister` on the group's communicator for `nccl`, a \
            symmetric allocation (every rank of the group, same size) for `symm_mem`. \
            Collective over the group: every rank calls it in the same order with the same \
            size.",
        results: &[ArgDef::one("pool", ANY)],
        attributes: &[
            AttrDef::required("kind", AttrConstraint::StrEnum(&["nccl", "symm_mem"])),
            GROUP,
            AttrDef::required("size", AttrConstraint::Integer).doc("Bytes."),
            AttrDef::required("alignment", AttrConstraint::Integer).doc("Slot alignment (bytes)."),
        ],
        traits: &[Trait::MemAlloc, Trait::Collective],
        verify: Some(|ctx, op| {
            nonneg(ctx, op, &["size", "alignment"])?;
            expect_type(ctx, op, ctx.result(op, 0), "rt.pool", "result")
        }),
        example: "%p = rt.pool_alloc {alignment = 64 : i64, group = @tp, kind = \"nccl\", size = 16384 : i64} : !rt.pool",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub POOL_FREE = OpDef {
        name: "rt.pool_free",
        summary: "Deregister and free a pool",
        description: "Placed after the compute stream has waited for the comm stream's last \
            work, so no collective still uses the pool.",
        operands: &[ArgDef::one("pool", ANY)],
        traits: &[Trait::MemWrite],
        verify: Some(|ctx, op| expect_type(ctx, op, ctx.operand(op, 0), "rt.pool", "operand")),
        example: "rt.pool_free %p : !rt.pool",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub POOL_VIEW = OpDef {
        name: "rt.pool_view",
        summary: "The buffer at a byte offset of a pool",
        description: "No call: the host computes `base + offset`. Used where a compute op \
            writes or reads a comm buffer.",
        operands: &[ArgDef::one("pool", ANY)],
        results: &[ArgDef::one("buffer", ANY)],
        attributes: &[AttrDef::required("offset", AttrConstraint::Integer).doc("Bytes.")],
        traits: &[Trait::Pure],
        verify: Some(|ctx, op| {
            nonneg(ctx, op, &["offset"])?;
            expect_type(ctx, op, ctx.operand(op, 0), "rt.pool", "operand")?;
            expect_memref(ctx, op, ctx.result(op, 0), "result")
        }),
        example: "%b = rt.pool_view %p {offset = 256 : i64} : (!rt.pool) -> memref<8x16xbf16>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub VIEW = OpDef {
        name: "rt.view",
        summary: "The same buffer with another shape",
        description: "No call: the host reuses the address. A row-major reshape moves no \
            element, so `comm-to-rt` lowers one whose input the function allocated to this \
            view rather than a copy; the allocation is freed after the last reader of the \
            buffer or any of its views.",
        operands: &[ArgDef::one("buffer", ANY)],
        results: &[ArgDef::one("view", ANY)],
        traits: &[Trait::Pure],
        verify: Some(verify_view),
        example: "%v = rt.view %b : (memref<8x16xbf16>) -> memref<128xbf16>",
        ..OpDef::EMPTY
    }
);

fn verify_view(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    expect_memref(ctx, op, ctx.operand(op, 0), "operand")?;
    expect_memref(ctx, op, ctx.result(op, 0), "result")?;
    let bytes = |v| {
        memref_info(ctx, ctx.value_type(v))
            .map(|(shape, elem)| shape.iter().product::<i64>() * elem_bytes(ctx, elem) as i64)
    };
    if bytes(ctx.operand(op, 0)) != bytes(ctx.result(op, 0)) {
        return Err(ctx.op_error(op, "requires a result of the operand's size in bytes"));
    }
    Ok(())
}

register_op!(
    pub RANK_VIEW = OpDef {
        name: "rt.rank_view",
        summary: "The block of a buffer that belongs to this rank of a group",
        description: "No call but `group_rank`: the host computes `buffer + rank · stride`, with \
            `rank` this process's rank in `group`. `coll.all_slice` lowers to a copy out of \
            it (after packing the sliced dimension chunk-major when it is not dim 0).",
        operands: &[ArgDef::one("buffer", ANY)],
        results: &[ArgDef::one("view", ANY)],
        attributes: &[
            AttrDef::required("stride", AttrConstraint::Integer).doc("Bytes between ranks' blocks."),
            GROUP,
        ],
        traits: &[Trait::Pure],
        verify: Some(|ctx, op| {
            nonneg(ctx, op, &["stride"])?;
            expect_memref(ctx, op, ctx.operand(op, 0), "operand")?;
            expect_memref(ctx, op, ctx.result(op, 0), "result")
        }),
        example: "%v = rt.rank_view %b {group = @tp, stride = 4096 : i64} : (memref<16x128xbf16>) -> memref<8x128xbf16>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub LAUNCH = OpDef {
        name: "rt.launch",
        summary: "Launch an `rt.kernel` (compute stream)",
        description: "Operands: one buffer per kernel argument, then the result buffer. \
            `grid` blocks of `block` threads; every kernel loops grid-stride, so any grid is \
            correct and the grid only sets the parallelism.",
        operands: &[ArgDef::variadic("buffers", ANY)],
        attributes: &[
            AttrDef::required("kernel", AttrConstraint::SymbolRef),
            AttrDef::required("grid", AttrConstraint::Integer),
            AttrDef::required("block", AttrConstraint::Integer),
        ],
        // `verify_launch` reads the result type from the op ending the kernel's body.
        traits: &[Trait::MemRead, Trait::MemWrite, Trait::OrderSensitiveVerifier],
        verify: Some(verify_launch),
        example: "rt.launch %a, %b {block = 256 : i64, grid = 1 : i64, kernel = @k0} : memref<8x16xbf16>",
        ..OpDef::EMPTY
    }
);

fn verify_launch(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    for &v in ctx.operands(op) {
        expect_memref(ctx, op, v, "every operand")?;
    }
    for n in ["grid", "block"] {
        if !int(ctx, op, n).is_some_and(|v| (1..=i64::from(u32::MAX)).contains(&v)) {
            return Err(ctx.op_error(op, format!("'{n}' must be in [1, 2^32)")));
        }
    }
    let name = ctx
        .inherent_attr(op, "kernel")
        .and_then(|a| ctx.attr_as_symbol(a))
        .unwrap_or("");
    let Some(k) = ctx
        .lookup_symbol(op, name)
        .filter(|k| ctx.op_name(*k) == "rt.kernel")
    else {
        return Err(ctx.op_error(op, format!("'@{name}' is not an rt.kernel")));
    };
    let Some(&body) = ctx.region_blocks(ctx.op_regions(k)[0]).first() else {
        return Ok(());
    };
    let mut want: Vec<Type> = ctx
        .block_args(body)
        .iter()
        .map(|v| ctx.value_type(*v))
        .collect();
    if let Some(y) = ctx
        .block_last(body)
        .filter(|y| ctx.op_name(*y) == "rt.yield")
    {
        want.extend(ctx.operands(y).iter().map(|v| ctx.value_type(*v)));
    }
    if want.len() != ctx.operands(op).len() {
        return Err(ctx.op_error(
            op,
            format!(
                "kernel @{name} takes {} buffers (arguments then result), got {}",
                want.len(),
                ctx.operands(op).len()
            ),
        ));
    }
    for (i, (&v, &t)) in ctx.operands(op).iter().zip(&want).enumerate() {
        let got = memref_info(ctx, ctx.value_type(v));
        let expect = match ctx.type_kind(t) {
            TypeKind::Tensor { shape, elem, .. } => Some((shape.clone(), *elem)),
            _ => None,
        };
        if got != expect {
            return Err(ctx.op_error(
                op,
                format!(
                    "buffer #{i} ({}) does not match kernel @{name}'s {}",
                    ty_str(ctx, ctx.value_type(v)),
                    ty_str(ctx, t)
                ),
            ));
        }
    }
    Ok(())
}

register_op!(
    pub GEMM = OpDef {
        name: "rt.gemm",
        summary: "A cuBLAS GEMM (compute stream)",
        description: "`C = op(A)·op(B)` in cuBLAS's column-major convention, strided-batched: \
            the attributes are exactly `cublasGemmStridedBatchedEx`'s (`transa`/`transb`: 0 = \
            N, 1 = T; alpha 1, beta 0, or 1 with `accumulate`; f32 accumulation). A row-major product `X·Y` is \
            lowered as the column-major `Yᵀ·Xᵀ`, so operand `a` is the row-major right factor.",
        operands: &[ArgDef::one("a", ANY), ArgDef::one("b", ANY), ArgDef::one("c", ANY)],
        attributes: &[
            AttrDef::required("transa", AttrConstraint::Integer),
            AttrDef::required("transb", AttrConstraint::Integer),
            AttrDef::required("m", AttrConstraint::Integer),
            AttrDef::required("n", AttrConstraint::Integer),
            AttrDef::required("k", AttrConstraint::Integer),
            AttrDef::required("lda", AttrConstraint::Integer),
            AttrDef::required("ldb", AttrConstraint::Integer),
            AttrDef::required("ldc", AttrConstraint::Integer),
            AttrDef::required("stride_a", AttrConstraint::Integer).doc("Elements between batches."),
            AttrDef::required("stride_b", AttrConstraint::Integer),
            AttrDef::required("stride_c", AttrConstraint::Integer),
            AttrDef::required("batch", AttrConstraint::Integer),
            DTYPE,
            AttrDef::optional("out_dtype", AttrConstraint::StrEnum(&["f32", "f64"]))
                .doc("Element type of `c` when it differs from `dtype` (f16/bf16 products kept in f32)."),
            AttrDef::optional("offset_a", AttrConstraint::Integer).doc("Bytes into `a` where the matrices start."),
            AttrDef::optional("offset_b", AttrConstraint::Integer).doc("Bytes into `b`."),
            AttrDef::optional("offset_c", AttrConstraint::Integer).doc("Bytes into `c`."),
            AttrDef::optional("accumulate", AttrConstraint::Unit)
                .doc("Adds the product onto `c` (beta 1) instead of overwriting it."),
        ],
        traits: &[Trait::MemRead, Trait::MemWrite],
        verify: Some(|ctx, op| {
            for &v in ctx.operands(op) {
                expect_memref(ctx, op, v, "every operand")?;
            }
            nonneg(ctx, op, &["m", "n", "k", "lda", "ldb", "ldc", "stride_a", "stride_b", "stride_c", "batch", "offset_a", "offset_b", "offset_c"])
        }),
        example: "rt.gemm %w, %x, %y {batch = 1 : i64, dtype = \"bf16\", k = 16 : i64, lda = 4 : i64, ldb = 16 : i64, ldc = 4 : i64, m = 4 : i64, n = 8 : i64, stride_a = 0 : i64, stride_b = 0 : i64, stride_c = 0 : i64, transa = 0 : i64, transb = 0 : i64} : (memref<16x4xbf16>, memref<8x16xbf16>, memref<8x4xbf16>) -> ()",
        ..OpDef::EMPTY
    }
);

/// The sizes every attention call carries (`commlir_rt.h`'s `attention`).
const ATTENTION_SIZES: &[&str] = &[
    "batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim", "v_dim",
];

/// The attributes of `rt.attention` and `rt.attention_backward`: the call's sizes, its dtype,
/// the scale and the causal mask.
const ATTENTION_ATTRS: &[AttrDef] = &[
    AttrDef::required("batch", AttrConstraint::Integer),
    AttrDef::required("heads", AttrConstraint::Integer),
    AttrDef::required("kv_heads", AttrConstraint::Integer),
    AttrDef::required("q_len", AttrConstraint::Integer),
    AttrDef::required("kv_len", AttrConstraint::Integer),
    AttrDef::required("head_dim", AttrConstraint::Integer),
    AttrDef::required("v_dim", AttrConstraint::Integer),
    DTYPE,
    AttrDef::required("scale", AttrConstraint::Float),
    AttrDef::optional("causal", AttrConstraint::Unit),
];

/// Shared checks of `rt.attention` and `rt.attention_backward`: memref operands, positive
/// sizes, query heads a multiple of the key/value heads, an f16/bf16 dtype, and every buffer
/// holding exactly the elements its role needs (`expected` in operand order).
fn verify_attention_call(
    ctx: &Context,
    op: OpId,
    roles: &[(&str, [&str; 4])],
) -> Result<(), Diagnostic> {
    for &v in ctx.operands(op) {
        expect_memref(ctx, op, v, "every operand")?;
    }
    let mut size = std::collections::HashMap::new();
    for n in ATTENTION_SIZES {
        let v = ctx
            .inherent_attr(op, n)
            .and_then(|a| ctx.attr_as_i64(a))
            .unwrap_or(0);
        if v <= 0 {
            return Err(ctx.op_error(op, format!("requires a positive '{n}'")));
        }
        size.insert(*n, v);
    }
    if size["heads"] % size["kv_heads"] != 0 {
        return Err(ctx.op_error(
            op,
            format!(
                "{} heads are not a multiple of {} kv_heads",
                size["heads"], size["kv_heads"]
            ),
        ));
    }
    let dtype = ctx
        .inherent_attr(op, "dtype")
        .and_then(|a| ctx.attr_as_str(a))
        .unwrap_or("");
    if !matches!(dtype, "f16" | "bf16") {
        return Err(ctx.op_error(op, "runs through cuDNN: dtype must be f16 or bf16"));
    }
    for (i, (role, dims)) in roles.iter().enumerate() {
        let Some(&v) = ctx.operands(op).get(i) else {
            break;
        };
        let want: i64 = dims
            .iter()
            .map(|d| if d.is_empty() { 1 } else { size[d] })
            .product();
        let got = memref_info(ctx, ctx.value_type(v))
            .map(|(shape, _)| shape.iter().product::<i64>())
            .unwrap_or(-1);
        if got != want {
            return Err(ctx.op_error(op, format!("{role} holds {got} elements, expected {want}")));
        }
    }
    Ok(())
}

register_op!(
    pub ATTENTION = OpDef {
        name: "rt.attention",
        summary: "Fused attention through cuDNN (compute stream)",
        description: "`compute.attention` of f16/bf16 tensors as one call of cuDNN's fused flash \
            attention (`commlir_rt.h`'s `attention`, the graph of `runtime/src/cuda/cudnn.rs`): \
            `q: batch×heads×q_len×head_dim`, `k: batch×kv_heads×kv_len×head_dim`, \
            `v: batch×kv_heads×kv_len×v_dim` → `out: batch×heads×q_len×v_dim`, contiguous, \
            query head `h` reading key/value head `h / (heads / kv_heads)`; with `lse`, the \
            rows' log-sum-exp (f32, `batch×heads×q_len`) is written too. Scores and \
            probabilities never reach memory.",
        operands: &[
            ArgDef::one("q", ANY),
            ArgDef::one("k", ANY),
            ArgDef::one("v", ANY),
            ArgDef::one("out", ANY),
            ArgDef::optional("lse", ANY),
        ],
        attributes: ATTENTION_ATTRS,
        traits: &[Trait::MemRead, Trait::MemWrite],
        verify: Some(|ctx, op| {
            verify_attention_call(
                ctx,
                op,
                &[
                    ("q", ["batch", "heads", "q_len", "head_dim"]),
                    ("k", ["batch", "kv_heads", "kv_len", "head_dim"]),
                    ("v", ["batch", "kv_heads", "kv_len", "v_dim"]),
                    ("out", ["batch", "heads", "q_len", "v_dim"]),
                    ("lse", ["batch", "heads", "q_len", ""]),
                ],
            )
        }),
        example: "rt.attention %q, %k, %v, %o, %lse {batch = 1 : i64, causal, dtype = \"bf16\", head_dim = 64 : i64, heads = 4 : i64, kv_heads = 2 : i64, kv_len = 128 : i64, q_len = 128 : i64, scale = 0.125 : f64, v_dim = 64 : i64} : (memref<1x4x128x64xbf16>, memref<1x2x128x64xbf16>, memref<1x2x128x64xbf16>, memref<1x4x128x64xbf16>, memref<1x4x128xf32>) -> ()",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ATTENTION_BACKWARD = OpDef {
        name: "rt.attention_backward",
        summary: "Fused attention gradients through cuDNN (compute stream)",
        description: "`compute.attention_backward` of f16/bf16 tensors as one call of cuDNN's \
            fused flash-attention backward (`commlir_rt.h`'s `attention_backward`): from `q, \
            k, v`, the forward's `out`, its gradient `dout` and the forward's `lse`, the \
            gradients `dq, dk, dv` (shaped as `q, k, v`; `dk` and `dv` summed over the query \
            heads that share a key/value head). The sizes and layout are `rt.attention`'s; \
            the probabilities are recomputed from `lse`, never stored.",
        operands: &[
            ArgDef::one("q", ANY),
            ArgDef::one("k", ANY),
            ArgDef::one("v", ANY),
            ArgDef::one("out", ANY),
            ArgDef::one("dout", ANY),
            ArgDef::one("lse", ANY),
            ArgDef::one("dq", ANY),
            ArgDef::one("dk", ANY),
            ArgDef::one("dv", ANY),
        ],
        attributes: ATTENTION_ATTRS,
        traits: &[Trait::MemRead, Trait::MemWrite],
        verify: Some(|ctx, op| {
            verify_attention_call(
                ctx,
                op,
                &[
                    ("q", ["batch", "heads", "q_len", "head_dim"]),
                    ("k", ["batch", "kv_heads", "kv_len", "head_dim"]),
                    ("v", ["batch", "kv_heads", "kv_len", "v_dim"]),
                    ("out", ["batch", "heads", "q_len", "v_dim"]),
                    ("dout", ["batch", "heads", "q_len", "v_dim"]),
                    ("lse", ["batch", "heads", "q_len", ""]),
                    ("dq", ["batch", "heads", "q_len", "head_dim"]),
                    ("dk", ["batch", "kv_heads", "kv_len", "head_dim"]),
                    ("dv", ["batch", "kv_heads", "kv_len", "v_dim"]),
                ],
            )
        }),
        example: "rt.attention_backward %q, %k, %v, %o, %do, %lse, %dq, %dk, %dv {batch = 1 : i64, dtype = \"bf16\", head_dim = 64 : i64, heads = 2 : i64, kv_heads = 2 : i64, kv_len = 64 : i64, q_len = 64 : i64, scale = 0.125 : f64, v_dim = 64 : i64} : (memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>, memref<1x2x64xf32>, memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>) -> ()",
        ..OpDef::EMPTY
    }
);

/// [`verify_pools`]; a `prescale` as the comm level allows it (a power of two, sum or avg,
/// a float dtype).
fn verify_reduce_scatter(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_pools(ctx, op)?;
    let Some(f) = ctx
        .inherent_attr(op, "prescale")
        .and_then(|a| ctx.attr_as_f64(a))
    else {
        return Ok(());
    };
    let pow2 = crate::coll::prescale_ok(f);
    let str_attr = |n: &str| ctx.inherent_attr(op, n).and_then(|a| ctx.attr_as_str(a));
    let float = matches!(str_attr("dtype"), Some("f16" | "bf16" | "f32" | "f64"));
    if !pow2 || !matches!(str_attr("reduce_op"), Some("sum" | "avg")) || !float {
        return Err(ctx.op_error(
            op,
            format!("'prescale' must be ± a power of two from 2^-14 to 2^15 on a float sum or avg, got {f:?}"),
        ));
    }
    Ok(())
}

/// [`verify_pools`]; a pushing all-gather receives into a pool (the one its peers map).
fn verify_all_gather(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_pools(ctx, op)?;
    let recv = ctx.value_type(ctx.operand(op, 1));
    if ctx.inherent_attr(op, "push_kernel").is_some() && !is_dialect_type(ctx, recv, "rt.pool") {
        return Err(ctx.op_error(
            op,
            format!(
                "'push_kernel' needs a !rt.pool to receive into, got {}",
                ty_str(ctx, recv)
            ),
        ));
    }
    Ok(())
}

fn verify_pools(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    // A base is a pool, or a plain buffer (staging buffers of `comm.shard_dim_alltoall`).
    for &v in ctx.operands(op) {
        let t = ctx.value_type(v);
        if !is_dialect_type(ctx, t, "rt.pool") && memref_info(ctx, t).is_none() {
            return Err(ctx.op_error(
                op,
                format!(
                    "every operand must be !rt.pool or a memref, got {}",
                    ty_str(ctx, t)
                ),
            ));
        }
    }
    nonneg(
        ctx,
        op,
        &[
            "offset",
            "send_offset",
            "recv_offset",
            "count",
            "send_count",
            "recv_count",
            "row_elems",
        ],
    )
}

register_op!(
    pub NCCL_ALL_REDUCE = OpDef {
        name: "rt.nccl_all_reduce",
        summary: "In-place `ncclAllReduce` (comm stream)",
        description: "Reduces `count` elements at `offset` of the pool across the group, in place.",
        operands: &[ArgDef::one("pool", ANY)],
        attributes: &[
            AttrDef::required("offset", AttrConstraint::Integer),
            AttrDef::required("count", AttrConstraint::Integer),
            DTYPE,
            REDUCE_OP,
            GROUP,
        ],
        traits: COMM,
        verify: Some(verify_pools),
        example: "rt.nccl_all_reduce %p {count = 128 : i64, dtype = \"bf16\", group = @tp, offset = 0 : i64, reduce_op = \"sum\"} : !rt.pool",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub NCCL_ALL_GATHER = OpDef {
        name: "rt.nccl_all_gather",
        summary: "`ncclAllGather`, or copy-engine pushes into peer-mapped pools (comm stream)",
        description: "`send_count` elements at `send_offset` of the first pool from every rank, \
            concatenated in rank order at `recv_offset` of the second. With `push_kernel`, \
            when the receiving pool is peer-mapped (`symm_pool_desc` non-null), no NCCL call \
            and no SM moves the data: a copy engine copies the own block, step G + 1 of the \
            kernel is a barrier (every rank's comm stream reached the collective), and per \
            peer rank (rank + s) mod G a copy engine writes this rank's block into that \
            peer's receive buffer (`symm_peer_put`) before step G + 1 + s signals it there \
            and waits for rank (rank − s) mod G's. Otherwise `ncclAllGather`.",
        operands: &[ArgDef::one("send_pool", ANY), ArgDef::one("recv_pool", ANY)],
        attributes: &[
            AttrDef::required("send_offset", AttrConstraint::Integer),
            AttrDef::required("recv_offset", AttrConstraint::Integer),
            AttrDef::required("send_count", AttrConstraint::Integer),
            DTYPE,
            GROUP,
            AttrDef::optional("push_kernel", AttrConstraint::SymbolRef).doc(
                "The `rt.symm_fused_kernel` (kind `all_gather_matmul`, the group's size) \
                 whose signal steps order the pushes.",
            ),
        ],
        traits: COMM,
        verify: Some(verify_all_gather),
        example: "rt.nccl_all_gather %p, %p {dtype = \"f32\", group = @tp, recv_offset = 256 : i64, send_count = 32 : i64, send_offset = 0 : i64} : (!rt.pool, !rt.pool) -> ()",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub NCCL_REDUCE_SCATTER = OpDef {
        name: "rt.nccl_reduce_scatter",
        summary: "`ncclReduceScatter` (comm stream)",
        description: "Reduces G·`recv_count` elements at `send_offset`; this rank's block of \
            `recv_count` lands at `recv_offset`.",
        operands: &[ArgDef::one("send_pool", ANY), ArgDef::one("recv_pool", ANY)],
        attributes: &[
            AttrDef::required("send_offset", AttrConstraint::Integer),
            AttrDef::required("recv_offset", AttrConstraint::Integer),
            AttrDef::required("recv_count", AttrConstraint::Integer),
            DTYPE,
            REDUCE_OP,
            GROUP,
            AttrDef::optional("prescale", AttrConstraint::Float).doc(
                "NCCL's pre-multiplied sum: each input × `prescale` (avg: ÷ G too), ± a power \
                 of two, so that it equals scaling, rounding and reducing.",
            ),
        ],
        traits: COMM,
        verify: Some(verify_reduce_scatter),
        example: "rt.nccl_reduce_scatter %p, %p {dtype = \"f32\", group = @tp, recv_count = 32 : i64, recv_offset = 256 : i64, reduce_op = \"sum\", send_offset = 0 : i64} : (!rt.pool, !rt.pool) -> ()",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub NCCL_ALL_TO_ALL = OpDef {
        name: "rt.nccl_all_to_all",
        summary: "All-to-all through grouped `ncclSend`/`ncclRecv` (comm stream)",
        description: "`count` elements at `send_offset` are split along dim 0 (rows of \
            `row_elems` elements) and exchanged; with the optional split matrices (dim-0 rows, \
            one row per rank, rank-major, as on `coll.all_to_all_single`) the blocks are uneven, \
            else G equal blocks.",
        operands: &[ArgDef::one("send_pool", ANY), ArgDef::one("recv_pool", ANY)],
        attributes: &[
            AttrDef::required("send_offset", AttrConstraint::Integer),
            AttrDef::required("recv_offset", AttrConstraint::Integer),
            AttrDef::required("count", AttrConstraint::Integer),
            AttrDef::required("row_elems", AttrConstraint::Integer),
            AttrDef::optional("input_split_sizes", AttrConstraint::Array),
            AttrDef::optional("output_split_sizes", AttrConstraint::Array),
            DTYPE,
            GROUP,
        ],
        traits: COMM,
        verify: Some(verify_pools),
        example: "rt.nccl_all_to_all %p, %p {count = 64 : i64, dtype = \"f32\", group = @tp, recv_offset = 256 : i64, row_elems = 8 : i64, send_offset = 0 : i64} : (!rt.pool, !rt.pool) -> ()",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub NCCL_BROADCAST = OpDef {
        name: "rt.nccl_broadcast",
        summary: "In-place `ncclBroadcast` (comm stream)",
        description: "Overwrites `count` elements at `offset` with rank `root`'s (rank in the group).",
        operands: &[ArgDef::one("pool", ANY)],
        attributes: &[
            AttrDef::required("offset", AttrConstraint::Integer),
            AttrDef::required("count", AttrConstraint::Integer),
            AttrDef::required("root", AttrConstraint::Integer),
            DTYPE,
            GROUP,
        ],
        traits: COMM,
        verify: Some(verify_pools),
        example: "rt.nccl_broadcast %p {count = 128 : i64, dtype = \"f32\", group = @tp, offset = 0 : i64, root = 0 : i64} : !rt.pool",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub NCCL_GROUP_START = OpDef {
        name: "rt.nccl_group_start",
        summary: "`ncclGroupStart`",
        description: "The collectives up to `rt.nccl_group_end` form one launch (coalesced forms).",
        traits: &[Trait::Collective],
        example: "rt.nccl_group_start",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub NCCL_GROUP_END = OpDef {
        name: "rt.nccl_group_end",
        summary: "`ncclGroupEnd`",
        description: "Closes an `rt.nccl_group_start`.",
        traits: &[Trait::Collective],
        example: "rt.nccl_group_end",
        ..OpDef::EMPTY
    }
);

const SYMM_COLL: AttrDef = AttrDef::required(
    "coll",
    AttrConstraint::StrEnum(&[
        "one_shot_all_reduce",
        "two_shot_all_reduce",
        "all_gather",
        "reduce_scatter",
    ]),
)
.doc("The collective (`symm_fallback`'s `coll` code, `abi::SYMM_COLLS`).");
const SYMM_COUNT: AttrDef = AttrDef::required("count", AttrConstraint::Integer).doc(
    "Elements: of the input (all-reduces), sent per rank (all-gather) or received per rank \
     (reduce-scatter).",
);
const SYMM_REDUCE_OP: AttrDef = AttrDef::optional(
    "reduce_op",
    AttrConstraint::StrEnum(&["sum", "product", "max", "min", "avg"]),
)
.doc("The reduction; required except on `all_gather`.");

/// `reduce_op` is present exactly when the collective reduces.
fn verify_symm_reduce(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let coll = ctx
        .inherent_attr(op, "coll")
        .and_then(|a| ctx.attr_as_str(a))
        .unwrap_or("");
    let has = ctx.inherent_attr(op, "reduce_op").is_some();
    if (coll == "all_gather") == has {
        return Err(ctx.op_error(
            op,
            "'reduce_op' is required by the reducing collectives and absent from all_gather",
        ));
    }
    nonneg(ctx, op, &["count"])
}

const SYMM_EPILOGUE: AttrDef = AttrDef::optional("epilogue", AttrConstraint::SymbolRef).doc(
    "The fused elementwise epilogue of a one-shot all-reduce: the `rt.kernel` of the chain \
     that reads the reduced value (also launched on its own by the NCCL fallback).",
);
const SYMM_EPILOGUE_OPERAND: AttrDef =
    AttrDef::optional("epilogue_operand", AttrConstraint::Integer)
        .doc("Which argument of the `epilogue` kernel is the reduced value (required with it).");

/// `epilogue` and `epilogue_operand` come together (`epilogue_operand` non-negative); returns
/// whether they are there.
fn verify_epilogue_pair(ctx: &Context, op: OpId) -> Result<bool, Diagnostic> {
    let has = ctx.inherent_attr(op, "epilogue").is_some();
    if has != ctx.inherent_attr(op, "epilogue_operand").is_some() {
        return Err(ctx.op_error(
            op,
            "'epilogue' and 'epilogue_operand' must be given together",
        ));
    }
    nonneg(ctx, op, &["epilogue_operand"])?;
    Ok(has)
}

/// The NCCL fallback's launch of a call's `epilogue` kernel.
const EPILOGUE_GRID: AttrDef = AttrDef::optional("epilogue_grid", AttrConstraint::Integer)
    .doc("The fallback's launch of `epilogue` (required with it).");
const EPILOGUE_BLOCK: AttrDef = AttrDef::optional("epilogue_block", AttrConstraint::Integer)
    .doc("The fallback's launch of `epilogue` (required with it).");

/// A call that applies an `epilogue` chain, whose other inputs are its operands from
/// `first_extra` on: extra operands only with an `epilogue`, which needs the fallback's launch
/// (`epilogue_grid`, `epilogue_block`) and an `epilogue_operand` among the chain's inputs.
fn verify_epilogue_call(ctx: &Context, op: OpId, first_extra: usize) -> Result<(), Diagnostic> {
    let extras = ctx.operands(op).len().saturating_sub(first_extra);
    if ctx.inherent_attr(op, "epilogue").is_none() {
        if extras > 0 {
            return Err(ctx.op_error(op, "epilogue operands without an 'epilogue'"));
        }
        return Ok(());
    }
    let has = |n| ctx.inherent_attr(op, n).is_some();
    if !has("epilogue_grid") || !has("epilogue_block") {
        return Err(ctx.op_error(
            op,
            "an 'epilogue' requires 'epilogue_grid' and 'epilogue_block'",
        ));
    }
    if int(ctx, op, "epilogue_operand").unwrap_or(-1) > extras as i64 {
        return Err(ctx.op_error(
            op,
            "'epilogue_operand' is past the epilogue kernel's inputs",
        ));
    }
    Ok(())
}

/// `epilogue` and `epilogue_operand` come together, on a one-shot all-reduce only.
fn verify_symm_epilogue(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    if !verify_epilogue_pair(ctx, op)? {
        return Ok(());
    }
    let coll = ctx
        .inherent_attr(op, "coll")
        .and_then(|a| ctx.attr_as_str(a))
        .unwrap_or("");
    if coll != "one_shot_all_reduce" {
        return Err(ctx.op_error(op, "an 'epilogue' is only fused into a one_shot_all_reduce"));
    }
    Ok(())
}

register_op!(
    pub SYMM_KERNEL = OpDef {
        name: "rt.symm_kernel",
        summary: "A generated symmetric-memory collective kernel",
        description: "Module-level symbol, compiled like an `rt.kernel` into one NVPTX entry \
            (same kernel table): a collective over peer-mapped `symm_mem` pools, specialized on \
            its element count, dtype, reduction and group size `world`. Its parameters are the \
            ABI's `(const commlir_symm_desc *desc, uint64_t in_offset, void *out, uint32_t \
            site)`; it synchronizes with its peers through the pools' signal pads (see \
            docs/codegen.md).",
        attributes: &[
            AttrDef::required("sym_name", AttrConstraint::SymbolName),
            SYMM_COLL,
            SYMM_COUNT,
            DTYPE,
            SYMM_REDUCE_OP,
            AttrDef::required("world", AttrConstraint::Integer).doc("The group size G (2 to 8)."),
            SYMM_EPILOGUE,
            SYMM_EPILOGUE_OPERAND,
        ],
        traits: &[Trait::Symbol],
        verify: Some(|ctx, op| {
            verify_symm_reduce(ctx, op)?;
            verify_symm_epilogue(ctx, op)?;
            verify_world(ctx, op)
        }),
        example: "rt.symm_kernel @s0_one_shot_all_reduce {coll = \"one_shot_all_reduce\", count = 16 : i64, dtype = \"f32\", reduce_op = \"sum\", world = 2 : i64}",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub SYMM_COLLECTIVE = OpDef {
        name: "rt.symm_collective",
        summary: "A symmetric-memory collective (compute stream, blocking)",
        description: "The input is at `offset` of a `symm_mem` pool, `out` the local result \
            (for the in-place two-shot all-reduce, the input's own slot). The host program asks \
            the runtime for the pool's peer descriptor (`symm_pool_desc`): when the peers are \
            mapped it launches `kernel` (an `rt.symm_kernel`) with `grid` blocks of `block` \
            threads, else it calls `symm_fallback` (NCCL on the compute stream). Either way it \
            runs on the compute stream, so no event is needed. With an `epilogue` (a one-shot \
            all-reduce fused with the elementwise chain that reads its result), `out` is the \
            chain's result and `extras` the chain's other inputs: the fused kernel takes them \
            as parameters after the four of the ABI, and the fallback reduces into a \
            temporary buffer, then launches the `epilogue` kernel with the temporary as its \
            argument `epilogue_operand`.",
        operands: &[
            ArgDef::one("pool", ANY),
            ArgDef::one("out", ANY),
            ArgDef::variadic("extras", ANY),
        ],
        attributes: &[
            SYMM_COLL,
            AttrDef::required("kernel", AttrConstraint::SymbolRef),
            SYMM_EPILOGUE,
            SYMM_EPILOGUE_OPERAND,
            EPILOGUE_GRID,
            EPILOGUE_BLOCK,
            AttrDef::required("offset", AttrConstraint::Integer).doc("Bytes."),
            SYMM_COUNT,
            DTYPE,
            SYMM_REDUCE_OP,
            GROUP,
            AttrDef::required("grid", AttrConstraint::Integer),
            AttrDef::required("block", AttrConstraint::Integer),
        ],
        traits: &[Trait::Collective, Trait::MemRead, Trait::MemWrite, Trait::Blocking],
        verify: Some(|ctx, op| {
            expect_type(ctx, op, ctx.operand(op, 0), "rt.pool", "operand 'pool'")?;
            expect_memref(ctx, op, ctx.operand(op, 1), "operand 'out'")?;
            verify_symm_reduce(ctx, op)?;
            verify_symm_epilogue(ctx, op)?;
            for (i, &x) in ctx.operands(op).iter().enumerate().skip(2) {
                expect_memref(ctx, op, x, &format!("operand #{i} (epilogue operand)"))?;
            }
            verify_epilogue_call(ctx, op, 2)?;
            nonneg(ctx, op, &["offset"])?;
            verify_launch_shape(ctx, op)
        }),
        example: "rt.symm_collective %p, %out {block = 512 : i64, coll = \"one_shot_all_reduce\", count = 16 : i64, dtype = \"f32\", grid = 1 : i64, group = @tp, kernel = @s0_one_shot_all_reduce, offset = 0 : i64, reduce_op = \"sum\"} : (!rt.pool, memref<4x4xf32>) -> ()",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub EVENT_RECORD = OpDef {
        name: "rt.event_record",
        summary: "Record an event on a stream",
        description: "The event completes when the stream's work issued so far has.",
        results: &[ArgDef::one("event", ANY)],
        attributes: &[STREAM],
        traits: &[Trait::MemRead],
        verify: Some(|ctx, op| expect_type(ctx, op, ctx.result(op, 0), "rt.event", "result")),
        example: "%e = rt.event_record {stream = \"comm\"} : !rt.event",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub STREAM_WAIT = OpDef {
        name: "rt.stream_wait",
        summary: "Make a stream wait for an event",
        description: "Work issued later on `stream` starts after the event completes \
            (`cudaStreamWaitEvent`; the host does not block).",
        operands: &[ArgDef::one("event", ANY)],
        attributes: &[STREAM],
        traits: &[Trait::MemRead, Trait::Wait],
        verify: Some(|ctx, op| expect_type(ctx, op, ctx.operand(op, 0), "rt.event", "operand")),
        example: "rt.stream_wait %e {stream = \"compute\"} : !rt.event",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub PACK_CHUNKS = OpDef {
        name: "rt.pack_chunks",
        summary: "Split a tensor into G chunks along a dimension, chunk-major (kernel body op)",
        description: "`result[j, ...] = input[..., j·c + k, ...]` where `c = input[dim] / G` and \
            G is the result's dim 0: chunk j of `dim` becomes the contiguous block j. Only inside \
            an `rt.kernel`; the send-side layout of `comm.shard_dim_alltoall`.",
        operands: &[ArgDef::one("input", TypeConstraint::StaticTensor)],
        results: &[ArgDef::one("result", TypeConstraint::StaticTensor)],
        attributes: &[AttrDef::required("dim", AttrConstraint::Integer)],
        traits: &[Trait::Pure, Trait::HasParent("rt.kernel")],
        example: "%p = rt.pack_chunks %x {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<2x4x4xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ATTENTION_SOFTMAX = OpDef {
        name: "rt.attention_softmax",
        summary: "The softmax of attention scores, row by row (kernel body op)",
        description: "`input: R×L` scores (f32, f64 for f64 attention) → `R×L` probabilities \
            in the result's element type: each row scaled by `scale`, with `causal` the keys \
            `j > i` masked (`i` = row mod `q_len`, the query's position), then softmax along \
            the row. Only inside an `rt.kernel`; the middle of `compute.attention` between \
            its two GEMMs.",
        operands: &[ArgDef::one("input", TypeConstraint::StaticTensor)],
        results: &[ArgDef::one("result", TypeConstraint::StaticTensor)],
        attributes: &[
            AttrDef::required("scale", AttrConstraint::Float),
            AttrDef::optional("causal", AttrConstraint::Unit),
            AttrDef::required("q_len", AttrConstraint::Integer).doc("Rows per head."),
        ],
        traits: &[Trait::Pure, Trait::HasParent("rt.kernel")],
        example: "%p = rt.attention_softmax %s {causal, q_len = 16 : i64, scale = 0.125 : f64} : (tensor<32x16xf32>) -> tensor<32x16xbf16>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub FLASH_ATTENTION = OpDef {
        name: "rt.flash_attention",
        summary: "Attention in one tensor-core kernel (kernel body op)",
        description: "`q: H×Lq×D`, `k: H×Lk×D`, `vt: H×Dv×Lk` (the values transposed) → \
            `H×Lq×Dv`, bf16: `compute.attention` with the scores kept in registers (online \
            softmax over tiles of 64 keys, `mma.sync` products in f32, the probabilities \
            rounded to bf16 before the product with the values). Only inside an `rt.kernel`, \
            launched with 128 threads a block.",
        operands: &[
            ArgDef::one("q", TypeConstraint::StaticTensor),
            ArgDef::one("k", TypeConstraint::StaticTensor),
            ArgDef::one("vt", TypeConstraint::StaticTensor),
        ],
        results: &[ArgDef::one("result", TypeConstraint::StaticTensor)],
        attributes: &[
            AttrDef::required("scale", AttrConstraint::Float),
            AttrDef::optional("causal", AttrConstraint::Unit),
        ],
        traits: &[Trait::Pure, Trait::HasParent("rt.kernel")],
        example: "%o = rt.flash_attention %q, %k, %vt {causal, scale = 0.125 : f64} : (tensor<4x64x64xbf16>, tensor<4x64x64xbf16>, tensor<4x64x64xbf16>) -> tensor<4x64x64xbf16>",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub UNPACK_CHUNKS = OpDef {
        name: "rt.unpack_chunks",
        summary: "Concatenate the G blocks of dim 0 along a dimension (kernel body op)",
        description: "The inverse layout of `rt.pack_chunks`: block j of the input (its dim-0 \
            index) becomes the j-th part of `dim` of the result. Only inside an `rt.kernel`; the \
            receive-side layout of `comm.shard_dim_alltoall`.",
        operands: &[ArgDef::one("input", TypeConstraint::StaticTensor)],
        results: &[ArgDef::one("result", TypeConstraint::StaticTensor)],
        attributes: &[AttrDef::required("dim", AttrConstraint::Integer)],
        traits: &[Trait::Pure, Trait::HasParent("rt.kernel")],
        example: "%u = rt.unpack_chunks %r {dim = 0 : i64} : (tensor<2x4x4xf32>) -> tensor<8x4xf32>",
        ..OpDef::EMPTY
    }
);

/// Every op name of the dialect that runs on the comm stream.
pub const COMM_STREAM_OPS: &[&str] = &[
    "rt.nccl_all_reduce",
    "rt.nccl_all_gather",
    "rt.nccl_reduce_scatter",
    "rt.nccl_all_to_all",
    "rt.nccl_broadcast",
    "rt.nccl_group_start",
    "rt.nccl_group_end",
];
