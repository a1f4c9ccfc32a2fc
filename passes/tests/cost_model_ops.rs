//! The cost model on the compute ops Llama blocks need: every one gets a finite, positive
//! compute cost (none falls through to free or panics); sin/cos/sigmoid/log cost like exp
//! (transcendental), compare/select/permute like the other memory-bound ops; a broadcast reads
//! its small operand once, so it is cheaper than an add writing the same tensor.

mod common;

use commlir_ir::{Context, OpId};
use commlir_passes::analysis::cost::{op_cost, OpCost, H200_NVLINK};

const OPS: &str = r#"
func.func @f(%a: tensor<4096x4096xf32>, %b: tensor<4096x4096xf32>, %r: tensor<1x4096xf32>) -> tensor<4096x4096xf32> {
  %exp = compute.exp %a : tensor<4096x4096xf32>
  %sin = compute.sin %a : tensor<4096x4096xf32>
  %cos = compute.cos %a : tensor<4096x4096xf32>
  %sigmoid = compute.sigmoid %a : tensor<4096x4096xf32>
  %log = compute.log %a : tensor<4096x4096xf32>
  %neg = compute.neg %a : tensor<4096x4096xf32>
  %add = compute.add %a, %b : tensor<4096x4096xf32>
  %compare = compute.compare %a, %b {predicate = "lt"} : (tensor<4096x4096xf32>, tensor<4096x4096xf32>) -> tensor<4096x4096xi1>
  %select = compute.select %compare, %a, %b : (tensor<4096x4096xi1>, tensor<4096x4096xf32>, tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  %permute = compute.permute %a {perm = array<i64: 1, 0>} : (tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  %transpose = compute.transpose %a : (tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  %broadcast = compute.broadcast %r : (tensor<1x4096xf32>) -> tensor<4096x4096xf32>
  %reduce_max = compute.reduce_max %a {dim = 1 : i64} : (tensor<4096x4096xf32>) -> tensor<4096xf32>
  %reduce_sum = compute.reduce_sum %a {dim = 1 : i64} : (tensor<4096x4096xf32>) -> tensor<4096xf32>
  %iota = compute.iota {dim = 0 : i64} : tensor<4096x4096xf32>
  %fill = compute.fill {value = 1.0 : f64} : tensor<4096x4096xf32>
  return %a : tensor<4096x4096xf32>
}
"#;

/// The cost (ns) of each op of `OPS`, by the name of its result.
fn costs() -> std::collections::HashMap<String, f64> {
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, OPS);
    let body = common::bodies(&ctx, m)[0];
    let ops: Vec<OpId> = ctx.block_ops(body).collect();
    let names = [
        "exp",
        "sin",
        "cos",
        "sigmoid",
        "log",
        "neg",
        "add",
        "compare",
        "select",
        "permute",
        "transpose",
        "broadcast",
        "reduce_max",
        "reduce_sum",
        "iota",
        "fill",
    ];
    names
        .iter()
        .zip(&ops)
        .map(|(n, &op)| {
            assert_eq!(ctx.op_name(op), format!("compute.{n}"));
            let ns = match op_cost(&ctx, &H200_NVLINK, op) {
                OpCost::Compute(ns) => ns,
                other => panic!("compute.{n}: {other:?}"),
            };
            assert!(ns.is_finite() && ns > 0.0, "compute.{n}: {ns} ns");
            (n.to_string(), ns)
        })
        .collect()
}

#[test]
fn model_ops_cost_like_their_kind() {
    let c = costs();
    for n in ["sin", "cos", "sigmoid", "log"] {
        assert_eq!(c[n], c["exp"], "{n} costs like exp");
    }
    assert_eq!(c["permute"], c["transpose"]);
    assert_eq!(c["reduce_max"], c["reduce_sum"]);
    assert_eq!(c["iota"], c["fill"]);
    // Memory-bound: select reads three tensors (one of bytes), add two, broadcast almost none.
    assert!(c["select"] > c["add"], "{c:?}");
    assert!(c["broadcast"] < c["neg"], "{c:?}");
    assert!(c["compare"] < c["add"], "{c:?}");
}
