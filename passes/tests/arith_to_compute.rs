//! `arith-to-compute` against IEEE semantics: generated chains of upstream `arith` / `math`
//! ops on f32 tensors (generic form, as real MLIR prints them) are converted, run on the sim
//! backend, and compared bit for bit with the same chain evaluated here per element (in f64,
//! rounded to f32 after every op: exact for +, −, ×, ÷ and √, whose double rounding is
//! innocuous from f64 to f32).

mod common;

use commlir_ir::Context;
use commlir_runtime::inputs::generate;
use commlir_runtime::{ElemType, SimOptions, TensorType};
use commlir_testgen::Rng;

#[derive(Clone, Copy, Debug)]
enum Op {
    Bin(&'static str),
    Un(&'static str),
    Splat(f32),
}

fn apply_bin(name: &str, a: f32, b: f32) -> f32 {
    let (x, y) = (a as f64, b as f64);
    let r = match name {
        "arith.addf" => x + y,
        "arith.subf" => x - y,
        "arith.mulf" => x * y,
        "arith.divf" => x / y,
        "arith.maximumf" => {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else {
                x.max(y)
            }
        }
        "arith.minimumf" => {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else {
                x.min(y)
            }
        }
        _ => unreachable!(),
    };
    r as f32
}

fn apply_un(name: &str, a: f32) -> f32 {
    match name {
        "arith.negf" => -a,
        "math.sqrt" => (a as f64).sqrt() as f32,
        _ => unreachable!(),
    }
}

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn generated_chains_match_ieee_semantics() {
    commlir_passes::link();
    let bins = [
        "arith.addf",
        "arith.subf",
        "arith.mulf",
        "arith.divf",
        "arith.maximumf",
        "arith.minimumf",
    ];
    let uns = ["arith.negf", "math.sqrt"];
    let mut rng = Rng::new(7);
    for seed in 0..100u64 {
        let shape = [1 + rng.below(4), 1 + rng.below(5)];
        let t = format!("tensor<{}x{}xf32>", shape[0], shape[1]);
        let n_ops = 1 + rng.below(8);
        // Values: %arg0, %arg1, then one per op.
        let mut body = String::new();
        let mut plan = Vec::new();
        for i in 0..n_ops {
            let avail = 2 + i;
            let name = |v: usize| {
                if v < 2 {
                    format!("%arg{v}")
                } else {
                    format!("%v{}", v - 2)
                }
            };
            let op = match rng.below(5) {
                0..=2 => Op::Bin(bins[rng.below(bins.len())]),
                3 => Op::Un(uns[rng.below(uns.len())]),
                _ => Op::Splat([0.5f32, -2.0, 3.0, 0.0][rng.below(4)]),
            };
            let (a, b) = (rng.below(avail), rng.below(avail));
            let line = match op {
                Op::Bin(n) => format!(
                    "  %v{i} = \"{n}\"({}, {}) <{{fastmath = #arith.fastmath<none>}}> : ({t}, {t}) -> {t}\n",
                    name(a),
                    name(b)
                ),
                Op::Un(n) => format!(
                    "  %v{i} = \"{n}\"({}) <{{fastmath = #arith.fastmath<none>}}> : ({t}) -> {t}\n",
                    name(a)
                ),
                Op::Splat(c) => format!(
                    "  %v{i} = \"arith.constant\"() <{{value = dense<{c:e}> : {t}}}> : () -> {t}\n"
                ),
            };
            body.push_str(&line);
            plan.push((op, a, b));
        }
        let text = format!(
            "func.func @main(%arg0: {t}, %arg1: {t}) -> {t} {{\n{body}  return %v{} : {t}\n}}\n",
            n_ops - 1
        );
        let mut ctx = Context::new();
        ctx.allow_unregistered = true;
        let m = commlir_ir::parser::parse_source(
            &mut ctx,
            "arith.mlir",
            text.as_bytes(),
            &Default::default(),
        )
        .unwrap_or_else(|d| panic!("{}\n{text}", d.message));
        common::run_pipeline(&mut ctx, m, "builtin.module(arith-to-compute)", &text);
        let out = common::print(&ctx, m);
        assert!(!out.contains("arith.") && !out.contains("math."), "{out}");
        ctx.allow_unregistered = false;
        commlir_ir::verify::verify(&ctx, m).unwrap_or_else(|_| panic!("does not verify:\n{out}"));
        let res = commlir_runtime::run(
            &ctx,
            m,
            &SimOptions {
                ranks: 1,
                entry: None,
                seed,
            },
        )
        .unwrap_or_else(|d| panic!("{}\n{out}", d.message));
        let ty = TensorType {
            elem: ElemType::F32,
            shape: shape.to_vec(),
        };
        let args: Vec<Vec<f32>> = (0..2)
            .map(|i| {
                generate(&ty, seed, 0, i)
                    .to_f64_vec()
                    .iter()
                    .map(|x| *x as f32)
                    .collect()
            })
            .collect();
        let got = res[0].results[0].to_f64_vec();
        for (e, g) in got.iter().enumerate() {
            let mut vals: Vec<f32> = vec![args[0][e], args[1][e]];
            for (op, a, b) in &plan {
                let v = match op {
                    Op::Bin(n) => apply_bin(n, vals[*a], vals[*b]),
                    Op::Un(n) => apply_un(n, vals[*a]),
                    Op::Splat(c) => *c,
                };
                vals.push(v);
            }
            let want = *vals.last().unwrap();
            assert!(
                same(*g as f32, want),
                "element {e}: got {g}, want {want}\n{text}\n{out}"
            );
        }
    }
}
