//! Differential tests of the pass pipelines on generated programs that use the transformer
//! ops (`GenConfig::model_ops`: broadcast, permute, reduce_max, sin, cos, sigmoid, log,
//! compare, select, iota): every pipeline keeps the sim results bit for bit, and the
//! scheduling passes keep their invariants (dependencies, collective order, peak memory).

mod common;

use commlir_ir::Context;
use commlir_testgen::GenConfig;

const PIPELINES: &[&str] = &[
    "builtin.module(func.func(coll-to-comm,comm-plan-pools))",
    "builtin.module(func.func(coll-to-comm,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools))",
    "builtin.module(func.func(comm-raise-comms,comm-sink-waits))",
    "builtin.module(func.func(coll-sequence-parallel,cse,dce))",
    "builtin.module(func.func(coll-bucket,coll-to-comm,comm-overlap-schedule,comm-plan-pools))",
];

#[test]
fn pipelines_keep_results_with_model_ops() {
    let mut changed = 0;
    for seed in 0..24u64 {
        let cfg = GenConfig {
            ranks: if seed % 2 == 0 { 2 } else { 4 },
            ops: 40,
            with_costs: seed % 3 == 0,
            model_ops: true,
            ..GenConfig::default()
        };
        for pipe in PIPELINES {
            let mut ctx = Context::new();
            let (text, m, before) = common::generated_text(&mut ctx, seed, &cfg);
            common::run_pipeline(&mut ctx, m, pipe, &text);
            let out = common::print(&ctx, m);
            changed += usize::from(out != text);
            assert_eq!(
                common::sim(&ctx, m, cfg.ranks, seed),
                before,
                "seed {seed}, {pipe}: results differ\ninput:\n{text}\noutput:\n{out}"
            );
        }
    }
    assert!(changed > 0, "no pipeline changed a program");
}

#[test]
fn scheduling_invariants_hold_with_model_ops() {
    for seed in 0..16u64 {
        let cfg = GenConfig {
            ranks: 2,
            ops: 45,
            model_ops: true,
            ..GenConfig::default()
        };
        for lower in [false, true] {
            let mut ctx = Context::new();
            let m = common::generated(&mut ctx, seed, &cfg, lower);
            let input = common::print(&ctx, m);
            let before = common::body_facts(&ctx, m);
            let pass = if lower {
                "comm-sink-waits-iterative"
            } else {
                "comm-reorder-compute-for-overlap"
            };
            common::run_pipeline(
                &mut ctx,
                m,
                &format!("builtin.module(func.func({pass}))"),
                &input,
            );
            let out = common::print(&ctx, m);
            let what = format!("{pass} seed {seed} lowered {lower}");
            common::assert_schedule_kept(&ctx, &before, 0.0, true, &what, &input, &out);
        }
    }
}
