//! Parser throughput on a generated 200k-op generic-form file (about 25 MB), with the default
//! front end (the fast path) and with pest alone, the reference.
//!
//! Run: `cargo test --release -p commlir-ir --test parser_bench -- --ignored --nocapture`

use commlir_ir::parser::{parse_source, parse_source_with, FrontEnd, ParseOptions};
use commlir_ir::Context;
use std::fmt::Write as _;
use std::time::Instant;

/// A function of `n` generic-form ops cycling through compute and collective shapes, each with
/// a `loc(...)`, as `mlir-opt --mlir-print-op-generic --mlir-print-debuginfo` prints them.
/// With `loc_aliases`, op locations are `loc(#locN)` with the aliases defined at the end of the
/// file, as mlir-opt prints them by default.
fn generate(n: usize, loc_aliases: bool) -> String {
    let t = "tensor<8x64xf32>";
    let mut s = String::with_capacity(n * 140);
    let mut aliases = String::new();
    s.push_str("\"builtin.module\"() ({\n");
    let _ = writeln!(
        s,
        "  \"func.func\"() <{{function_type = ({t}) -> {t}, sym_name = \"f\"}}> ({{"
    );
    let _ = writeln!(s, "  ^bb0(%arg0: {t} loc(\"bench.mlir\":3:10)):");
    let mut prev = "%arg0".to_string();
    for i in 0..n {
        let line = i + 4;
        let loc = if loc_aliases {
            let _ = writeln!(aliases, "#loc{i} = loc(\"bench.mlir\":{line}:5)");
            format!("#loc{i}")
        } else {
            format!("\"bench.mlir\":{line}:5")
        };
        let _ = match i % 4 {
            0 => writeln!(s, "    %{i} = \"compute.add\"({prev}, %arg0) : ({t}, {t}) -> {t} loc({loc})"),
            1 => writeln!(s, "    %{i} = \"coll.all_reduce\"({prev}) {{group = @tp, reduce_op = \"sum\"}} : ({t}) -> {t} loc({loc})"),
            2 => writeln!(s, "    %{i} = \"coll.wait_tensor\"({prev}) : ({t}) -> {t} loc({loc})"),
            _ => writeln!(s, "    %{i} = \"compute.scale\"({prev}) <{{factor = 5.000000e-01 : f64}}> : ({t}) -> {t} loc({loc})"),
        };
        prev = format!("%{i}");
    }
    let _ = writeln!(s, "    \"func.return\"({prev}) : ({t}) -> ()");
    s.push_str("  }) : () -> ()\n}) : () -> ()\n");
    s.push_str(&aliases);
    s
}

/// Best of 5 parse times of `src` in milliseconds.
fn best_of_5(src: &str, front_end: FrontEnd) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let mut ctx = Context::new();
        ctx.allow_unregistered = true;
        let t0 = Instant::now();
        let m = parse_source_with(
            &mut ctx,
            "bench.mlir",
            src.as_bytes(),
            &ParseOptions::default(),
            front_end,
        );
        let dt = t0.elapsed().as_secs_f64() * 1e3;
        assert!(m.is_ok());
        best = best.min(dt);
    }
    best
}

#[test]
#[ignore]
fn bench_parse_200k_generic_ops() {
    for loc_aliases in [false, true] {
        let src = generate(200_000, loc_aliases);
        let fast = best_of_5(&src, FrontEnd::Auto);
        let pest = best_of_5(&src, FrontEnd::PestOnly);
        let form = if loc_aliases {
            "loc(#alias)"
        } else {
            "loc(\"f\":L:C)"
        };
        println!(
            "parse: {:.1} MB, 200000 ops, {form}: best of 5 = {fast:.1} ms (pest alone: {pest:.1} ms)",
            src.len() as f64 / 1e6
        );
    }
}

#[test]
fn generated_file_parses() {
    let src = generate(1000, false);
    let mut ctx = Context::new();
    ctx.allow_unregistered = true;
    let m = parse_source(
        &mut ctx,
        "bench.mlir",
        src.as_bytes(),
        &ParseOptions::default(),
    )
    .unwrap();
    let mut n = 0;
    ctx.walk(m, |_| n += 1);
    assert_eq!(n, 1003);
}
