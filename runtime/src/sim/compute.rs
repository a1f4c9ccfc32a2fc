//! Semantics of the `compute` dialect: value-semantics tensor math.
//!
//! f16/bf16/f32 arithmetic is carried out in f32 and every result element is rounded to the
//! element type (round-to-nearest-even); f64 is computed in f64; integer types support the
//! data-movement ops (including broadcast/permute/select/iota), compare, and
//! add/sub/mul/div/maximum/minimum/neg/relu/reduce_sum/reduce_max/matmul with
//! two's-complement wrapping. Matmul and reductions accumulate in a fixed order (ascending
//! index along the reduced dimension), so results are deterministic and bit-exact.

use crate::tensor::{Data, ElemType, Tensor, TensorType};
use commlir_ir::{Context, OpId};

/// Executes compute op `op` of one result on its operand tensors; `result` is the result's
/// type. `Ok(None)`: the sim backend has no semantics for this op. An op of several results
/// (`compute.attention` with `with_lse`, `compute.attention_backward`) is an error here:
/// [`execute_all`] runs those.
pub fn execute(
    ctx: &Context,
    op: OpId,
    inputs: &[&Tensor],
    result: &TensorType,
) -> Result<Option<Tensor>, String> {
    let Some(mut outs) = execute_all(ctx, op, inputs, std::slice::from_ref(result))? else {
        return Ok(None);
    };
    Ok(outs.pop())
}

/// Executes compute op `op` on its operand tensors; `results` are the types of its results,
/// which the computed tensors must have. `Ok(None)`: the sim backend has no semantics for
/// this op.
pub fn execute_all(
    ctx: &Context,
    op: OpId,
    inputs: &[&Tensor],
    results: &[TensorType],
) -> Result<Option<Vec<Tensor>>, String> {
    let name = ctx.op_name(op);
    let short = name.strip_prefix("compute.").unwrap_or(name);
    let scale = || {
        ctx.inherent_attr(op, "scale")
            .and_then(|a| ctx.attr_as_f64(a))
            .ok_or_else(|| "requires float attribute 'scale'".to_string())
    };
    let causal = ctx.inherent_attr(op, "causal").is_some();
    let outs = match short {
        "attention" => {
            let [q, k, v] = inputs else {
                return Err(format!("expects 3 operands, got {}", inputs.len()));
            };
            let with_lse = ctx.inherent_attr(op, "with_lse").is_some();
            attention(q, k, v, scale()?, causal, with_lse)?
        }
        "attention_backward" => attention_backward(inputs, scale()?, causal)?,
        _ => {
            let [result] = results else {
                return Err(format!("expects one result, got {}", results.len()));
            };
            return Ok(execute_one(ctx, op, inputs, result)?.map(|t| vec![t]));
        }
    };
    if outs.len() != results.len() {
        return Err(format!(
            "computes {} results, but has {} result types",
            outs.len(),
            results.len()
        ));
    }
    for (i, (t, want)) in outs.iter().zip(results).enumerate() {
        if t.ty != *want {
            return Err(format!(
                "computes {} for result #{i}, but its type is {want}",
                t.ty
            ));
        }
    }
    Ok(Some(outs))
}

/// [`execute`] for the ops of exactly one result.
fn execute_one(
    ctx: &Context,
    op: OpId,
    inputs: &[&Tensor],
    result: &TensorType,
) -> Result<Option<Tensor>, String> {
    let name = ctx.op_name(op);
    let short = name.strip_prefix("compute.").unwrap_or(name);
    let int_attr = |n: &str| -> Result<i64, String> {
        ctx.inherent_attr(op, n)
            .and_then(|a| ctx.attr_as_i64(a))
            .ok_or_else(|| format!("requires integer attribute '{n}'"))
    };
    let f64_attr = |n: &str| -> Result<f64, String> {
        ctx.inherent_attr(op, n)
            .and_then(|a| ctx.attr_as_f64(a))
            .ok_or_else(|| format!("requires float attribute '{n}'"))
    };
    let arity = |n: usize| -> Result<(), String> {
        if inputs.len() == n {
            Ok(())
        } else {
            Err(format!("expects {n} operands, got {}", inputs.len()))
        }
    };
    let out = match short {
        "add" | "sub" | "mul" | "div" | "maximum" | "minimum" => {
            arity(2)?;
            binary(short, inputs[0], inputs[1])?
        }
        "neg" | "exp" | "relu" | "gelu" | "silu" | "tanh" | "sqrt" | "rsqrt" | "clone" | "sin"
        | "cos" | "sigmoid" | "log" => {
            arity(1)?;
            unary(short, inputs[0])?
        }
        "scale" => {
            arity(1)?;
            scale(inputs[0], f64_attr("factor")?)?
        }
        "softmax" => {
            arity(1)?;
            let dim = dim_attr(int_attr("dim")?, inputs[0])?;
            softmax(inputs[0], dim)?
        }
        "reduce_sum" => {
            arity(1)?;
            let dim = dim_attr(int_attr("dim")?, inputs[0])?;
            reduce_sum(inputs[0], dim)
        }
        "reduce_max" => {
            arity(1)?;
            let dim = dim_attr(int_attr("dim")?, inputs[0])?;
            if inputs[0].ty.shape[dim] == 0 {
                return Err(format!("cannot reduce dim {dim} of size 0"));
            }
            reduce_max(inputs[0], dim)
        }
        "broadcast" => {
            arity(1)?;
            broadcast(inputs[0], result)?
        }
        "permute" => {
            arity(1)?;
            let perm = ctx
                .inherent_attr(op, "perm")
                .and_then(|a| ctx.attr_as_i64_array(a))
                .ok_or("requires integer array attribute 'perm'")?;
            permute(inputs[0], &perm)?
        }
        "compare" => {
            arity(2)?;
            let pred = ctx
                .inherent_attr(op, "predicate")
                .and_then(|a| ctx.attr_as_str(a))
                .ok_or("requires string attribute 'predicate'")?;
            compare(pred, inputs[0], inputs[1], result.elem)?
        }
        "select" => {
            arity(3)?;
            select(inputs[0], inputs[1], inputs[2])?
        }
        "iota" => {
            arity(0)?;
            let dim = usize::try_from(int_attr("dim")?)
                .ok()
                .filter(|d| *d < result.shape.len())
                .ok_or_else(|| format!("dim is out of range for {result}"))?;
            iota(result, dim)
        }
        "matmul" => {
            arity(2)?;
            matmul(inputs[0], inputs[1])?
        }
        "transpose" => {
            arity(1)?;
            if inputs[0].ty.shape.len() < 2 {
                return Err(format!(
                    "expects an operand of rank at least 2, got {}",
                    inputs[0].ty
                ));
            }
            inputs[0].transpose_last2()
        }
        "reshape" => {
            arity(1)?;
            if result.numel() != inputs[0].numel() || result.elem != inputs[0].ty.elem {
                return Err(format!("cannot reshape {} into {result}", inputs[0].ty));
            }
            inputs[0].reshaped(result.shape.clone())
        }
        "slice" => {
            arity(1)?;
            let t = inputs[0];
            let dim = dim_attr(int_attr("dim")?, t)?;
            let (start, size) = (int_attr("start")?, int_attr("size")?);
            let extent = t.ty.shape[dim] as i64;
            if start < 0 || size < 0 || start + size > extent {
                return Err(format!("slice [{start}, {start}+{size}) is out of bounds for dim {dim} of size {extent}"));
            }
            t.slice(dim, start as usize, size as usize)
        }
        "concat" => {
            let first = inputs.first().ok_or("expects at least one operand")?;
            let dim = dim_attr(int_attr("dim")?, first)?;
            for (i, t) in inputs.iter().enumerate() {
                let same_rank =
                    t.ty.shape.len() == first.ty.shape.len() && t.ty.elem == first.ty.elem;
                let agree = same_rank
                    && t.ty
                        .shape
                        .iter()
                        .zip(&first.ty.shape)
                        .enumerate()
                        .all(|(k, (a, b))| k == dim || a == b);
                if !agree {
                    return Err(format!(
                        "operand #{i} ({}) cannot be concatenated with {} along dim {dim}",
                        t.ty, first.ty
                    ));
                }
            }
            Tensor::concat(inputs, dim)
        }
        "cast" => {
            arity(1)?;
            inputs[0].cast(result.elem)
        }
        "fill" => {
            arity(0)?;
            Tensor::splat(result.clone(), f64_attr("value")?)
        }
        _ => return Ok(None),
    };
    if out.ty != *result {
        return Err(format!(
            "computes {}, but its result type is {result}",
            out.ty
        ));
    }
    Ok(Some(out))
}

fn dim_attr(d: i64, t: &Tensor) -> Result<usize, String> {
    usize::try_from(d)
        .ok()
        .filter(|d| *d < t.ty.shape.len())
        .ok_or_else(|| format!("dim {d} is out of range for {}", t.ty))
}

/// Applies `f32f` (then rounds) to f16/bf16/f32 elements, `f64f` to f64 elements.
/// `compute.scale`: `t × factor`, in f32 for the narrow floats (then rounded), in f64 for
/// f64; also a reduce-scatter's `prescale` of each rank's input.
pub fn scale(t: &Tensor, factor: f64) -> Result<Tensor, String> {
    let f32_factor = factor as f32;
    map_float(t, |x| x * f32_factor, |x| x * factor)
}

fn map_float(
    t: &Tensor,
    f32f: impl Fn(f32) -> f32,
    f64f: impl Fn(f64) -> f64,
) -> Result<Tensor, String> {
    let e = t.ty.elem;
    let data = match &t.data {
        Data::F32(v) => Data::F32(v.iter().map(|x| e.round(f32f(*x))).collect()),
        Data::F64(v) => Data::F64(v.iter().map(|x| f64f(*x)).collect()),
        Data::Int(_) => return Err(format!("is not supported on integer element type {e}")),
    };
    Ok(Tensor {
        ty: t.ty.clone(),
        data,
    })
}

/// The tanh approximation of GELU (PyTorch's `approximate="tanh"`).
fn gelu32(x: f32) -> f32 {
    const K: f32 = 0.797_884_6; // sqrt(2 / pi)
    0.5 * x * (1.0 + (K * (x + 0.044_715 * x * x * x)).tanh())
}

fn gelu64(x: f64) -> f64 {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (k * (x + 0.044_715 * x * x * x)).tanh())
}

fn unary(name: &str, t: &Tensor) -> Result<Tensor, String> {
    if name == "clone" {
        return Ok(t.clone());
    }
    if let Data::Int(v) = &t.data {
        let e = t.ty.elem;
        let neg = match name {
            "neg" => true,
            "relu" => false,
            _ => return Err(format!("is not supported on integer element type {e}")),
        };
        let f = |x: i64| {
            if neg {
                x.wrapping_neg()
            } else {
                e.int_max(x, 0)
            }
        };
        return Ok(Tensor {
            ty: t.ty.clone(),
            data: Data::Int(v.iter().map(|&x| e.wrap(f(x))).collect()),
        });
    }
    match name {
        "neg" => map_float(t, |x| -x, |x| -x),
        "exp" => map_float(t, f32::exp, f64::exp),
        // `max` would turn a NaN into 0 and hide a read of uninitialized memory.
        "relu" => map_float(
            t,
            |x| if x < 0.0 { 0.0 } else { x },
            |x| if x < 0.0 { 0.0 } else { x },
        ),
        "gelu" => map_float(t, gelu32, gelu64),
        "silu" => map_float(t, |x| x / (1.0 + (-x).exp()), |x| x / (1.0 + (-x).exp())),
        "tanh" => map_float(t, f32::tanh, f64::tanh),
        "sqrt" => map_float(t, f32::sqrt, f64::sqrt),
        "rsqrt" => map_float(t, |x| 1.0 / x.sqrt(), |x| 1.0 / x.sqrt()),
        "sin" => map_float(t, f32::sin, f64::sin),
        "cos" => map_float(t, f32::cos, f64::cos),
        "sigmoid" => map_float(
            t,
            |x| 1.0 / (1.0 + (-x).exp()),
            |x| 1.0 / (1.0 + (-x).exp()),
        ),
        "log" => map_float(t, f32::ln, f64::ln),
        _ => unreachable!("unary op {name}"),
    }
}

fn nan_max<T: PartialOrd + Copy>(a: T, b: T) -> T {
    // NaN-propagating, like torch.maximum: `a != a` holds exactly for NaN.
    #[allow(clippy::eq_op)]
    if a != a || b != b {
        return if a != a { a } else { b };
    }
    if b > a {
        b
    } else {
        a
    }
}

fn nan_min<T: PartialOrd + Copy>(a: T, b: T) -> T {
    #[allow(clippy::eq_op)]
    if a != a || b != b {
        return if a != a { a } else { b };
    }
    if b < a {
        b
    } else {
        a
    }
}

fn binary(name: &str, a: &Tensor, b: &Tensor) -> Result<Tensor, String> {
    if a.ty != b.ty {
        return Err(format!(
            "requires operands of the same type, got {} and {}",
            a.ty, b.ty
        ));
    }
    let e = a.ty.elem;
    let data = match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => {
            let f: fn(f32, f32) -> f32 = match name {
                "add" => |p, q| p + q,
                "sub" => |p, q| p - q,
                "mul" => |p, q| p * q,
                "div" => |p, q| p / q,
                "maximum" => nan_max,
                _ => nan_min,
            };
            Data::F32(x.iter().zip(y).map(|(p, q)| e.round(f(*p, *q))).collect())
        }
        (Data::F64(x), Data::F64(y)) => {
            let f: fn(f64, f64) -> f64 = match name {
                "add" => |p, q| p + q,
                "sub" => |p, q| p - q,
                "mul" => |p, q| p * q,
                "div" => |p, q| p / q,
                "maximum" => nan_max,
                _ => nan_min,
            };
            Data::F64(x.iter().zip(y).map(|(p, q)| f(*p, *q)).collect())
        }
        (Data::Int(x), Data::Int(y)) => {
            let mut out = Vec::with_capacity(x.len());
            for (p, q) in x.iter().zip(y) {
                let v = match name {
                    "add" => p.wrapping_add(*q),
                    "sub" => p.wrapping_sub(*q),
                    "mul" => p.wrapping_mul(*q),
                    "div" if *q == 0 => return Err("divides by zero".into()),
                    "div" => e.int_div(*p, *q),
                    "maximum" => e.int_max(*p, *q),
                    _ => e.int_min(*p, *q),
                };
                out.push(e.wrap(v));
            }
            Data::Int(out)
        }
        _ => unreachable!("equal types have equal storage"),
    };
    Ok(Tensor {
        ty: a.ty.clone(),
        data,
    })
}

/// `(outer, len, inner)` for iterating lanes along `dim` of a row-major shape.
fn lanes(shape: &[usize], dim: usize) -> (usize, usize, usize) {
    (
        shape[..dim].iter().product(),
        shape[dim],
        shape[dim + 1..].iter().product(),
    )
}

/// The sizes of an attention's `q: B…×Hq×Lq×D`, `k: B…×Hkv×Lk×D`, `v: B…×Hkv×Lk×Dv`, checked
/// against each other as the verifier does (grouped kv heads included).
#[derive(Clone, Copy)]
struct AttnDims {
    /// `q`'s leading blocks (`B…×Hq`), each one `Lq×D` matrix.
    nb: usize,
    /// `k`'s and `v`'s leading blocks (`B…×Hkv`).
    nkv: usize,
    /// Query heads and kv heads (1 and 1 below rank 3).
    hq: usize,
    hkv: usize,
    lq: usize,
    lk: usize,
    d: usize,
    dv: usize,
}

impl AttnDims {
    fn of(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<AttnDims, String> {
        let bad = || format!("cannot attend with {}, {}, {}", q.ty, k.ty, v.ty);
        let r = q.ty.shape.len();
        if r < 2 || k.ty.shape.len() != r || v.ty.shape.len() != r {
            return Err(bad());
        }
        let (qs, ks, vs) = (&q.ty.shape, &k.ty.shape, &v.ty.shape);
        // Dim r−3 holds the heads, of which k and v may have fewer (dividing q's).
        let heads = r.checked_sub(3);
        let (hq, hkv) = heads.map_or((1, 1), |h| (qs[h], ks[h]));
        let same_lead = (0..r - 2).all(|i| Some(i) == heads || (ks[i] == qs[i] && vs[i] == qs[i]));
        let heads_ok = heads.is_none_or(|h| vs[h] == hkv && hkv > 0 && hq % hkv == 0);
        if !same_lead || !heads_ok || ks[r - 1] != qs[r - 1] || vs[r - 2] != ks[r - 2] {
            return Err(bad());
        }
        Ok(AttnDims {
            nb: qs[..r - 2].iter().product(),
            nkv: ks[..r - 2].iter().product(),
            hq,
            hkv,
            lq: qs[r - 2],
            lk: ks[r - 2],
            d: qs[r - 1],
            dv: vs[r - 1],
        })
    }

    /// The `k`/`v` block that `q`'s block `b` reads: the same batch, kv head
    /// `h / (Hq/Hkv)` (PyTorch's `repeat_interleave` of the kv heads).
    fn kv_block(&self, b: usize) -> usize {
        (b / self.hq) * self.hkv + (b % self.hq) / (self.hq / self.hkv)
    }

    /// How many keys row `i` sees: the first `i + 1` (top-left aligned) when causal.
    fn visible(&self, i: usize, causal: bool) -> usize {
        if causal {
            (i + 1).min(self.lk)
        } else {
            self.lk
        }
    }
}

/// The element type of an attention's log-sum-exp: f32, or f64 for f64 attention.
fn lse_elem(e: ElemType) -> ElemType {
    if e == ElemType::F64 {
        ElemType::F64
    } else {
        ElemType::F32
    }
}

/// `compute.attention`: per query row (of the kv head it reads, for grouped heads), the
/// scaled scores against every key it may see (the first `i + 1` with `causal`), their
/// softmax (max-subtracted exponentials over their sum) rounded to the element type, and
/// the probability-weighted sum of the value rows, each sum in ascending index; f32 (f64 for
/// f64), the result rounded to the element type. This is `matmul(softmax(scores) : T, v)`,
/// as flash attention computes it too (its second product reads the probabilities in the
/// element type). A row that sees no key is zeros (PyTorch's safe softmax). With `with_lse`
/// the second result is each row's `max + ln(Σ exp(s − max))` in f32 (f64), unrounded:
/// `-inf` for a row that sees no key.
fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f64,
    causal: bool,
    with_lse: bool,
) -> Result<Vec<Tensor>, String> {
    let dims = AttnDims::of(q, k, v)?;
    let AttnDims {
        nb, lq, lk, d, dv, ..
    } = dims;
    let e = q.ty.elem;
    let lead = &q.ty.shape[..q.ty.shape.len() - 2];
    let mut shape = lead.to_vec();
    shape.extend([lq, dv]);
    let mut lse_shape = lead.to_vec();
    lse_shape.push(lq);
    macro_rules! attend {
        ($x:expr, $y:expr, $z:expr, $t:ty, $fin:expr) => {{
            let sc = scale as $t;
            let mut out = vec![0 as $t; nb * lq * dv];
            let mut lse = vec![<$t>::NEG_INFINITY; nb * lq];
            let mut s: Vec<$t> = Vec::with_capacity(lk);
            for b in 0..nb {
                let kb = dims.kv_block(b);
                for i in 0..lq {
                    let qi = &$x[(b * lq + i) * d..][..d];
                    let n = dims.visible(i, causal);
                    if n == 0 {
                        continue;
                    }
                    s.clear();
                    for j in 0..n {
                        let kj = &$y[(kb * lk + j) * d..][..d];
                        let dot = qi.iter().zip(kj).fold(0 as $t, |a, (p, q)| a + p * q);
                        s.push(dot * sc);
                    }
                    let m = s.iter().copied().fold(<$t>::NEG_INFINITY, nan_max);
                    s.iter_mut().for_each(|x| *x = (*x - m).exp());
                    let l = s.iter().fold(0 as $t, |a, x| a + x);
                    lse[b * lq + i] = m + l.ln();
                    s.iter_mut().for_each(|x| *x = $fin(*x / l));
                    let o = &mut out[(b * lq + i) * dv..][..dv];
                    for (c, oc) in o.iter_mut().enumerate() {
                        let acc = s
                            .iter()
                            .enumerate()
                            .fold(0 as $t, |a, (j, p)| a + p * $z[(kb * lk + j) * dv + c]);
                        *oc = $fin(acc);
                    }
                }
            }
            (out, lse)
        }};
    }
    let (out, lse) = match (&q.data, &k.data, &v.data) {
        (Data::F32(x), Data::F32(y), Data::F32(z)) => {
            let (o, l) = attend!(x, y, z, f32, |a: f32| e.round(a));
            (Data::F32(o), Data::F32(l))
        }
        (Data::F64(x), Data::F64(y), Data::F64(z)) => {
            let (o, l) = attend!(x, y, z, f64, |a| a);
            (Data::F64(o), Data::F64(l))
        }
        _ => return Err(format!("is not supported on element type {e}")),
    };
    let mut res = vec![Tensor {
        ty: TensorType { shape, elem: e },
        data: out,
    }];
    if with_lse {
        res.push(Tensor {
            ty: TensorType {
                shape: lse_shape,
                elem: lse_elem(e),
            },
            data: lse,
        });
    }
    Ok(res)
}

/// `compute.attention_backward`, per `q` block `b` and row `i` (the kv block `kb` it reads):
/// `P[j] = exp(scale·q[i]·k[j] − lse[i])` on the visible keys; `dv[kb] += round_T(P)ᵀ·dout`
/// (the probabilities rounded to the element type, as the forward's second product reads
/// them); `dP[j] = dout[i]·v[j]`, `Δ = dout[i]·out[i]`, `dS = P∘(dP − Δ)` with the unrounded
/// `P`; `dq[i] = scale · Σ_j dS[j]·k[j]`, `dk[kb] += dSᵀ·q[i]`. Everything in f32 (f64 for
/// f64), every sum in ascending index: `dk` and `dv` accumulate over `q`'s blocks in order
/// (so the query heads sharing a kv head add up head by head, row by row), and each result
/// is scaled (`dk` by `scale`) and rounded once at the end.
fn attention_backward(ins: &[&Tensor], scale: f64, causal: bool) -> Result<Vec<Tensor>, String> {
    let [q, k, v, out, dout, lse] = ins else {
        return Err(format!("expects 6 operands, got {}", ins.len()));
    };
    let dims = AttnDims::of(q, k, v)?;
    let AttnDims {
        nb,
        nkv,
        lq,
        lk,
        d,
        dv,
        ..
    } = dims;
    let e = q.ty.elem;
    let r = q.ty.shape.len();
    let mut out_shape = q.ty.shape.clone();
    out_shape[r - 1] = dv;
    let want_out = TensorType {
        shape: out_shape,
        elem: e,
    };
    let want_lse = TensorType {
        shape: q.ty.shape[..r - 1].to_vec(),
        elem: lse_elem(e),
    };
    if out.ty != want_out || dout.ty != want_out || lse.ty != want_lse {
        return Err(format!(
            "expects out and dout of type {want_out} and lse of type {want_lse}, got {}, {} and {}",
            out.ty, dout.ty, lse.ty
        ));
    }
    macro_rules! backward {
        ($x:expr, $y:expr, $z:expr, $o:expr, $g:expr, $l:expr, $t:ty, $fin:expr) => {{
            let sc = scale as $t;
            let mut dq = vec![0 as $t; nb * lq * d];
            let mut dk = vec![0 as $t; nkv * lk * d];
            let mut dvv = vec![0 as $t; nkv * lk * dv];
            let mut p: Vec<$t> = Vec::with_capacity(lk);
            let mut ds: Vec<$t> = Vec::with_capacity(lk);
            for b in 0..nb {
                let kb = dims.kv_block(b);
                for i in 0..lq {
                    let row = b * lq + i;
                    let qi = &$x[row * d..][..d];
                    let gi = &$g[row * dv..][..dv];
                    let oi = &$o[row * dv..][..dv];
                    let li = $l[row];
                    let n = dims.visible(i, causal);
                    p.clear();
                    for j in 0..n {
                        let kj = &$y[(kb * lk + j) * d..][..d];
                        let dot = qi.iter().zip(kj).fold(0 as $t, |a, (x, y)| a + x * y);
                        p.push((dot * sc - li).exp());
                    }
                    let delta = gi.iter().zip(oi).fold(0 as $t, |a, (x, y)| a + x * y);
                    ds.clear();
                    for (j, pj) in p.iter().enumerate() {
                        let vj = &$z[(kb * lk + j) * dv..][..dv];
                        let dp = gi.iter().zip(vj).fold(0 as $t, |a, (x, y)| a + x * y);
                        ds.push(pj * (dp - delta));
                        // dv[kb, j] += round_T(P[j]) · dout[i]
                        let pr = $fin(*pj);
                        let acc = &mut dvv[(kb * lk + j) * dv..][..dv];
                        acc.iter_mut().zip(gi).for_each(|(a, g)| *a += pr * g);
                    }
                    let dqi = &mut dq[row * d..][..d];
                    for (c, dqc) in dqi.iter_mut().enumerate() {
                        *dqc = ds
                            .iter()
                            .enumerate()
                            .fold(0 as $t, |a, (j, s)| a + s * $y[(kb * lk + j) * d + c]);
                    }
                    for (j, s) in ds.iter().enumerate() {
                        let acc = &mut dk[(kb * lk + j) * d..][..d];
                        acc.iter_mut().zip(qi).for_each(|(a, x)| *a += s * x);
                    }
                }
            }
            let done = |xs: Vec<$t>, f: $t| xs.into_iter().map(|x| $fin(x * f)).collect();
            (done(dq, sc), done(dk, sc), done(dvv, 1 as $t))
        }};
    }
    let (dq, dk, dvv) = match (&q.data, &k.data, &v.data, &out.data, &dout.data, &lse.data) {
        (Data::F32(x), Data::F32(y), Data::F32(z), Data::F32(o), Data::F32(g), Data::F32(l)) => {
            let (a, b, c) = backward!(x, y, z, o, g, l, f32, |a: f32| e.round(a));
            (Data::F32(a), Data::F32(b), Data::F32(c))
        }
        (Data::F64(x), Data::F64(y), Data::F64(z), Data::F64(o), Data::F64(g), Data::F64(l)) => {
            let (a, b, c) = backward!(x, y, z, o, g, l, f64, |a: f64| a);
            (Data::F64(a), Data::F64(b), Data::F64(c))
        }
        _ => return Err(format!("is not supported on element type {e}")),
    };
    Ok(vec![
        Tensor {
            ty: q.ty.clone(),
            data: dq,
        },
        Tensor {
            ty: k.ty.clone(),
            data: dk,
        },
        Tensor {
            ty: v.ty.clone(),
            data: dvv,
        },
    ])
}

fn softmax(t: &Tensor, dim: usize) -> Result<Tensor, String> {
    let (outer, len, inner) = lanes(&t.ty.shape, dim);
    let e = t.ty.elem;
    let mut out = t.clone();
    match &mut out.data {
        Data::F32(v) => {
            for o in 0..outer {
                for i in 0..inner {
                    let at = |k: usize| (o * len + k) * inner + i;
                    let src = |k: usize| match &t.data {
                        Data::F32(s) => s[at(k)],
                        _ => unreachable!(),
                    };
                    let m = (0..len).map(src).fold(f32::NEG_INFINITY, nan_max);
                    let exps: Vec<f32> = (0..len).map(|k| (src(k) - m).exp()).collect();
                    let sum: f32 = exps.iter().fold(0.0, |acc, x| acc + x);
                    for (k, x) in exps.iter().enumerate() {
                        v[at(k)] = e.round(x / sum);
                    }
                }
            }
        }
        Data::F64(v) => {
            let src = v.clone();
            for o in 0..outer {
                for i in 0..inner {
                    let at = |k: usize| (o * len + k) * inner + i;
                    let m = (0..len)
                        .map(|k| src[at(k)])
                        .fold(f64::NEG_INFINITY, nan_max);
                    let exps: Vec<f64> = (0..len).map(|k| (src[at(k)] - m).exp()).collect();
                    let sum: f64 = exps.iter().fold(0.0, |acc, x| acc + x);
                    for (k, x) in exps.iter().enumerate() {
                        v[at(k)] = x / sum;
                    }
                }
            }
        }
        Data::Int(_) => return Err(format!("is not supported on integer element type {e}")),
    }
    Ok(out)
}

fn reduce_sum(t: &Tensor, dim: usize) -> Tensor {
    let (outer, len, inner) = lanes(&t.ty.shape, dim);
    let e = t.ty.elem;
    let mut shape = t.ty.shape.clone();
    shape.remove(dim);
    let idx = |o: usize, k: usize, i: usize| (o * len + k) * inner + i;
    let data = match &t.data {
        Data::F32(v) => Data::F32(
            (0..outer)
                .flat_map(|o| (0..inner).map(move |i| (o, i)))
                .map(|(o, i)| e.round((0..len).fold(0.0f32, |acc, k| acc + v[idx(o, k, i)])))
                .collect(),
        ),
        Data::F64(v) => Data::F64(
            (0..outer)
                .flat_map(|o| (0..inner).map(move |i| (o, i)))
                .map(|(o, i)| (0..len).fold(0.0f64, |acc, k| acc + v[idx(o, k, i)]))
                .collect(),
        ),
        Data::Int(v) => Data::Int(
            (0..outer)
                .flat_map(|o| (0..inner).map(move |i| (o, i)))
                .map(|(o, i)| {
                    e.wrap((0..len).fold(0i64, |acc, k| acc.wrapping_add(v[idx(o, k, i)])))
                })
                .collect(),
        ),
    };
    Tensor {
        ty: TensorType { elem: e, shape },
        data,
    }
}

fn reduce_max(t: &Tensor, dim: usize) -> Tensor {
    let (outer, len, inner) = lanes(&t.ty.shape, dim);
    let e = t.ty.elem;
    let mut shape = t.ty.shape.clone();
    shape.remove(dim);
    let idx = |o: usize, k: usize, i: usize| (o * len + k) * inner + i;
    let lanes = (0..outer).flat_map(|o| (0..inner).map(move |i| (o, i)));
    // Folding from the lane's first element (the dim is non-empty) keeps every element type
    // exact and needs no identity; the maximum of rounded values is already rounded.
    let data = match &t.data {
        Data::F32(v) => Data::F32(
            lanes
                .map(|(o, i)| (1..len).fold(v[idx(o, 0, i)], |m, k| nan_max(m, v[idx(o, k, i)])))
                .collect(),
        ),
        Data::F64(v) => Data::F64(
            lanes
                .map(|(o, i)| (1..len).fold(v[idx(o, 0, i)], |m, k| nan_max(m, v[idx(o, k, i)])))
                .collect(),
        ),
        Data::Int(v) => Data::Int(
            lanes
                .map(|(o, i)| (1..len).fold(v[idx(o, 0, i)], |m, k| e.int_max(m, v[idx(o, k, i)])))
                .collect(),
        ),
    };
    Tensor {
        ty: TensorType { elem: e, shape },
        data,
    }
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The tensor of shape `shape` whose element at index `j` is `t`'s element at flat position
/// `sum(j[i] * src_strides[i])`: broadcast (stride 0) and permute (permuted strides) alike.
fn strided_gather(t: &Tensor, shape: Vec<usize>, src_strides: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let mut idx = Vec::with_capacity(n);
    let mut j = vec![0usize; shape.len()];
    let mut at = 0usize;
    for _ in 0..n {
        idx.push(at);
        // Odometer step on the row-major result index, updating the source offset.
        for d in (0..shape.len()).rev() {
            j[d] += 1;
            at += src_strides[d];
            if j[d] < shape[d] {
                break;
            }
            at -= src_strides[d] * j[d];
            j[d] = 0;
        }
    }
    Tensor {
        ty: TensorType {
            elem: t.ty.elem,
            shape,
        },
        data: t.data.gather(&idx),
    }
}

fn broadcast(t: &Tensor, result: &TensorType) -> Result<Tensor, String> {
    let (src, dst) = (&t.ty.shape, &result.shape);
    let fits = src.len() <= dst.len()
        && t.ty.elem == result.elem
        && src
            .iter()
            .zip(&dst[dst.len() - src.len()..])
            .all(|(s, d)| s == d || *s == 1);
    if !fits {
        return Err(format!("cannot broadcast {} to {result}", t.ty));
    }
    let lead = dst.len() - src.len();
    let st = strides(src);
    let src_strides: Vec<usize> = (0..dst.len())
        .map(|i| match i.checked_sub(lead) {
            Some(k) if src[k] != 1 => st[k],
            _ => 0,
        })
        .collect();
    Ok(strided_gather(t, dst.clone(), &src_strides))
}

fn permute(t: &Tensor, perm: &[i64]) -> Result<Tensor, String> {
    let rank = t.ty.shape.len();
    let mut seen = vec![false; rank];
    let perm: Vec<usize> = perm
        .iter()
        .map(|&p| {
            let p = usize::try_from(p).ok().filter(|&p| p < rank && !seen[p])?;
            seen[p] = true;
            Some(p)
        })
        .collect::<Option<_>>()
        .filter(|p: &Vec<usize>| p.len() == rank)
        .ok_or_else(|| format!("{perm:?} is not a permutation of the dims of {}", t.ty))?;
    let st = strides(&t.ty.shape);
    let shape = perm.iter().map(|&p| t.ty.shape[p]).collect();
    let src_strides: Vec<usize> = perm.iter().map(|&p| st[p]).collect();
    Ok(strided_gather(t, shape, &src_strides))
}

fn compare(pred: &str, a: &Tensor, b: &Tensor, out: ElemType) -> Result<Tensor, String> {
    if !matches!(out, ElemType::Int { width: 1, .. }) {
        return Err(format!(
            "produces i1, but its result type has element type {out}"
        ));
    }
    if a.ty != b.ty {
        return Err(format!(
            "requires operands of the same type, got {} and {}",
            a.ty, b.ty
        ));
    }
    // On partially ordered floats every predicate but `ne` is false for NaN, which is what
    // `PartialOrd` gives; `ne` is `!eq` for the same reason.
    fn test<T: PartialOrd>(pred: &str, p: T, q: T) -> Option<bool> {
        Some(match pred {
            "eq" => p == q,
            "ne" => p != q,
            "lt" => p < q,
            "le" => p <= q,
            "gt" => p > q,
            "ge" => p >= q,
            _ => return None,
        })
    }
    let e = a.ty.elem;
    let bits: Option<Vec<bool>> = match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => x.iter().zip(y).map(|(p, q)| test(pred, p, q)).collect(),
        (Data::F64(x), Data::F64(y)) => x.iter().zip(y).map(|(p, q)| test(pred, p, q)).collect(),
        // Only ui64 storage does not order as its values (see `ElemType::is_u64`).
        (Data::Int(x), Data::Int(y)) if e.is_u64() => x
            .iter()
            .zip(y)
            .map(|(p, q)| test(pred, *p as u64, *q as u64))
            .collect(),
        (Data::Int(x), Data::Int(y)) => x.iter().zip(y).map(|(p, q)| test(pred, p, q)).collect(),
        _ => unreachable!("equal types have equal storage"),
    };
    let bits: Vec<i64> = bits
        .map(|v| v.into_iter().map(i64::from).collect())
        .ok_or_else(|| format!("unknown predicate \"{pred}\""))?;
    Ok(Tensor {
        ty: TensorType {
            elem: out,
            shape: a.ty.shape.clone(),
        },
        data: Data::Int(bits),
    })
}

fn select(c: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor, String> {
    let Data::Int(cond) = &c.data else {
        return Err(format!("requires an i1 condition, got {}", c.ty));
    };
    if a.ty != b.ty || c.ty.shape != a.ty.shape {
        return Err(format!(
            "cannot select between {} and {} by {}",
            a.ty, b.ty, c.ty
        ));
    }
    let pick = |i: usize| cond[i] != 0;
    let data = match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => Data::F32(
            (0..x.len())
                .map(|i| if pick(i) { x[i] } else { y[i] })
                .collect(),
        ),
        (Data::F64(x), Data::F64(y)) => Data::F64(
            (0..x.len())
                .map(|i| if pick(i) { x[i] } else { y[i] })
                .collect(),
        ),
        (Data::Int(x), Data::Int(y)) => Data::Int(
            (0..x.len())
                .map(|i| if pick(i) { x[i] } else { y[i] })
                .collect(),
        ),
        _ => unreachable!("equal types have equal storage"),
    };
    Ok(Tensor {
        ty: a.ty.clone(),
        data,
    })
}

fn iota(ty: &TensorType, dim: usize) -> Tensor {
    let (outer, len, inner) = lanes(&ty.shape, dim);
    let index = (0..outer).flat_map(|_| (0..len).flat_map(|k| std::iter::repeat_n(k, inner)));
    let e = ty.elem;
    let data = match e {
        ElemType::F64 => Data::F64(index.map(|k| k as f64).collect()),
        e if e.is_float() => Data::F32(index.map(|k| e.round_from_f64(k as f64)).collect()),
        // Integers wrap like every other integer result (an i8 iota over 300 entries wraps).
        e => Data::Int(index.map(|k| e.wrap(k as i64)).collect()),
    };
    Tensor {
        ty: ty.clone(),
        data,
    }
}

pub(super) fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor, String> {
    let (sa, sb) = (&a.ty.shape, &b.ty.shape);
    let (batch, m, k, n) = match (sa.as_slice(), sb.as_slice()) {
        ([m, k1], [k2, n]) if k1 == k2 => (1, *m, *k1, *n),
        ([b1, m, k1], [b2, k2, n]) if k1 == k2 && b1 == b2 => (*b1, *m, *k1, *n),
        _ => return Err(format!("cannot multiply {} by {}", a.ty, b.ty)),
    };
    if a.ty.elem != b.ty.elem {
        return Err(format!(
            "requires operands of the same element type, got {} and {}",
            a.ty, b.ty
        ));
    }
    let e = a.ty.elem;
    let mut shape = if sa.len() == 3 { vec![batch] } else { vec![] };
    shape.extend([m, n]);
    // Row-major i-k-j loop: each output element still accumulates its products in ascending
    // k, which is the order that fixes the rounding; only the loop nest is cache-friendly.
    macro_rules! mm {
        ($x:expr, $y:expr, $zero:expr, $acc:expr, $fin:expr) => {{
            let mut out = Vec::with_capacity(batch * m * n);
            let mut row = vec![$zero; n];
            for bi in 0..batch {
                let (xa, yb) = (
                    &$x[bi * m * k..(bi + 1) * m * k],
                    &$y[bi * k * n..(bi + 1) * k * n],
                );
                for i in 0..m {
                    row.iter_mut().for_each(|r| *r = $zero);
                    for kk in 0..k {
                        let p = xa[i * k + kk];
                        let yr = &yb[kk * n..(kk + 1) * n];
                        for (r, q) in row.iter_mut().zip(yr) {
                            *r = $acc(*r, p, *q);
                        }
                    }
                    out.extend(row.iter().map(|r| $fin(*r)));
                }
            }
            out
        }};
    }
    let data = match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => Data::F32(mm!(
            x,
            y,
            0.0f32,
            |r: f32, p: f32, q: f32| r + p * q,
            |r: f32| e.round(r)
        )),
        (Data::F64(x), Data::F64(y)) => Data::F64(mm!(
            x,
            y,
            0.0f64,
            |r: f64, p: f64, q: f64| r + p * q,
            |r: f64| r
        )),
        (Data::Int(x), Data::Int(y)) => Data::Int(mm!(
            x,
            y,
            0i64,
            |r: i64, p: i64, q: i64| r.wrapping_add(p.wrapping_mul(q)),
            |r: i64| e.wrap(r)
        )),
        _ => unreachable!("equal element types have equal storage"),
    };
    Ok(Tensor {
        ty: TensorType { elem: e, shape },
        data,
    })
}
