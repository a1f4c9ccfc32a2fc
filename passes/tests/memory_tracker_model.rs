//! Model test of the run-based moves of [`MemoryTracker`]: on generated programs (at the
//! `coll` level and after `coll-to-comm`), random runs are opened, grown at either end and
//! crossed by their neighbours with [`MemoryTracker::move_after_run`] and
//! [`MemoryTracker::move_before_run`], whose O(1) path keeps the members' levels behind a lazy
//! offset. A second tracker does the same moves the definitional way (one
//! [`MemoryTracker::swap_adjacent`] per member, swapped back when a level exceeds the limit).
//! Every accept/reject decision and every node's levels must agree after every step, and the
//! limits are drawn around the peak each move would reach so that both outcomes occur.
//!
//! Also checks the shape of [`DepGraph`]'s predecessor lists on the same programs: sorted,
//! distinct, pointing backwards, and the barrier rule (a fixed node's long predecessor run is
//! merged rather than sorted in).

mod common;

use common::bodies;

use commlir_ir::{BlockId, Context};
use commlir_passes::schedule::{DepGraph, GraphOptions, MemoryTracker, NodeKind};
use commlir_testgen::{GenConfig, Rng};

/// The definitional move of `x` across the run `seg` (after it when `after`, else before),
/// within `limit`; returns whether it moved and the peak over the nodes involved.
fn reference_move(
    mem: &mut MemoryTracker,
    x: u32,
    seg: &[u32],
    after: bool,
    limit: i64,
) -> (bool, i64) {
    if after {
        for &g in seg {
            mem.swap_adjacent(x, g);
        }
    } else {
        for &g in seg.iter().rev() {
            mem.swap_adjacent(g, x);
        }
    }
    let peak = seg
        .iter()
        .map(|&g| mem.post_alloc(g))
        .fold(mem.post_alloc(x), i64::max);
    if peak <= limit {
        return (true, peak);
    }
    if after {
        for &g in seg.iter().rev() {
            mem.swap_adjacent(g, x);
        }
    } else {
        for &g in seg {
            mem.swap_adjacent(x, g);
        }
    }
    (false, peak)
}

fn assert_same_levels(a: &MemoryTracker, b: &MemoryTracker, n: usize, what: &str) {
    for v in 0..n as u32 {
        assert_eq!(
            (a.post_alloc(v), a.post_free(v)),
            (b.post_alloc(v), b.post_free(v)),
            "{what}: levels of node {v} differ"
        );
    }
}

/// Random runs over one block; returns (moves accepted, moves refused).
fn exercise(ctx: &Context, block: BlockId, rng: &mut Rng, what: &str) -> (usize, usize) {
    let graph = DepGraph::build(ctx, block, GraphOptions::default());
    let n = graph.len();
    if n < 3 {
        return (0, 0);
    }
    let mut fast = MemoryTracker::new(ctx, block, &graph);
    let mut slow = fast.clone();
    // The order, as node numbers (legality does not matter to the memory arithmetic).
    let mut order: Vec<u32> = (0..n as u32).collect();
    let (mut accepted, mut refused) = (0, 0);
    for run in 0..40 {
        let mut len = 1 + rng.below(3.min(n - 1));
        let mut start = rng.below(n - len + 1);
        fast.run_start(order[start]);
        for k in 1..len {
            fast.run_push_back(order[start + k]);
        }
        let sinking = rng.chance(0.5);
        for step in 0..30 {
            let what = format!("{what} run {run} step {step}");
            // Grow the run now and then, as a dragged dependency does.
            if rng.chance(0.15) {
                if sinking && start + len < n {
                    fast.run_push_back(order[start + len]);
                    len += 1;
                } else if !sinking && start > 0 {
                    fast.run_push_front(order[start - 1]);
                    start -= 1;
                    len += 1;
                }
            }
            let end = start + len;
            assert!(
                fast.run_members().iter().eq(order[start..end].iter()),
                "{what}: run members"
            );
            let (x, after) = if sinking {
                if end == n {
                    break;
                }
                (order[end], false)
            } else {
                if start == 0 {
                    break;
                }
                (order[start - 1], true)
            };
            let seg: Vec<u32> = order[start..end].to_vec();
            // The peak this move would reach, to draw a limit on either side of it.
            let mut probe = slow.clone();
            let (_, peak) = reference_move(&mut probe, x, &seg, after, i64::MAX);
            let limit = match rng.below(4) {
                0 => peak - 1,
                1 => peak,
                2 => peak - 1 - rng.below(1 << 20) as i64,
                _ => i64::MAX,
            };
            let (want, _) = reference_move(&mut slow, x, &seg, after, limit);
            let got = if after {
                fast.move_after_run(x, limit)
            } else {
                fast.move_before_run(x, limit)
            };
            assert_eq!(got, want, "{what}: decision (limit {limit}, peak {peak})");
            if got {
                accepted += 1;
                if after {
                    order.remove(start - 1);
                    order.insert(end - 1, x);
                    start -= 1;
                } else {
                    order.remove(end);
                    order.insert(start, x);
                    start += 1;
                }
            } else {
                refused += 1;
            }
            assert_same_levels(&fast, &slow, n, &what);
        }
        fast.run_finish();
        assert_same_levels(&fast, &slow, n, &format!("{what} run {run} finished"));
    }
    (accepted, refused)
}

#[test]
fn run_moves_match_adjacent_swaps() {
    let (mut accepted, mut refused) = (0, 0);
    for seed in 0..40u64 {
        for lower in [false, true] {
            let cfg = GenConfig {
                ranks: 2,
                ops: 45,
                with_costs: false,
                ..GenConfig::default()
            };
            let mut ctx = Context::new();
            let m = common::generated(&mut ctx, seed, &cfg, lower);
            let mut rng = Rng::new(seed * 2 + u64::from(lower));
            for b in bodies(&ctx, m) {
                let (a, r) = exercise(&ctx, b, &mut rng, &format!("seed {seed} lower {lower}"));
                accepted += a;
                refused += r;
            }
        }
    }
    assert!(accepted > 1000 && refused > 1000, "{accepted} / {refused}");
}

/// Every node's predecessors are sorted, distinct and earlier; a fixed node has every node
/// since the previous fixed one (and that one) among them, and every node has the last fixed
/// node before it.
fn check_pred_lists(graph: &DepGraph, what: &str) {
    let mut last_fixed: Option<u32> = None;
    for i in 0..graph.len() as u32 {
        let preds = graph.preds(i);
        assert!(
            preds.windows(2).all(|w| w[0] < w[1]) && preds.iter().all(|&p| p < i),
            "{what}: preds of {i} not sorted, distinct and earlier: {preds:?}"
        );
        if let Some(f) = last_fixed {
            assert!(preds.contains(&f), "{what}: {i} misses barrier {f}");
        }
        if graph.kind[i as usize] == NodeKind::Fixed {
            let from = last_fixed.map_or(0, |f| f + 1);
            for p in from..i {
                assert!(preds.contains(&p), "{what}: fixed {i} misses {p}");
            }
            last_fixed = Some(i);
        }
    }
}

#[test]
fn pred_lists_are_sorted_and_keep_barriers() {
    for seed in 0..30u64 {
        for lower in [false, true] {
            let cfg = GenConfig {
                ranks: 4,
                ops: 60,
                with_costs: seed % 2 == 0,
                ..GenConfig::default()
            };
            let mut ctx = Context::new();
            let m = common::generated(&mut ctx, seed, &cfg, lower);
            for b in bodies(&ctx, m) {
                for collective_order in [false, true] {
                    let g = DepGraph::build(&ctx, b, GraphOptions { collective_order });
                    check_pred_lists(&g, &format!("seed {seed} lower {lower}"));
                }
            }
        }
    }
}
