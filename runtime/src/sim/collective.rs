//! What each collective computes, independent of how ranks reach it: given every member's
//! inputs (in group-rank order), the outputs each member receives.
//!
//! Reductions combine contributions strictly in rank order (`r0 ⊕ r1 ⊕ r2 …`), in f32 for
//! f16/bf16/f32 and in f64 for f64, rounding once at the end, so results are bit-exact and do
//! not depend on the order in which ranks happened to issue the collective.

use crate::tensor::{Data, Tensor, TensorType};
use std::fmt;

/// The reduction of an all-reduce or reduce-scatter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Avg,
    Max,
    Min,
    Product,
}

impl ReduceOp {
    /// Parses the `reduce_op` attribute's spelling.
    pub fn parse(s: &str) -> Option<ReduceOp> {
        Some(match s {
            "sum" => ReduceOp::Sum,
            "avg" => ReduceOp::Avg,
            "max" => ReduceOp::Max,
            "min" => ReduceOp::Min,
            "product" => ReduceOp::Product,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Avg => "avg",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Product => "product",
        }
    }
}

/// NaN-propagating maximum/minimum (a NaN contribution must show up in the result).
fn fmax<T: PartialOrd + Copy>(a: T, b: T, nan: impl Fn(T) -> bool) -> T {
    if nan(a) || nan(b) {
        if nan(a) {
            a
        } else {
            b
        }
    } else if b > a {
        b
    } else {
        a
    }
}

fn fmin<T: PartialOrd + Copy>(a: T, b: T, nan: impl Fn(T) -> bool) -> T {
    if nan(a) || nan(b) {
        if nan(a) {
            a
        } else {
            b
        }
    } else if b < a {
        b
    } else {
        a
    }
}

/// Elementwise reduction of equally typed tensors, in the given order.
pub fn reduce(op: ReduceOp, parts: &[&Tensor]) -> Tensor {
    let first = parts[0];
    let elem = first.ty.elem;
    let n = parts.len();
    let data = match &first.data {
        Data::F32(_) => Data::F32(fold_ranks(
            parts,
            |d| match d {
                Data::F32(v) => Some(v.as_slice()),
                _ => None,
            },
            |a, x| match op {
                ReduceOp::Sum | ReduceOp::Avg => a + x,
                ReduceOp::Product => a * x,
                ReduceOp::Max => fmax(a, x, f32::is_nan),
                ReduceOp::Min => fmin(a, x, f32::is_nan),
            },
            |a| elem.round(if op == ReduceOp::Avg { a / n as f32 } else { a }),
        )),
        Data::F64(_) => Data::F64(fold_ranks(
            parts,
            |d| match d {
                Data::F64(v) => Some(v.as_slice()),
                _ => None,
            },
            |a, x| match op {
                ReduceOp::Sum | ReduceOp::Avg => a + x,
                ReduceOp::Product => a * x,
                ReduceOp::Max => fmax(a, x, f64::is_nan),
                ReduceOp::Min => fmin(a, x, f64::is_nan),
            },
            |a| if op == ReduceOp::Avg { a / n as f64 } else { a },
        )),
        Data::Int(_) => Data::Int(fold_ranks(
            parts,
            |d| match d {
                Data::Int(v) => Some(v.as_slice()),
                _ => None,
            },
            |a, x| match op {
                ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(x),
                ReduceOp::Product => a.wrapping_mul(x),
                ReduceOp::Max => elem.int_max(a, x),
                ReduceOp::Min => elem.int_min(a, x),
            },
            |a| {
                // NCCL's average of integers divides the sum as the type holds it (wrapped
                // to its width).
                let sum = elem.wrap(a);
                if op == ReduceOp::Avg {
                    elem.int_div(sum, n as i64)
                } else {
                    sum
                }
            },
        )),
    };
    Tensor {
        ty: first.ty.clone(),
        data,
    }
}

/// Combines the ranks' contributions element by element, in rank order (r0 ∘ r1 ∘ r2 …, so
/// the result is bit-exact whatever the schedule), then applies `finish` to each element.
/// Members agree on the element type before a collective completes (the engine checks), so a
/// part of another storage type cannot occur; it is skipped rather than trusted.
fn fold_ranks<T: Copy>(
    parts: &[&Tensor],
    view: impl Fn(&Data) -> Option<&[T]>,
    combine: impl Fn(T, T) -> T,
    finish: impl Fn(T) -> T,
) -> Vec<T> {
    let views: Vec<&[T]> = parts.iter().filter_map(|p| view(&p.data)).collect();
    let Some((head, rest)) = views.split_first() else {
        return Vec::new();
    };
    head.iter()
        .enumerate()
        .map(|(i, &x0)| finish(rest.iter().fold(x0, |a, v| combine(a, v[i]))))
        .collect()
}

/// The kind of a collective, with the attributes members must agree on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CollKind {
    AllReduce(ReduceOp),
    /// Concatenation along dim 0 in group-rank order.
    AllGather,
    /// Reduction, then member `i` keeps rows `[i·d0, (i+1)·d0)`.
    ReduceScatter(ReduceOp),
    /// `splits[r][j]`: rows member `r` sends to member `j`; `None`: equal splits.
    AllToAll {
        splits: Option<Vec<Vec<usize>>>,
    },
    /// Every member receives member `src`'s input.
    Broadcast {
        src: usize,
    },
    /// DTensor's resharding all-to-all (blocking).
    ShardDimAllToAll {
        gather_dim: usize,
        shard_dim: usize,
    },
}

impl fmt::Display for CollKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollKind::AllReduce(op) => write!(f, "all_reduce({})", op.as_str()),
            CollKind::AllGather => f.write_str("all_gather"),
            CollKind::ReduceScatter(op) => write!(f, "reduce_scatter({})", op.as_str()),
            CollKind::AllToAll { splits: None } => f.write_str("all_to_all(equal splits)"),
            CollKind::AllToAll { splits: Some(s) } => write!(f, "all_to_all(splits {s:?})"),
            CollKind::Broadcast { src } => write!(f, "broadcast(src {src})"),
            CollKind::ShardDimAllToAll {
                gather_dim,
                shard_dim,
            } => {
                write!(
                    f,
                    "shard_dim_alltoall(gather_dim {gather_dim}, shard_dim {shard_dim})"
                )
            }
        }
    }
}

/// Everything members must agree on: the kind (with attributes) and the input types.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CollSpec {
    pub kind: CollKind,
    pub inputs: Vec<TensorType>,
}

impl fmt::Display for CollSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of (", self.kind)?;
        for (i, t) in self.inputs.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{t}")?;
        }
        f.write_str(")")
    }
}

impl CollSpec {
    /// Checks that the collective can run on a group of `g` members, and returns the type of
    /// each output (one per input; the same on every member).
    pub fn output_types(&self, g: usize) -> Result<Vec<TensorType>, String> {
        self.inputs
            .iter()
            .map(|t| {
                let mut out = t.clone();
                let need_dim0 = || t.shape.first().copied().ok_or_else(|| format!("expects inputs of rank at least 1, got {t}"));
                match &self.kind {
                    CollKind::AllReduce(_) | CollKind::Broadcast { .. } => {}
                    CollKind::AllGather => out.shape[0] = need_dim0()? * g,
                    CollKind::ReduceScatter(_) => {
                        let d0 = need_dim0()?;
                        if !d0.is_multiple_of(g) {
                            return Err(format!("dim 0 ({d0}) must be divisible by the group size ({g})"));
                        }
                        out.shape[0] = d0 / g;
                    }
                    CollKind::AllToAll { splits } => {
                        let d0 = need_dim0()?;
                        match splits {
                            None if !d0.is_multiple_of(g) => {
                                return Err(format!("dim 0 ({d0}) must be divisible by the group size ({g}) for equal splits"));
                            }
                            None => {}
                            Some(s) => {
                                if s.len() != g || s.iter().any(|row| row.len() != g) {
                                    return Err(format!("split sizes must be {g} arrays of {g} sizes"));
                                }
                                for (r, row) in s.iter().enumerate() {
                                    let sent: usize = row.iter().sum();
                                    let received: usize = (0..g).map(|j| s[j][r]).sum();
                                    if sent != d0 || received != d0 {
                                        return Err(format!("rank {r} sends {sent} and receives {received} rows, but dim 0 is {d0}"));
                                    }
                                }
                            }
                        }
                    }
                    CollKind::ShardDimAllToAll { gather_dim, shard_dim } => {
                        let rank = t.shape.len();
                        if *gather_dim >= rank || *shard_dim >= rank {
                            return Err(format!("gather_dim {gather_dim} / shard_dim {shard_dim} out of range for {t}"));
                        }
                        out.shape[*gather_dim] *= g;
                        if !out.shape[*shard_dim].is_multiple_of(g) {
                            return Err(format!("dim {shard_dim} ({}) must be divisible by the group size ({g})", out.shape[*shard_dim]));
                        }
                        out.shape[*shard_dim] /= g;
                    }
                }
                if let CollKind::Broadcast { src } = self.kind {
                    if src >= g {
                        return Err(format!("src {src} is out of range for a group of size {g}"));
                    }
                }
                Ok(out)
            })
            .collect()
    }
}

/// Runs the collective: `inputs[m]` are member `m`'s tensors (one per coalesced input);
/// returns, per member, its outputs. The spec was checked by [`CollSpec::output_types`].
pub fn execute(kind: &CollKind, inputs: &[Vec<Tensor>]) -> Vec<Vec<Tensor>> {
    let g = inputs.len();
    let n = inputs[0].len();
    let mut out: Vec<Vec<Tensor>> = vec![Vec::with_capacity(n); g];
    for i in 0..n {
        let parts: Vec<&Tensor> = inputs.iter().map(|m| &m[i]).collect();
        let per_member: Vec<Tensor> = match kind {
            CollKind::AllReduce(op) => vec![reduce(*op, &parts); g],
            CollKind::AllGather => vec![Tensor::concat(&parts, 0); g],
            CollKind::ReduceScatter(op) => {
                let d0 = parts[0].ty.shape[0] / g;
                reduce(*op, &parts).split(0, &vec![d0; g])
            }
            CollKind::Broadcast { src } => vec![parts[*src].clone(); g],
            CollKind::AllToAll { splits } => {
                let d0 = parts[0].ty.shape[0];
                let rows = |r: usize| -> Vec<usize> {
                    splits
                        .as_ref()
                        .map_or_else(|| vec![d0 / g; g], |s| s[r].clone())
                };
                let chunks: Vec<Vec<Tensor>> = parts
                    .iter()
                    .enumerate()
                    .map(|(r, p)| p.split(0, &rows(r)))
                    .collect();
                (0..g)
                    .map(|r| {
                        let mine: Vec<&Tensor> = (0..g).map(|j| &chunks[j][r]).collect();
                        Tensor::concat(&mine, 0)
                    })
                    .collect()
            }
            CollKind::ShardDimAllToAll {
                gather_dim,
                shard_dim,
            } => {
                let global = Tensor::concat(&parts, *gather_dim);
                let size = global.ty.shape[*shard_dim] / g;
                global.split(*shard_dim, &vec![size; g])
            }
        };
        for (m, t) in per_member.into_iter().enumerate() {
            out[m].push(t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::ElemType;

    fn t(elem: ElemType, shape: &[usize], v: &[f64]) -> Tensor {
        Tensor::from_f64(
            TensorType {
                elem,
                shape: shape.to_vec(),
            },
            v,
        )
    }

    #[test]
    fn bf16_sum_rounds_once_after_f32_accumulation() {
        // 1 + 2^-8 + 2^-8: step-wise bf16 rounding would give 1 (ties to even) twice; one
        // rounding of the f32 sum gives 1 + 2^-7.
        let e = 2f64.powi(-8);
        let a = t(ElemType::F32, &[1], &[1.0]);
        let a = a.cast(ElemType::BF16);
        let b = t(ElemType::BF16, &[1], &[e]);
        let r = reduce(ReduceOp::Sum, &[&a, &b, &b]);
        assert_eq!(r.to_f64_vec(), vec![1.0 + 2.0 * e]);
    }

    #[test]
    fn integer_reductions_follow_the_type() {
        let int = |width, signedness| ElemType::Int { width, signedness };
        let u64t = int(64, commlir_ir::Signedness::Unsigned);
        let ints = |e: ElemType, v: Vec<i64>| Tensor {
            ty: TensorType {
                elem: e,
                shape: vec![v.len()],
            },
            data: Data::Int(v),
        };
        // ui64 above 2^63 (stored as a negative i64) is the larger value.
        let big = (1u64 << 63) as i64 + 5;
        let a = ints(u64t, vec![big, 7]);
        let b = ints(u64t, vec![3, big]);
        let Data::Int(mx) = reduce(ReduceOp::Max, &[&a, &b]).data else {
            unreachable!()
        };
        assert_eq!(mx, vec![big, big]);
        let Data::Int(mn) = reduce(ReduceOp::Min, &[&a, &b]).data else {
            unreachable!()
        };
        assert_eq!(mn, vec![3, 7]);
        // i32 average: the sum wraps at 32 bits before the division (as in NCCL):
        // 2^31 - 1 + 2^31 - 1 wraps to -2, and -2 / 2 = -1.
        let i32t = int(32, commlir_ir::Signedness::Signless);
        let m = i32::MAX as i64;
        let Data::Int(avg) =
            reduce(ReduceOp::Avg, &[&ints(i32t, vec![m]), &ints(i32t, vec![m])]).data
        else {
            unreachable!()
        };
        assert_eq!(avg, vec![-1]);
        // ui64 average of two values near 2^64: the wrapped sum, divided unsigned.
        let top = u64::MAX as i64; // 2^64 - 1
        let Data::Int(avg) = reduce(
            ReduceOp::Avg,
            &[&ints(u64t, vec![top]), &ints(u64t, vec![2])],
        )
        .data
        else {
            unreachable!()
        };
        assert_eq!(avg, vec![0]); // (2^64 - 1 + 2) mod 2^64 = 1; 1 / 2 = 0
    }

    #[test]
    fn uneven_all_to_all() {
        let x0 = t(ElemType::F32, &[3], &[0.0, 1.0, 2.0]);
        let x1 = t(ElemType::F32, &[3], &[10.0, 11.0, 12.0]);
        // rank 0 sends 1 row to itself, 2 to rank 1; rank 1 sends 2 to rank 0, 1 to itself.
        let kind = CollKind::AllToAll {
            splits: Some(vec![vec![1, 2], vec![2, 1]]),
        };
        let spec = CollSpec {
            kind: kind.clone(),
            inputs: vec![x0.ty.clone()],
        };
        assert!(spec.output_types(2).is_ok());
        let out = execute(&kind, &[vec![x0], vec![x1]]);
        assert_eq!(out[0][0].to_f64_vec(), vec![0.0, 10.0, 11.0]);
        assert_eq!(out[1][0].to_f64_vec(), vec![1.0, 2.0, 12.0]);
    }
}
