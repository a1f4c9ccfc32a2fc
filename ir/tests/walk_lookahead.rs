//! Block walks request the records of the ops ahead of the one they hand out
//! (`PREFETCH_DISTANCE`); the lookahead must never change what a walk yields. Blocks of every
//! length around the distance, nested regions between and inside, and ops moved, erased and
//! inserted after a first walk are walked by `block_ops`, `walk` and `prefetched`, and
//! compared with the plain linked-list order.

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::{BlockId, Context, OpId, PREFETCH_DISTANCE};

/// A module whose body holds `n` ops, every third with a region of `n % 5` ops.
fn program(n: usize) -> String {
    let mut s = String::from("\"builtin.module\"() ({\n");
    for i in 0..n {
        if i % 3 == 1 {
            s.push_str("  \"t.region\"() ({\n");
            for _ in 0..n % 5 {
                s.push_str("    \"t.inner\"() : () -> ()\n");
            }
            s.push_str("  }) : () -> ()\n");
        } else {
            s.push_str(&format!("  \"t.op\"() {{i = {i} : i64}} : () -> ()\n"));
        }
    }
    s.push_str("}) : () -> ()\n");
    s
}

/// The ops of `b` by following `next_op` alone.
fn linked(ctx: &Context, b: BlockId) -> Vec<OpId> {
    let mut v = Vec::new();
    let mut c = ctx.block_first(b);
    while let Some(o) = c {
        v.push(o);
        c = ctx.next_op(o);
    }
    v
}

/// Pre-order of `root` by recursion over `linked`.
fn preorder(ctx: &Context, root: OpId, out: &mut Vec<OpId>) {
    out.push(root);
    for &r in ctx.op_regions(root) {
        for &b in ctx.region_blocks(r) {
            for o in linked(ctx, b) {
                preorder(ctx, o, out);
            }
        }
    }
}

/// The module's body block (`None`: an empty region, when the program has no ops).
fn body(ctx: &Context, module: OpId) -> Option<BlockId> {
    ctx.region_blocks(ctx.op_regions(module)[0])
        .first()
        .copied()
}

fn check(ctx: &Context, module: OpId) {
    let mut walked = Vec::new();
    ctx.walk(module, |o| walked.push(o));
    let mut expected = Vec::new();
    preorder(ctx, module, &mut expected);
    assert_eq!(walked, expected);
    let Some(body) = body(ctx, module) else {
        return;
    };
    let want = linked(ctx, body);
    assert_eq!(ctx.block_ops(body).collect::<Vec<_>>(), want);
    assert_eq!(ctx.block_op_list(body), want);
    assert_eq!(ctx.prefetched(&want).collect::<Vec<_>>(), want);
    // A walk started part-way and dropped early yields a prefix.
    for k in 0..want.len().min(3) {
        assert_eq!(ctx.block_ops(body).take(k).collect::<Vec<_>>(), want[..k]);
    }
}

#[test]
fn walks_yield_the_block_order_whatever_the_length() {
    for n in (0..=2 * PREFETCH_DISTANCE + 3).chain([64, 65]) {
        let mut ctx = Context::new();
        ctx.allow_unregistered = true;
        let src = program(n);
        let module = parse_source(&mut ctx, "t", src.as_bytes(), &ParseOptions::default())
            .unwrap_or_else(|e| panic!("{}", e.message));
        check(&ctx, module);
        // Move the last op first and erase the second: the walks follow the edited list.
        let ops = body(&ctx, module).map_or(Vec::new(), |b| linked(&ctx, b));
        if ops.len() >= 3 {
            ctx.move_before(ops[ops.len() - 1], ops[0]);
            ctx.erase_op(ops[1]);
            check(&ctx, module);
        }
    }
}
