//! The overlap slowdown of the timeline simulator (a kernel and a collective running at once
//! both stretch by the machine's factors): on generated programs, at the `coll` level and
//! after `coll-to-comm`, the event-driven simulator with factors 1 computes what the one-pass
//! simulator does (so the model is the old one when the factors are 1), factors above 1 never
//! shorten the makespan, and `comm-overlap-schedule` on a machine with factors above 1 stays
//! deterministic and never slower than its input on that machine. A hand-made overlap checks
//! the rates themselves.

mod common;

use commlir_ir::{Context, OpId};
use commlir_passes::analysis::cost::{op_cost, OpCost};
use commlir_passes::analysis::machine;
use commlir_passes::analysis::timeline::{
    simulate_ops, simulate_ops_event_driven, simulate_ops_overlap, Overlap, Timeline,
};
use commlir_testgen::GenConfig;
use common::bodies;

fn generate(ctx: &mut Context, seed: u64, ranks: usize, costs: bool, lower: bool) -> OpId {
    let cfg = GenConfig {
        ranks,
        ops: 45,
        with_costs: costs,
        ..GenConfig::default()
    };
    common::generated(ctx, seed, &cfg, lower)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn assert_same(a: &Timeline, b: &Timeline, what: &str) {
    assert!(
        close(a.makespan_ns, b.makespan_ns),
        "{what}: makespan {} vs {}",
        a.makespan_ns,
        b.makespan_ns
    );
    assert!(
        close(a.compute_ns, b.compute_ns),
        "{what}: compute {} vs {}",
        a.compute_ns,
        b.compute_ns
    );
    assert!(
        close(a.comm_ns, b.comm_ns),
        "{what}: comm {} vs {}",
        a.comm_ns,
        b.comm_ns
    );
    assert!(
        close(a.exposed_comm_ns, b.exposed_comm_ns),
        "{what}: exposed {} vs {}",
        a.exposed_comm_ns,
        b.exposed_comm_ns
    );
    assert_eq!(a.collectives.len(), b.collectives.len(), "{what}");
    for (x, y) in a.collectives.iter().zip(&b.collectives) {
        assert_eq!(x.op, y.op, "{what}");
        assert!(
            close(x.start_ns, y.start_ns),
            "{what}: start {} vs {}",
            x.start_ns,
            y.start_ns
        );
        assert!(
            close(x.end_ns, y.end_ns),
            "{what}: end {} vs {}",
            x.end_ns,
            y.end_ns
        );
        assert!(
            close(x.exposed_ns, y.exposed_ns),
            "{what}: exposed {} vs {}",
            x.exposed_ns,
            y.exposed_ns
        );
    }
}

/// Every body of every case, with its op costs on the default machine.
fn each_body(mut f: impl FnMut(&Context, &[OpId], &dyn Fn(OpId) -> OpCost, &str)) {
    let m = machine::default_machine();
    for seed in 0..12 {
        for &(ranks, costs, lower) in &[
            (2, false, false),
            (2, true, true),
            (4, true, false),
            (4, false, true),
        ] {
            let mut ctx = Context::new();
            let module = generate(&mut ctx, seed, ranks, costs, lower);
            for b in bodies(&ctx, module) {
                let ops = ctx.block_op_list(b);
                let cost = |op| op_cost(&ctx, m, op);
                let what = format!("seed {seed} ranks {ranks} costs {costs} lower {lower}");
                f(&ctx, &ops, &cost, &what);
            }
        }
    }
}

#[test]
fn factors_of_one_reproduce_the_one_pass_simulator() {
    let mut n = 0;
    each_body(|ctx, ops, cost, what| {
        let one = simulate_ops(ctx, ops.iter().copied(), cost);
        let ev = simulate_ops_event_driven(ctx, ops.iter().copied(), cost, Overlap::NONE);
        assert_same(&one, &ev, what);
        // The dispatching entry point takes the one-pass path: bit-identical.
        let same = simulate_ops_overlap(ctx, ops.iter().copied(), cost, Overlap::NONE);
        assert_eq!(one, same, "{what}");
        n += 1;
    });
    assert!(n >= 48, "{n} bodies");
}

#[test]
fn slowdown_never_shortens_the_makespan() {
    let mut stretched = 0;
    each_body(|ctx, ops, cost, what| {
        let base = simulate_ops(ctx, ops.iter().copied(), cost).makespan_ns;
        for (c, m) in [(1.1, 1.0), (1.0, 1.3), (1.25, 1.15), (2.0, 3.0)] {
            let o = Overlap {
                compute: c,
                comm: m,
            };
            let t = simulate_ops_overlap(ctx, ops.iter().copied(), cost, o);
            assert!(
                t.makespan_ns >= base * (1.0 - 1e-12),
                "{what}: {o:?} gives {} < {base}",
                t.makespan_ns
            );
            // Deterministic.
            assert_eq!(
                t,
                simulate_ops_overlap(ctx, ops.iter().copied(), cost, o),
                "{what}"
            );
            if t.makespan_ns > base * (1.0 + 1e-9) {
                stretched += 1;
            }
        }
    });
    // The programs overlap compute with communication: the model must bite somewhere.
    assert!(
        stretched > 0,
        "no program got slower: the slowdown is not modelled"
    );
}

/// A kernel of 100 µs alongside a collective of 100 µs issued at the same time, factors 1.5
/// (compute) and 1.2 (comm): both run at reduced rates until the collective ends at 120 µs
/// (100 × 1.2), with 100 − 120 / 1.5 = 20 µs of the kernel left, which runs at full rate:
/// the makespan is 140 µs instead of 100.
#[test]
fn rates_of_a_hand_made_overlap() {
    let text = r#"
coll.group @g {size = 2 : i64}
func.func @f(%x: tensor<16xf32>, %y: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %r = coll.all_reduce %x {reduce_op = "sum", group = @g, cost_ns = 100000 : i64} : tensor<16xf32>
  %e = compute.exp %y {cost_ns = 100000 : i64} : tensor<16xf32>
  %w = coll.wait_tensor %r : tensor<16xf32>
  return %w, %e : tensor<16xf32>, tensor<16xf32>
}
"#;
    let mut ctx = Context::new();
    let module = common::parse(&mut ctx, text);
    let b = bodies(&ctx, module)[0];
    let ops = ctx.block_op_list(b);
    let m = machine::default_machine();
    let cost = |op| op_cost(&ctx, m, op);
    let none = simulate_ops(&ctx, ops.iter().copied(), cost);
    assert!(close(none.makespan_ns, 100_000.0), "{}", none.makespan_ns);
    let o = Overlap {
        compute: 1.5,
        comm: 1.2,
    };
    let t = simulate_ops_overlap(&ctx, ops.iter().copied(), cost, o);
    assert!(close(t.makespan_ns, 140_000.0), "{}", t.makespan_ns);
    assert!(
        close(t.collectives[0].end_ns, 120_000.0),
        "{:?}",
        t.collectives[0]
    );
    // The wait after the kernel finds the collective done: nothing exposed.
    assert_eq!(t.exposed_comm_ns, 0.0);
    assert!(
        close(t.compute_ns, 140_000.0) && close(t.comm_ns, 120_000.0),
        "{t:?}"
    );
}

/// The same overlap with costs measured in the running program (`cost_measured`, as
/// `comm-apply-profile` marks them): their times already hold the slowdown, so the kernel and
/// the collective both take their 100 µs; with only the collective measured, the kernel alone
/// runs slowed while the collective runs its 100 µs (doing 100 / 1.5 of its work), then the
/// rest at full rate: 100 + 100 / 3 µs.
#[test]
fn measured_costs_are_not_slowed_again() {
    let text = |k: &str, c: &str| {
        format!(
            r#"
coll.group @g {{size = 2 : i64}}
func.func @f(%x: tensor<16xf32>, %y: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {{
  %r = coll.all_reduce %x {{reduce_op = "sum", group = @g, cost_ns = 100000 : i64{c}}} : tensor<16xf32>
  %e = compute.exp %y {{cost_ns = 100000 : i64{k}}} : tensor<16xf32>
  %w = coll.wait_tensor %r : tensor<16xf32>
  return %w, %e : tensor<16xf32>, tensor<16xf32>
}}
"#
        )
    };
    let o = Overlap {
        compute: 1.5,
        comm: 1.2,
    };
    let m = machine::default_machine();
    for (k, c, want) in [
        (", cost_measured", ", cost_measured", 100_000.0),
        ("", ", cost_measured", 100_000.0 + 100_000.0 / 3.0),
        ("", "", 140_000.0),
    ] {
        let mut ctx = Context::new();
        let module = common::parse(&mut ctx, &text(k, c));
        let b = bodies(&ctx, module)[0];
        let ops = ctx.block_op_list(b);
        let t = simulate_ops_overlap(&ctx, ops.iter().copied(), |op| op_cost(&ctx, m, op), o);
        assert!(
            close(t.makespan_ns, want),
            "kernel{k} coll{c}: {}",
            t.makespan_ns
        );
    }
}

/// `comm-overlap-schedule` on a machine whose factors are above 1: deterministic, and never
/// slower than its input on that machine's (slowed) timeline.
#[test]
fn overlap_schedule_on_a_slowed_machine() {
    let dir = std::env::temp_dir().join(format!("commlir-overlap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("slow.json");
    std::fs::write(
        &file,
        r#"{"base": "h200x2-nvlink", "name": "slowed", "overlap_compute_slowdown": 1.3, "overlap_comm_slowdown": 1.2}"#,
    )
    .unwrap();
    let slowed = machine::load(file.to_str().unwrap()).unwrap();
    let pipeline = format!(
        "builtin.module(func.func(comm-overlap-schedule{{machine={} peak-memory-budget=0.5}}))",
        file.display()
    );
    for seed in 0..8 {
        for &(ranks, lower) in &[(2, false), (4, true)] {
            let mut outs = Vec::new();
            for _ in 0..2 {
                let mut ctx = Context::new();
                let module = generate(&mut ctx, seed, ranks, false, lower);
                let before: Vec<f64> = bodies(&ctx, module)
                    .into_iter()
                    .map(|b| {
                        let ops = ctx.block_op_list(b);
                        simulate_ops_overlap(
                            &ctx,
                            ops,
                            |op| op_cost(&ctx, &slowed, op),
                            Overlap::of(&slowed),
                        )
                        .makespan_ns
                    })
                    .collect();
                common::run_pipeline(&mut ctx, module, &pipeline, "");
                let after: Vec<f64> = bodies(&ctx, module)
                    .into_iter()
                    .map(|b| {
                        let ops = ctx.block_op_list(b);
                        simulate_ops_overlap(
                            &ctx,
                            ops,
                            |op| op_cost(&ctx, &slowed, op),
                            Overlap::of(&slowed),
                        )
                        .makespan_ns
                    })
                    .collect();
                for (a, b) in after.iter().zip(&before) {
                    assert!(*a <= b * (1.0 + 1e-9), "seed {seed}: {a} > {b}");
                }
                outs.push(common::print(&ctx, module));
            }
            assert_eq!(outs[0], outs[1], "seed {seed}: not deterministic");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
