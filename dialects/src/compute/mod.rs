//! The `compute` dialect: tensor computation with value semantics. Every result is a new
//! buffer (trait `MemAlloc`), so the peak-memory analysis and the pool planner can reason
//! about each op's footprint; bf16/f16 arithmetic is defined as f32 rounded on every result.

use crate::shape::{int_attr, ty_str, value_tensor_view, verify_same_tensor_types};
use commlir_ir::{
    register_dialect, register_op, ArgDef, AttrConstraint, AttrDef, Context, Diagnostic, FloatKind,
    OpDef, OpId, Signedness, Trait, Type, TypeConstraint, TypeKind,
};

register_dialect!(pub COMPUTE_DIALECT = commlir_ir::opdef::DialectDef {
    name: "compute",
    summary: "Tensor computation with value semantics.",
    description: "Matmuls, elementwise and unary math, reductions and data movement on \
        statically shaped tensors. Each op produces a new buffer; bf16 and f16 arithmetic is \
        carried out in f32 and rounded to the element type on every result. Any op may carry \
        `cost_ns = N : i64`, which overrides the cost model for that op.",
});

const T: TypeConstraint = TypeConstraint::StaticTensor;
const COST: AttrDef = AttrDef::optional("cost_ns", AttrConstraint::Integer)
    .doc("Overrides the cost model's runtime estimate for this op (nanoseconds).");
const ELEMENTWISE_TRAITS: &[Trait] = &[Trait::Pure, Trait::MemAlloc];

register_op!(
    pub MATMUL = OpDef {
        name: "compute.matmul",
        summary: "Matrix product (optionally batched)",
        description: "`a: M×K`, `b: K×N` → `M×N`; batched: `B×M×K · B×K×N → B×M×N`. \
            All three element types are equal; accumulation is in f32 for f16/bf16.",
        operands: &[ArgDef::one("a", T), ArgDef::one("b", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[COST],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_matmul),
        example: "%c = compute.matmul %a, %b : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16>",
        ..OpDef::EMPTY
    }
);

fn verify_matmul(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let a = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    let b = value_tensor_view(ctx, ctx.operand(op, 1)).unwrap();
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    if a.elem != b.elem || a.elem != r.elem {
        return Err(ctx.op_error(
            op,
            "requires the same element type for both operands and the result",
        ));
    }
    // The expected result shape, without allocating: [m, n] or [b, m, n].
    let (expected, rank) = match (a.shape, b.shape) {
        ([m, k1], [k2, n]) if k1 == k2 => ([*m, *n, 0], 2),
        ([b1, m, k1], [b2, k2, n]) if k1 == k2 && b1 == b2 => ([*b1, *m, *n], 3),
        ([_, k1], [k2, _]) | ([_, _, k1], [_, k2, _]) if k1 != k2 => {
            return Err(ctx.op_error(
                op,
                format!("contraction dims differ: lhs has {k1}, rhs has {k2}"),
            ));
        }
        ([b1, _, _], [b2, _, _]) => {
            return Err(ctx.op_error(op, format!("batch dims differ: lhs has {b1}, rhs has {b2}")));
        }
        _ => {
            return Err(ctx.op_error(
                op,
                "expects rank-2 operands (M×K, K×N) or rank-3 batched operands",
            ));
        }
    };
    let expected = &expected[..rank];
    if r.shape != expected {
        return Err(ctx.op_error(
            op,
            format!(
                "result shape must be {}, got {}",
                fmt_shape(expected),
                fmt_shape(r.shape)
            ),
        ));
    }
    Ok(())
}

/// Formats a shape as `4x8`.
pub fn fmt_shape(s: &[i64]) -> String {
    s.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

macro_rules! binary_op {
    ($id:ident, $name:literal, $summary:literal) => {
        register_op!(
            pub $id = OpDef {
                name: $name,
                summary: $summary,
                description: "Elementwise on two tensors of the same type.",
                operands: &[ArgDef::one("lhs", T), ArgDef::one("rhs", T)],
                results: &[ArgDef::one("result", T)],
                attributes: &[COST],
                traits: ELEMENTWISE_TRAITS,
                verify: Some(verify_same_tensor_types),
                example: concat!("%c = ", $name, " %a, %b : tensor<8x16xf32>"),
                ..OpDef::EMPTY
            }
        );
    };
}

binary_op!(ADD, "compute.add", "Elementwise addition");
binary_op!(SUB, "compute.sub", "Elementwise subtraction");
binary_op!(MUL, "compute.mul", "Elementwise multiplication");
binary_op!(DIV, "compute.div", "Elementwise division");
binary_op!(MAXIMUM, "compute.maximum", "Elementwise maximum");
binary_op!(MINIMUM, "compute.minimum", "Elementwise minimum");

/// An elementwise op on one tensor whose result has the operand's type: any element type
/// (`unary_op!(ID, name, summary)`), or float only (`unary_op!(float ID, name, summary)`, checked
/// by the verifier).
macro_rules! unary_op {
    ($id:ident, $name:literal, $summary:literal) => {
        unary_op!(@def $id, $name, $summary,
            "Elementwise on one tensor; the result has the operand's type.",
            verify_same_tensor_types);
    };
    (float $id:ident, $name:literal, $summary:literal) => {
        unary_op!(@def $id, $name, $summary,
            "Elementwise on one float tensor; the result has the operand's type.",
            verify_float_unary);
    };
    (@def $id:ident, $name:literal, $summary:literal, $description:literal, $verify:path) => {
        register_op!(
            pub $id = OpDef {
                name: $name,
                summary: $summary,
                description: $description,
                operands: &[ArgDef::one("input", T)],
                results: &[ArgDef::one("result", T)],
                attributes: &[COST],
                traits: ELEMENTWISE_TRAITS,
                verify: Some($verify),
                example: concat!("%b = ", $name, " %a : tensor<8x16xf32>"),
                ..OpDef::EMPTY
            }
        );
    };
}

unary_op!(NEG, "compute.neg", "Elementwise negation");
unary_op!(EXP, "compute.exp", "Elementwise exponential");
unary_op!(RELU, "compute.relu", "Elementwise max(x, 0)");
unary_op!(
    GELU,
    "compute.gelu",
    "Elementwise GELU (tanh approximation)"
);
unary_op!(SILU, "compute.silu", "Elementwise x·sigmoid(x)");
unary_op!(TANH, "compute.tanh", "Elementwise hyperbolic tangent");
unary_op!(SQRT, "compute.sqrt", "Elementwise square root");
unary_op!(RSQRT, "compute.rsqrt", "Elementwise reciprocal square root");
unary_op!(CLONE, "compute.clone", "Copy into a new buffer");
unary_op!(float SIN, "compute.sin", "Elementwise sine");
unary_op!(float COS, "compute.cos", "Elementwise cosine");
unary_op!(
    float SIGMOID,
    "compute.sigmoid",
    "Elementwise logistic 1/(1+exp(-x))"
);
unary_op!(float LOG, "compute.log", "Elementwise natural logarithm");

fn is_float(ctx: &Context, t: Type) -> bool {
    matches!(ctx.type_kind(t), TypeKind::Float(_))
}

fn is_int_or_float(ctx: &Context, t: Type) -> bool {
    matches!(
        ctx.type_kind(t),
        TypeKind::Float(_) | TypeKind::Integer { .. } | TypeKind::Index
    )
}

fn is_i1(ctx: &Context, t: Type) -> bool {
    matches!(
        ctx.type_kind(t),
        TypeKind::Integer {
            width: 1,
            signedness: Signedness::Signless
        }
    )
}

fn verify_float_unary(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_same_tensor_types(ctx, op)?;
    let a = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    if !is_float(ctx, a.elem) {
        return Err(ctx.op_error(
            op,
            format!("expects a float element type, got {}", ty_str(ctx, a.elem)),
        ));
    }
    Ok(())
}

register_op!(
    pub SCALE = OpDef {
        name: "compute.scale",
        summary: "Multiplication by a constant",
        description: "`result = input × factor`, elementwise.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[AttrDef::required("factor", AttrConstraint::Float).doc("The constant factor."), COST],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_same_tensor_types),
        example: "%b = compute.scale %a {factor = 5.000000e-01 : f64} : tensor<8x16xf32>",
        ..OpDef::EMPTY
    }
);

fn check_dim(ctx: &Context, op: OpId, rank: usize) -> Result<usize, Diagnostic> {
    let d = int_attr(ctx, op, "dim").unwrap_or(-1);
    if d < 0 || d as usize >= rank {
        return Err(ctx.op_error(op, format!("dim {d} is out of range for rank {rank}")));
    }
    Ok(d as usize)
}

register_op!(
    pub SOFTMAX = OpDef {
        name: "compute.softmax",
        summary: "Softmax along a dimension",
        description: "Numerically stable softmax (max-subtracted) along `dim`.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[AttrDef::required("dim", AttrConstraint::Integer).doc("The reduced dimension."), COST],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_softmax),
        example: "%b = compute.softmax %a {dim = 1 : i64} : tensor<8x16xf32>",
        ..OpDef::EMPTY
    }
);

fn verify_softmax(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_same_tensor_types(ctx, op)?;
    let a = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    check_dim(ctx, op, a.shape.len())?;
    Ok(())
}

register_op!(
    pub ATTENTION = OpDef {
        name: "compute.attention",
        summary: "Scaled dot-product attention (grouped-query heads)",
        description: "`q: B…×Hq×Lq×D`, `k: B…×Hkv×Lk×D`, `v: B…×Hkv×Lk×Dv` → \
            `B…×Hq×Lq×Dv`, one element type everywhere (f16, bf16, f32 or f64). The leading \
            dims are equal, except that from rank 3 on, the head dim (rank−3) of `k` and `v` \
            may be `Hkv` dividing `Hq` (grouped-query attention): query head `h` reads kv \
            head `h / (Hq/Hkv)`, PyTorch's `enable_gqa` (its `repeat_interleave` of `k` and \
            `v`). For each query row `i`, `s_j = scale · Σ_d q[i,d]·k[j,d]`, `p = softmax(s)` \
            over the keys (max-subtracted; with `causal`, keys `j > i` are masked out, \
            PyTorch's `is_causal`, aligned top-left), and `result[i] = Σ_j p_j · v[j]`. \
            Carried out in f32 (f64 for f64); `p` is rounded to the element type before the \
            second product (as a softmax result would be, and as flash attention does) and \
            the result once at the end. With `with_lse` there is a second result, the row \
            log-sum-exp `lse: B…×Hq×Lq` = `ln Σ_j exp(s_j)` over the visible keys (`-inf` \
            for a row that sees none), f32 (f64 for f64 attention): what \
            `compute.attention_backward` reads, PyTorch's flash/cuDNN `logsumexp`. PyTorch's \
            `scaled_dot_product_attention` without mask or dropout; the scores are never a \
            tensor of the program, so the memory they take is the lowering's choice.",
        operands: &[ArgDef::one("q", T), ArgDef::one("k", T), ArgDef::one("v", T)],
        results: &[ArgDef::one("result", T), ArgDef::optional("lse", T)],
        attributes: &[
            AttrDef::required("scale", AttrConstraint::Float)
                .doc("Factor of the scores (PyTorch's default is `1/sqrt(D)`)."),
            AttrDef::optional("causal", AttrConstraint::Unit)
                .doc("Mask keys after the query's position (`j > i`)."),
            AttrDef::optional("with_lse", AttrConstraint::Unit)
                .doc("Also return the row log-sum-exp (the second result)."),
            COST,
        ],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_attention),
        example: "%o, %lse = compute.attention %q, %k, %v {causal, scale = 0.125 : f64, with_lse} : (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>) -> (tensor<2x8x16x64xbf16>, tensor<2x8x16xf32>)",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub ATTENTION_BACKWARD = OpDef {
        name: "compute.attention_backward",
        summary: "Gradients of scaled dot-product attention",
        description: "Operands `q`, `k`, `v` as for `compute.attention` (grouped-query heads \
            included), its result `out: B…×Hq×Lq×Dv`, the result's gradient `dout` (the same \
            type) and its `lse` (`B…×Hq×Lq`, f32; f64 for f64) → `dq`, `dk`, `dv` of the \
            types of `q`, `k` and `v`. Per (batch, query head) with the kv head it reads, in \
            f32 (f64 for f64): `P[i,j] = exp(scale · Σ_d q[i,d]·k[j,d] − lse[i])` on the \
            visible keys and 0 on masked ones (`causal` as the forward: top-left aligned); \
            `dv = Pᵀ·dout` with `P` rounded to the element type (as the forward rounds it \
            before its second product, and as flash backward kernels feed it to that GEMM); \
            `dP = dout·vᵀ`; `Δ[i] = Σ_d dout[i,d]·out[i,d]`; `dS = P∘(dP − Δ)` with the \
            unrounded `P`; `dq = scale · dS·k`; `dk = scale · dSᵀ·q`. With grouped heads, \
            `dk` and `dv` of a kv head are the sums over the query heads that read it. Every \
            sum runs in ascending index (query heads, then rows), and each result is rounded \
            to the element type once, at the end. PyTorch's flash/efficient/cuDNN attention \
            backward without mask or dropout; like the forward, no score-sized tensor is a \
            value of the program.",
        operands: &[
            ArgDef::one("q", T),
            ArgDef::one("k", T),
            ArgDef::one("v", T),
            ArgDef::one("out", T),
            ArgDef::one("dout", T),
            ArgDef::one("lse", T),
        ],
        results: &[ArgDef::one("dq", T), ArgDef::one("dk", T), ArgDef::one("dv", T)],
        attributes: &[
            AttrDef::required("scale", AttrConstraint::Float)
                .doc("The forward's factor of the scores."),
            AttrDef::optional("causal", AttrConstraint::Unit)
                .doc("The forward was causal (keys `j > i` masked out)."),
            COST,
        ],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_attention_backward),
        example: "%dq, %dk, %dv = compute.attention_backward %q, %k, %v, %o, %do, %lse {causal, scale = 0.125 : f64} : (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x8x16x64xbf16>, tensor<2x8x16x64xbf16>, tensor<2x8x16xf32>) -> (tensor<2x8x16x64xbf16>, tensor<2x2x16x64xbf16>, tensor<2x2x16x64xbf16>)",
        ..OpDef::EMPTY
    }
);

/// Whether a bf16 `compute.attention` of these sizes runs as one tensor-core kernel on the
/// GPU (`rt.flash_attention`): query and key counts multiples of 64 (the kernel's row blocks
/// and key tiles), a head dim that is a multiple of 16 and a value width that is a multiple
/// of 8, both at most 128 (the accumulators live in registers). Other shapes and types take
/// two GEMMs around a softmax kernel. The cost model uses the same rule.
pub fn flash_attention_supported(lq: i64, lk: i64, d: i64, dv: i64) -> bool {
    lq > 0
        && lk > 0
        && lq % 64 == 0
        && lk % 64 == 0
        && d % 16 == 0
        && (16..=128).contains(&d)
        && dv % 8 == 0
        && (8..=128).contains(&dv)
}

/// The shapes of an attention's `q`, `k`, `v` once they are checked against each other:
/// what the forward's result and log-sum-exp, and the backward's operands and results, must
/// be.
struct AttentionShapes {
    /// `B…×Hq×Lq×Dv`: the forward's result, the backward's `out` and `dout`.
    out: Vec<i64>,
    /// `B…×Hq×Lq`: the log-sum-exp.
    lse: Vec<i64>,
    /// f32, or f64 for f64 attention: the type of the log-sum-exp (what the op computes in,
    /// PyTorch's opmath type of its `logsumexp`).
    lse_elem: FloatKind,
}

/// Checks `q`, `k`, `v` (operands 0–2) of `compute.attention` / `compute.attention_backward`:
/// one float element type, one rank ≥ 2, equal leading dims but for grouped kv heads (dim
/// rank−3 of `k` and `v` equal, dividing `q`'s), one head dim `D`, one key count.
fn verify_qkv(ctx: &Context, op: OpId) -> Result<AttentionShapes, Diagnostic> {
    let view = |i| value_tensor_view(ctx, ctx.operand(op, i)).unwrap();
    let (q, k, v) = (view(0), view(1), view(2));
    if k.elem != q.elem || v.elem != q.elem {
        return Err(ctx.op_error(op, "requires the same element type for q, k and v"));
    }
    let lse_elem = match ctx.type_kind(q.elem) {
        TypeKind::Float(FloatKind::F64) => FloatKind::F64,
        TypeKind::Float(FloatKind::F16 | FloatKind::BF16 | FloatKind::F32) => FloatKind::F32,
        _ => {
            return Err(ctx.op_error(
                op,
                format!(
                    "requires f16, bf16, f32 or f64 elements, got {}",
                    ty_str(ctx, q.elem)
                ),
            ))
        }
    };
    let rank = q.shape.len();
    if rank < 2 || k.shape.len() != rank || v.shape.len() != rank {
        return Err(ctx.op_error(op, "expects q, k and v of one rank, at least 2 (…×L×D)"));
    }
    // From rank 3 on, dim rank−3 is the heads, which k and v may have fewer of.
    let heads = rank.checked_sub(3);
    let differs = |t: &[i64]| (0..rank - 2).any(|i| Some(i) != heads && t[i] != q.shape[i]);
    if differs(k.shape) || differs(v.shape) {
        return Err(ctx.op_error(
            op,
            format!(
                "leading dims differ: q {}, k {}, v {}",
                fmt_shape(q.shape),
                fmt_shape(k.shape),
                fmt_shape(v.shape)
            ),
        ));
    }
    if let Some(h) = heads {
        let (hq, hk, hv) = (q.shape[h], k.shape[h], v.shape[h]);
        if hk != hv {
            return Err(ctx.op_error(
                op,
                format!("k and v head counts differ: k has {hk}, v has {hv}"),
            ));
        }
        if hk <= 0 || hq % hk != 0 {
            return Err(ctx.op_error(
                op,
                format!("kv heads must divide query heads: q has {hq}, k and v have {hk}"),
            ));
        }
    }
    let (d, lk) = (q.shape[rank - 1], k.shape[rank - 2]);
    if k.shape[rank - 1] != d {
        return Err(ctx.op_error(
            op,
            format!("head dim differs: q has {d}, k has {}", k.shape[rank - 1]),
        ));
    }
    if v.shape[rank - 2] != lk {
        return Err(ctx.op_error(
            op,
            format!("key count differs: k has {lk}, v has {}", v.shape[rank - 2]),
        ));
    }
    let mut out = q.shape.to_vec();
    out[rank - 1] = v.shape[rank - 1];
    Ok(AttentionShapes {
        out,
        lse: q.shape[..rank - 1].to_vec(),
        lse_elem,
    })
}

/// Checks that `scale` is finite (the forward's and the backward's).
fn verify_scale(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let scale = ctx
        .inherent_attr(op, "scale")
        .and_then(|a| ctx.attr_as_f64(a))
        .unwrap_or(f64::NAN);
    if !scale.is_finite() {
        return Err(ctx.op_error(op, "requires a finite 'scale'"));
    }
    Ok(())
}

/// The element type an attention value must have: q's, or a float kind (the log-sum-exp's).
#[derive(Clone, Copy)]
enum Elem {
    Of(Type),
    Float(FloatKind),
}

/// Checks that value `v` (called `what` in the message) has shape `shape` and element type
/// `elem`.
fn expect_tensor(
    ctx: &Context,
    op: OpId,
    v: commlir_ir::Value,
    what: &str,
    shape: &[i64],
    elem: Elem,
) -> Result<(), Diagnostic> {
    let t = value_tensor_view(ctx, v).unwrap();
    let (elem_ok, elem_name) = match elem {
        Elem::Of(e) => (t.elem == e, ty_str(ctx, e)),
        Elem::Float(k) => (
            *ctx.type_kind(t.elem) == TypeKind::Float(k),
            if k == FloatKind::F64 { "f64" } else { "f32" }.to_string(),
        ),
    };
    if t.shape == shape && elem_ok {
        return Ok(());
    }
    let dims: String = shape.iter().map(|d| format!("{d}x")).collect();
    Err(ctx.op_error(
        op,
        format!(
            "{what} must be tensor<{dims}{elem_name}>, got {}",
            ty_str(ctx, ctx.value_type(v))
        ),
    ))
}

/// Whether f16/bf16 attention with these head dims runs as cuDNN's fused flash attention
/// (`rt.attention`, the default lowering): both multiples of 8 of at most 128, the sizes its
/// Hopper kernels are measured at here. `comm-to-rt` and the cost model use the same rule.
pub fn cudnn_attention_supported(d: i64, dv: i64) -> bool {
    [d, dv].iter().all(|&x| x > 0 && x % 8 == 0 && x <= 128)
}

fn verify_attention(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let s = verify_qkv(ctx, op)?;
    let elem = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap().elem;
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    if r.elem != elem {
        return Err(ctx.op_error(
            op,
            "requires the same element type for q, k, v and the result",
        ));
    }
    if r.shape != s.out.as_slice() {
        return Err(ctx.op_error(
            op,
            format!(
                "result shape must be {}, got {}",
                fmt_shape(&s.out),
                fmt_shape(r.shape)
            ),
        ));
    }
    let with_lse = ctx.inherent_attr(op, "with_lse").is_some();
    match (with_lse, ctx.results(op).len()) {
        (true, 2) => expect_tensor(
            ctx,
            op,
            ctx.result(op, 1),
            "lse",
            &s.lse,
            Elem::Float(s.lse_elem),
        )?,
        (false, 1) => {}
        (true, n) => {
            return Err(ctx.op_error(
                op,
                format!("with 'with_lse' expects 2 results (result, lse), got {n}"),
            ))
        }
        (false, _) => {
            return Err(ctx.op_error(
                op,
                "has a second result (the log-sum-exp) only with 'with_lse'",
            ))
        }
    }
    verify_scale(ctx, op)
}

fn verify_attention_backward(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let s = verify_qkv(ctx, op)?;
    let elem = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap().elem;
    expect_tensor(ctx, op, ctx.operand(op, 3), "out", &s.out, Elem::Of(elem))?;
    expect_tensor(ctx, op, ctx.operand(op, 4), "dout", &s.out, Elem::Of(elem))?;
    expect_tensor(
        ctx,
        op,
        ctx.operand(op, 5),
        "lse",
        &s.lse,
        Elem::Float(s.lse_elem),
    )?;
    for (i, (grad, of)) in [("dq", "q"), ("dk", "k"), ("dv", "v")].iter().enumerate() {
        let want = value_tensor_view(ctx, ctx.operand(op, i)).unwrap();
        let got = value_tensor_view(ctx, ctx.result(op, i)).unwrap();
        if got.shape != want.shape || got.elem != want.elem {
            return Err(ctx.op_error(
                op,
                format!(
                    "{grad} must have the type of {of}, {}, got {}",
                    ty_str(ctx, ctx.value_type(ctx.operand(op, i))),
                    ty_str(ctx, ctx.value_type(ctx.result(op, i)))
                ),
            ));
        }
    }
    verify_scale(ctx, op)
}

register_op!(
    pub REDUCE_SUM = OpDef {
        name: "compute.reduce_sum",
        summary: "Sum along a dimension",
        description: "The result drops dimension `dim`; accumulation is in f32 for f16/bf16.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[AttrDef::required("dim", AttrConstraint::Integer).doc("The reduced dimension."), COST],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_reduce_sum),
        example: "%b = compute.reduce_sum %a {dim = 1 : i64} : (tensor<8x16xf32>) -> tensor<8xf32>",
        ..OpDef::EMPTY
    }
);

fn verify_reduce_sum(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let a = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    let d = check_dim(ctx, op, a.shape.len())?;
    let mut want = a.shape.to_vec();
    want.remove(d);
    expect_result(ctx, op, r.shape, r.elem == a.elem, &want)
}

register_op!(
    pub REDUCE_MAX = OpDef {
        name: "compute.reduce_max",
        summary: "Maximum along a dimension",
        description: "The result drops dimension `dim`; a NaN in a lane makes that lane's result \
            NaN (as `compute.maximum`). The reduced dimension must not be empty.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[AttrDef::required("dim", AttrConstraint::Integer).doc("The reduced dimension."), COST],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_reduce_max),
        example: "%b = compute.reduce_max %a {dim = 1 : i64} : (tensor<8x16xf32>) -> tensor<8xf32>",
        ..OpDef::EMPTY
    }
);

fn verify_reduce_max(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_reduce_sum(ctx, op)?;
    let a = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    let d = check_dim(ctx, op, a.shape.len())?;
    // A maximum over nothing has no value in the element type (torch raises, too).
    if a.shape[d] == 0 {
        return Err(ctx.op_error(op, format!("cannot reduce dim {d} of size 0")));
    }
    Ok(())
}

fn fmt_shape_or_scalar(s: &[i64]) -> String {
    if s.is_empty() {
        "a rank-0 tensor".into()
    } else {
        format!("shape {}", fmt_shape(s))
    }
}

register_op!(
    pub TRANSPOSE = OpDef {
        name: "compute.transpose",
        summary: "Swap the last two dimensions",
        description: "`M×N → N×M`; for higher ranks the last two dimensions are swapped.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[COST],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_transpose),
        example: "%b = compute.transpose %a : (tensor<8x16xf32>) -> tensor<16x8xf32>",
        ..OpDef::EMPTY
    }
);

fn verify_transpose(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let a = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    if a.shape.len() < 2 {
        return Err(ctx.op_error(op, "expects an operand of rank at least 2"));
    }
    let mut want = a.shape.to_vec();
    let n = want.len();
    want.swap(n - 2, n - 1);
    if r.shape != want || r.elem != a.elem {
        return Err(ctx.op_error(
            op,
            format!(
                "result shape must be {}, got {}",
                fmt_shape(&want),
                fmt_shape(r.shape)
            ),
        ));
    }
    Ok(())
}

register_op!(
    pub PERMUTE = OpDef {
        name: "compute.permute",
        summary: "Permute the dimensions",
        description: "Result dimension `i` is operand dimension `perm[i]` (torch.permute); \
            `perm` is a permutation of `0..rank`.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[
            AttrDef::required("perm", AttrConstraint::I64Array).doc("The permutation (`array<i64: 1, 0, 2>`)."),
            COST,
        ],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_permute),
        example: "%b = compute.permute %a {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>",
        ..OpDef::EMPTY
    }
);

fn verify_permute(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let a = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    let perm = ctx
        .inherent_attr(op, "perm")
        .and_then(|p| ctx.attr_as_i64_array(p))
        .unwrap_or_default();
    let rank = a.shape.len();
    let mut seen = vec![false; rank];
    let is_perm = perm.len() == rank
        && perm.iter().all(|&p| {
            usize::try_from(p)
                .ok()
                .filter(|&p| p < rank && !seen[p])
                .map(|p| seen[p] = true)
                .is_some()
        });
    if !is_perm {
        let list: Vec<String> = perm.iter().map(|p| p.to_string()).collect();
        return Err(ctx.op_error(
            op,
            format!(
                "perm must be a permutation of [0, {rank}), got [{}]",
                list.join(", ")
            ),
        ));
    }
    let want: Vec<i64> = perm.iter().map(|&p| a.shape[p as usize]).collect();
    expect_result(ctx, op, r.shape, r.elem == a.elem, &want)
}

register_op!(
    pub BROADCAST = OpDef {
        name: "compute.broadcast",
        summary: "Broadcast to a larger shape",
        description: "NumPy broadcasting (torch `expand`): shapes are aligned at the right; \
            each operand dimension equals the result's or is 1 (then repeated), and missing \
            leading dimensions are repeated. The element type is unchanged.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[COST],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_broadcast),
        example: "%b = compute.broadcast %a : (tensor<1x4xf32>) -> tensor<3x4xf32>",
        ..OpDef::EMPTY
    }
);

fn verify_broadcast(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let a = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    if a.elem != r.elem {
        return Err(ctx.op_error(op, "requires the same element type for operand and result"));
    }
    if a.shape.len() > r.shape.len() {
        return Err(ctx.op_error(
            op,
            format!(
                "operand rank {} exceeds result rank {}",
                a.shape.len(),
                r.shape.len()
            ),
        ));
    }
    let lead = r.shape.len() - a.shape.len();
    for (i, &d) in a.shape.iter().enumerate() {
        let want = r.shape[lead + i];
        if d != want && d != 1 {
            return Err(ctx.op_error(
                op,
                format!(
                    "operand dim {i} ({d}) must be 1 or equal result dim {} ({want})",
                    lead + i
                ),
            ));
        }
    }
    Ok(())
}

register_op!(
    pub RESHAPE = OpDef {
        name: "compute.reshape",
        summary: "Reinterpret the shape",
        description: "Same elements in row-major order under a new shape with the same element count.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[COST],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_reshape),
        example: "%b = compute.reshape %a : (tensor<8x16xf32>) -> tensor<128xf32>",
        ..OpDef::EMPTY
    }
);

fn verify_reshape(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let a = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    if a.elem != r.elem {
        return Err(ctx.op_error(op, "requires the same element type for operand and result"));
    }
    if a.checked_numel().is_none() || r.checked_numel().is_none() {
        return Err(ctx.op_error(op, "element count overflows"));
    }
    if a.numel() != r.numel() {
        return Err(ctx.op_error(
            op,
            format!(
                "element count must be preserved: {} vs {}",
                a.numel(),
                r.numel()
            ),
        ));
    }
    Ok(())
}

register_op!(
    pub SLICE = OpDef {
        name: "compute.slice",
        summary: "A contiguous slice along one dimension",
        description: "Takes `size` entries starting at `start` along `dim`.",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[
            AttrDef::required("dim", AttrConstraint::Integer),
            AttrDef::required("start", AttrConstraint::Integer),
            AttrDef::required("size", AttrConstraint::Integer),
            COST,
        ],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_slice),
        example: "%b = compute.slice %a {dim = 0 : i64, start = 4 : i64, size = 4 : i64} : (tensor<8x16xf32>) -> tensor<4x16xf32>",
        ..OpDef::EMPTY
    }
);

fn verify_slice(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let a = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    let d = check_dim(ctx, op, a.shape.len())?;
    let start = int_attr(ctx, op, "start").unwrap_or(-1);
    let size = int_attr(ctx, op, "size").unwrap_or(-1);
    if start < 0 || size < 0 || start.checked_add(size).is_none_or(|e| e > a.shape[d]) {
        return Err(ctx.op_error(
            op,
            format!(
                "slice [{start}, {start}+{size}) is out of bounds for dim {d} of size {}",
                a.shape[d]
            ),
        ));
    }
    let mut want = a.shape.to_vec();
    want[d] = size;
    if r.shape != want || r.elem != a.elem {
        return Err(ctx.op_error(
            op,
            format!(
                "result shape must be {}, got {}",
                fmt_shape(&want),
                fmt_shape(r.shape)
            ),
        ));
    }
    Ok(())
}

register_op!(
    pub CONCAT = OpDef {
        name: "compute.concat",
        summary: "Concatenation along a dimension",
        description: "Operands agree on every dimension but `dim`; the result's `dim` is their sum.",
        operands: &[ArgDef::variadic("inputs", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[AttrDef::required("dim", AttrConstraint::Integer), COST],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_concat),
        example: "%c = compute.concat %a, %b {dim = 0 : i64} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>",
        ..OpDef::EMPTY
    }
);

fn verify_concat(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let ins: Vec<_> = ctx
        .operands(op)
        .iter()
        .map(|v| value_tensor_view(ctx, *v).unwrap())
        .collect();
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    let Some(first) = ins.first() else {
        return Err(ctx.op_error(op, "expects at least one operand"));
    };
    let d = check_dim(ctx, op, first.shape.len())?;
    let mut want = first.shape.to_vec();
    want[d] = 0;
    for (i, t) in ins.iter().enumerate() {
        if t.elem != first.elem || t.shape.len() != first.shape.len() {
            return Err(ctx.op_error(
                op,
                format!("operand #{i} must have the rank and element type of operand #0"),
            ));
        }
        for (k, (x, y)) in t.shape.iter().zip(first.shape).enumerate() {
            if k != d && x != y {
                return Err(ctx.op_error(
                    op,
                    format!("operand #{i} differs from operand #0 in dim {k} ({x} vs {y})"),
                ));
            }
        }
        want[d] = want[d]
            .checked_add(t.shape[d])
            .ok_or_else(|| ctx.op_error(op, format!("concatenated dim {d} overflows")))?;
    }
    if r.shape != want || r.elem != first.elem {
        return Err(ctx.op_error(
            op,
            format!(
                "result shape must be {}, got {}",
                fmt_shape(&want),
                fmt_shape(r.shape)
            ),
        ));
    }
    Ok(())
}

register_op!(
    pub CAST = OpDef {
        name: "compute.cast",
        summary: "Element type conversion",
        description: "Same shape, another element type (round-to-nearest-even for narrowing floats).",
        operands: &[ArgDef::one("input", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[COST],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_cast),
        example: "%b = compute.cast %a : (tensor<8x16xf32>) -> tensor<8x16xbf16>",
        ..OpDef::EMPTY
    }
);

fn verify_cast(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let a = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    if a.shape != r.shape {
        return Err(ctx.op_error(
            op,
            format!(
                "requires the same shape, got {} and {}",
                fmt_shape(a.shape),
                fmt_shape(r.shape)
            ),
        ));
    }
    Ok(())
}

register_op!(
    pub FILL = OpDef {
        name: "compute.fill",
        summary: "A tensor filled with a constant",
        description: "Every element is `value`, rounded to the element type.",
        results: &[ArgDef::one("result", T)],
        attributes: &[AttrDef::required("value", AttrConstraint::Float).doc("The fill value."), COST],
        traits: ELEMENTWISE_TRAITS,
        example: "%a = compute.fill {value = 1.000000e+00 : f64} : tensor<8x16xf32>",
        ..OpDef::EMPTY
    }
);

/// The predicates of `compute.compare`.
pub const COMPARE_PREDICATES: &[&str] = &["eq", "ne", "lt", "le", "gt", "ge"];

register_op!(
    pub COMPARE = OpDef {
        name: "compute.compare",
        summary: "Elementwise comparison",
        description: "Compares two tensors of the same (float or integer) type elementwise; \
            the result has their shape and element type `i1`. A comparison involving NaN is \
            false, except `ne`, which is true. Unsigned integers compare unsigned.",
        operands: &[ArgDef::one("lhs", T), ArgDef::one("rhs", T)],
        results: &[ArgDef::one("result", T)],
        attributes: &[
            AttrDef::required("predicate", AttrConstraint::StrEnum(COMPARE_PREDICATES)).doc("The comparison."),
            COST,
        ],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_compare),
        example: "%c = compute.compare %a, %b {predicate = \"lt\"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>",
        ..OpDef::EMPTY
    }
);

fn verify_compare(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let (ta, tb) = (
        ctx.value_type(ctx.operand(op, 0)),
        ctx.value_type(ctx.operand(op, 1)),
    );
    if !crate::shape::same_modulo_encoding(ctx, ta, tb) {
        return Err(ctx.op_error(
            op,
            format!(
                "requires operands of the same type, got {} and {}",
                ty_str(ctx, ta),
                ty_str(ctx, tb)
            ),
        ));
    }
    let a = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    if !is_int_or_float(ctx, a.elem) {
        return Err(ctx.op_error(
            op,
            format!(
                "expects float or integer operands, got {}",
                ty_str(ctx, a.elem)
            ),
        ));
    }
    if r.shape != a.shape || !is_i1(ctx, r.elem) {
        return Err(ctx.op_error(
            op,
            format!(
                "result must be tensor<{}xi1>, got {}",
                fmt_shape(a.shape),
                ty_str(ctx, ctx.value_type(ctx.result(op, 0)))
            ),
        ));
    }
    Ok(())
}

register_op!(
    pub SELECT = OpDef {
        name: "compute.select",
        summary: "Elementwise choice by a condition",
        description: "`result[i] = condition[i] ? true_value[i] : false_value[i]` (torch.where); \
            the condition is `i1` of the values' shape, the values and the result share one type.",
        operands: &[
            ArgDef::one("condition", T),
            ArgDef::one("true_value", T),
            ArgDef::one("false_value", T),
        ],
        results: &[ArgDef::one("result", T)],
        attributes: &[COST],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_select),
        example: "%r = compute.select %c, %a, %b : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>",
        ..OpDef::EMPTY
    }
);

fn verify_select(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let c = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    let (ta, tb, tr) = (
        ctx.value_type(ctx.operand(op, 1)),
        ctx.value_type(ctx.operand(op, 2)),
        ctx.value_type(ctx.result(op, 0)),
    );
    for t in [tb, tr] {
        if !crate::shape::same_modulo_encoding(ctx, ta, t) {
            return Err(ctx.op_error(
                op,
                format!(
                    "requires both values and the result to have the same type, got {} and {}",
                    ty_str(ctx, ta),
                    ty_str(ctx, t)
                ),
            ));
        }
    }
    let a = value_tensor_view(ctx, ctx.operand(op, 1)).unwrap();
    if c.shape != a.shape || !is_i1(ctx, c.elem) {
        return Err(ctx.op_error(
            op,
            format!(
                "condition must be tensor<{}xi1>, got {}",
                fmt_shape(a.shape),
                ty_str(ctx, ctx.value_type(ctx.operand(op, 0)))
            ),
        ));
    }
    Ok(())
}

register_op!(
    pub IOTA = OpDef {
        name: "compute.iota",
        summary: "Indices along a dimension",
        description: "Every element is its index along `dim` (torch.arange, broadcast), \
            converted to the (float or integer) element type.",
        results: &[ArgDef::one("result", T)],
        attributes: &[AttrDef::required("dim", AttrConstraint::Integer).doc("The counted dimension."), COST],
        traits: ELEMENTWISE_TRAITS,
        verify: Some(verify_iota),
        example: "%i = compute.iota {dim = 1 : i64} : tensor<4x8xi64>",
        ..OpDef::EMPTY
    }
);

fn verify_iota(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    check_dim(ctx, op, r.shape.len())?;
    if !is_int_or_float(ctx, r.elem) {
        return Err(ctx.op_error(
            op,
            format!(
                "expects a float or integer element type, got {}",
                ty_str(ctx, r.elem)
            ),
        ));
    }
    Ok(())
}

/// Names of the elementwise binary ops.
pub const BINARY_OPS: &[&str] = &[
    "compute.add",
    "compute.sub",
    "compute.mul",
    "compute.div",
    "compute.maximum",
    "compute.minimum",
];
/// Names of the elementwise unary ops (including `clone`).
pub const UNARY_OPS: &[&str] = &[
    "compute.neg",
    "compute.exp",
    "compute.relu",
    "compute.gelu",
    "compute.silu",
    "compute.tanh",
    "compute.sqrt",
    "compute.rsqrt",
    "compute.clone",
    "compute.sin",
    "compute.cos",
    "compute.sigmoid",
    "compute.log",
];

/// `Ok` when the result has shape `want` and the input's element type (`same_elem`), else the
/// verifier's error naming the expected and the actual result type.
fn expect_result(
    ctx: &Context,
    op: OpId,
    shape: &[i64],
    same_elem: bool,
    want: &[i64],
) -> Result<(), Diagnostic> {
    if shape == want && same_elem {
        return Ok(());
    }
    Err(ctx.op_error(
        op,
        format!(
            "result must be {} of the input's element type, got {}",
            fmt_shape_or_scalar(want),
            ty_str(ctx, ctx.value_type(ctx.result(op, 0)))
        ),
    ))
}
