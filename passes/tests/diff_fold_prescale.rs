//! Differential and property tests of `coll-fold-prescale` on generated programs: random SPMD
//! programs at 2 and 4 ranks with a power-of-two scale put in front of each float sum or avg
//! reduce-scatter, and the FSDP and TP+FSDP transformers (whose backward stand-in scales every
//! gradient by 0.5 before reducing it). The sim results are bit-identical before and after
//! folding and after the scheduling pipelines that follow it; every group issues the same
//! collectives in the same order; peak memory does not grow (at the coll level and after
//! `coll-to-comm`); the output is deterministic. Dropping a folded `prescale` is caught.

mod common;

use commlir_ir::{BlockId, Context, Trait};
use commlir_passes::schedule;
use commlir_testgen::{transformer_program, GenConfig, Parallelism, TransformerConfig};
use common::bodies;

const FOLD: &str = "builtin.module(func.func(coll-fold-prescale))";

/// What follows the fold in the benchmarks: bucketing and the overlap scheduler, and
/// Inductor's sequence.
const PIPELINES: &[&str] = &[
    "coll-bucket,coll-to-comm,comm-overlap-schedule,comm-plan-pools",
    "coll-to-comm,comm-reorder-peak-memory,comm-sink-waits-iterative,\
     comm-reorder-peak-memory,comm-plan-pools",
];

/// `text` with `%psN = compute.scale %x {factor = f}` in front of every float sum or avg
/// `coll.reduce_scatter_tensor %x`, which then reads the scale (f cycles through powers of
/// two, negative ones included).
fn with_prescales(text: &str) -> String {
    const FACTORS: &[&str] = &["0.5", "0.25", "2.0", "-1.0", "0.125"];
    let mut out = String::new();
    let mut n = 0;
    for line in text.lines() {
        let rs = line.find("= coll.reduce_scatter_tensor %").and_then(|at| {
            let start = at + "= coll.reduce_scatter_tensor ".len();
            let x = line[start..].split_whitespace().next()?;
            let ty = line.rsplit_once(" : (")?.1.split_once(") -> ")?.0;
            let float = ["xf32>", "xbf16>", "xf16>", "xf64>"]
                .iter()
                .any(|e| ty.ends_with(e));
            let sum = line.contains("reduce_op = \"sum\"") || line.contains("reduce_op = \"avg\"");
            (float && sum).then(|| (start, x.to_string(), ty.to_string()))
        });
        match rs {
            Some((start, x, ty)) => {
                let indent = &line[..line.len() - line.trim_start().len()];
                let f = FACTORS[n % FACTORS.len()];
                out.push_str(&format!(
                    "{indent}%ps{n} = compute.scale {x} {{factor = {f} : f64}} : {ty}\n"
                ));
                out.push_str(&line[..start]);
                out.push_str(&format!("%ps{n}"));
                out.push_str(&line[start + x.len()..]);
                out.push('\n');
                n += 1;
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Per group, the family and reduction of each collective in order.
fn group_streams(ctx: &Context, b: BlockId) -> Vec<(String, String, String)> {
    ctx.block_ops(b)
        .filter(|&o| ctx.op_has_trait(o, Trait::Collective))
        .map(|o| {
            let s = |n: &str| {
                ctx.inherent_attr(o, n)
                    .and_then(|a| ctx.attr_as_str(a).or_else(|| ctx.attr_as_symbol(a)))
                    .unwrap_or("")
                    .to_string()
            };
            (s("group"), ctx.op_name(o).to_string(), s("reduce_op"))
        })
        .collect()
}

fn peaks(text: &str, pipeline: Option<&str>) -> Vec<i64> {
    let mut c = Context::new();
    let m = common::parse(&mut c, text);
    if let Some(p) = pipeline {
        common::run_pipeline(&mut c, m, p, text);
    }
    bodies(&c, m)
        .into_iter()
        .map(|b| schedule::block_peak(&c, b))
        .collect()
}

/// Folds `text` and checks every invariant; returns how many scales were folded.
fn check(text: &str, ranks: usize, seed: u64, what: &str) -> usize {
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, text);
    let sim_before = common::sim(&ctx, m, ranks, seed);
    assert!(
        !sim_before.starts_with("error"),
        "{what}: input does not run: {sim_before}"
    );
    let streams: Vec<_> = bodies(&ctx, m)
        .into_iter()
        .map(|b| group_streams(&ctx, b))
        .collect();
    common::run_pipeline(&mut ctx, m, FOLD, text);
    let out = common::print(&ctx, m);
    assert_eq!(
        common::sim(&ctx, m, ranks, seed),
        sim_before,
        "{what}: results differ\ninput:\n{text}\noutput:\n{out}"
    );
    let now: Vec<_> = bodies(&ctx, m)
        .into_iter()
        .map(|b| group_streams(&ctx, b))
        .collect();
    assert_eq!(now, streams, "{what}: collectives changed\n{out}");
    let lowered = Some("builtin.module(func.func(coll-to-comm))");
    for (p, q) in [(None, None), (lowered, lowered)] {
        for (before, after) in peaks(text, p).into_iter().zip(peaks(&out, q)) {
            assert!(
                after <= before,
                "{what}: peak {before} -> {after} ({p:?})\n{out}"
            );
        }
    }
    let mut ctx2 = Context::new();
    let m2 = common::parse(&mut ctx2, text);
    common::run_pipeline(&mut ctx2, m2, FOLD, text);
    assert_eq!(common::print(&ctx2, m2), out, "{what}: not deterministic");
    for pipeline in PIPELINES {
        let mut ctx3 = Context::new();
        let m3 = common::parse(&mut ctx3, &out);
        let p = format!("builtin.module(func.func({pipeline}))");
        common::run_pipeline(&mut ctx3, m3, &p, &out);
        assert_eq!(
            common::sim(&ctx3, m3, ranks, seed),
            sim_before,
            "{what}: results differ after {pipeline}\ninput:\n{out}"
        );
    }
    out.matches("prescale = ").count()
}

#[test]
fn random_programs() {
    let mut folded = 0;
    for ranks in [2, 4] {
        for seed in 0..24u64 {
            let cfg = GenConfig {
                ranks,
                ops: 45,
                ..GenConfig::default()
            };
            let text = with_prescales(&commlir_testgen::random_program(seed, &cfg));
            folded += check(
                &text,
                ranks,
                seed,
                &format!("random seed {seed} ranks {ranks}"),
            );
        }
    }
    assert!(folded > 10, "only {folded} reduce-scatters took a prescale");
}

#[test]
fn transformers() {
    for (par, ranks) in [(Parallelism::Fsdp, 2), (Parallelism::Mixed, 4)] {
        for layers in [1, 2] {
            let text = transformer_program(&TransformerConfig::small(par, layers));
            let n = check(&text, ranks, 7, &format!("{par:?} {layers} layers"));
            // Four weights per layer, each gradient scaled by 0.5 and reduce-scattered.
            assert_eq!(n, 4 * layers, "{par:?} {layers} layers");
        }
    }
}

/// The result check is not vacuous: a fold that dropped the factor is caught by the sim.
#[test]
fn dropping_the_prescale_is_caught() {
    let text = transformer_program(&TransformerConfig::small(Parallelism::Fsdp, 1));
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, &text);
    let before = common::sim(&ctx, m, 2, 7);
    common::run_pipeline(&mut ctx, m, FOLD, &text);
    let dropped = common::print(&ctx, m).replace("prescale = 0.5 : f64, ", "");
    let mut ctx2 = Context::new();
    let m2 = common::parse(&mut ctx2, &dropped);
    assert_ne!(common::sim(&ctx2, m2, 2, 7), before);
}
