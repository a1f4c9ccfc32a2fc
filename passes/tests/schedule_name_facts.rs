//! The scheduling core caches per op name what it would otherwise ask per op; these tests
//! pin the cached rules to the functions they stand for, on generated programs at the `coll`
//! level and after `coll-to-comm`.

mod common;

use commlir_ir::Context;
use commlir_passes::analysis::buffers::alias_of;
use commlir_passes::schedule::graph::AliasRule;
use commlir_testgen::GenConfig;

#[test]
fn alias_rule_matches_alias_of() {
    let mut checked = 0usize;
    for seed in 0..40u64 {
        for lower in [false, true] {
            let cfg = GenConfig {
                ranks: 2,
                ops: 45,
                ..GenConfig::default()
            };
            let mut ctx = Context::new();
            let m = common::generated(&mut ctx, seed, &cfg, lower);
            let mut ops = Vec::new();
            ctx.walk(m, |op| ops.push(op));
            for op in ops {
                let rule = AliasRule::of_name(ctx.op_name(op));
                // Past the results too: the rule must not invent aliases.
                for r in 0..ctx.results(op).len() + 2 {
                    assert_eq!(
                        rule.alias(ctx.operands(op), r),
                        alias_of(&ctx, op, r),
                        "{} result {r}",
                        ctx.op_name(op)
                    );
                    checked += usize::from(alias_of(&ctx, op, r).is_some());
                }
            }
        }
    }
    assert!(checked > 0, "no aliasing op was generated");
}
