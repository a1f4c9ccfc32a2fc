//! The pool-planning benchmark of docs/benchmarks.md: total planned pool bytes against the
//! lower bound (most bytes live at once) and against first fit by decreasing size, on the
//! examples and on generated programs, all lowered with `coll-to-comm` first. It prints the
//! table (`cargo test -p commlir-passes --test pools_bench -- --nocapture`) and checks that
//! every row stays within 5% of its lower bound and never above first fit.

mod common;

use commlir_ir::Context;
use commlir_passes::pools::plan_block;
use commlir_testgen::{random_program, GenConfig};
use std::path::PathBuf;

#[derive(Default)]
struct Row {
    name: String,
    programs: usize,
    pools: usize,
    buffers: usize,
    unshared: u64,
    lower: u64,
    first_fit: u64,
    planned: u64,
}

impl Row {
    fn add(&mut self, ctx: &mut Context, text: &str) {
        let m = common::parse(ctx, text);
        common::run_pipeline(ctx, m, "builtin.module(func.func(coll-to-comm))", text);
        let mut funcs = Vec::new();
        ctx.walk(m, |op| {
            if ctx.op_name(op) == "func.func" && !ctx.op_regions(op).is_empty() {
                funcs.push(op);
            }
        });
        for f in funcs {
            let Some(&body) = ctx.region_blocks(ctx.op_regions(f)[0]).first() else {
                continue;
            };
            for p in plan_block(ctx, body, 64).pools {
                self.pools += 1;
                self.buffers += p.slots.len();
                self.unshared += p.unshared_bytes;
                self.lower += p.lower_bound;
                self.first_fit += p.first_fit_bytes.unwrap();
                self.planned += p.bytes;
            }
        }
        self.programs += 1;
    }

    fn ratio(&self, x: u64) -> f64 {
        if self.lower == 0 {
            1.0
        } else {
            x as f64 / self.lower as f64
        }
    }

    fn line(&self) -> String {
        format!(
            "| {} | {} | {} | {} | {} | {} | {} ({:.3}) | {} ({:.3}) |",
            self.name,
            self.programs,
            self.pools,
            self.buffers,
            self.unshared,
            self.lower,
            self.first_fit,
            self.ratio(self.first_fit),
            self.planned,
            self.ratio(self.planned)
        )
    }
}

fn generated(name: &str, seeds: std::ops::Range<u64>, ranks: usize, ops: usize) -> Row {
    let mut row = Row {
        name: name.to_string(),
        ..Row::default()
    };
    for seed in seeds {
        let text = random_program(
            seed,
            &GenConfig {
                ranks,
                ops,
                ..GenConfig::default()
            },
        );
        row.add(&mut Context::new(), &text);
    }
    row
}

#[test]
fn pool_planning_table() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "mlir"))
        .collect();
    paths.sort();
    let mut rows = Vec::new();
    for p in paths {
        let mut row = Row {
            name: format!("examples/{}", p.file_name().unwrap().to_string_lossy()),
            ..Row::default()
        };
        row.add(&mut Context::new(), &std::fs::read_to_string(&p).unwrap());
        rows.push(row);
    }
    rows.push(generated(
        "generated, 2 ranks, 45 ops (seeds 0..100)",
        0..100,
        2,
        45,
    ));
    rows.push(generated(
        "generated, 4 ranks, 45 ops (seeds 0..100)",
        0..100,
        4,
        45,
    ));
    rows.push(generated(
        "generated, 2 ranks, 300 ops (seeds 0..20)",
        0..20,
        2,
        300,
    ));
    rows.push(generated(
        "generated, 4 ranks, 300 ops (seeds 0..20)",
        0..20,
        4,
        300,
    ));
    println!("| programs | n | pools | buffers | no reuse (B) | lower bound (B) | first fit by size (B, /LB) | comm-plan-pools (B, /LB) |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!("{}", r.line());
    }
    for r in &rows {
        assert!(r.planned <= r.first_fit, "{}", r.line());
        assert!(r.ratio(r.planned) <= 1.05, "{}", r.line());
    }
}
