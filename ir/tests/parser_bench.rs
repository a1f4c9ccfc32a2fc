//! Parser throughput on a generated 200k-op generic-form file (about 20 MB).
//!
//! Run: `cargo test --release -p commlir-ir --test parser_bench -- --ignored --nocapture`

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::Context;
use std::fmt::Write as _;
use std::time::Instant;

/// A function of `n` generic-form ops cycling through compute and collective shapes, each with
/// a `loc(...)`, as `mlir-opt --mlir-print-op-generic --mlir-print-debuginfo` prints them.
fn generate(n: usize) -> String {
    let t = "tensor<8x64xf32>";
    let mut s = String::with_capacity(n * 110);
    s.push_str("\"builtin.module\"() ({\n");
    let _ = writeln!(
        s,
        "  \"func.func\"() <{{function_type = ({t}) -> {t}, sym_name = \"f\"}}> ({{"
    );
    let _ = writeln!(s, "  ^bb0(%arg0: {t} loc(\"bench.mlir\":3:10)):");
    let mut prev = "%arg0".to_string();
    for i in 0..n {
        let line = i + 4;
        let _ = match i % 4 {
            0 => writeln!(s, "    %{i} = \"compute.add\"({prev}, %arg0) : ({t}, {t}) -> {t} loc(\"bench.mlir\":{line}:5)"),
            1 => writeln!(s, "    %{i} = \"coll.all_reduce\"({prev}) {{group = @tp, reduce_op = \"sum\"}} : ({t}) -> {t} loc(\"bench.mlir\":{line}:5)"),
            2 => writeln!(s, "    %{i} = \"coll.wait_tensor\"({prev}) : ({t}) -> {t} loc(\"bench.mlir\":{line}:5)"),
            _ => writeln!(s, "    %{i} = \"compute.scale\"({prev}) <{{factor = 5.000000e-01 : f64}}> : ({t}) -> {t} loc(\"bench.mlir\":{line}:5)"),
        };
        prev = format!("%{i}");
    }
    let _ = writeln!(s, "    \"func.return\"({prev}) : ({t}) -> ()");
    s.push_str("  }) : () -> ()\n}) : () -> ()\n");
    s
}

#[test]
#[ignore]
fn bench_parse_200k_generic_ops() {
    let src = generate(200_000);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let mut ctx = Context::new();
        ctx.allow_unregistered = true;
        let t0 = Instant::now();
        let m = parse_source(
            &mut ctx,
            "bench.mlir",
            src.as_bytes(),
            &ParseOptions::default(),
        );
        let dt = t0.elapsed().as_secs_f64() * 1e3;
        assert!(m.is_ok());
        best = best.min(dt);
    }
    println!(
        "parse: {:.1} MB, 200000 ops: best of 5 = {best:.1} ms",
        src.len() as f64 / 1e6
    );
}

#[test]
fn generated_file_parses() {
    let src = generate(1000);
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
