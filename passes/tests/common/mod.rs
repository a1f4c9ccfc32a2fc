//! Helpers for the differential tests: parse, verify, run on the sim backend, run a pipeline.

#![allow(dead_code)]

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::pass::{parse_pipeline, PassManager};
use commlir_ir::printer::{print_op, PrintOptions};
use commlir_ir::{BlockId, Context, OpId, SourceFile, SourceMgr};
use commlir_runtime::{format_results, PrintMode, SimOptions};

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
