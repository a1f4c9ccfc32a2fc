//! Semantics of the `compute` dialect: value-semantics tensor math.
//!
//! f16/bf16/f32 arithmetic is carried out in f32 and every result element is rounded to the
//! element type (round-to-nearest-even); f64 is computed in f64; integer types support the
//! data-movement ops and add/sub/mul/div/maximum/minimum/neg/relu/reduce_sum/matmul with
//! two's-complement wrapping. Matmul and reductions accumulate in a fixed order (ascending
//! index along the reduced dimension), so results are deterministic and bit-exact.

use crate::tensor::{Data, Tensor, TensorType};
use commlir_ir::{Context, OpId};

/// Executes compute op `op` on its operand tensors; `result` is the result's type.
/// `Ok(None)`: the sim backend has no semantics for this op.
pub fn execute(
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
        "neg" | "exp" | "relu" | "gelu" | "silu" | "tanh" | "sqrt" | "rsqrt" | "clone" => {
            arity(1)?;
            unary(short, inputs[0])?
        }
        "scale" => {
            arity(1)?;
            let factor = f64_attr("factor")?;
            let f32_factor = factor as f32;
            map_float(inputs[0], |x| x * f32_factor, |x| x * factor)?
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
