//! `Context::is_before_in_block` against a plain list of the block's ops, through inserts
//! (append, prepend, before, after), moves within and between blocks and erasures, with
//! queries in between so that the position keys are maintained incrementally (midpoints,
//! range relabelling) rather than renumbered; and the relabelling work on insertion patterns
//! that exhaust the gaps (the same spot over and over, appends, random spots), which must
//! stay near-linear in the number of insertions.

use commlir_ir::{BlockId, Context, OpId, OpState};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn new_op(ctx: &mut Context) -> OpId {
    let name = ctx.ident("t.op");
    let loc = ctx.unknown_loc();
    ctx.create_op(OpState::new(name, loc))
}

fn ops_of(ctx: &Context, b: BlockId) -> Vec<OpId> {
    let mut v = Vec::new();
    let mut c = ctx.block_first(b);
    while let Some(o) = c {
        v.push(o);
        c = ctx.next_op(o);
    }
    v
}

/// Every pair of `b`'s ops (or a sample of them on long blocks) agrees with the list order.
fn check(ctx: &Context, b: BlockId, model: &[OpId], rng: &mut Rng) {
    assert_eq!(ops_of(ctx, b), model);
    if model.len() <= 40 {
        for (i, &x) in model.iter().enumerate() {
            for (j, &y) in model.iter().enumerate() {
                assert_eq!(ctx.is_before_in_block(x, y), i < j, "{i} vs {j}");
            }
        }
    } else {
        for w in model.windows(2) {
            assert!(ctx.is_before_in_block(w[0], w[1]));
            assert!(!ctx.is_before_in_block(w[1], w[0]));
        }
        for _ in 0..200 {
            let (i, j) = (rng.below(model.len()), rng.below(model.len()));
            assert_eq!(ctx.is_before_in_block(model[i], model[j]), i < j);
        }
    }
}

#[test]
fn order_queries_follow_every_edit() {
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut ctx = Context::new();
        let blocks = [ctx.new_block(&[]), ctx.new_block(&[])];
        let mut models: [Vec<OpId>; 2] = [Vec::new(), Vec::new()];
        // A spot that many edits hit in a row, to use up the gaps there.
        let mut hot = 0usize;
        let steps = if seed % 8 == 0 { 6000 } else { 400 };
        for step in 0..steps {
            let k = rng.below(2);
            let (b, len) = (blocks[k], models[k].len());
            let at = if rng.below(4) == 0 || len == 0 {
                rng.below(len + 1)
            } else {
                hot.min(len)
            };
            match rng.below(10) {
                0 => {
                    let o = new_op(&mut ctx);
                    ctx.append_op(b, o);
                    models[k].push(o);
                }
                1 => {
                    let o = new_op(&mut ctx);
                    ctx.prepend_op(b, o);
                    models[k].insert(0, o);
                }
                2..=4 if at < len => {
                    let o = new_op(&mut ctx);
                    ctx.insert_before(models[k][at], o);
                    models[k].insert(at, o);
                }
                5 if at < len => {
                    let o = new_op(&mut ctx);
                    ctx.insert_after(models[k][at], o);
                    models[k].insert(at + 1, o);
                }
                6 if len >= 2 => {
                    // Move within the block.
                    let from = rng.below(len);
                    let to = at.min(len - 1);
                    let (o, anchor) = (models[k][from], models[k][to]);
                    ctx.move_before(o, anchor);
                    if o != anchor {
                        let o = models[k].remove(from);
                        let to = models[k].iter().position(|&x| x == anchor).unwrap();
                        models[k].insert(to, o);
                    }
                }
                7 if len >= 1 && !models[1 - k].is_empty() => {
                    // Move to the other block.
                    let o = models[k].remove(rng.below(len));
                    let other = &mut models[1 - k];
                    let to = rng.below(other.len());
                    ctx.move_after(o, other[to]);
                    other.insert(to + 1, o);
                }
                8 if len >= 1 => {
                    let o = models[k].remove(rng.below(len));
                    ctx.erase_op(o);
                }
                _ => {
                    let o = new_op(&mut ctx);
                    ctx.append_op(b, o);
                    models[k].push(o);
                }
            }
            if rng.below(50) == 0 {
                hot = rng.below(models[k].len() + 1);
            }
            // Query often (keys maintained incrementally), sometimes not for a while (the
            // block renumbered at the next query).
            if step % 97 < 60 {
                let x = rng.below(2);
                if !models[x].is_empty() {
                    let (i, j) = (rng.below(models[x].len()), rng.below(models[x].len()));
                    assert_eq!(
                        ctx.is_before_in_block(models[x][i], models[x][j]),
                        i < j,
                        "seed {seed} step {step}"
                    );
                }
            }
            if step % 53 == 0 {
                for x in 0..2 {
                    check(&ctx, blocks[x], &models[x], &mut rng);
                }
            }
        }
        for x in 0..2 {
            check(&ctx, blocks[x], &models[x], &mut rng);
        }
    }
}

/// Inserts `n` ops into a numbered block of `base` ops, each at the spot `spot` picks (an
/// index into the current list), querying after every insertion; returns the keys written
/// per insertion.
fn relabel_work(base: usize, n: usize, mut spot: impl FnMut(usize) -> usize) -> f64 {
    let mut ctx = Context::new();
    let b = ctx.new_block(&[]);
    let mut model = Vec::new();
    for _ in 0..base {
        let o = new_op(&mut ctx);
        ctx.append_op(b, o);
        model.push(o);
    }
    let o = new_op(&mut ctx);
    ctx.append_op(b, o);
    model.push(o);
    assert!(ctx.is_before_in_block(model[0], o) || base == 0);
    let before = ctx.order_keys_written();
    for _ in 0..n {
        let at = spot(model.len());
        let o = new_op(&mut ctx);
        if at == model.len() {
            ctx.append_op(b, o);
        } else {
            ctx.insert_before(model[at], o);
        }
        model.insert(at, o);
        if at > 0 {
            assert!(ctx.is_before_in_block(model[at - 1], o));
        }
        if at + 1 < model.len() {
            assert!(ctx.is_before_in_block(o, model[at + 1]));
        }
    }
    let mut rng = Rng(7);
    check(&ctx, b, &model, &mut rng);
    (ctx.order_keys_written() - before) as f64 / n as f64
}

#[test]
fn insertions_between_queries_relabel_little() {
    // Renumbering the block on every insertion would write ~base + n/2 keys per insertion.
    let n = 40_000;
    // The same spot over and over: the worst case for the gaps.
    let same_spot = relabel_work(20_000, n, |len| len / 2);
    // The same index: each op goes right before the previous one.
    let mut fixed = None;
    let before_one = relabel_work(20_000, n, |len| *fixed.get_or_insert(len / 3));
    let appends = relabel_work(0, n, |len| len);
    let prepends = relabel_work(10, n, |_| 0);
    let mut rng = Rng(11);
    let random = relabel_work(1_000, n, |len| rng.below(len + 1));
    for (what, w) in [
        ("same spot", same_spot),
        ("same index", before_one),
        ("appends", appends),
        ("prepends", prepends),
        ("random", random),
    ] {
        assert!(w < 64.0, "{what}: {w} keys written per insertion");
    }
}
