//! Differential tests of `coll-to-comm`: generated programs mixing every collective and
//! compute op over several groups give bit-identical sim results before and after lowering,
//! the lowered IR verifies, holds no functional collective, and re-parses to the same text.

mod common;

use commlir_ir::Context;
use commlir_testgen::{random_program, GenConfig};

fn check(seed: u64, ranks: usize, threshold: u64) {
    let cfg = GenConfig {
        ranks,
        ops: 45,
        ..GenConfig::default()
    };
    let text = random_program(seed, &cfg);
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, &text);
    let before = common::sim(&ctx, m, ranks, seed);
    assert!(
        !before.starts_with("error"),
        "seed {seed}: the input does not run: {before}\n{text}"
    );
    let pipeline =
        format!("builtin.module(func.func(coll-to-comm{{one-shot-threshold={threshold}}}))");
    common::run_pipeline(&mut ctx, m, &pipeline, &text);
    let lowered = common::print(&ctx, m);
    assert!(
        !lowered.contains("coll.all_")
            && !lowered.contains("coll.wait_tensor")
            && !lowered.contains("coll.broadcast"),
        "seed {seed}: functional collectives left:\n{lowered}"
    );
    let after = common::sim(&ctx, m, ranks, seed);
    assert_eq!(
        before, after,
        "seed {seed} ranks {ranks}: results differ\ninput:\n{text}\nlowered:\n{lowered}"
    );
    // The lowered text is itself a valid program with the same meaning.
    let mut ctx2 = Context::new();
    let m2 = common::parse(&mut ctx2, &lowered);
    assert_eq!(
        common::print(&ctx2, m2),
        lowered,
        "seed {seed}: lowered IR does not round-trip"
    );
    assert_eq!(common::sim(&ctx2, m2, ranks, seed), before);
}

#[test]
fn two_ranks_default_threshold() {
    for seed in 0..40 {
        check(seed, 2, 131_072);
    }
}

#[test]
fn four_ranks_subgroups() {
    for seed in 100..130 {
        check(seed, 4, 131_072);
    }
}

#[test]
fn no_one_shot() {
    for seed in 200..220 {
        check(seed, 2, 0);
    }
}
