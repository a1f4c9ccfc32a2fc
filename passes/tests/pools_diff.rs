//! Differential tests of `comm-plan-pools` on generated programs, at 2 and 4 ranks: after
//! `coll-to-comm`, planning changes no sim line (every comm buffer now lives in its pool,
//! aliasing other slots, with the sim's liveness checks on), pools stay within 5% of their
//! lower bound in total and never above first fit, the planned IR round-trips through text,
//! planning is deterministic and idempotent, and a plan with two live slots moved onto each
//! other is caught by the sim.

mod common;

use commlir_dialects::comm::{set_slot, slot_of, PoolSlot};
use commlir_ir::{Context, OpId};
use commlir_passes::analysis::cost::H200_NVLINK;
use commlir_passes::analysis::report;
use commlir_passes::pools::plan_block;
use commlir_testgen::{random_program, GenConfig};

const LOWER: &str = "builtin.module(func.func(coll-to-comm))";
const PLAN: &str = "builtin.module(func.func(comm-plan-pools))";

/// (planned bytes, lower bound, first-fit bytes) over the pools of one program.
#[derive(Default, Debug, Clone, Copy)]
struct Totals {
    planned: u64,
    lower: u64,
    first_fit: u64,
}

fn functions(ctx: &Context, module: OpId) -> Vec<OpId> {
    let mut f = Vec::new();
    ctx.walk(module, |op| {
        if ctx.op_name(op) == "func.func" {
            f.push(op);
        }
    });
    f
}

fn check(seed: u64, ranks: usize) -> Totals {
    let cfg = GenConfig {
        ranks,
        ops: 45,
        ..GenConfig::default()
    };
    let mut ctx = Context::new();
    let (text, m, original) = common::generated_text(&mut ctx, seed, &cfg);
    common::run_pipeline(&mut ctx, m, LOWER, &text);
    let lowered = common::print(&ctx, m);
    // What the planner sees, for the totals and the first-fit comparison.
    let mut totals = Totals::default();
    for f in functions(&ctx, m) {
        let body = ctx.region_blocks(ctx.op_regions(f)[0])[0];
        for p in plan_block(&ctx, body, 64).pools {
            assert!(
                p.bytes >= p.lower_bound && p.bytes <= p.first_fit_bytes.unwrap(),
                "seed {seed}: {p:?}"
            );
            totals.planned += p.bytes;
            totals.lower += p.lower_bound;
            totals.first_fit += p.first_fit_bytes.unwrap();
        }
    }
    common::run_pipeline(&mut ctx, m, PLAN, &lowered);
    let planned = common::print(&ctx, m);
    let after = common::sim(&ctx, m, ranks, seed);
    assert_eq!(original, after, "seed {seed} ranks {ranks}: results differ after planning\nlowered:\n{lowered}\nplanned:\n{planned}");

    // The report reads the pools the pass wrote.
    let rep = report::build(&ctx, &H200_NVLINK, m);
    let reported: u64 = rep
        .functions
        .iter()
        .flat_map(|f| &f.pools)
        .map(|p| p.bytes)
        .sum();
    let reported_lb: u64 = rep
        .functions
        .iter()
        .flat_map(|f| &f.pools)
        .map(|p| p.lower_bound_bytes)
        .sum();
    assert!(
        rep.functions
            .iter()
            .flat_map(|f| &f.pools)
            .all(|p| p.planned),
        "seed {seed}: unplanned pool in the report"
    );
    assert_eq!(
        (reported, reported_lb),
        (totals.planned, totals.lower),
        "seed {seed}"
    );

    // Text round trip, determinism and idempotence: a fresh parse plans to the same text.
    let mut ctx2 = Context::new();
    let m2 = common::parse(&mut ctx2, &planned);
    assert_eq!(
        common::print(&ctx2, m2),
        planned,
        "seed {seed}: planned IR does not round-trip"
    );
    common::run_pipeline(&mut ctx2, m2, PLAN, &planned);
    assert_eq!(
        common::print(&ctx2, m2),
        planned,
        "seed {seed}: re-planning changed the plan"
    );
    assert_eq!(common::sim(&ctx2, m2, ranks, seed), original);
    totals
}

fn sweep(seeds: std::ops::Range<u64>, ranks: usize) {
    let mut sum = Totals::default();
    for seed in seeds {
        let t = check(seed, ranks);
        sum.planned += t.planned;
        sum.lower += t.lower;
        sum.first_fit += t.first_fit;
    }
    assert!(sum.lower > 0);
    let ratio = sum.planned as f64 / sum.lower as f64;
    assert!(
        ratio <= 1.05,
        "ranks {ranks}: pools total {} bytes, lower bound {} ({ratio:.3})",
        sum.planned,
        sum.lower
    );
}

#[test]
fn two_ranks() {
    sweep(0..40, 2);
}

#[test]
fn four_ranks() {
    sweep(100..130, 4);
}

/// Moves one slot onto another buffer live at the same time; the sim must refuse to run it
/// and name both producers rather than compute something wrong.
#[test]
fn overlapping_plan_is_caught_by_the_sim() {
    let mut caught = 0;
    for seed in 0..20u64 {
        let cfg = GenConfig {
            ranks: 2,
            ops: 45,
            ..GenConfig::default()
        };
        let text = random_program(seed, &cfg);
        let mut ctx = Context::new();
        let m = common::parse(&mut ctx, &text);
        common::run_pipeline(&mut ctx, m, LOWER, &text);
        common::run_pipeline(&mut ctx, m, PLAN, &text);
        let f = functions(&ctx, m)[0];
        let body = ctx.region_blocks(ctx.op_regions(f)[0])[0];
        let live = commlir_passes::pools::liveness::analyze(&ctx, body);
        // Two buffers of one pool, live together, the second produced while the first lives.
        let pair = live.slots.iter().enumerate().find_map(|(i, a)| {
            live.slots[i + 1..]
                .iter()
                .find(|b| {
                    b.kind == a.kind
                        && b.group == a.group
                        && b.start > a.start
                        && b.start <= a.end
                        && b.size > 0
                        && b.size <= a.size
                })
                .map(|b| (a.clone(), b.clone()))
        });
        let Some((a, b)) = pair else { continue };
        let sa = slot_of(&ctx, a.producer).unwrap();
        set_slot(
            &mut ctx,
            b.producer,
            PoolSlot {
                offset: sa.offset,
                size: b.size,
            },
        );
        let out = common::sim(&ctx, m, 2, seed);
        assert!(
            out.starts_with("error"),
            "seed {seed}: an overlapping plan ran:\n{out}"
        );
        let named = format!("'{}' at", ctx.op_name(a.producer));
        assert!(
            out.contains("the pool plan overlaps two live slots") || out.contains("already reused"),
            "seed {seed}: {out}"
        );
        assert!(
            out.contains(&named),
            "seed {seed}: the other op is not named: {out}"
        );
        caught += 1;
    }
    assert!(
        caught >= 10,
        "only {caught} programs had two buffers live together"
    );
}
