//! The scheduling quality table of docs/benchmarks.md: for each program, exposed
//! communication, peak memory and makespan after `coll-to-comm` alone, after each scheduling
//! pass, and after the recommended sequence, next to the lower bound from the critical path.
//!
//! `cargo run --release -p commlir-passes --example quality`

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::pass::{parse_pipeline, PassManager};
use commlir_ir::{BlockId, Context, OpId};
use commlir_passes::analysis::buffers::BufferModel;
use commlir_passes::analysis::cost::{op_cost, OpCost, H200_NVLINK};
use commlir_passes::analysis::timeline::simulate;
use commlir_testgen::{transformer_program, Parallelism, TransformerConfig};

struct Row {
    exposed_us: f64,
    peak_mib: f64,
    makespan_us: f64,
}

fn body(ctx: &Context, module: OpId) -> BlockId {
    let mut f = None;
    ctx.walk(module, |op| {
        if f.is_none() && ctx.op_name(op) == "func.func" {
            f = Some(op);
        }
    });
    let r = ctx.op_regions(f.expect("a function"))[0];
    ctx.region_blocks(r)[0]
}

fn measure(ctx: &Context, module: OpId) -> Row {
    let b = body(ctx, module);
    let t = simulate(ctx, &H200_NVLINK, b);
    let peak = BufferModel::new(ctx, b).profile().peak;
    Row {
        exposed_us: t.exposed_comm_ns / 1e3,
        peak_mib: peak as f64 / (1 << 20) as f64,
        makespan_us: t.makespan_ns / 1e3,
    }
}

/// Lower bound on the makespan: the longest dependency chain (each op at its cost), the total
/// compute (one compute stream) and the total communication (one comm stream). The exposed
/// communication is then at least `bound − compute`.
fn lower_bound(ctx: &Context, module: OpId) -> (f64, f64) {
    let b = body(ctx, module);
    let mut finish = vec![0.0f64; ctx.num_value_slots()];
    let (mut compute, mut comm, mut path) = (0.0f64, 0.0f64, 0.0f64);
    for op in ctx.block_ops(b) {
        let ready = ctx
            .operands(op)
            .iter()
            .map(|v| finish[v.index()])
            .fold(0.0, f64::max);
        let c = op_cost(ctx, &H200_NVLINK, op);
        match c {
            OpCost::Compute(t) => compute += t,
            OpCost::Collective(t) => comm += t,
            // Blocking on the compute stream; only its exposed part is communication.
            OpCost::Fused { ns, exposed_ns } => {
                compute += ns - exposed_ns;
                comm += exposed_ns;
            }
            OpCost::Free => {}
        }
        let end = ready + c.ns();
        path = path.max(end);
        for r in ctx.results(op) {
            finish[r.index()] = end;
        }
    }
    let bound = path.max(compute).max(comm);
    (bound / 1e3, (bound - compute).max(0.0) / 1e3)
}

fn run(text: &str, pipeline: &str) -> (Context, OpId) {
    let mut ctx = Context::new();
    let m = parse_source(
        &mut ctx,
        "q.mlir",
        text.as_bytes(),
        &ParseOptions::default(),
    )
    .expect("parses");
    let mut pm = PassManager::from_pipeline(parse_pipeline(pipeline).expect("pipeline"));
    if let Err(d) = pm.run(&mut ctx, m) {
        panic!("{pipeline}: {}", d[0].message);
    }
    (ctx, m)
}

fn main() {
    commlir_passes::link();
    let mut programs: Vec<(String, String)> = Vec::new();
    for f in ["examples/tp_mlp.mlir", "examples/fsdp_layer.mlir"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(f);
        programs.push((
            f.to_string(),
            std::fs::read_to_string(path).expect("example"),
        ));
    }
    for (name, p) in [
        ("TP", Parallelism::Tp),
        ("FSDP", Parallelism::Fsdp),
        ("TP+FSDP", Parallelism::Mixed),
    ] {
        let cfg = TransformerConfig {
            tokens: 2048,
            ..TransformerConfig::large(p, 4)
        };
        programs.push((
            format!("{name} transformer, 4 layers (2048x4096, ffn 16384)"),
            transformer_program(&cfg),
        ));
    }
    let base = "coll-to-comm";
    let variants: Vec<(&str, String)> = vec![
        ("coll-to-comm", base.to_string()),
        ("+ comm-sink-waits", format!("{base},comm-sink-waits")),
        ("+ comm-raise-comms", format!("{base},comm-raise-comms")),
        ("+ comm-reorder-compute-for-overlap", format!("{base},comm-reorder-compute-for-overlap")),
        ("+ comm-reorder-peak-memory", format!("{base},comm-reorder-peak-memory")),
        ("+ comm-sink-waits-iterative", format!("{base},comm-sink-waits-iterative")),
        (
            "recommended",
            format!("{base},comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory"),
        ),
        ("comm-overlap-schedule", format!("{base},comm-overlap-schedule")),
        (
            "comm-overlap-schedule, budget 0.1",
            format!("{base},comm-overlap-schedule{{peak-memory-budget=0.1}}"),
        ),
        (
            "recommended, budget 0.1",
            format!("{base},comm-reorder-peak-memory{{peak-memory-budget=0.1}},comm-sink-waits-iterative{{peak-memory-budget=0.1}},comm-reorder-peak-memory{{peak-memory-budget=0.1}}"),
        ),
    ];
    for (name, text) in &programs {
        println!("\n**{name}**\n");
        println!("| pipeline | exposed comm (µs) | makespan (µs) | peak memory (MiB) |");
        println!("|---|---|---|---|");
        for (label, p) in &variants {
            let (ctx, m) = run(text, &format!("builtin.module(func.func({p}))"));
            let r = measure(&ctx, m);
            println!(
                "| {label} | {:.1} | {:.1} | {:.2} |",
                r.exposed_us, r.makespan_us, r.peak_mib
            );
        }
        let (ctx, m) = run(text, &format!("builtin.module(func.func({base}))"));
        let (lb, lb_exposed) = lower_bound(&ctx, m);
        println!("| lower bound (critical path) | {lb_exposed:.1} | {lb:.1} | |");
    }
}
