//! The sim backend on planned programs: comm buffers live in their pool's bytes at their
//! slot, results match the unplanned program, and plans that overlap live buffers are
//! refused with both ops named instead of corrupting data.

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::{Context, OpId};
use commlir_runtime::{format_results, sim, PrintMode, SimOptions};

fn parse(ctx: &mut Context, text: &str) -> OpId {
    commlir_dialects::link();
    let m = parse_source(ctx, "t.mlir", text.as_bytes(), &ParseOptions::default())
        .unwrap_or_else(|d| panic!("{}", d.message));
    commlir_ir::verify::verify(ctx, m)
        .unwrap_or_else(|d| panic!("{:?}", d.iter().map(|x| &x.message).collect::<Vec<_>>()));
    m
}

/// The sim's lines, or `error: MESSAGE`.
fn run(text: &str, entry: &str, ranks: usize) -> String {
    let mut ctx = Context::new();
    let m = parse(&mut ctx, text);
    let opts = SimOptions {
        ranks,
        entry: Some(entry.into()),
        seed: 7,
    };
    match sim::run(&ctx, m, &opts) {
        Ok(r) => format_results(&r, PrintMode::Digest),
        Err(d) => format!("error: {}", d.message),
    }
}

const GROUP: &str = "coll.group @tp {size = 2 : i64}\n";

/// An all-gather whose destination reuses the bytes of a buffer that died before it: same
/// result with and without the plan.
const REUSE: &str = r#"
func.func @planned(%x: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %p = comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 192 : i64} : !comm.pool
  %a = compute.exp %x {comm.slot = array<i64: 0, 64>} : (tensor<2x8xf32>) -> tensor<2x8xf32, #comm.buffer<nccl, @tp>>
  %w = comm.all_reduce %a {reduce_op = "sum", group = @tp} : (tensor<2x8xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %y = comm.wait %w, %a : (!comm.work, tensor<2x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<2x8xf32, #comm.buffer<nccl, @tp>>
  %n = compute.neg %y {comm.slot = array<i64: 128, 64>} : (tensor<2x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<2x8xf32, #comm.buffer<nccl, @tp>>
  %o = comm.alloc {comm.slot = array<i64: 0, 128>} : tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  %g = comm.all_gather %n, %o {group = @tp} : (tensor<2x8xf32, #comm.buffer<nccl, @tp>>, tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %r = comm.wait %g, %o : (!comm.work, tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
  %c = compute.clone %r : (tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<4x8xf32>
  comm.pool_release %p : !comm.pool
  return %c : tensor<4x8xf32>
}
"#;

#[test]
fn planned_program_matches_unplanned() {
    let planned = format!("{GROUP}{REUSE}");
    let unplanned = planned
        .lines()
        .filter(|l| !l.contains("comm.pool"))
        .map(|l| {
            l.replace("{comm.slot = array<i64: 0, 64>} ", "")
                .replace("{comm.slot = array<i64: 128, 64>} ", "")
                .replace("{comm.slot = array<i64: 0, 128>} ", "")
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!unplanned.contains("comm.slot"));
    for ranks in [2, 4] {
        let a = run(&planned, "planned", ranks);
        assert!(!a.starts_with("error"), "{a}");
        assert_eq!(a, run(&unplanned, "planned", ranks));
    }
}

#[test]
fn destination_over_a_buffer_still_read_by_the_collective_is_refused() {
    // The all-gather reads %n until its wait; its destination must not cover %n.
    let bad = format!("{GROUP}{REUSE}").replace("array<i64: 128, 64>", "array<i64: 64, 64>");
    let out = run(&bad, "planned", 2);
    assert!(
        out.contains("writes bytes [0, 128) of the nccl pool of @tp, overlapping bytes [64, 128)"),
        "{out}"
    );
    assert!(
        out.contains("the buffer produced by 'compute.neg'"),
        "{out}"
    );
    assert!(out.contains("read by 'comm.wait'"), "{out}");
}

#[test]
fn buffer_of_an_in_flight_collective_cannot_be_reused() {
    // %b takes %a's bytes while the all-reduce on %a is in flight: caught when %b is placed.
    let text = format!(
        "{GROUP}{}",
        r#"
func.func @f(%x: tensor<16xf32>) -> tensor<16xf32> {
  %p = comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 64 : i64} : !comm.pool
  %a = compute.exp %x {comm.slot = array<i64: 0, 64>} : (tensor<16xf32>) -> tensor<16xf32, #comm.buffer<nccl, @tp>>
  %w = comm.all_reduce %a {reduce_op = "sum", group = @tp} : (tensor<16xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %b = compute.neg %x {comm.slot = array<i64: 0, 64>} : (tensor<16xf32>) -> tensor<16xf32, #comm.buffer<nccl, @tp>>
  %y = comm.wait %w, %a : (!comm.work, tensor<16xf32, #comm.buffer<nccl, @tp>>) -> tensor<16xf32, #comm.buffer<nccl, @tp>>
  %s = compute.add %y, %b : (tensor<16xf32, #comm.buffer<nccl, @tp>>, tensor<16xf32, #comm.buffer<nccl, @tp>>) -> tensor<16xf32>
  comm.pool_release %p : !comm.pool
  return %s : tensor<16xf32>
}
"#
    );
    let out = run(&text, "f", 2);
    assert!(
        out.contains("'compute.exp' at") && out.contains("still live (read by 'compute.add'"),
        "{out}"
    );
}

#[test]
fn each_call_gets_its_own_pool() {
    // The callee plans its buffer at offset 0 of its own pool while the caller's buffer at
    // offset 0 of the caller's pool is live across the call: different allocations.
    let text = format!(
        "{GROUP}{}",
        r#"
func.func private @inner(%x: tensor<16xf32>) -> tensor<16xf32> {
  %p = comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 64 : i64} : !comm.pool
  %a = compute.exp %x {comm.slot = array<i64: 0, 64>} : (tensor<16xf32>) -> tensor<16xf32, #comm.buffer<nccl, @tp>>
  %w = comm.all_reduce %a {reduce_op = "sum", group = @tp} : (tensor<16xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
  %y = comm.wait %w, %a : (!comm.work, tensor<16xf32, #comm.buffer<nccl, @tp>>) -> tensor<16xf32, #comm.buffer<nccl, @tp>>
  %c = compute.clone %y : (tensor<16xf32, #comm.buffer<nccl, @tp>>) -> tensor<16xf32>
  comm.pool_release %p : !comm.pool
  return %c : tensor<16xf32>
}
func.func @outer(%x: tensor<16xf32>) -> tensor<16xf32> {
  %p = comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 64 : i64} : !comm.pool
  %a = compute.neg %x {comm.slot = array<i64: 0, 64>} : (tensor<16xf32>) -> tensor<16xf32, #comm.buffer<nccl, @tp>>
  %i = func.call @inner(%x) : (tensor<16xf32>) -> tensor<16xf32>
  %j = func.call @inner(%i) : (tensor<16xf32>) -> tensor<16xf32>
  %s = compute.add %a, %j : (tensor<16xf32, #comm.buffer<nccl, @tp>>, tensor<16xf32>) -> tensor<16xf32>
  comm.pool_release %p : !comm.pool
  return %s : tensor<16xf32>
}
"#
    );
    let out = run(&text, "outer", 2);
    assert!(out.starts_with("rank 0 result 0"), "{out}");
}
