//! The hiding budget `coll-fuse-matmul` decides with (`analysis::hiding`): which compute can
//! hide which collective, and how a collective that stays or goes shares it with the next.

mod common;

use commlir_ir::{Context, OpId};
use commlir_passes::analysis::hiding::HidingBudget;
use commlir_passes::schedule::CostTable;

/// The budget of the program's only function and its collectives in program order.
fn budget_of(src: &str) -> (HidingBudget, Vec<OpId>) {
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, src);
    let block = common::bodies(&ctx, m)[0];
    let budget = HidingBudget::new(&ctx, block, &CostTable::new(&ctx, block));
    let colls = ctx
        .block_ops(block)
        .filter(|&o| budget.rank(o).is_some())
        .collect();
    (budget, colls)
}

/// Two all-gathers of 100 ns. `%p` lies before the first (and is not its input), `%a` and
/// `%c` after it without using its result: 80 ns for the first. `%c` is the second's input and
/// `%b` uses the first's result, so the second gets `%b`, `%d` after it, and what is left of
/// `%a`, the only op whose window spans both.
const PROGRAM: &str = r#"
coll.group @tp {size = 2 : i64}
func.func @f(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>) {
  %p = compute.relu %y {cost_ns = 10} : tensor<4x4xf32>
  %g = coll.all_gather_into_tensor %x {group = @tp, cost_ns = 100} : (tensor<4x4xf32>) -> tensor<8x4xf32>
  %w = coll.wait_tensor %g : tensor<8x4xf32>
  %a = compute.relu %y {cost_ns = 30} : tensor<4x4xf32>
  %b = compute.relu %w {cost_ns = 50} : tensor<8x4xf32>
  %c = compute.relu %y {cost_ns = 40} : tensor<4x4xf32>
  %g2 = coll.all_gather_into_tensor %c {group = @tp, cost_ns = 100} : (tensor<4x4xf32>) -> tensor<8x4xf32>
  %w2 = coll.wait_tensor %g2 : tensor<8x4xf32>
  %d = compute.relu %p {cost_ns = 1000} : tensor<4x4xf32>
  return %a, %b, %d, %w2 : tensor<4x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>
}
"#;

#[test]
fn windows() {
    let (mut b, colls) = budget_of(PROGRAM);
    assert_eq!(colls.len(), 2);
    assert_eq!(b.hideable(colls[0]), Some(80.0));
    // A collective that stays takes every open op (it needs 100 ns).
    b.settle(colls[0], true);
    assert_eq!(b.hideable(colls[1]), Some(1050.0));
}

/// A collective that goes (fused) leaves its share to the next one: `%a` goes to the second.
#[test]
fn a_fused_collective_leaves_its_share() {
    let (mut b, colls) = budget_of(PROGRAM);
    b.settle(colls[0], false);
    assert_eq!(b.hideable(colls[1]), Some(1080.0));
}

/// Earliest deadline first: a first all-gather of 50 ns takes `%p` and `%c`, whose windows
/// close with it, and leaves `%a` to the second.
#[test]
fn earliest_deadline_first() {
    let src = PROGRAM.replacen("cost_ns = 100}", "cost_ns = 50}", 1);
    let (mut b, colls) = budget_of(&src);
    assert_eq!(b.hideable(colls[0]), Some(80.0));
    b.settle(colls[0], true);
    assert_eq!(b.hideable(colls[1]), Some(1080.0));
}

/// Compute beyond the neighbouring collectives is not counted: `%d`, after the second
/// all-gather and independent of both, does not hide the first (80 ns, not 1080). A collective
/// the caller skips stays and takes its share.
#[test]
fn reach_is_the_neighbouring_collectives() {
    let (mut b, colls) = budget_of(PROGRAM);
    assert_eq!(b.hideable(colls[0]), Some(80.0));
    assert_eq!(b.hideable(colls[1]), Some(1050.0));
}
