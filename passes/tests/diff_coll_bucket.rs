//! Differential and property tests of `coll-bucket` on generated programs (random SPMD
//! programs, the FSDP and TP+FSDP transformers) at 2 and 4 ranks: the sim results are
//! bit-identical before and after; every group issues the same tensors in the same order (the
//! members of a coalesced op in its operand order); peak memory stays within
//! `(1 + budget) ×` the input's; the simulated makespan is not worse unless `ignore-cost`;
//! the output is deterministic; and the scheduling pipelines run after bucketing (Inductor's
//! sequence, `comm-overlap-schedule`) still give the input's results. On the FSDP and TP+FSDP
//! transformers at full size, bucketing before `comm-overlap-schedule` is not slower than
//! scheduling alone (and faster on FSDP).

mod common;

use common::bodies;

use commlir_ir::{BlockId, Context, OpId, Trait, Value, ValueDef};
use commlir_passes::analysis::cost::H200_NVLINK;
use commlir_passes::analysis::timeline::simulate;
use commlir_passes::schedule;
use commlir_testgen::{transformer_program, GenConfig, Parallelism, TransformerConfig};
use std::collections::BTreeMap;

/// The scheduling pipelines run after bucketing: Inductor's sequence and the overlap
/// scheduler.
const PIPELINES: &[&str] = &[
    "coll-to-comm,comm-reorder-peak-memory,comm-sink-waits-iterative,\
     comm-reorder-peak-memory,comm-plan-pools",
    "coll-to-comm,comm-overlap-schedule,comm-plan-pools",
];

/// A name for a value that bucketing does not change: a waited collective result is named
/// after the collective's input it came from (bucketing replaces the waits, not the data).
fn stable_name(ctx: &Context, v: Value) -> String {
    let Some(w) = ctx
        .defining_op(v)
        .filter(|&w| ctx.op_name(w) == "coll.wait_tensor")
    else {
        return format!("{v:?}");
    };
    let r = ctx.operand(w, 0);
    match ctx.value_def(r) {
        ValueDef::Result { op, index } => {
            let family = ctx.op_name(op).trim_end_matches("_coalesced").to_string();
            match ctx.operands(op).get(index as usize) {
                Some(&x) => format!("wait({family}, {})", stable_name(ctx, x)),
                None => format!("{v:?}"),
            }
        }
        ValueDef::BlockArg { .. } => format!("{v:?}"),
    }
}

/// Per group, the tensors its collectives send, in issue order, with the collective family:
/// what every rank must agree on, however the collectives are bucketed.
fn group_streams(ctx: &Context, block: BlockId) -> BTreeMap<String, Vec<(String, String)>> {
    let mut m: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for op in ctx.block_ops(block) {
        if !ctx.op_has_trait(op, Trait::Collective) {
            continue;
        }
        let g = ctx
            .inherent_attr(op, "group")
            .and_then(|a| ctx.attr_as_symbol(a))
            .unwrap_or("?")
            .to_string();
        let family = ctx.op_name(op).trim_end_matches("_coalesced").to_string();
        let reduce = ctx
            .inherent_attr(op, "reduce_op")
            .and_then(|a| ctx.attr_as_str(a))
            .unwrap_or("")
            .to_string();
        let entry = m.entry(g).or_default();
        for &v in ctx.operands(op) {
            entry.push((format!("{family}/{reduce}"), stable_name(ctx, v)));
        }
    }
    m
}

struct Facts {
    streams: BTreeMap<String, Vec<(String, String)>>,
    peak: i64,
    makespan: f64,
}

fn facts(ctx: &Context, b: BlockId) -> Facts {
    Facts {
        streams: group_streams(ctx, b),
        peak: schedule::block_peak(ctx, b),
        makespan: simulate(ctx, &H200_NVLINK, b).makespan_ns,
    }
}

/// Runs `coll-bucket{options}` on `text` and checks every invariant; returns the output text
/// and the number of coalesced ops in it.
fn check(text: &str, ranks: usize, seed: u64, options: &str, budget: f64, what: &str) -> String {
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, text);
    let sim_before = common::sim(&ctx, m, ranks, seed);
    assert!(
        !sim_before.starts_with("error"),
        "{what}: input does not run: {sim_before}"
    );
    let before: Vec<(BlockId, Facts)> = bodies(&ctx, m)
        .into_iter()
        .map(|b| (b, facts(&ctx, b)))
        .collect();
    let pass = format!("builtin.module(func.func(coll-bucket{{{options}}}))");
    common::run_pipeline(&mut ctx, m, &pass, text);
    let out = common::print(&ctx, m);
    let what = format!("{what} coll-bucket{{{options}}}");
    assert_eq!(
        common::sim(&ctx, m, ranks, seed),
        sim_before,
        "{what}: results differ\ninput:\n{text}\noutput:\n{out}"
    );
    for (b, f) in &before {
        let now = facts(&ctx, *b);
        assert_eq!(
            now.streams, f.streams,
            "{what}: a group's collectives changed order\ninput:\n{text}\noutput:\n{out}"
        );
        assert!(
            schedule::within_budget(now.peak, f.peak, budget),
            "{what}: peak memory {} -> {}\ninput:\n{text}\noutput:\n{out}",
            f.peak,
            now.peak
        );
        if !options.contains("ignore-cost=true") {
            assert!(
                now.makespan <= f.makespan,
                "{what}: makespan {} -> {}\ninput:\n{text}\noutput:\n{out}",
                f.makespan,
                now.makespan
            );
        }
    }
    // The budget holds after lowering too (staging copies of arguments included).
    let lowered_peak = |text: &str| {
        let mut c = Context::new();
        let m = common::parse(&mut c, text);
        common::run_pipeline(&mut c, m, "builtin.module(func.func(coll-to-comm))", text);
        bodies(&c, m)
            .into_iter()
            .map(|b| schedule::block_peak(&c, b))
            .collect::<Vec<_>>()
    };
    for (before, after) in lowered_peak(text).into_iter().zip(lowered_peak(&out)) {
        assert!(
            schedule::within_budget(after, before, budget),
            "{what}: peak memory after coll-to-comm {before} -> {after}\ninput:\n{text}\noutput:\n{out}"
        );
    }
    // Deterministic: a second run from the text gives the same bytes.
    let mut ctx2 = Context::new();
    let m2 = common::parse(&mut ctx2, text);
    common::run_pipeline(&mut ctx2, m2, &pass, text);
    assert_eq!(common::print(&ctx2, m2), out, "{what}: not deterministic");
    // The output reads back, and the scheduling pipelines still compute the same results.
    for pipeline in PIPELINES {
        let mut ctx3 = Context::new();
        let m3 = common::parse(&mut ctx3, &out);
        common::run_pipeline(
            &mut ctx3,
            m3,
            &format!("builtin.module(func.func({pipeline}))"),
            &out,
        );
        assert_eq!(
            common::sim(&ctx3, m3, ranks, seed),
            sim_before,
            "{what}: results differ after {pipeline}\ninput:\n{out}"
        );
    }
    out
}

fn coalesced_ops(text: &str) -> usize {
    text.matches("_coalesced ").count()
}

const OPTION_SETS: &[(&str, f64)] = &[
    ("", 0.0),
    ("peak-memory-budget=0.5", 0.5),
    ("bucket-bytes=4096", 0.0),
    ("ignore-cost=true peak-memory-budget=10.0", 10.0),
];

#[test]
fn random_programs() {
    let mut merged = 0;
    for ranks in [2, 4] {
        for seed in 0..24u64 {
            let cfg = GenConfig {
                ranks,
                ops: 45,
                with_costs: seed % 4 == 3,
                ..GenConfig::default()
            };
            let text = commlir_testgen::random_program(seed, &cfg);
            for (opts, budget) in OPTION_SETS {
                let what = format!("random seed {seed} ranks {ranks}");
                let out = check(&text, ranks, seed, opts, *budget, &what);
                merged += coalesced_ops(&out).saturating_sub(coalesced_ops(&text));
            }
        }
    }
    // The generator waits most collectives late: plenty of buckets form.
    assert!(merged > 20, "only {merged} coalesced ops formed");
}

#[test]
fn transformers() {
    for (par, ranks) in [(Parallelism::Fsdp, 2), (Parallelism::Mixed, 4)] {
        for layers in [1, 2, 3] {
            let text = transformer_program(&TransformerConfig::small(par, layers));
            for (opts, budget) in OPTION_SETS {
                let what = format!("{par:?} {layers} layers");
                let out = check(&text, ranks, 7, opts, *budget, &what);
                if opts.contains("ignore-cost") {
                    assert!(coalesced_ops(&out) > 0, "{what}: nothing bucketed\n{out}");
                }
            }
        }
    }
}

/// The FSDP transformer at its real size: bucketing by the cost model merges its collectives,
/// keeps the peak at budget 0 and shortens the simulated step.
#[test]
fn large_fsdp_transformer_gets_faster() {
    let text = transformer_program(&TransformerConfig::large(Parallelism::Fsdp, 4));
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, &text);
    let b = bodies(&ctx, m)[0];
    let before = facts(&ctx, b);
    let n_before = collectives(&ctx, b).len();
    common::run_pipeline(&mut ctx, m, "builtin.module(func.func(coll-bucket))", &text);
    let after = facts(&ctx, b);
    assert_eq!(after.streams, before.streams);
    assert!(after.peak <= before.peak);
    assert!(after.makespan < before.makespan);
    assert!(collectives(&ctx, b).len() < n_before);
}

/// The simulated makespan of `text` after `pipeline` (one function).
fn makespan_after(text: &str, pipeline: &str) -> f64 {
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, text);
    common::run_pipeline(
        &mut ctx,
        m,
        &format!("builtin.module(func.func({pipeline}))"),
        text,
    );
    simulate(&ctx, &H200_NVLINK, bodies(&ctx, m)[0]).makespan_ns
}

/// The programs of the bucketing table in docs/benchmarks.md (4 layers, 2048 tokens, hidden
/// 4096, ffn 16384, no symmetric memory), scheduled by `comm-overlap-schedule` after
/// bucketing and without: on TP+FSDP bucketing used to lose (5414 against 5028 µs), the DP
/// all-gathers bucketed for the traced order being prefetched only whole on the comm stream
/// the TP all-reduces share; judged on the scheduled order too it never loses, and on FSDP it
/// still wins. At budget 0 and with 10% more memory for each pass.
#[test]
fn bucketing_pays_after_scheduling() {
    for (par, must_win) in [(Parallelism::Fsdp, true), (Parallelism::Mixed, false)] {
        let text = transformer_program(&TransformerConfig {
            tokens: 2048,
            symm_mem: false,
            ..TransformerConfig::large(par, 4)
        });
        for budget in ["0.0", "0.1"] {
            let sched =
                format!("coll-to-comm,comm-overlap-schedule{{peak-memory-budget={budget}}}");
            let alone = makespan_after(&text, &sched);
            let bucketed = makespan_after(
                &text,
                &format!("coll-bucket{{peak-memory-budget={budget}}},{sched}"),
            );
            assert!(
                bucketed <= alone,
                "{par:?} budget {budget}: bucketing slows the scheduled step ({alone} -> {bucketed} ns)"
            );
            if must_win {
                assert!(
                    bucketed < alone,
                    "{par:?} budget {budget}: bucketing no longer pays ({alone} -> {bucketed} ns)"
                );
            }
        }
    }
}

fn collectives(ctx: &Context, b: BlockId) -> Vec<OpId> {
    ctx.block_ops(b)
        .filter(|&o| ctx.op_has_trait(o, Trait::Collective))
        .collect()
}

/// The checks above are not vacuous: reordering two collectives of a group, or splitting a
/// coalesced op's results across other tensors, is caught by the stream comparison.
#[test]
fn stream_check_catches_reordering() {
    let text = "coll.group @dp {size = 2 : i64}\n\
        func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {\n\
          %ra = coll.all_reduce %a {reduce_op = \"sum\", group = @dp} : tensor<4xf32>\n\
          %rb = coll.all_reduce %b {reduce_op = \"sum\", group = @dp} : tensor<4xf32>\n\
          %ya = coll.wait_tensor %ra : tensor<4xf32>\n\
          %yb = coll.wait_tensor %rb : tensor<4xf32>\n\
          return %ya, %yb : tensor<4xf32>, tensor<4xf32>\n\
        }\n";
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, text);
    let b = bodies(&ctx, m)[0];
    let before = group_streams(&ctx, b);
    let c = collectives(&ctx, b);
    ctx.move_after(c[0], c[1]);
    assert_ne!(group_streams(&ctx, b), before);
}
