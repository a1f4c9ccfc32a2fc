//! Differential and property tests of the communication scheduling passes on generated
//! programs, at the `coll` level and after `coll-to-comm`, with and without `cost_ns`, on 2
//! and 4 ranks. For every pass: the sim results are bit-identical before and after; every
//! dependency edge of the input's graph still points forward; the relative order of the
//! collectives on every group is unchanged; peak memory stays within `(1 + budget) ×` the
//! input's; and the output is deterministic (two runs give byte-identical text).

mod common;

use common::bodies;

use commlir_ir::Context;
use commlir_passes::schedule::{check, DepGraph, GraphOptions};
use commlir_passes::schedule_for_comm::{schedule_for_comm, Mode};
use commlir_testgen::GenConfig;

/// Runs `pass` (a `func.func` pass with its options) on the generated program and checks
/// every invariant; returns the output text.
fn run_checked(
    pass: &str,
    budget: f64,
    seed: u64,
    ranks: usize,
    with_costs: bool,
    lower: bool,
) -> String {
    let cfg = GenConfig {
        ranks,
        ops: 45,
        with_costs,
        ..GenConfig::default()
    };
    let mut ctx = Context::new();
    let m = common::generated(&mut ctx, seed, &cfg, lower);
    let sim_before = common::sim(&ctx, m, ranks, seed);
    assert!(
        !sim_before.starts_with("error"),
        "seed {seed}: input does not run: {sim_before}"
    );
    let before = common::body_facts(&ctx, m);
    let input = common::print(&ctx, m);
    common::run_pipeline(
        &mut ctx,
        m,
        &format!("builtin.module(func.func({pass}))"),
        &input,
    );
    let out = common::print(&ctx, m);
    let what = format!("{pass} seed {seed} ranks {ranks} costs {with_costs} lowered {lower}");
    assert_eq!(
        common::sim(&ctx, m, ranks, seed),
        sim_before,
        "{what}: results differ\ninput:\n{input}\noutput:\n{out}"
    );
    common::assert_schedule_kept(&ctx, &before, budget, true, &what, &input, &out);
    out
}

/// Runs the whole matrix for `pass`: both levels, costs on and off, 2 and 4 ranks; also
/// checks determinism. Returns how many programs the pass changed.
fn matrix(pass: &str, budget: f64, seeds: std::ops::Range<u64>) -> usize {
    let mut changed = 0;
    for seed in seeds {
        for &(ranks, with_costs, lower) in &[
            (2, false, false),
            (2, true, true),
            (4, true, false),
            (4, false, true),
        ] {
            let a = run_checked(pass, budget, seed, ranks, with_costs, lower);
            let b = run_checked(pass, budget, seed, ranks, with_costs, lower);
            assert_eq!(a, b, "{pass} seed {seed}: output is not deterministic");
            // Did the pass change anything? Compare with the input printed the same way.
            let cfg = GenConfig {
                ranks,
                ops: 45,
                with_costs,
                ..GenConfig::default()
            };
            let mut ctx = Context::new();
            let m = common::generated(&mut ctx, seed, &cfg, lower);
            if common::print(&ctx, m) != a {
                changed += 1;
            }
        }
    }
    changed
}

#[test]
fn sink_waits_invariants() {
    let changed = matrix("comm-sink-waits{peak-memory-budget=0.5}", 0.5, 0..12);
    assert!(
        changed > 10,
        "comm-sink-waits changed only {changed} programs"
    );
}

#[test]
fn raise_comms_invariants() {
    let changed = matrix("comm-raise-comms{peak-memory-budget=0.5}", 0.5, 20..32);
    assert!(
        changed > 10,
        "comm-raise-comms changed only {changed} programs"
    );
}

#[test]
fn reorder_compute_for_overlap_invariants() {
    let changed = matrix(
        "comm-reorder-compute-for-overlap{peak-memory-budget=0.5}",
        0.5,
        40..52,
    );
    assert!(
        changed > 10,
        "comm-reorder-compute-for-overlap changed only {changed} programs"
    );
}

#[test]
fn greedy_default_budget_never_raises_peak() {
    matrix("comm-reorder-compute-for-overlap", 0.0, 60..66);
    matrix("comm-sink-waits", 0.0, 66..72);
}

#[test]
fn global_order_then_schedule() {
    for seed in 80..88 {
        for lower in [false, true] {
            let out = run_checked(
                "comm-global-order,comm-reorder-compute-for-overlap{peak-memory-budget=1.0}",
                1.0,
                seed,
                4,
                true,
                lower,
            );
            assert!(
                out.contains("comm_order = 0"),
                "seed {seed}: no pins:\n{out}"
            );
        }
    }
}

/// The seed's `sink_waits` alone (scores without `score_0`) lets a later collective overtake
/// an earlier one on the same group when the earlier one depends on a deferred wait. The
/// graph's group-order edges prevent it; without them (`unsafe-collective-reorder`) the
/// overtaking happens, which is what the seed's algorithm does.
#[test]
fn sink_waits_would_reorder_collectives_without_group_edges() {
    let text = r#"
module {
  coll.group @tp {size = 2 : i64}
  func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %0 = coll.all_reduce %a {reduce_op = "sum", group = @tp} : tensor<4xf32>
    %1 = coll.wait_tensor %0 : tensor<4xf32>
    %2 = coll.all_reduce %1 {reduce_op = "sum", group = @tp} : tensor<4xf32>
    %3 = coll.all_reduce %b {reduce_op = "sum", group = @tp} : tensor<4xf32>
    %4 = coll.wait_tensor %2 : tensor<4xf32>
    %5 = coll.wait_tensor %3 : tensor<4xf32>
    return %4, %5 : tensor<4xf32>, tensor<4xf32>
  }
}"#;
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, text);
    let b = bodies(&ctx, m)[0];
    let rt = vec![0.0; 7];
    let unsafe_graph = DepGraph::build(
        &ctx,
        b,
        GraphOptions {
            collective_order: false,
        },
    );
    let order = schedule_for_comm(&unsafe_graph, &rt, Mode::SINK_WAITS);
    assert_eq!(
        order,
        vec![0, 3, 1, 2, 4, 5, 6],
        "the seed's order: %3 overtakes %2"
    );
    assert!(!check::keeps_group_order(&unsafe_graph, &order));
    let safe_graph = DepGraph::build(&ctx, b, GraphOptions::default());
    let order = schedule_for_comm(&safe_graph, &rt, Mode::SINK_WAITS);
    assert!(check::keeps_group_order(&safe_graph, &order));
    assert_eq!(order, vec![0, 1, 2, 3, 4, 5, 6]);
}

/// In-place comm buffers: a reader of a buffer an all-reduce mutates stays on its side of the
/// start and of the wait.
#[test]
fn comm_level_buffer_hazards_are_edges() {
    let text = r#"
module {
  coll.group @tp {size = 2 : i64}
  func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = compute.relu %a : (tensor<4xf32>) -> tensor<4xf32, #comm.buffer<nccl, @tp>>
    %1 = compute.neg %0 : (tensor<4xf32, #comm.buffer<nccl, @tp>>) -> tensor<4xf32>
    %2 = comm.all_reduce %0 {group = @tp, reduce_op = "sum"} : (tensor<4xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
    %3 = comm.wait %2, %0 : (!comm.work, tensor<4xf32, #comm.buffer<nccl, @tp>>) -> tensor<4xf32, #comm.buffer<nccl, @tp>>
    %4 = compute.add %3, %1 : (tensor<4xf32, #comm.buffer<nccl, @tp>>, tensor<4xf32>) -> tensor<4xf32>
    %5 = compute.exp %0 : (tensor<4xf32, #comm.buffer<nccl, @tp>>) -> tensor<4xf32>
    %6 = compute.add %4, %5 : tensor<4xf32>
    return %6 : tensor<4xf32>
  }
}"#;
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, text);
    let b = bodies(&ctx, m)[0];
    let g = DepGraph::build(&ctx, b, GraphOptions::default());
    // The neg reads %0 before the in-place all-reduce writes it (WAR).
    assert!(g.succs(1).contains(&2), "{:?}", g.succs(1));
    // The wait completes the write; the add reads after it.
    assert!(g.succs(3).contains(&4));
    assert_eq!(g.coll_of_wait[3], 2);
    // Reading the buffer through its pre-wait name still happens after the wait (RAW through
    // the alias; there is no SSA edge).
    assert!(g.succs(3).contains(&5), "{:?}", g.succs(3));
}

#[test]
fn reorder_peak_memory_invariants() {
    // verify-memory checks the O(1) incremental levels against a full recompute every move.
    let changed = matrix(
        "comm-reorder-peak-memory{verify-memory=true}",
        0.0,
        100..112,
    );
    assert!(
        changed > 5,
        "comm-reorder-peak-memory changed only {changed} programs"
    );
    matrix("comm-reorder-peak-memory{peak-memory-budget=0.25 use-runtime-estimates=true verify-memory=true}", 0.25, 112..118);
    matrix("comm-reorder-peak-memory{use-runtime-estimates=true extra-overlap=true verify-memory=true}", 0.0, 118..124);
}

#[test]
fn sink_waits_iterative_invariants() {
    let changed = matrix(
        "comm-sink-waits-iterative{verify-memory=true}",
        0.0,
        130..142,
    );
    assert!(
        changed > 5,
        "comm-sink-waits-iterative changed only {changed} programs"
    );
    matrix("comm-sink-waits-iterative{peak-memory-budget=0.25 use-runtime-estimates=true verify-memory=true}", 0.25, 142..148);
    matrix("comm-sink-waits-iterative{use-runtime-estimates=true extra-overlap=true verify-memory=true}", 0.0, 148..154);
}

#[test]
fn iterative_pipeline_after_pins() {
    for seed in 160..166 {
        for lower in [false, true] {
            run_checked(
                "comm-global-order,comm-sink-waits-iterative{verify-memory=true},comm-reorder-peak-memory{verify-memory=true}",
                0.0,
                seed,
                2,
                true,
                lower,
            );
        }
    }
}

/// The guarded passes hand their cost table and makespan to the next one through the pass
/// manager's analysis cache. Running the pipeline in one pass manager (cache used) and pass
/// by pass in fresh managers (nothing cached) must give byte-identical IR and statistics, on
/// generated programs at both levels, including with a pass in between that changes the
/// function (the cache must be dropped there) and with a module-level pass between.
#[test]
fn cached_analyses_change_nothing() {
    let passes = [
        "func.func(comm-reorder-peak-memory)",
        "func.func(comm-sink-waits-iterative{use-runtime-estimates=true})",
        "func.func(comm-reorder-peak-memory{peak-memory-budget=0.1})",
        "func.func(comm-raise-comms)",
        "func.func(comm-sink-waits-iterative)",
        "comm-global-order",
        "func.func(comm-reorder-peak-memory{use-runtime-estimates=true})",
        "func.func(comm-reorder-peak-memory{annotate=true})",
        "func.func(comm-sink-waits-iterative)",
    ];
    let mut reused = 0;
    for seed in 170..182 {
        for lower in [false, true] {
            let cfg = GenConfig {
                ranks: 2,
                ops: 60,
                with_costs: seed % 2 == 0,
                ..GenConfig::default()
            };
            let mut one = Context::new();
            let m1 = common::generated(&mut one, seed, &cfg, lower);
            let input = common::print(&one, m1);
            let whole = format!("builtin.module({})", passes.join(","));
            let mut pm = commlir_ir::pass::PassManager::from_pipeline(
                commlir_ir::pass::parse_pipeline(&whole).unwrap(),
            );
            pm.run(&mut one, m1).unwrap();
            let mut each = Context::new();
            let m2 = common::generated(&mut each, seed, &cfg, lower);
            let mut stats = String::new();
            for p in passes {
                let mut pm = commlir_ir::pass::PassManager::from_pipeline(
                    commlir_ir::pass::parse_pipeline(&format!("builtin.module({p})")).unwrap(),
                );
                pm.run(&mut each, m2).unwrap();
                stats.push_str(&stat_lines(&pm.statistics_report()));
            }
            let what = format!("seed {seed} lowered {lower}");
            assert_eq!(common::print(&one, m1), common::print(&each, m2), "{what}");
            assert_eq!(stat_lines(&pm.statistics_report()), stats, "{what}");
            reused += usize::from(common::print(&one, m1) != input);
        }
    }
    assert!(reused > 0, "the pipeline changed no program");
}

/// The `(S)` lines of a statistics report, in order.
fn stat_lines(report: &str) -> String {
    report
        .lines()
        .filter(|l| l.trim_start().starts_with("(S)"))
        .map(|l| format!("{}\n", l.trim()))
        .collect()
}
