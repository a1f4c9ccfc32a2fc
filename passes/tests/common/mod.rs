//! Helpers for the differential tests: parse, verify, run on the sim backend, run a pipeline.

#![allow(dead_code)]

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::pass::{parse_pipeline, PassManager};
use commlir_ir::printer::{print_op, PrintOptions};
use commlir_ir::{BlockId, Context, OpId, SourceFile, SourceMgr};
use commlir_passes::schedule::{self, check, DepGraph, GraphOptions};
use commlir_runtime::{format_results, PrintMode, SimOptions};
use std::collections::BTreeMap;

/// Parses and verifies `text`, panicking with rendered diagnostics on failure.
pub fn parse(ctx: &mut Context, text: &str) -> OpId {
    commlir_passes::link();
    let m = match parse_source(ctx, "gen.mlir", text.as_bytes(), &ParseOptions::default()) {
        Ok(m) => m,
        Err(d) => panic!("{}\n{text}", render(ctx, text, &[d])),
    };
    if let Err(ds) = commlir_ir::verify::verify(ctx, m) {
        panic!("{}\n{text}", render(ctx, text, &ds));
    }
    m
}

fn render(ctx: &Context, text: &str, ds: &[commlir_ir::Diagnostic]) -> String {
    let mut sm = SourceMgr::default();
    sm.add(SourceFile::new("gen.mlir", text));
    ds.iter().map(|d| sm.render(ctx, d)).collect()
}

/// The sim backend's output lines for `module` on `ranks` ranks.
pub fn sim(ctx: &Context, module: OpId, ranks: usize, seed: u64) -> String {
    let opts = SimOptions {
        ranks,
        entry: None,
        seed,
    };
    match commlir_runtime::run(ctx, module, &opts) {
        Ok(r) => format_results(&r, PrintMode::Digest),
        Err(d) => format!("error: {}", d.message),
    }
}

/// Runs a textual pipeline on `module`; panics with diagnostics if it fails.
pub fn run_pipeline(ctx: &mut Context, module: OpId, pipeline: &str, text: &str) {
    let opm = parse_pipeline(pipeline).unwrap_or_else(|e| panic!("bad pipeline {pipeline}: {e:?}"));
    let mut pm = PassManager::from_pipeline(opm);
    if let Err(ds) = pm.run(ctx, module) {
        panic!(
            "{pipeline} failed:\n{}\ninput:\n{text}\nIR:\n{}",
            render(ctx, text, &ds),
            print_op(ctx, module, &PrintOptions::default())
        );
    }
}

/// The module printed in the custom form.
pub fn print(ctx: &Context, module: OpId) -> String {
    print_op(ctx, module, &PrintOptions::default())
}

/// The single-block bodies of the module's functions, in walk order.
pub fn bodies(ctx: &Context, module: OpId) -> Vec<BlockId> {
    let mut v = Vec::new();
    ctx.walk(module, |op| {
        if ctx.op_name(op) == "func.func" {
            if let Some(b) = commlir_passes::schedule::body_block(ctx, op) {
                v.push(b);
            }
        }
    });
    v
}

/// The generated program of `seed` under `cfg`, parsed into `ctx` and lowered by
/// `coll-to-comm` first when `lower` is set: the comm-level variant the scheduling tests run
/// on as well as the coll-level one.
pub fn generated(
    ctx: &mut Context,
    seed: u64,
    cfg: &commlir_testgen::GenConfig,
    lower: bool,
) -> OpId {
    let text = commlir_testgen::random_program(seed, cfg);
    let m = parse(ctx, &text);
    if lower {
        run_pipeline(ctx, m, "builtin.module(func.func(coll-to-comm))", &text);
    }
    m
}

/// The generated program of `seed` under `cfg`, as text and parsed into `ctx`, with its sim
/// output (asserted to run) on `cfg.ranks` ranks.
pub fn generated_text(
    ctx: &mut Context,
    seed: u64,
    cfg: &commlir_testgen::GenConfig,
) -> (String, OpId, String) {
    let text = commlir_testgen::random_program(seed, cfg);
    let m = parse(ctx, &text);
    let before = sim(ctx, m, cfg.ranks, seed);
    assert!(
        !before.starts_with("error"),
        "seed {seed}: the input does not run: {before}\n{text}"
    );
    (text, m, before)
}

/// `lowered` re-parses to itself and gives the sim output `want` (`what` names the case).
pub fn assert_round_trip(lowered: &str, ranks: usize, seed: u64, want: &str, what: &str) {
    let mut ctx2 = Context::new();
    let m2 = parse(&mut ctx2, lowered);
    assert_eq!(print(&ctx2, m2), lowered, "{what}: no round trip");
    assert_eq!(sim(&ctx2, m2, ranks, seed), want, "{what}: reparsed");
}

/// What a scheduling pass must keep of one function body: the body, its dependency graph,
/// the collectives of each group in order, and its peak memory.
pub type BodyFacts = (BlockId, DepGraph, BTreeMap<String, Vec<OpId>>, i64);

/// The [`BodyFacts`] of every function body of `module`.
pub fn body_facts(ctx: &Context, module: OpId) -> Vec<BodyFacts> {
    bodies(ctx, module)
        .into_iter()
        .map(|b| {
            (
                b,
                DepGraph::build(ctx, b, GraphOptions::default()),
                check::collectives_by_group(ctx, b),
                schedule::block_peak(ctx, b),
            )
        })
        .collect()
}

/// Panics unless the scheduled `module` keeps `before`: every dependency, the order of each
/// group's collectives, the pins (`pins`) and peak memory within `budget`; `input` and `out`
/// are the texts before and after, for the message.
pub fn assert_schedule_kept(
    ctx: &Context,
    before: &[BodyFacts],
    budget: f64,
    pins: bool,
    what: &str,
    input: &str,
    out: &str,
) {
    for (b, graph, groups, peak) in before {
        if let Err(v) = check::check_dependencies(ctx, *b, graph) {
            panic!("{what}: dependency broken: {v:?}\ninput:\n{input}\noutput:\n{out}");
        }
        if let Err(v) = check::check_group_order(ctx, *b, groups) {
            panic!("{what}: collective order changed: {v:?}\ninput:\n{input}\noutput:\n{out}");
        }
        if pins {
            check::check_pins(ctx, *b).unwrap_or_else(|v| panic!("{what}: pins broken: {v:?}"));
        }
        let after = schedule::block_peak(ctx, *b);
        assert!(
            schedule::within_budget(after, *peak, budget),
            "{what}: peak memory {peak} -> {after}\ninput:\n{input}\noutput:\n{out}"
        );
    }
}
