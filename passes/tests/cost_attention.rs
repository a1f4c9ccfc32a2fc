//! The cost model on fused attention: `compute.attention_backward` costs about 2.5× its
//! forward on the two-GEMM path and what cuDNN measured (about 3×) on cuDNN's, cuDNN's
//! forward is within 10 % of its measured time, grouped kv heads cost
//! like the same number of query heads (the scores are per query head), and the log-sum-exp
//! result does not change the estimate beyond its bytes.

mod common;

use commlir_ir::{Context, OpId};
use commlir_passes::analysis::cost::{op_cost, OpCost, H200_NVLINK};

/// The compute cost (ns) of each op of the one function of `src`, in order.
fn costs(src: &str) -> Vec<f64> {
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, src);
    let body = common::bodies(&ctx, m)[0];
    let ops: Vec<OpId> = ctx.block_ops(body).collect();
    ops.iter()
        .filter(|&&op| ctx.op_name(op).starts_with("compute."))
        .map(|&op| match op_cost(&ctx, &H200_NVLINK, op) {
            OpCost::Compute(ns) if ns.is_finite() && ns > 0.0 => ns,
            other => panic!("{}: {other:?}", ctx.op_name(op)),
        })
        .collect()
}

/// A forward (with its log-sum-exp), its backward, and the same forward without grouped
/// heads, for `elem` and `l` positions.
fn program(elem: &str, l: usize) -> String {
    let q = format!("tensor<2x8x{l}x128x{elem}>");
    let kv = format!("tensor<2x2x{l}x128x{elem}>");
    let full = format!("tensor<2x8x{l}x128x{elem}>");
    let lse = format!("tensor<2x8x{l}xf32>");
    format!(
        r#"
func.func @f(%q: {q}, %k: {kv}, %v: {kv}, %kf: {full}, %do: {q}) -> {kv} {{
  %o, %lse = compute.attention %q, %k, %v {{causal, scale = 0.125 : f64, with_lse}} : ({q}, {kv}, {kv}) -> ({q}, {lse})
  %dq, %dk, %dv = compute.attention_backward %q, %k, %v, %o, %do, %lse {{causal, scale = 0.125 : f64}} : ({q}, {kv}, {kv}, {q}, {q}, {lse}) -> ({q}, {kv}, {kv})
  %of = compute.attention %q, %kf, %kf {{causal, scale = 0.125 : f64}} : ({q}, {full}, {full}) -> {q}
  return %dk : {kv}
}}
"#
    )
}

#[test]
fn backward_costs_about_two_and_a_half_forwards() {
    // bf16 at 4096 positions: cuDNN's path (its backward measured at 3.0× its forward on an
    // H200); f32 at 1000: two GEMMs and a softmax.
    for (elem, l, ratios) in [("bf16", 4096, 2.8..=3.1), ("f32", 1000, 2.2..=2.6)] {
        let c = costs(&program(elem, l));
        let (fwd, bwd, full) = (c[0], c[1], c[2]);
        let ratio = bwd / fwd;
        assert!(
            ratios.contains(&ratio),
            "{elem}: backward {bwd} ns vs forward {fwd} ns ({ratio:.2}×)"
        );
        // Grouped kv heads read less, compute the same: at most the ungrouped forward.
        assert!(fwd <= full * 1.01, "{elem}: grouped {fwd} vs full {full}");
        assert!(fwd >= full * 0.9, "{elem}: grouped {fwd} vs full {full}");
    }
}

#[test]
fn cudnn_forward_is_within_ten_percent_of_its_measured_time() {
    // One H200, 2026-11-28 (docs/benchmarks.md, *attention*): 1×32 heads × 4096², causal,
    // head dim 128, bf16: 262 µs forward, 786 µs backward.
    let t = "tensor<1x32x4096x128xbf16>";
    let lse = "tensor<1x32x4096xf32>";
    let c = costs(&format!(
        r#"
func.func @f(%q: {t}, %do: {t}) -> {t} {{
  %o, %l = compute.attention %q, %q, %q {{causal, scale = 0.088 : f64, with_lse}} : ({t}, {t}, {t}) -> ({t}, {lse})
  %dq, %dk, %dv = compute.attention_backward %q, %q, %q, %o, %do, %l {{causal, scale = 0.088 : f64}} : ({t}, {t}, {t}, {t}, {t}, {lse}) -> ({t}, {t}, {t})
  return %dq : {t}
}}
"#
    ));
    for (got, want) in [(c[0], 262e3), (c[1], 786e3)] {
        assert!(
            (got / want - 1.0).abs() <= 0.10,
            "predicted {got} ns, measured {want} ns"
        );
    }
}
