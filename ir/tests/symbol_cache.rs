//! `Context::with_symbol_cache` must not change what `Context::lookup_symbol` answers: every
//! lookup from every op of a module with nested symbol tables, shadowed and duplicated
//! names, symbols in properties and in attributes, is compared with the uncached search.

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::{Context, OpId};

const SRC: &str = r#"
"t.sym"() {sym_name = "a"} : () -> ()
"t.sym"() <{sym_name = "b"}> : () -> ()
"t.sym"() {sym_name = "a", dup = 1 : i64} : () -> ()
"builtin.module"() ({
  "t.sym"() {sym_name = "a"} : () -> ()
  "t.sym"() <{sym_name = "c"}> {sym_name = "ignored"} : () -> ()
  "t.op"() ({
    "t.user"() : () -> ()
    "builtin.module"() ({
      "t.sym"() {sym_name = "b"} : () -> ()
      "t.user"() : () -> ()
    }) : () -> ()
  }) : () -> ()
}) : () -> ()
"t.user"() : () -> ()
"t.sym"() {sym_name = "d"} : () -> ()
"#;

/// The module of [`SRC`] and every op in it, in walk order.
fn fixture() -> (Context, OpId, Vec<OpId>) {
    let mut ctx = Context::new();
    ctx.allow_unregistered = true;
    let module = parse_source(&mut ctx, "t", SRC.as_bytes(), &ParseOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.message));
    let mut ops: Vec<OpId> = Vec::new();
    ctx.walk(module, |op| ops.push(op));
    (ctx, module, ops)
}

#[test]
fn cached_lookups_match_the_linear_search() {
    let (mut ctx, module, ops) = fixture();
    let names = ["a", "b", "c", "d", "ignored", "nope", ""];
    let uncached: Vec<Option<OpId>> = ops
        .iter()
        .flat_map(|&o| names.iter().map(move |n| (o, *n)))
        .map(|(o, n)| ctx.lookup_symbol(o, n))
        .collect();
    assert!(uncached.iter().filter(|r| r.is_some()).count() > 10);
    // Twice inside one scope (the second pass reads the indexes the first built), and in a
    // nested scope.
    ctx.with_symbol_cache(|| {
        for _ in 0..2 {
            let cached: Vec<Option<OpId>> = ops
                .iter()
                .flat_map(|&o| names.iter().map(move |n| (o, *n)))
                .map(|(o, n)| ctx.lookup_symbol(o, n))
                .collect();
            assert_eq!(cached, uncached);
        }
        ctx.with_symbol_cache(|| assert_eq!(ctx.lookup_symbol(ops[0], "a"), uncached[0]));
    });
    // The scope is gone: an edit is seen by the next lookup.
    let first_a = ctx.lookup_symbol(module, "a").unwrap();
    ctx.erase_op(first_a);
    let after = ctx.lookup_symbol(module, "a");
    assert!(after.is_some() && after != Some(first_a));
    ctx.with_symbol_cache(|| assert_eq!(ctx.lookup_symbol(module, "a"), after));
}

#[test]
fn pinned_tables_answer_like_the_linear_search_even_after_edits() {
    let (mut ctx, module, ops) = fixture();
    let names = ["a", "b", "c", "d", "ignored", "nope", ""];
    let all = |ctx: &Context| -> Vec<Option<OpId>> {
        ops.iter()
            .filter(|&&o| !ctx.is_erased(o))
            .flat_map(|&o| names.iter().map(move |n| (o, *n)))
            .map(|(o, n)| ctx.lookup_symbol(o, n))
            .collect()
    };
    let uncached = all(&ctx);
    // Pinned: the same answers, directly and through the verifier's cache.
    ctx.pin_symbol_table(module);
    assert_eq!(all(&ctx), uncached);
    ctx.with_symbol_cache(|| assert_eq!(all(&ctx), uncached));
    // A pass breaking the pin's rule (erasing a symbol of the pinned table) is still seen:
    // the stale hit is checked and the search falls back.
    let first_a = ctx.lookup_symbol(module, "a").unwrap();
    ctx.erase_op(first_a);
    let pinned_after = all(&ctx);
    let cached_after = ctx.with_symbol_cache(|| all(&ctx));
    ctx.unpin_symbol_table(module);
    let after = all(&ctx);
    assert_eq!(pinned_after, after);
    assert_eq!(cached_after, after);
    assert!(!after.contains(&Some(first_a)));
}
