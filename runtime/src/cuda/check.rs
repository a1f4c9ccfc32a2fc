//! `--check`: the GPU's results against the sim backend's, element by element, within a
//! tolerance set by the element type.
//!
//! The GPU does not reproduce the sim's bits: cuBLAS sums in another order (and may split K),
//! NCCL reduces in ring/tree order rather than rank order, and the kernels' `exp`/`tanh` are
//! not the host's. Every intermediate result is rounded to the element type, so a one-ulp
//! difference in an intermediate (a bf16 `h = x·w1`, say) feeds sums whose partial values are
//! at the scale of the tensor's largest elements; an output element that cancels to a small
//! value keeps that absolute error. So floats compare within
//! `|gpu - sim| <= abs + rel·|sim| + scale·max|sim|`: `rel` a few ulps of the element type,
//! `scale` one ulp of the type relative to the tensor's largest magnitude, `abs` a floor for
//! values near zero. Integers must match exactly.
//!
//! A float result computed from less precise values carries their error: the f32 loss of a
//! bf16 model is a mean over bf16 activations, each of which may be an ulp of bf16 away from
//! the sim's. So a result's tolerance is that of the least precise float type among the
//! values it depends on in the source program ([`least_precise_inputs`]), when that is looser
//! than its own type's.

use crate::output::RankResults;
use crate::tensor::{Data, ElemType};
use std::fmt::Write as _;

/// Tolerance for one element type: relative to the element, absolute, and relative to the
/// tensor's largest magnitude.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub rel: f64,
    pub abs: f64,
    pub scale: f64,
}

/// The tolerance of an element type: bf16 (8 significant bits) ~1e-2, f16 (11 bits) ~1e-3,
/// f32 ~1e-5, f64 ~1e-12; integers exact. The absolute floors cover sums of many terms whose
/// result is near zero, where a relative bound is meaningless.
pub fn tolerance(elem: ElemType) -> Tolerance {
    match elem {
        ElemType::BF16 => Tolerance {
            rel: 1.6e-2,
            abs: 1e-2,
            scale: 2f64.powi(-8),
        },
        ElemType::F16 => Tolerance {
            rel: 2e-3,
            abs: 1e-3,
            scale: 2f64.powi(-11),
        },
        ElemType::F32 => Tolerance {
            rel: 1e-5,
            abs: 1e-5,
            scale: 1e-6,
        },
        ElemType::F64 => Tolerance {
            rel: 1e-12,
            abs: 1e-12,
            scale: 1e-14,
        },
        _ => Tolerance {
            rel: 0.0,
            abs: 0.0,
            scale: 0.0,
        },
    }
}

/// Significant bits (with the implicit one) of a float element type; 0 for integers.
fn precision(elem: ElemType) -> i32 {
    match elem {
        ElemType::BF16 => 8,
        ElemType::F16 => 11,
        ElemType::F32 => 24,
        ElemType::F64 => 53,
        _ => 0,
    }
}

/// One unit in the last place of `x` in `elem`: the spacing of the element type's values
/// in `x`'s binade, `2^(floor(log2 |x|) - (p - 1))`. (A fixed fraction of `x` such as
/// `2^-8·x` for bf16 is only half an ulp at the top of a binade.)
pub fn ulp(x: f64, elem: ElemType) -> f64 {
    let p = precision(elem);
    if p == 0 || x == 0.0 || !x.is_finite() {
        return 0.0;
    }
    2f64.powi(x.abs().log2().floor() as i32 - (p - 1))
}

/// The first mismatch found, and how many elements were compared.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckReport {
    pub compared: usize,
    pub mismatched: usize,
    /// Elements whose value differs from the sim's at all (within tolerance or not): how
    /// often the GPU's arithmetic lands on another value of the element type.
    pub differing: usize,
    /// The worst relative error (|d| / max(|sim|, the absolute floor)) among compared floats.
    pub worst_rel: f64,
    /// The worst absolute error in ulps of its tensor's largest magnitude.
    pub worst_ulps_of_max: f64,
    /// Readable problem lines (at most a few per result).
    pub problems: Vec<String>,
}

impl CheckReport {
    /// Whether every element was within tolerance and the structures matched.
    pub fn passed(&self) -> bool {
        self.mismatched == 0 && self.problems.is_empty()
    }

    /// The one-line summary `--check` prints.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let verdict = if self.passed() { "PASS" } else { "FAIL" };
        let _ = write!(
            s,
            "check: {verdict}: {} elements compared with the sim backend, {} outside tolerance, {} not identical, worst relative error {:.3e}, worst error {:.3} ulp of the tensor's largest magnitude",
            self.compared, self.mismatched, self.differing, self.worst_rel, self.worst_ulps_of_max
        );
        s
    }
}

/// Compares every rank's results, each within its own element type's tolerance. Both sides
/// list ranks in the same order.
pub fn compare(gpu: &[RankResults], sim: &[RankResults]) -> CheckReport {
    compare_with(gpu, sim, &[])
}

/// The least precise float element type among the values each result of `func` depends on
/// (through the ops of its body, its arguments included), in result order; the result's own
/// type where nothing less precise feeds it, `None` for a result that is no tensor.
pub fn least_precise_inputs(
    ctx: &commlir_ir::Context,
    func: commlir_ir::OpId,
) -> Vec<Option<ElemType>> {
    let Some(&region) = ctx.op_regions(func).first() else {
        return Vec::new();
    };
    let Some(&block) = ctx.region_blocks(region).first() else {
        return Vec::new();
    };
    let Some(ret) = ctx.block_ops(block).last() else {
        return Vec::new();
    };
    let elem = |v: commlir_ir::Value| {
        crate::tensor::TensorType::from_type(ctx, ctx.value_type(v)).map(|t| t.elem)
    };
    let mut out = Vec::new();
    for &r in ctx.operands(ret) {
        let mut least = elem(r);
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![r];
        while let Some(v) = stack.pop() {
            if !seen.insert(v) {
                continue;
            }
            if let (Some(e), Some(l)) = (elem(v), least) {
                if e.is_float() && (!l.is_float() || precision(e) < precision(l)) {
                    least = Some(e);
                }
            }
            if let Some(d) = ctx.defining_op(v) {
                stack.extend(ctx.operands(d).iter().copied());
            }
        }
        out.push(least);
    }
    out
}

/// [`compare`], result `i` within the tolerance of `least[i]` where that float type is less
/// precise than the result's own ([`least_precise_inputs`]).
pub fn compare_with(
    gpu: &[RankResults],
    sim: &[RankResults],
    least: &[Option<ElemType>],
) -> CheckReport {
    let mut rep = CheckReport::default();
    if gpu.len() != sim.len() {
        rep.problems.push(format!(
            "{} ranks ran on the GPU, {} in the sim",
            gpu.len(),
            sim.len()
        ));
        return rep;
    }
    for (g, s) in gpu.iter().zip(sim) {
        if g.results.len() != s.results.len() {
            rep.problems.push(format!(
                "rank {}: {} results on the GPU, {} in the sim",
                g.rank,
                g.results.len(),
                s.results.len()
            ));
            continue;
        }
        for (i, (a, b)) in g.results.iter().zip(&s.results).enumerate() {
            if a.ty != b.ty {
                rep.problems.push(format!(
                    "rank {} result {i}: type {} on the GPU, {} in the sim",
                    g.rank, a.ty, b.ty
                ));
                continue;
            }
            let tol_elem = match least.get(i).copied().flatten() {
                Some(e) if a.ty.elem.is_float() && precision(e) < precision(a.ty.elem) => e,
                _ => a.ty.elem,
            };
            let tol = tolerance(tol_elem);
            let (_, max_abs) = crate::output::summary(b);
            let max_abs = if max_abs.is_finite() { max_abs } else { 0.0 };
            let floor = tol.abs + (tol.scale * max_abs).max(ulp(max_abs, tol_elem));
            let mut shown = 0;
            // Integers compare exactly, as integers: through f64 an i64 above 2^53 would
            // hide a difference in its low bits.
            if let (Data::Int(xs), Data::Int(ys)) = (&a.data, &b.data) {
                for (e, (x, y)) in xs.iter().zip(ys).enumerate() {
                    rep.compared += 1;
                    if x != y {
                        rep.differing += 1;
                        rep.mismatched += 1;
                        if shown < 3 {
                            shown += 1;
                            rep.problems.push(format!(
                                "rank {} result {i} element {e}: GPU {x}, sim {y} (integers compare exactly)",
                                g.rank
                            ));
                        }
                    }
                }
                continue;
            }
            for e in 0..a.numel() {
                let x = a.data.get_f64(e, a.ty.elem);
                let y = b.data.get_f64(e, b.ty.elem);
                rep.compared += 1;
                let d = (x - y).abs();
                if x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan()) {
                    rep.differing += 1;
                }
                let ok = if x.is_nan() || y.is_nan() {
                    x.is_nan() && y.is_nan()
                } else if x.is_infinite() || y.is_infinite() {
                    x == y
                } else {
                    d <= floor + tol.rel * y.abs()
                };
                if a.ty.elem.is_float() && d.is_finite() {
                    rep.worst_rel = rep.worst_rel.max(d / y.abs().max(floor.max(1e-30)));
                    let u = ulp(max_abs, a.ty.elem);
                    if u > 0.0 {
                        rep.worst_ulps_of_max = rep.worst_ulps_of_max.max(d / u);
                    }
                }
                if !ok {
                    rep.mismatched += 1;
                    if shown < 3 {
                        shown += 1;
                        rep.problems.push(format!(
                            "rank {} result {i} element {e}: GPU {x:e}, sim {y:e} (tolerance {floor:.1e} + {:.1e}·|sim|)",
                            g.rank, tol.rel
                        ));
                    }
                }
            }
        }
    }
    rep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{Tensor, TensorType};

    fn one(elem: ElemType, v: &[f64]) -> Vec<RankResults> {
        let ty = TensorType {
            elem,
            shape: vec![v.len()],
        };
        vec![RankResults {
            rank: 0,
            results: vec![Tensor::from_f64(ty, v)],
        }]
    }

    #[test]
    fn within_and_outside_tolerance() {
        let sim = one(ElemType::F32, &[1.0, -2.0, 0.0]);
        let gpu = one(ElemType::F32, &[1.000_005, -2.0, 5e-6]);
        let r = compare(&gpu, &sim);
        assert!(r.passed());
        assert_eq!(r.differing, 2);
        assert!(r.summary().contains(", 2 not identical,"));
        let gpu = one(ElemType::F32, &[1.001, -2.0, 0.0]);
        let r = compare(&gpu, &sim);
        assert!(!r.passed());
        assert_eq!(r.mismatched, 1);
        assert!(r.summary().starts_with("check: FAIL"));
        // bf16 allows about one unit in the last place of 8 bits.
        let sim = one(ElemType::BF16, &[1.0]);
        let gpu = one(ElemType::BF16, &[1.0078125]);
        assert!(compare(&gpu, &sim).passed());
        // A small element of a tensor with large ones: the error scale is the largest
        // magnitude (seen on the GPU: -44 for -46 next to 1544, one bf16 ulp of 1544 is 8).
        let sim = one(ElemType::BF16, &[-46.0, 1544.0]);
        let gpu = one(ElemType::BF16, &[-44.0, 1544.0]);
        assert!(compare(&gpu, &sim).passed());
        let gpu = one(ElemType::BF16, &[-30.0, 1544.0]);
        assert!(!compare(&gpu, &sim).passed());
    }

    #[test]
    fn ulp_of_the_largest_magnitude() {
        assert_eq!(ulp(1.0, ElemType::BF16), 2f64.powi(-7));
        assert_eq!(ulp(1.99, ElemType::BF16), 2f64.powi(-7));
        assert_eq!(ulp(-1544.0, ElemType::BF16), 8.0);
        assert_eq!(ulp(1.0, ElemType::F32), 2f64.powi(-23));
        assert_eq!(ulp(0.0, ElemType::BF16), 0.0);
        // The 4-layer TP transformer at 64x256x1024 on 2 x H200 (tf/tp4_small in
        // docs/benchmarks.md, *GPU: correctness*):
        // an element that cancels to -7.18e6 in a tensor whose largest magnitude is 7.80e8
        // came out -3.90e6 on the GPU, 0.78 ulp of 7.80e8 (4.19e6) away. The old bound,
        // 2^-8 x 7.80e8 = 3.05e6, was 0.73 ulp there and failed it.
        let sim = one(ElemType::BF16, &[-7.176192e6, 7.801405e8]);
        let gpu = one(ElemType::BF16, &[-3.899392e6, 7.801405e8]);
        assert!(compare(&gpu, &sim).passed());
        let gpu = one(ElemType::BF16, &[-1.2e7 - 7.176192e6, 7.801405e8]);
        assert!(!compare(&gpu, &sim).passed());
    }

    #[test]
    fn large_integers_compare_exactly() {
        // 2^60 and 2^60 + 1 are the same f64: an f64 comparison would pass them.
        let ty = TensorType {
            elem: ElemType::Int {
                width: 64,
                signedness: commlir_ir::Signedness::Signless,
            },
            shape: vec![2],
        };
        let t = |v: Vec<i64>| {
            vec![RankResults {
                rank: 0,
                results: vec![Tensor {
                    ty: ty.clone(),
                    data: Data::Int(v),
                }],
            }]
        };
        let big = 1i64 << 60;
        let r = compare(&t(vec![big + 1, -7]), &t(vec![big, -7]));
        assert!(!r.passed());
        assert_eq!((r.compared, r.differing, r.mismatched), (2, 1, 1));
        assert!(
            r.problems[0].contains(&format!("GPU {}, sim {big}", big + 1)),
            "{:?}",
            r.problems
        );
        assert!(compare(&t(vec![big, -7]), &t(vec![big, -7])).passed());
    }

    #[test]
    fn integers_are_exact_and_shapes_must_match() {
        let ity = ElemType::Int {
            width: 32,
            signedness: commlir_ir::Signedness::Signless,
        };
        assert!(!compare(&one(ity, &[1.0]), &one(ity, &[2.0])).passed());
        assert!(compare(&one(ity, &[3.0]), &one(ity, &[3.0])).passed());
        assert!(!compare(
            &one(ElemType::F32, &[1.0, 2.0]),
            &one(ElemType::F32, &[1.0])
        )
        .passed());
        assert!(!compare(
            &one(ElemType::F32, &[f64::NAN]),
            &one(ElemType::F32, &[0.0])
        )
        .passed());
    }
}
