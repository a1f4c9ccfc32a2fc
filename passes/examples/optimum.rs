//! The optimum as a measuring stick for `comm-overlap-schedule`: on generated programs small
//! enough for exact search (FSDP, TP+FSDP, random), the simulated makespan of the input
//! (after `coll-to-comm`), Inductor's sequence, the new pass with list scheduling only
//! (`exact-region-ops=0`) and with its default exact search, and the optimum found by branch
//! and bound over every topological order under the same memory limit (budget 0).
//!
//! `cargo run --release -p commlir-passes --example optimum [-- NODES]`

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::pass::{parse_pipeline, PassManager};
use commlir_ir::{BlockId, Context, OpId};
use commlir_passes::comm_overlap_schedule::{branch_and_bound, limit_for, Model};
use commlir_passes::schedule::{check, CostTable};
use commlir_testgen::{
    random_program, transformer_program, GenConfig, Parallelism, TransformerConfig,
};

const INDUCTOR: &str =
    "coll-to-comm,comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory";

fn body(ctx: &Context, module: OpId) -> Option<BlockId> {
    let mut f = None;
    ctx.walk(module, |op| {
        if f.is_none() && ctx.op_name(op) == "func.func" {
            f = Some(op);
        }
    });
    let r = *ctx.op_regions(f?).first()?;
    ctx.region_blocks(r).first().copied()
}

/// The module after `pipeline` (a `func.func` pipeline), or why it failed.
fn run(text: &str, pipeline: &str) -> Result<(Context, OpId), String> {
    let mut ctx = Context::new();
    let m = parse_source(
        &mut ctx,
        "o.mlir",
        text.as_bytes(),
        &ParseOptions::default(),
    )
    .map_err(|d| d.message)?;
    let p = format!("builtin.module(func.func({pipeline}))");
    let mut pm = PassManager::from_pipeline(parse_pipeline(&p).map_err(|e| format!("{e:?}"))?);
    pm.run(&mut ctx, m).map_err(|d| d[0].message.clone())?;
    Ok((ctx, m))
}

/// (makespan µs, peak bytes, ops) of the first function after `pipeline`.
fn measure(text: &str, pipeline: &str) -> Option<(f64, i64, usize)> {
    let (ctx, m) = run(text, pipeline).ok()?;
    let b = body(&ctx, m)?;
    let costs = CostTable::new(&ctx, b);
    let model = Model::new(&ctx, b, &costs);
    let order: Vec<u32> = (0..model.len() as u32).collect();
    let (ms, peak) = model.evaluate(&order);
    Some((ms / 1e3, peak, model.len()))
}

fn main() {
    commlir_passes::link();
    let max_nodes: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000_000);
    let mut programs: Vec<(String, String)> = Vec::new();
    for (name, p) in [("FSDP", Parallelism::Fsdp), ("TP+FSDP", Parallelism::Mixed)] {
        for layers in [1usize, 2] {
            let cfg = TransformerConfig {
                tokens: 2048,
                ..TransformerConfig::large(p, layers)
            };
            programs.push((
                format!("{name} transformer, {layers} layer(s)"),
                transformer_program(&cfg),
            ));
        }
    }
    for seed in 0..8u64 {
        let cfg = GenConfig {
            ranks: if seed % 2 == 0 { 2 } else { 4 },
            ops: 24,
            with_costs: true,
            ..GenConfig::default()
        };
        programs.push((
            format!("random seed {seed}, {} ranks", cfg.ranks),
            random_program(seed, &cfg),
        ));
    }
    let mut fsdp_rows: Vec<(String, String, f64)> = Vec::new();
    println!("| program | ops | input | Inductor sequence | new pass, list only | new pass | optimum | pass / optimum |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, text) in &programs {
        let Some((ms_in, peak_in, ops)) = measure(text, "coll-to-comm") else {
            continue;
        };
        let ind = measure(text, INDUCTOR).map_or(f64::NAN, |r| r.0);
        let list = measure(
            text,
            "coll-to-comm,comm-overlap-schedule{exact-region-ops=0}",
        )
        .map_or(f64::NAN, |r| r.0);
        let pass = measure(text, "coll-to-comm,comm-overlap-schedule").map_or(f64::NAN, |r| r.0);
        // The optimum from scratch: branch and bound from the input order, no help from the pass.
        let (ctx, m) = run(text, "coll-to-comm").expect("lowers");
        let b = body(&ctx, m).expect("body");
        let costs = CostTable::new(&ctx, b);
        let model = Model::new(&ctx, b, &costs);
        // Exact from the best order known (the incumbent only speeds the search up: a
        // finished search is optimal whatever it started from): the input, the pass's and
        // Inductor's (the same ops: arenas are deterministic, so op numbers match).
        let limit = limit_for(peak_in, 0.0);
        let mut incumbent: Vec<u32> = (0..model.len() as u32).collect();
        for p in [
            "coll-to-comm,comm-overlap-schedule{exact-region-ops=0}",
            "coll-to-comm,comm-overlap-schedule",
            INDUCTOR,
        ] {
            let Ok((c2, m2)) = run(text, p) else { continue };
            let Some(b2) = body(&c2, m2) else { continue };
            let order: Option<Vec<u32>> = c2.block_ops(b2).map(|op| model.graph.node(op)).collect();
            let Some(order) = order else { continue };
            if !check::is_topological(&model.graph, &order) {
                continue;
            }
            let (ms, pk) = model.evaluate(&order);
            if pk <= limit && ms < model.evaluate(&incumbent).0 {
                incumbent = order;
            }
        }
        let ex = branch_and_bound(&model, limit, &incumbent, max_nodes);
        if name.starts_with("FSDP") {
            fsdp_rows.push((name.clone(), text.clone(), model.lower_bound() / 1e3));
        }
        let opt = ex.makespan_ns / 1e3;
        let mark = if ex.proven {
            format!(" (proven, {} nodes)", ex.nodes)
        } else {
            " (≤, search cut)".to_string()
        };
        println!(
            "| {name} | {ops} | {ms_in:.1} | {ind:.1} | {list:.1} | {pass:.1} | {opt:.1}{mark} | {:.3} |",
            pass / opt
        );
    }
    // What stops the FSDP programs short of the critical-path bound: the same pass with more
    // memory (the budget is the only thing that changes), and the exact search with no
    // memory limit at all, next to the bound.
    let cfg4 = TransformerConfig {
        tokens: 2048,
        ..TransformerConfig::large(Parallelism::Fsdp, 4)
    };
    let text4 = transformer_program(&cfg4);
    if let Some((_, _, ops)) = measure(&text4, "coll-to-comm") {
        let (ctx, m) = run(&text4, "coll-to-comm").expect("lowers");
        let b = body(&ctx, m).expect("body");
        let model = Model::new(&ctx, b, &CostTable::new(&ctx, b));
        fsdp_rows.push((
            format!("FSDP transformer, 4 layers ({ops} ops)"),
            text4,
            model.lower_bound() / 1e3,
        ));
    }
    println!();
    println!("| program | pass, budget 0 | 0.1 | 0.5 | 1 | 10 | exact search, no memory limit | critical-path bound |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, text, bound) in &fsdp_rows {
        let mut cells = Vec::new();
        for budget in ["0", "0.1", "0.5", "1", "10"] {
            let p = format!("coll-to-comm,comm-overlap-schedule{{peak-memory-budget={budget}}}");
            let r = measure(text, &p);
            cells.push(r.map_or("-".to_string(), |(ms, _, _)| format!("{ms:.1}")));
        }
        let free = (|| {
            let (ctx, m) = run(
                text,
                "coll-to-comm,comm-overlap-schedule{peak-memory-budget=10}",
            )
            .ok()?;
            let b = body(&ctx, m)?;
            let model = Model::new(&ctx, b, &CostTable::new(&ctx, b));
            let start: Vec<u32> = (0..model.len() as u32).collect();
            let ex = branch_and_bound(&model, i64::MAX / 4, &start, max_nodes);
            let mark = if ex.proven { "" } else { " (≤)" };
            Some(format!("{:.1}{mark}", ex.makespan_ns / 1e3))
        })()
        .unwrap_or_else(|| "-".to_string());
        println!("| {name} | {} | {free} | {bound:.1} |", cells.join(" | "));
    }
}
