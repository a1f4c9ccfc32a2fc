//! Invariants of `comm-overlap-schedule` on generated programs, at the `coll` level and after
//! `coll-to-comm`, with and without `cost_ns`, on 2 and 4 ranks: sim results identical, every
//! dependency of the input's graph kept, the collective order of every group kept, peak memory
//! within `(1 + budget) ×` the input's, deterministic, never slower than the input, and
//! monotone in the budget. Each check is also shown to fail when its invariant is broken on
//! purpose (the pass's testing-only `test-break` option, or a broken series fed to the
//! checker), so that a check that can never fail does not pass for a guarantee.

mod common;

use commlir_ir::{Context, OpId};
use commlir_passes::analysis::timeline::simulate_ops;
use commlir_passes::comm_overlap_schedule::{
    branch_and_bound, limit_for, list_schedule, plan, ComputeOrder, Model, OverlapOptions,
    TestBreak,
};
use commlir_passes::schedule::{self, check, CostTable, DepGraph, GraphOptions};
use commlir_testgen::{transformer_program, GenConfig, Parallelism, TransformerConfig};
use common::bodies;

/// One generated program: seed, ranks, `cost_ns` on some ops, lowered by `coll-to-comm`.
#[derive(Clone, Copy, Debug)]
struct Case {
    seed: u64,
    ranks: usize,
    costs: bool,
    lower: bool,
}

fn cases(seeds: std::ops::Range<u64>) -> Vec<Case> {
    let mut v = Vec::new();
    for seed in seeds {
        for &(ranks, costs, lower) in &[
            (2, false, false),
            (2, true, true),
            (4, true, false),
            (4, false, true),
        ] {
            v.push(Case {
                seed,
                ranks,
                costs,
                lower,
            });
        }
    }
    v
}

fn generate(ctx: &mut Context, c: Case) -> OpId {
    let cfg = GenConfig {
        ranks: c.ranks,
        ops: 45,
        with_costs: c.costs,
        ..GenConfig::default()
    };
    common::generated(ctx, c.seed, &cfg, c.lower)
}

/// The makespans of every function body, with the cost model.
fn makespans(ctx: &Context, m: OpId) -> Vec<f64> {
    bodies(ctx, m)
        .into_iter()
        .map(|b| {
            let costs = CostTable::new(ctx, b);
            simulate_ops(ctx, ctx.block_op_list(b), |o| costs.get(o)).makespan_ns
        })
        .collect()
}

/// Runs `pass` on the case; checks sim results, dependencies, group order, the memory limit
/// and "never slower". Returns the output text and the makespans, or which invariant broke.
fn run_checked(pass: &str, budget: f64, c: Case) -> Result<(String, Vec<f64>), String> {
    let mut ctx = Context::new();
    let m = generate(&mut ctx, c);
    let sim_before = common::sim(&ctx, m, c.ranks, c.seed);
    assert!(
        !sim_before.starts_with("error"),
        "{c:?}: input does not run"
    );
    let before = common::body_facts(&ctx, m);
    let ms_before = makespans(&ctx, m);
    let input = common::print(&ctx, m);
    common::run_pipeline(
        &mut ctx,
        m,
        &format!("builtin.module(func.func({pass}))"),
        &input,
    );
    let out = common::print(&ctx, m);
    let what = format!("{pass} {c:?}");
    if common::sim(&ctx, m, c.ranks, c.seed) != sim_before {
        return Err(format!("{what}: results differ"));
    }
    for (b, graph, groups, peak) in &before {
        // The order is checked before the sim: a broken dependency may still run.
        if let Err(v) = check::check_dependencies(&ctx, *b, graph) {
            return Err(format!("{what}: dependency broken: {v:?}"));
        }
        if let Err(v) = check::check_group_order(&ctx, *b, groups) {
            return Err(format!("{what}: collective order changed: {v:?}"));
        }
        let after = schedule::block_peak(&ctx, *b);
        if !schedule::within_budget(after, *peak, budget) {
            return Err(format!(
                "{what}: peak memory over the limit: {peak} -> {after}"
            ));
        }
    }
    let ms_after = makespans(&ctx, m);
    for (a, b) in ms_after.iter().zip(&ms_before) {
        if *a > b * (1.0 + 1e-9) {
            return Err(format!("{what}: slower than the input: {b} -> {a}"));
        }
    }
    Ok((out, ms_after))
}

/// Whether a series of (budget, makespan) pairs, by increasing budget, never gets slower.
fn monotone(series: &[(f64, f64)]) -> Result<(), String> {
    for w in series.windows(2) {
        if w[1].1 > w[0].1 * (1.0 + 1e-9) {
            return Err(format!(
                "not monotone in the budget: {} at {} -> {} at {}",
                w[0].1, w[0].0, w[1].1, w[1].0
            ));
        }
    }
    Ok(())
}

const BUDGETS: &[f64] = &[0.0, 0.05, 0.1, 0.25, 0.5, 1.0];

/// Every invariant on every case; returns how many programs got faster.
fn all_invariants(extra: &str, seeds: std::ops::Range<u64>) -> usize {
    let mut faster = 0;
    for c in cases(seeds) {
        let mut series = Vec::new();
        for &budget in BUDGETS {
            let pass = format!("comm-overlap-schedule{{peak-memory-budget={budget}{extra}}}");
            let (a, ms) = run_checked(&pass, budget, c).unwrap_or_else(|e| panic!("{e}"));
            let (b, _) = run_checked(&pass, budget, c).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(a, b, "{pass} {c:?}: output is not deterministic");
            series.push((budget, ms.iter().sum::<f64>()));
        }
        monotone(&series).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        let mut ctx = Context::new();
        let m = generate(&mut ctx, c);
        if series[0].1 < makespans(&ctx, m).iter().sum::<f64>() * (1.0 - 1e-9) {
            faster += 1;
        }
    }
    faster
}

#[test]
fn invariants_with_exact_search() {
    let faster = all_invariants("", 0..6);
    assert!(faster > 4, "only {faster} programs got faster");
}

/// The pass is seeded with Inductor's whole sequence (and keeps an order only when it is
/// faster), so at budget 0, where the sequence stays within the input's peak, it is never
/// slower than that sequence; with the list schedules and the local search it is faster on
/// some.
#[test]
fn never_slower_than_inductors_sequence() {
    let sequence = "comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory";
    let mut faster = 0;
    for c in cases(20..26).into_iter().filter(|c| c.lower) {
        let (_, pass) =
            run_checked("comm-overlap-schedule", 0.0, c).unwrap_or_else(|e| panic!("{e}"));
        let (_, seq) = run_checked(sequence, 0.0, c).unwrap_or_else(|e| panic!("{e}"));
        for (p, q) in pass.iter().zip(&seq) {
            assert!(
                *p <= q * (1.0 + 1e-9),
                "{c:?}: pass {p} slower than the sequence {q}"
            );
            if *p < q * (1.0 - 1e-9) {
                faster += 1;
            }
        }
    }
    assert!(
        faster > 2,
        "only {faster} functions faster than the sequence"
    );
}

#[test]
fn invariants_list_scheduling_only() {
    let faster = all_invariants(" exact-region-ops=0 lookahead=2", 10..16);
    assert!(faster > 4, "only {faster} programs got faster");
}

/// Runs the broken pass over cases until the invariant named `needle` fails.
fn breaks(test_break: &str, budget: f64, needle: &str) {
    for c in cases(0..12) {
        let pass =
            format!("comm-overlap-schedule{{peak-memory-budget={budget} test-break={test_break}}}");
        if let Err(e) = run_checked(&pass, budget, c) {
            assert!(
                e.contains(needle),
                "test-break={test_break}: other failure: {e}"
            );
            return;
        }
    }
    panic!("test-break={test_break}: no program broke `{needle}`");
}

#[test]
fn memory_check_fails_when_the_limit_is_ignored() {
    breaks("memory", 0.0, "peak memory over the limit");
}

/// Plans with `test-break` and writes the order without the pass manager (whose verifier
/// would reject a broken def-use order before the checks see it); returns the first
/// violation the scheduling checks find.
fn broken_order_violation(test_break: TestBreak) -> Option<check::Violation> {
    for c in cases(0..12) {
        let mut ctx = Context::new();
        let m = generate(&mut ctx, c);
        for b in bodies(&ctx, m) {
            let graph = DepGraph::build(&ctx, b, GraphOptions::default());
            let groups = check::collectives_by_group(&ctx, b);
            let costs = CostTable::new(&ctx, b);
            let opts = OverlapOptions {
                test_break,
                ..OverlapOptions::default()
            };
            let (order, _) = plan(&ctx, b, &costs, &opts);
            if let Some(order) = order {
                schedule::apply_op_order(&mut ctx, order);
            }
            if let Err(v) = check::check_dependencies(&ctx, b, &graph) {
                return Some(v);
            }
            if let Err(v) = check::check_group_order(&ctx, b, &groups) {
                return Some(v);
            }
        }
    }
    None
}

#[test]
fn group_order_check_fails_when_collectives_swap() {
    // Swapping two collectives of a group breaks their order edge too: either check may
    // speak first, and the group check must when the two are independent.
    let v = broken_order_violation(TestBreak::GroupOrder);
    assert!(
        matches!(
            v,
            Some(check::Violation::GroupOrder { .. } | check::Violation::Dependency { .. })
        ),
        "{v:?}"
    );
    // The group check alone, on a swapped pair.
    let mut ctx = Context::new();
    let m = generate(&mut ctx, cases(0..1)[0]);
    let b = bodies(&ctx, m)[0];
    let groups = check::collectives_by_group(&ctx, b);
    let (_, ops) = groups
        .iter()
        .find(|(_, o)| o.len() >= 2)
        .expect("a group with two");
    let (x, y) = (ops[0], ops[1]);
    ctx.move_before(y, x);
    assert!(matches!(
        check::check_group_order(&ctx, b, &groups),
        Err(check::Violation::GroupOrder { .. })
    ));
}

#[test]
fn dependency_check_fails_when_an_op_moves_past_its_user() {
    let v = broken_order_violation(TestBreak::Dependency);
    assert!(
        matches!(v, Some(check::Violation::Dependency { .. })),
        "{v:?}"
    );
}

#[test]
fn slower_check_fails_without_the_guard() {
    breaks("no-guard", 0.0, "slower than the input");
}

#[test]
fn determinism_check_fails_when_runs_differ() {
    for c in cases(0..12) {
        let pass = "comm-overlap-schedule{test-break=nondeterministic}";
        let a = run_checked(pass, 0.0, c).map(|r| r.0);
        let b = run_checked(pass, 0.0, c).map(|r| r.0);
        if a != b {
            return;
        }
    }
    panic!("test-break=nondeterministic: every pair of runs agreed");
}

#[test]
fn monotone_check_fails_on_a_series_that_gets_slower() {
    assert!(monotone(&[(0.0, 10.0), (0.1, 9.0), (0.25, 9.0)]).is_ok());
    assert!(monotone(&[(0.0, 10.0), (0.1, 9.0), (0.25, 9.5)]).is_err());
}

/// The node model agrees with the timeline simulator and the buffer model on every order it
/// produces (the pass chooses on the model, then writes the order).
#[test]
fn model_matches_simulator_and_buffer_model() {
    for c in cases(20..26) {
        let mut ctx = Context::new();
        let m = generate(&mut ctx, c);
        for b in bodies(&ctx, m) {
            let costs = CostTable::new(&ctx, b);
            let model = Model::new(&ctx, b, &costs);
            let peak = schedule::block_peak(&ctx, b);
            for (compute, keep) in [
                (ComputeOrder::Input, false),
                (ComputeOrder::CriticalPath, true),
            ] {
                let order = list_schedule(&model, limit_for(peak, 0.5), compute, keep, 8);
                assert!(check::is_topological(&model.graph, &order), "{c:?}");
                let (ms, p) = model.evaluate(&order);
                let ops: Vec<_> = order.iter().map(|&i| model.graph.ops[i as usize]).collect();
                let sim = simulate_ops(&ctx, ops.iter().copied(), |o| costs.get(o)).makespan_ns;
                assert!(
                    (ms - sim).abs() <= 1e-6 * sim.max(1.0),
                    "{c:?}: {ms} vs {sim}"
                );
                let mut cx = Context::new();
                let mm = generate(&mut cx, c);
                let bb = bodies(&cx, mm)[bodies(&ctx, m).iter().position(|x| *x == b).unwrap()];
                let ops2: Vec<_> = cx.block_op_list(bb);
                schedule::apply_op_order(&mut cx, order.iter().map(|&i| ops2[i as usize]));
                assert_eq!(p, schedule::block_peak(&cx, bb), "{c:?}: peak");
            }
        }
    }
}

/// The exact search never loses to the list schedule it starts from and keeps to the
/// memory limit and the dependencies.
#[test]
fn exact_search_is_at_least_as_good() {
    let cfg = TransformerConfig::small(Parallelism::Fsdp, 1);
    let text = transformer_program(&cfg);
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, &text);
    common::run_pipeline(
        &mut ctx,
        m,
        "builtin.module(func.func(coll-to-comm))",
        &text,
    );
    let b = bodies(&ctx, m)[0];
    let costs = CostTable::new(&ctx, b);
    let model = Model::new(&ctx, b, &costs);
    let peak = schedule::block_peak(&ctx, b);
    let limit = limit_for(peak, 0.0);
    let list = list_schedule(&model, limit, ComputeOrder::Input, false, 8);
    let (ms, _) = model.evaluate(&list);
    let ex = branch_and_bound(&model, limit, &list, 200_000);
    assert!(ex.makespan_ns <= ms + 1e-6);
    assert!(check::is_topological(&model.graph, &ex.order));
    assert!(model.evaluate(&ex.order).1 <= limit);
}

/// Every topological order of `model` within `limit`, by brute force: the best makespan, or
/// `None` when there are more than `cap` orders.
fn brute_force(model: &Model, limit: i64, cap: u64) -> Option<f64> {
    fn go(
        model: &Model,
        limit: i64,
        indeg: &mut Vec<u32>,
        prefix: &mut Vec<u32>,
        best: &mut f64,
        leaves: &mut u64,
        cap: u64,
    ) -> bool {
        let n = model.len();
        if prefix.len() == n {
            *leaves += 1;
            let (ms, peak) = model.evaluate(prefix);
            if peak <= limit {
                *best = best.min(ms);
            }
            return *leaves <= cap;
        }
        for x in 0..n as u32 {
            if indeg[x as usize] != 0 || prefix.contains(&x) {
                continue;
            }
            for &s in model.graph.succs(x) {
                indeg[s as usize] -= 1;
            }
            prefix.push(x);
            let ok = go(model, limit, indeg, prefix, best, leaves, cap);
            prefix.pop();
            for &s in model.graph.succs(x) {
                indeg[s as usize] += 1;
            }
            if !ok {
                return false;
            }
        }
        true
    }
    let n = model.len();
    let mut indeg: Vec<u32> = (0..n as u32)
        .map(|i| model.graph.preds(i).len() as u32)
        .collect();
    let (mut best, mut leaves) = (f64::INFINITY, 0);
    go(
        model,
        limit,
        &mut indeg,
        &mut Vec::new(),
        &mut best,
        &mut leaves,
        cap,
    )
    .then_some(best)
}

/// The exact search's pruning (lower bounds, costless ops issued alone, dominance with
/// finish times raised to their users' stream times) loses no optimum: on generated programs
/// small enough to enumerate, a finished search equals brute force over every topological
/// order under the same memory limit.
#[test]
fn exact_search_matches_brute_force() {
    let mut compared = 0;
    for seed in 0..40u64 {
        for ranks in [2, 4] {
            let cfg = GenConfig {
                ranks,
                ops: 5,
                with_costs: true,
                ..GenConfig::default()
            };
            let mut ctx = Context::new();
            let m = common::generated(&mut ctx, seed, &cfg, true);
            for b in bodies(&ctx, m) {
                let costs = CostTable::new(&ctx, b);
                let model = Model::new(&ctx, b, &costs);
                let limit = limit_for(schedule::block_peak(&ctx, b), 0.0);
                let Some(best) = brute_force(&model, limit, 200_000) else {
                    continue;
                };
                let input: Vec<u32> = (0..model.len() as u32).collect();
                let ex = branch_and_bound(&model, limit, &input, 10_000_000);
                assert!(ex.proven, "seed {seed}: search not finished");
                assert!(
                    (ex.makespan_ns - best).abs() <= 1e-6 * best.max(1.0),
                    "seed {seed}, {ranks} ranks: search {} against brute force {best}",
                    ex.makespan_ns
                );
                compared += 1;
            }
        }
    }
    assert!(
        compared >= 20,
        "only {compared} programs small enough to compare"
    );
}
