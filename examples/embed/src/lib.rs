//! An embedder of commlir: the `acme` dialect, defined outside commlir with nothing but the
//! `commlir` crate's public API, and the pipeline that lowers and schedules programs using it.
//!
//! `acme.all_gather_matmul` is a fused symmetric-memory kernel (like PyTorch's
//! `symm_mem.fused_all_gather_matmul`): every rank reads its peers' shards of `a` straight
//! from their symmetric memory, gathers them along dim 0 and multiplies by `b`. Its
//! definition declares what commlir needs to handle it with no op-specific code:
//!
//! - **memory effects** (traits): it reads its operands (`MemRead`, its peers' copies of `a`
//!   included), allocates its result (`MemAlloc`), and is a blocking collective on its group
//!   (`Collective`, `Blocking`), so the scheduling passes keep it in order with the group's
//!   other collectives;
//! - **a comm-buffer operand**: `a` must live in symmetric memory of the op's group, so
//!   `coll-to-comm` realizes it there (the producer writes into it directly, or a copy is
//!   inserted), PR #173513's argument registration;
//! - **a cost estimate** ([`estimate_ns`]), which the timeline simulator, the report and
//!   the scheduling passes use;
//! - **a verifier** with MLIR-shaped diagnostics.

#![warn(missing_docs)]

use commlir::dialect::{
    group_of, tensor_bytes, tensor_info, ty_str, verify_comm_buffer_operands, ArgDef,
    AttrConstraint, AttrDef, CommBufferKind, CommBufferOperand, DialectDef, OpDef, Trait,
    TypeConstraint,
};
use commlir::{Builder, Context, Diagnostic, Diagnostics, IterOptions, OpId, Pipeline, Value};

/// The name of the fused op.
pub const ALL_GATHER_MATMUL: &str = "acme.all_gather_matmul";

commlir::register_dialect!(
    /// The `acme` dialect.
    pub ACME_DIALECT = DialectDef {
    name: "acme",
    summary: "Acme's fused symmetric-memory kernels.",
    description: "Defined outside commlir, in examples/embed, through the `commlir` crate.",
});

commlir::register_op!(
    /// `%c = acme.all_gather_matmul %a, %b {group = @g} : (MxK, KxN) -> (G·M)xN`.
    pub ALL_GATHER_MATMUL_OP = OpDef {
        name: ALL_GATHER_MATMUL,
        summary: "All-gather of `a` from peers' symmetric memory, fused with a matmul by `b`",
        description: "Every rank reads the peers' `a` (M×K) from symmetric memory, stacks the \
            G shards along dim 0 and multiplies by `b` (K×N): the result is (G·M)×N. Blocking.",
        operands: &[
            ArgDef::one("a", TypeConstraint::StaticTensor),
            ArgDef::one("b", TypeConstraint::StaticTensor),
        ],
        results: &[ArgDef::one("c", TypeConstraint::StaticTensor)],
        attributes: &[
            AttrDef::required("group", AttrConstraint::SymbolRef).doc("A `coll.group` with `symm_mem`."),
            AttrDef::optional("cost_ns", AttrConstraint::Integer).doc("Overrides the cost estimate (ns)."),
        ],
        traits: &[Trait::Collective, Trait::Blocking, Trait::MemRead, Trait::MemAlloc],
        comm_buffer_operands: &[CommBufferOperand {
            operand: "a",
            kind: CommBufferKind::SymmMem,
            group_attr: "group",
        }],
        verify: Some(verify_all_gather_matmul),
        cost: Some(all_gather_matmul_cost),
        example: "%c = acme.all_gather_matmul %a, %b {group = @tp} : (tensor<64x1024xbf16>, tensor<1024x512xbf16>) -> tensor<128x512xbf16>",
        ..OpDef::EMPTY
    }
);

/// Keeps this crate's registrations (and commlir's) in the final binary: they live in
/// statics that nothing references, which the linker would otherwise drop.
#[inline(never)]
pub fn link() {
    commlir::register_all();
    std::hint::black_box((&ACME_DIALECT, &ALL_GATHER_MATMUL_OP));
}

/// Fixed cost of the fused kernel, ns.
pub const LAUNCH_NS: f64 = 3_000.0;
/// Bytes per ns read from one peer's symmetric memory (150 GB/s).
pub const PEER_BYTES_PER_NS: f64 = 150.0;
/// Matmul throughput, FLOP per ns (400 TFLOP/s).
pub const FLOPS_PER_NS: f64 = 400_000.0;

/// Acme's estimate of the fused kernel in ns: a launch, the peers' shards read one after
/// the other, and the matmul, which overlaps nothing (the kernel is not pipelined).
/// `a_bytes` is one shard's size; the matmul is `(g·m) × k × n`.
pub fn estimate_ns(g: i64, m: i64, k: i64, n: i64, a_bytes: u64) -> f64 {
    let gather = (g - 1) as f64 * a_bytes as f64 / PEER_BYTES_PER_NS;
    let flops = 2.0 * (g * m) as f64 * k as f64 * n as f64;
    LAUNCH_NS + gather + flops / FLOPS_PER_NS
}

/// The cost hook: [`estimate_ns`] on the op's shapes and group size.
fn all_gather_matmul_cost(ctx: &Context, op: OpId) -> Option<f64> {
    let a = tensor_info(ctx, ctx.value_type(ctx.operand(op, 0)))?;
    let b = tensor_info(ctx, ctx.value_type(ctx.operand(op, 1)))?;
    let g = group_of(ctx, op).ok()?.size;
    let a_bytes = tensor_bytes(ctx, ctx.value_type(ctx.operand(op, 0)))?;
    match (a.shape.as_slice(), b.shape.as_slice()) {
        ([m, k], [_, n]) => Some(estimate_ns(g, *m, *k, *n, a_bytes)),
        _ => None,
    }
}

/// The verifier: a symmetric-memory group, 2-D shapes that chain, the gathered result
/// shape, one element type, and `a` either a plain tensor (to be realized by `coll-to-comm`)
/// or already a symmetric-memory buffer of the group.
fn verify_all_gather_matmul(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let group = group_of(ctx, op)?;
    if !group.symm_mem {
        return Err(ctx.op_error(
            op,
            format!(
                "group @{} must enable symmetric memory (symm_mem)",
                group.name
            ),
        ));
    }
    verify_comm_buffer_operands(ctx, op)?;
    let ty = |v: Value| ctx.value_type(v);
    let (a_ty, b_ty, c_ty) = (
        ty(ctx.operand(op, 0)),
        ty(ctx.operand(op, 1)),
        ty(ctx.result(op, 0)),
    );
    let (Some(a), Some(b), Some(c)) = (
        tensor_info(ctx, a_ty),
        tensor_info(ctx, b_ty),
        tensor_info(ctx, c_ty),
    ) else {
        return Err(ctx.op_error(op, "operands and result must be ranked tensors"));
    };
    let ([m, k], [kb, n]) = (a.shape.as_slice(), b.shape.as_slice()) else {
        return Err(ctx.op_error(op, "operands must be 2-D"));
    };
    if k != kb {
        return Err(ctx.op_error(
            op,
            format!(
                "contracting dims differ: {} and {}",
                ty_str(ctx, a_ty),
                ty_str(ctx, b_ty)
            ),
        ));
    }
    let want = [group.size * m, *n];
    if c.shape != want {
        return Err(ctx.op_error(
            op,
            format!(
                "result must be {}x{} (group @{} has size {}), got {}",
                want[0],
                want[1],
                group.name,
                group.size,
                ty_str(ctx, c_ty)
            ),
        ));
    }
    if a.elem != b.elem || a.elem != c.elem {
        return Err(ctx.op_error(op, "operands and result must share one element type"));
    }
    Ok(())
}

/// Creates `acme.all_gather_matmul %a, %b {group = @group}` at the builder's insertion
/// point, inferring the result type, as a dialect's C++ `build` method would.
///
/// # Panics
/// If `a` or `b` is not a 2-D tensor, or `group` is not a `coll.group` of the module the
/// builder inserts into (the verifier reports these on parsed IR).
pub fn build_all_gather_matmul(
    b: &mut Builder<'_>,
    a: Value,
    w: Value,
    group: &str,
    group_size: i64,
) -> Value {
    let ctx = &mut *b.ctx;
    let a_info = tensor_info(ctx, ctx.value_type(a)).expect("a is a tensor");
    let w_info = tensor_info(ctx, ctx.value_type(w)).expect("b is a tensor");
    let shape = [group_size * a_info.shape[0], w_info.shape[1]];
    let result = ctx.tensor_type(&shape, a_info.elem);
    let group = ctx.symbol_ref(group);
    b.create_value(ALL_GATHER_MATMUL, &[a, w], result, &[("group", group)])
}

/// A tensor-parallel block using the fused op next to functional collectives and compute,
/// written the naive way a tracer emits it: each collective right before its first use,
/// each wait right after its collective. The scheduling passes move the weight all-gather
/// up (it stops at the fused op, an earlier collective on the same group) and sink the
/// all-reduce's wait below the independent compute.
pub const PROGRAM: &str = r#"coll.group @tp {size = 2 : i64, symm_mem}
func.func @block(%x: tensor<64x512xbf16>, %w1: tensor<512x1024xbf16>, %wa: tensor<1024x512xbf16>, %wb: tensor<512x512xbf16>, %w2_shard: tensor<256x512xbf16>) -> (tensor<128x512xbf16>, tensor<128x512xbf16>) {
  %h = compute.matmul %x, %w1 : (tensor<64x512xbf16>, tensor<512x1024xbf16>) -> tensor<64x1024xbf16>
  %a = compute.gelu %h : tensor<64x1024xbf16>
  %c = acme.all_gather_matmul %a, %wa {group = @tp} : (tensor<64x1024xbf16>, tensor<1024x512xbf16>) -> tensor<128x512xbf16>
  %e = compute.silu %c : tensor<128x512xbf16>
  %f = compute.matmul %e, %wb : (tensor<128x512xbf16>, tensor<512x512xbf16>) -> tensor<128x512xbf16>
  %g = coll.all_gather_into_tensor %w2_shard {group = @tp} : (tensor<256x512xbf16>) -> tensor<512x512xbf16>
  %w2 = coll.wait_tensor %g : tensor<512x512xbf16>
  %d = compute.matmul %f, %w2 : (tensor<128x512xbf16>, tensor<512x512xbf16>) -> tensor<128x512xbf16>
  %r = coll.all_reduce %d {reduce_op = "sum", group = @tp} : tensor<128x512xbf16>
  %y = coll.wait_tensor %r : tensor<128x512xbf16>
  %z = compute.gelu %f : tensor<128x512xbf16>
  %o = compute.matmul %z, %wb : (tensor<128x512xbf16>, tensor<512x512xbf16>) -> tensor<128x512xbf16>
  return %y, %o : tensor<128x512xbf16>, tensor<128x512xbf16>
}
"#;

/// The pipeline, built from code: lower the collectives (and realize `acme`'s declared
/// comm-buffer operand), move collectives earlier within the peak-memory budget, sink the
/// waits, plan the comm-buffer pools.
pub fn pipeline() -> Result<Pipeline, Diagnostics> {
    link();
    let schedule = IterOptions {
        use_runtime_estimates: true,
        ..IterOptions::default()
    };
    let mut p = Pipeline::new();
    p.coll_to_comm(&commlir::CollToCommOptions {
        // Keep the all-reduce a start/wait pair for the schedulers to overlap, rather than
        // a blocking one-shot all-reduce.
        one_shot_threshold: Some(0),
        ..Default::default()
    })?
    .reorder_peak_memory(&schedule)?
    .sink_waits_iterative(&schedule)?
    .add("comm-plan-pools")?;
    Ok(p)
}

/// The same pipeline as a pipeline string, the way it would be given to `commlir-opt`.
pub const PIPELINE: &str = "builtin.module(func.func(coll-to-comm{one-shot-threshold=0},\
    comm-reorder-peak-memory{use-runtime-estimates},\
    comm-sink-waits-iterative{use-runtime-estimates},comm-plan-pools))";
