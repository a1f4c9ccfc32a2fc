//! The transformer generators produce programs that the sim backend runs and that lower
//! through coll-to-comm with identical results (the generators are used by benchmarks, so a
//! broken generator would silently measure nothing).

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::Context;
use commlir_testgen::{transformer_program, Parallelism, TransformerConfig};

#[test]
fn transformer_programs_verify_and_run() {
    commlir_passes::link();
    for p in [Parallelism::Tp, Parallelism::Fsdp, Parallelism::Mixed] {
        let cfg = TransformerConfig::small(p, 2);
        let text = transformer_program(&cfg);
        let mut ctx = Context::new();
        let m = parse_source(
            &mut ctx,
            "t.mlir",
            text.as_bytes(),
            &ParseOptions::default(),
        )
        .unwrap_or_else(|d| panic!("{p:?}: {}\n{text}", d.message));
        commlir_ir::verify::verify(&ctx, m)
            .unwrap_or_else(|d| panic!("{p:?}: {}\n{text}", d[0].message));
        let opts = commlir_runtime::SimOptions {
            ranks: cfg.ranks(),
            entry: None,
            seed: 1,
        };
        let before =
            commlir_runtime::run(&ctx, m, &opts).unwrap_or_else(|d| panic!("{p:?}: {}", d.message));
        let mut pm = commlir_ir::pass::PassManager::from_pipeline(
            commlir_ir::pass::parse_pipeline("builtin.module(func.func(coll-to-comm))").unwrap(),
        );
        pm.run(&mut ctx, m)
            .unwrap_or_else(|d| panic!("{p:?}: {}", d[0].message));
        let after = commlir_runtime::run(&ctx, m, &opts).unwrap();
        assert_eq!(
            commlir_runtime::format_results(&before, commlir_runtime::PrintMode::Digest),
            commlir_runtime::format_results(&after, commlir_runtime::PrintMode::Digest),
            "{p:?}"
        );
    }
}
