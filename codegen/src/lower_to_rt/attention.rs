//! `comm-to-rt` of `compute.attention` and `compute.attention_backward`.
//!
//! f16/bf16 attention whose head dims suit cuDNN ([`cudnn_supported`]) is one call of
//! cuDNN's fused flash attention in each direction (`rt.attention`, `rt.attention_backward`:
//! the runtime builds and caches the graph, `runtime/src/cuda/cudnn.rs`), with grouped-query
//! heads and the forward's log-sum-exp; this is the default (`comm-to-rt{attention=cudnn}`).
//! The rest of this module is commlir's own forward, taken for other element types, other
//! head dims, or with `comm-to-rt{attention=generated}`:
//!
//! bf16 attention whose sizes suit it (`compute::flash_attention_supported`: query and key
//! counts multiples of 64, head dims of at most 128) is one tensor-core kernel,
//! `rt.flash_attention` (`kernels/flash.rs`), after a transpose of the values; the scores
//! never reach memory.
//!
//! Everything else is two cuBLAS GEMMs around one softmax kernel, over chunks of heads so
//! that the scores never take more than [`SCORES_BYTES`]. Per chunk of `h` heads (of the
//! `B…` leading dims flattened):
//! 1. `rt.gemm` `S = q·kᵀ` (strided-batched over the chunk's heads), f16/bf16 operands with
//!    the products kept in f32 (`out_dtype`), so the softmax sees the scores the f32
//!    accumulator produced rather than their bf16 rounding;
//! 2. an `rt.attention_softmax` kernel (one block per row): scale, causal mask, max, exp,
//!    sum, and the probabilities `P` stored in the element type;
//! 3. `rt.gemm` `result = P·v` into the chunk's rows of the result.
//!
//! `S` and `P` are two `rt.alloc` buffers sized for one chunk and reused by every chunk (the
//! compute stream orders them), freed after the last one. The chunk is the largest divisor of
//! the head count whose scores fit [`SCORES_BYTES`] (at least one head), so every chunk has
//! the same shape and one kernel serves them all.
//!
//! With `causal`, the softmax kernel reads no score past a row's query position (they are
//! masked), but the GEMMs compute them: see the comment in [`lower`].

use super::{
    buffer, dtype_of, err, i64_attr, launch, memref_of, result_buffer, synthetic_kernel_with,
    AttentionLowering, KernelTable, Lowering, BLOCK,
};
use commlir_dialects::shape::{elem_bytes, value_tensor};
use commlir_ir::{Builder, Context, Diagnostic, OpId};

/// The most bytes the scores and probabilities of one chunk take (`S` and `P` together).
pub const SCORES_BYTES: i64 = 256 << 20;

/// Heads per chunk: the largest divisor of `heads` whose `S` and `P` fit [`SCORES_BYTES`].
pub fn heads_per_chunk(heads: i64, per_head_bytes: i64) -> i64 {
    let fit = (SCORES_BYTES / per_head_bytes.max(1)).clamp(1, heads.max(1));
    (1..=fit).rev().find(|h| heads % h == 0).unwrap_or(1)
}

/// Whether cuDNN's fused attention takes these: f16 or bf16 with head dims it takes
/// (`compute::cudnn_attention_supported`, the cost model's rule too).
pub fn cudnn_supported(dtype: &str, d: i64, dv: i64) -> bool {
    matches!(dtype, "f16" | "bf16") && commlir_dialects::compute::cudnn_attention_supported(d, dv)
}

/// The sizes of an attention op as the runtime takes them: `(batch, heads, kv_heads,
/// q_len, kv_len, head_dim, v_dim)`, the dims before the head dim flattened into the batch
/// (a rank-2 attention is one head).
fn call_sizes(ctx: &Context, op: OpId) -> Result<[i64; 7], Diagnostic> {
    let t =
        |i| value_tensor(ctx, ctx.operand(op, i)).ok_or_else(|| err(ctx, op, "expects tensors"));
    let (q, k, v) = (t(0)?, t(1)?, t(2)?);
    let rank = q.shape.len();
    let (lq, d) = (q.shape[rank - 2], q.shape[rank - 1]);
    let (lk, dv) = (k.shape[rank - 2], v.shape[rank - 1]);
    let (batch, hq, hkv) = if rank >= 3 {
        let b: i64 = q.shape[..rank - 3].iter().product();
        (b, q.shape[rank - 3], k.shape[rank - 3])
    } else {
        (1, 1, 1)
    };
    Ok([batch, hq, hkv, lq, lk, d, dv])
}

/// One `rt.attention` or `rt.attention_backward` before `op` on `buffers`.
fn cudnn_call(
    ctx: &mut Context,
    op: OpId,
    name: &str,
    buffers: &[commlir_ir::Value],
    dtype: &str,
) -> Result<(), Diagnostic> {
    let sizes = call_sizes(ctx, op)?;
    let names = [
        "batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim", "v_dim",
    ];
    let mut attrs: Vec<(&str, commlir_ir::Attr)> = names
        .iter()
        .zip(sizes)
        .map(|(n, v)| (*n, i64_attr(ctx, v)))
        .collect();
    attrs.push(("dtype", ctx.str_attr(dtype)));
    attrs.extend(scale_and_causal(ctx, op));
    Builder::before(ctx, op).create(name, buffers, &[], &attrs);
    Ok(())
}

/// `compute.attention_backward`: one `rt.attention_backward` (cuDNN only).
pub(super) fn lower_backward(
    ctx: &mut Context,
    op: OpId,
    st: &mut Lowering,
) -> Result<(), Diagnostic> {
    let dtype = dtype_of(ctx, op, ctx.operand(op, 0))?;
    let [.., d, dv] = call_sizes(ctx, op)?;
    if st.opts.attention != AttentionLowering::Cudnn || !cudnn_supported(dtype, d, dv) {
        return Err(err(
            ctx,
            op,
            "comm-to-rt: attention_backward lowers only to cuDNN (comm-to-rt{attention=cudnn}): f16 or bf16 with head dims multiples of 8 up to 128",
        ));
    }
    let mut bufs = Vec::new();
    for i in 0..6 {
        bufs.push(buffer(ctx, st, op, ctx.operand(op, i))?);
    }
    for i in 0..3 {
        let r = ctx.result(op, i);
        bufs.push(result_buffer(ctx, st, op, r)?);
    }
    cudnn_call(ctx, op, "rt.attention_backward", &bufs, dtype)?;
    st.compute_dirty = true;
    Ok(())
}

pub(super) fn lower(
    ctx: &mut Context,
    op: OpId,
    module: Option<OpId>,
    func: OpId,
    st: &mut Lowering,
    kernels: &mut KernelTable,
) -> Result<(), Diagnostic> {
    let dtype = dtype_of(ctx, op, ctx.operand(op, 0))?;
    let [_, hq, hkv, .., d, dv] = call_sizes(ctx, op)?;
    let with_lse = ctx.results(op).len() > 1;
    if st.opts.attention == AttentionLowering::Cudnn && cudnn_supported(dtype, d, dv) {
        let mut bufs = Vec::new();
        for i in 0..3 {
            bufs.push(buffer(ctx, st, op, ctx.operand(op, i))?);
        }
        for i in 0..ctx.results(op).len() {
            let r = ctx.result(op, i);
            bufs.push(result_buffer(ctx, st, op, r)?);
        }
        cudnn_call(ctx, op, "rt.attention", &bufs, dtype)?;
        st.compute_dirty = true;
        return Ok(());
    }
    if hq != hkv || with_lse {
        return Err(err(
            ctx,
            op,
            "comm-to-rt: grouped-query attention and attention with_lse lower only to cuDNN (comm-to-rt{attention=cudnn}): f16 or bf16 with head dims multiples of 8 up to 128",
        ));
    }
    let (q, k, v, r) = (
        ctx.operand(op, 0),
        ctx.operand(op, 1),
        ctx.operand(op, 2),
        ctx.result(op, 0),
    );
    let (Some(tq), Some(tk), Some(tv)) = (
        value_tensor(ctx, q),
        value_tensor(ctx, k),
        value_tensor(ctx, v),
    ) else {
        return Err(err(ctx, op, "expects tensors"));
    };
    let rank = tq.shape.len();
    let heads: i64 = tq.shape[..rank - 2].iter().product();
    let (lq, d) = (tq.shape[rank - 2], tq.shape[rank - 1]);
    let (lk, dv) = (tk.shape[rank - 2], tv.shape[rank - 1]);
    let dtype = dtype_of(ctx, op, q)?;
    // Scores in f32 for f16/bf16/f32, in f64 for f64.
    let (score_dtype, score_elem) = match dtype {
        "f16" | "bf16" | "f32" => ("f32", ctx.float_type(commlir_ir::FloatKind::F32)),
        "f64" => ("f64", ctx.float_type(commlir_ir::FloatKind::F64)),
        _ => {
            return Err(err(
                ctx,
                op,
                "comm-to-rt: attention multiplies floating-point matrices only",
            ))
        }
    };
    if dtype == "bf16"
        && flash_enabled()
        && commlir_dialects::compute::flash_attention_supported(lq, lk, d, dv)
    {
        return lower_flash(ctx, op, module, func, st, kernels, [heads, lq, lk, d, dv]);
    }
    let es = elem_bytes(ctx, tq.elem).max(1) as i64;
    let ss = elem_bytes(ctx, score_elem).max(1) as i64;
    let h = heads_per_chunk(heads, lq * lk * (ss + es));
    let chunks = heads / h.max(1);

    let (bq, bk, bv) = (
        buffer(ctx, st, op, q)?,
        buffer(ctx, st, op, k)?,
        buffer(ctx, st, op, v)?,
    );
    let out = result_buffer(ctx, st, op, r)?;
    let s_t = ctx.tensor_type(&[h * lq, lk], score_elem);
    let p_t = ctx.tensor_type(&[h * lq, lk], tq.elem);
    let (s_m, p_m) = (memref_of(ctx, s_t), memref_of(ctx, p_t));
    let mut bld = Builder::before(ctx, op);
    let sb = bld.create_value("rt.alloc", &[], s_m, &[]);
    let pb = bld.create_value("rt.alloc", &[], p_m, &[]);

    let mut attrs = vec![("q_len", i64_attr(ctx, lq))];
    attrs.extend(scale_and_causal(ctx, op));
    let softmax = synthetic_kernel_with(
        ctx,
        module,
        func,
        kernels,
        "rt.attention_softmax",
        &attrs,
        &[s_t],
        p_t,
    )?;

    for c in 0..chunks {
        let first = c * h;
        // Row-major S[lq×lk] = Q[lq×d]·Kᵀ: column-major Sᵀ = K·Qᵀ, so cuBLAS gets (K
        // transposed, Q) with leading dimension d for both. A causal attention computes its
        // masked scores too: splitting the queries into row blocks that each multiply only
        // the keys they see gives cuBLAS problems too small to fill the GPU (measured slower
        // on an H100 at 32 heads × 4096², docs/benchmarks.md).
        gemm(
            ctx,
            op,
            [bk, bq, sb],
            [
                ("transa", 1),
                ("transb", 0),
                ("m", lk),
                ("n", lq),
                ("k", d),
                ("lda", d),
                ("ldb", d),
                ("ldc", lk),
                ("stride_a", lk * d),
                ("stride_b", lq * d),
                ("stride_c", lq * lk),
                ("batch", h),
                ("offset_a", first * lk * d * es),
                ("offset_b", first * lq * d * es),
                ("offset_c", 0),
            ],
            dtype,
            (dtype != score_dtype).then_some(score_dtype),
        );
        launch(ctx, op, &softmax, &[sb, pb], h * lq * BLOCK);
        // Row-major O[lq×dv] = P[lq×lk]·V[lk×dv]: column-major Oᵀ = Vᵀ·Pᵀ.
        gemm(
            ctx,
            op,
            [bv, pb, out],
            [
                ("transa", 0),
                ("transb", 0),
                ("m", dv),
                ("n", lq),
                ("k", lk),
                ("lda", dv),
                ("ldb", lk),
                ("ldc", dv),
                ("stride_a", lk * dv),
                ("stride_b", lq * lk),
                ("stride_c", lq * dv),
                ("batch", h),
                ("offset_a", first * lk * dv * es),
                ("offset_b", 0),
                ("offset_c", first * lq * dv * es),
            ],
            dtype,
            None,
        );
    }
    st.compute_dirty = true;
    Ok(())
}

/// One `rt.gemm` before `op` (zero offsets are left out).
fn gemm(
    ctx: &mut Context,
    op: OpId,
    [a, b, c]: [commlir_ir::Value; 3],
    ints: [(&str, i64); 15],
    dtype: &str,
    out_dtype: Option<&str>,
) {
    let mut named: Vec<(&str, commlir_ir::Attr)> = ints
        .iter()
        .filter(|(n, v)| *v != 0 || !n.starts_with("offset_"))
        .map(|(n, v)| (*n, i64_attr(ctx, *v)))
        .collect();
    named.push(("dtype", ctx.str_attr(dtype)));
    if let Some(o) = out_dtype {
        named.push(("out_dtype", ctx.str_attr(o)));
    }
    let mut bld = Builder::before(ctx, op);
    bld.create("rt.gemm", &[a, b, c], &[], &named);
}

/// Whether bf16 attention of a supported shape takes the one-kernel path
/// (`rt.flash_attention`); `COMMLIR_FLASH_ATTENTION=0` keeps the GEMM–softmax–GEMM lowering
/// (for comparing the two).
fn flash_enabled() -> bool {
    std::env::var("COMMLIR_FLASH_ATTENTION").map_or(true, |v| v != "0")
}

/// bf16 attention as one tensor-core kernel (`rt.flash_attention`, `kernels/flash.rs`): the
/// values transposed first (a `compute.transpose` kernel into a scratch buffer, so that the
/// kernel loads adjacent key pairs), then 64 query rows of one head per block of 128 threads.
fn lower_flash(
    ctx: &mut Context,
    op: OpId,
    module: Option<OpId>,
    func: OpId,
    st: &mut Lowering,
    kernels: &mut KernelTable,
    [heads, lq, lk, d, dv]: [i64; 5],
) -> Result<(), Diagnostic> {
    let (q, k, v, r) = (
        ctx.operand(op, 0),
        ctx.operand(op, 1),
        ctx.operand(op, 2),
        ctx.result(op, 0),
    );
    let elem = value_tensor(ctx, q)
        .map(|t| t.elem)
        .ok_or_else(|| err(ctx, op, "expects tensors"))?;
    let (bq, bk, bv) = (
        buffer(ctx, st, op, q)?,
        buffer(ctx, st, op, k)?,
        buffer(ctx, st, op, v)?,
    );
    let out = result_buffer(ctx, st, op, r)?;
    let t3 = |ctx: &mut Context, a: i64, b: i64| ctx.tensor_type(&[heads, a, b], elem);
    let (q3, k3, v3, vt3, o3) = (
        t3(ctx, lq, d),
        t3(ctx, lk, d),
        t3(ctx, lk, dv),
        t3(ctx, dv, lk),
        t3(ctx, lq, dv),
    );
    let mut views = Vec::new();
    for (b, t) in [(bq, q3), (bk, k3), (bv, v3), (out, o3)] {
        let m = memref_of(ctx, t);
        views.push(Builder::before(ctx, op).create_value("rt.view", &[b], m, &[]));
    }
    let vt_m = memref_of(ctx, vt3);
    let vtb = Builder::before(ctx, op).create_value("rt.alloc", &[], vt_m, &[]);
    let transpose = synthetic_kernel_with(
        ctx,
        module,
        func,
        kernels,
        "compute.transpose",
        &[],
        &[v3],
        vt3,
    )?;
    launch(ctx, op, &transpose, &[views[2], vtb], heads * lk * dv);
    let attrs = scale_and_causal(ctx, op);
    let flash = synthetic_kernel_with(
        ctx,
        module,
        func,
        kernels,
        "rt.flash_attention",
        &attrs,
        &[q3, k3, vt3],
        o3,
    )?;
    let items = heads * (lq / 64);
    let ks = ctx.symbol_ref(&flash);
    let grid = i64_attr(ctx, items.clamp(1, super::MAX_GRID));
    let block = i64_attr(ctx, crate::kernels::FLASH_BLOCK);
    Builder::before(ctx, op).create(
        "rt.launch",
        &[views[0], views[1], vtb, views[3]],
        &[],
        &[("kernel", ks), ("grid", grid), ("block", block)],
    );
    st.compute_dirty = true;
    Ok(())
}

/// The attention's `scale` and (if set) `causal` attributes, for the kernel ops.
fn scale_and_causal(ctx: &Context, op: OpId) -> Vec<(&'static str, commlir_ir::Attr)> {
    ["scale", "causal"]
        .into_iter()
        .filter_map(|n| ctx.inherent_attr(op, n).map(|a| (n, a)))
        .collect()
}
