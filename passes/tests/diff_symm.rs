//! Differential tests of the symmetric-memory lowerings: generated programs lowered by
//! `coll-to-comm` with every all-reduce path (forced one-shot, forced two-shot, the cost
//! model, the size rule) give bit-identical sim results before and after, keep the order of
//! the collectives of each group, and stay identical through the scheduling pipeline and
//! pool planning; programs written with the `symm` ops at the input level too.

mod common;

use commlir_ir::{Context, OpId, Trait};
use commlir_testgen::{random_program, GenConfig};
use std::collections::BTreeMap;

/// The collectives of each (function, group), in program order, by family: the same family
/// at the `coll`, `comm` and `symm` levels (an all-reduce is an all-reduce whether it runs
/// through NCCL, one-shot or two-shot).
fn order_by_group(ctx: &Context, module: OpId) -> BTreeMap<String, Vec<&'static str>> {
    let mut out: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    let mut func = String::new();
    ctx.walk(module, |op| {
        let name = ctx.op_name(op);
        if name == "func.func" {
            func = ctx.symbol_name(op).unwrap_or("").to_string();
        }
        if !ctx.op_has_trait(op, Trait::Collective) {
            return;
        }
        let group = ctx
            .inherent_attr(op, "group")
            .and_then(|a| ctx.attr_as_symbol(a))
            .unwrap_or("");
        let family = if name.contains("all_reduce") {
            "all_reduce"
        } else if name.contains("all_gather") {
            "all_gather"
        } else if name.contains("reduce_scatter") {
            "reduce_scatter"
        } else if name.contains("shard_dim") {
            "shard_dim_alltoall"
        } else if name.contains("all_to_all") {
            "all_to_all"
        } else if name.contains("broadcast") {
            "broadcast"
        } else {
            "other"
        };
        out.entry(format!("{func}@{group}"))
            .or_default()
            .push(family);
    });
    out
}

fn count(text: &str, what: &str) -> usize {
    text.matches(what).count()
}

/// Lowers the program of `seed` with `coll-to-comm{opts}` and checks it; returns the
/// lowered text.
fn lower_checked(seed: u64, ranks: usize, opts: &str) -> String {
    let cfg = GenConfig {
        ranks,
        ops: 45,
        ..GenConfig::default()
    };
    let mut ctx = Context::new();
    let (text, m, before) = common::generated_text(&mut ctx, seed, &cfg);
    let order = order_by_group(&ctx, m);
    common::run_pipeline(
        &mut ctx,
        m,
        &format!("builtin.module(func.func(coll-to-comm{{{opts}}}))"),
        &text,
    );
    let lowered = common::print(&ctx, m);
    let what = format!("coll-to-comm{{{opts}}} seed {seed} ranks {ranks}");
    assert!(
        !lowered.contains("coll.all_reduce ") && !lowered.contains("coll.wait_tensor"),
        "{what}: functional collectives left:\n{lowered}"
    );
    assert_eq!(
        common::sim(&ctx, m, ranks, seed),
        before,
        "{what}: results differ\ninput:\n{text}\nlowered:\n{lowered}"
    );
    assert_eq!(
        order_by_group(&ctx, m),
        order,
        "{what}: collective order changed\ninput:\n{text}\nlowered:\n{lowered}"
    );
    // The lowered text re-parses to itself and means the same.
    common::assert_round_trip(&lowered, ranks, seed, &before, &what);
    lowered
}

#[test]
fn every_symm_path_at_2_and_4_ranks() {
    for (ranks, seeds) in [(2usize, 0..24u64), (4, 100..118)] {
        let (mut one, mut two, mut auto_symm) = (0, 0, 0);
        for seed in seeds {
            let l = lower_checked(seed, ranks, "symm-algo=one-shot");
            one += count(&l, "symm.one_shot_all_reduce");
            assert_eq!(count(&l, "symm.two_shot_all_reduce"), 0);
            let l = lower_checked(seed, ranks, "symm-algo=two-shot");
            two += count(&l, "symm.two_shot_all_reduce");
            assert_eq!(count(&l, "symm.one_shot_all_reduce"), 0);
            let l = lower_checked(seed, ranks, "");
            auto_symm += count(&l, "symm.");
            let l = lower_checked(seed, ranks, "symm-algo=nccl");
            assert_eq!(count(&l, "symm."), 0, "symm-algo=nccl");
            lower_checked(seed, ranks, "one-shot-threshold=1024");
        }
        assert!(
            one > 10 && two > 10 && auto_symm > 10,
            "{ranks} ranks: too few symm all-reduces exercised ({one}, {two}, {auto_symm})"
        );
    }
}

/// The scheduling passes on programs with two-shot and one-shot all-reduces: sim results,
/// dependencies (two-shot writes its input: no reader of the old value moves after it),
/// collective order per group and peak memory hold; pool planning keeps the results.
#[test]
fn scheduling_pipeline_on_symm_programs() {
    for algo in ["two-shot", "one-shot", "auto"] {
        for (ranks, seeds) in [(2usize, 300..312u64), (4, 400..408)] {
            for seed in seeds {
                let cfg = GenConfig {
                    ranks,
                    ops: 45,
                    with_costs: seed % 2 == 0,
                    ..GenConfig::default()
                };
                let text = random_program(seed, &cfg);
                let mut ctx = Context::new();
                let m = common::parse(&mut ctx, &text);
                let want = common::sim(&ctx, m, ranks, seed);
                common::run_pipeline(
                    &mut ctx,
                    m,
                    &format!("builtin.module(func.func(coll-to-comm{{symm-algo={algo}}}))"),
                    &text,
                );
                let before = common::body_facts(&ctx, m);
                let input = common::print(&ctx, m);
                common::run_pipeline(
                    &mut ctx,
                    m,
                    "builtin.module(func.func(comm-reorder-peak-memory{verify-memory=true},comm-sink-waits-iterative{verify-memory=true}))",
                    &input,
                );
                let out = common::print(&ctx, m);
                let what = format!("{algo} seed {seed} ranks {ranks}");
                assert_eq!(
                    common::sim(&ctx, m, ranks, seed),
                    want,
                    "{what}: results differ\ninput:\n{input}\noutput:\n{out}"
                );
                common::assert_schedule_kept(&ctx, &before, 0.0, false, &what, &input, &out);
                common::run_pipeline(
                    &mut ctx,
                    m,
                    "builtin.module(func.func(comm-plan-pools))",
                    &out,
                );
                assert_eq!(
                    common::sim(&ctx, m, ranks, seed),
                    want,
                    "{what}: results differ after comm-plan-pools\n{}",
                    common::print(&ctx, m)
                );
            }
        }
    }
}

/// A program written with the `symm` ops at the input level (plain tensors), through the
/// whole pipeline: the results equal the `coll` program's.
#[test]
fn input_level_symm_ops_through_the_pipeline() {
    let body = |ar2: &str, ar1: &str, ag: &str, rs: &str| {
        format!(
            r#"module {{
  coll.group @tp {{size = 2 : i64, symm_mem}}
  func.func @main(%x: tensor<8x4xf32>, %w: tensor<4x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<16x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>) {{
    %h = compute.matmul %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %g = compute.gelu %h : tensor<8x4xf32>
    {ar2}
    %s = compute.add %a, %h : tensor<8x4xf32>
    {ar1}
    {ag}
    {rs}
    %t = compute.mul %g, %s : tensor<8x4xf32>
    return %a, %b, %c, %d, %t : tensor<8x4xf32>, tensor<8x4xf32>, tensor<16x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>
  }}
}}
"#
        )
    };
    let coll = body(
        "%a0 = coll.all_reduce %g {reduce_op = \"avg\", group = @tp} : tensor<8x4xf32>\n    %a = coll.wait_tensor %a0 : tensor<8x4xf32>",
        "%b0 = coll.all_reduce %h {reduce_op = \"max\", group = @tp} : tensor<8x4xf32>\n    %b = coll.wait_tensor %b0 : tensor<8x4xf32>",
        "%c0 = coll.all_gather_into_tensor %s {group = @tp} : (tensor<8x4xf32>) -> tensor<16x4xf32>\n    %c = coll.wait_tensor %c0 : tensor<16x4xf32>",
        "%d0 = coll.reduce_scatter_tensor %s {reduce_op = \"sum\", group = @tp} : (tensor<8x4xf32>) -> tensor<4x4xf32>\n    %d = coll.wait_tensor %d0 : tensor<4x4xf32>",
    );
    let symm = body(
        "%a = symm.two_shot_all_reduce %g {reduce_op = \"avg\", group = @tp} : tensor<8x4xf32>",
        "%b = symm.one_shot_all_reduce %h {reduce_op = \"max\", group = @tp} : tensor<8x4xf32>",
        "%c = symm.all_gather %s {group = @tp} : (tensor<8x4xf32>) -> tensor<16x4xf32>",
        "%d = symm.reduce_scatter %s {reduce_op = \"sum\", group = @tp} : (tensor<8x4xf32>) -> tensor<4x4xf32>",
    );
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, &coll);
    let want = common::sim(&ctx, m, 2, 7);
    assert!(!want.starts_with("error"), "{want}");
    for pipeline in [
        "builtin.module(func.func(coll-to-comm))",
        "builtin.module(func.func(coll-to-comm,comm-reorder-peak-memory{verify-memory=true},comm-sink-waits-iterative{verify-memory=true},comm-plan-pools))",
    ] {
        let mut ctx = Context::new();
        let m = common::parse(&mut ctx, &symm);
        assert_eq!(common::sim(&ctx, m, 2, 7), want, "input-level symm program");
        common::run_pipeline(&mut ctx, m, pipeline, &symm);
        let out = common::print(&ctx, m);
        assert_eq!(common::sim(&ctx, m, 2, 7), want, "{pipeline}:\n{out}");
        // %g has another reader (%t), so two-shot, which clobbers its input, runs on a clone.
        assert!(
            out.contains("symm.two_shot_all_reduce") && out.contains("compute.clone %"),
            "{out}"
        );
    }
}
