//! `symbol-dce`: erases private `func.func`s that nothing live references.
//!
//! Liveness starts from every op of the symbol table that is not a private function (public
//! functions, groups, any other op) and follows symbol references transitively, so a private
//! function only called from another dead private function is erased as well. References are
//! found in attributes and properties at any depth, and conservatively in the verbatim text of
//! dialect attributes (which may mention `@symbols`).

use commlir_ir::pass::{Anchor, Pass, PassEnv, PassInfo, StatisticDef};
use commlir_ir::{Attr, AttrKind, Context, Diagnostic, OpId};
use rustc_hash::{FxHashMap, FxHashSet};

commlir_ir::register_pass!(
    /// The `symbol-dce` pass.
    pub SYMBOL_DCE = PassInfo {
        argument: "symbol-dce",
        name: "SymbolDCE",
        summary: "Eliminate dead symbols",
        description: "Erases the private `func.func`s of a symbol table (usually the module) \
            that are not referenced, directly or through other live symbols, from any public \
            symbol or other op.",
        anchor: Anchor::Any,
        options: &[],
        statistics: &[StatisticDef::new("num-dce'd", "Number of symbols DCE'd")],
        create: |_| Ok(Box::new(SymbolDce)),
    }
);

/// The `symbol-dce` pass instance (stateless).
pub struct SymbolDce;

fn is_private_func(ctx: &Context, op: OpId) -> bool {
    ctx.op_name(op) == "func.func"
        && ctx
            .inherent_attr(op, "sym_visibility")
            .and_then(|a| ctx.attr_as_str(a))
            == Some("private")
}

/// Adds the root names of the symbols referenced by `a` to `out`.
fn collect_refs(ctx: &Context, a: Attr, out: &mut Vec<String>) {
    let mut stack = vec![a];
    while let Some(a) = stack.pop() {
        match ctx.attr_kind(a) {
            AttrKind::SymbolRef { root, .. } => out.push(ctx.ident_str(*root).to_string()),
            AttrKind::Array(items) => stack.extend(items.iter().copied()),
            AttrKind::Dict(entries) => stack.extend(entries.iter().map(|(_, v)| *v)),
            AttrKind::Dialect { text, .. } | AttrKind::Opaque(text) => scan_text_refs(text, out),
            _ => {}
        }
    }
}

fn scan_text_refs(text: &str, out: &mut Vec<String>) {
    let mut rest = text;
    while let Some(i) = rest.find('@') {
        let tail = &rest[i + 1..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.' | '-')))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
}

/// Every symbol referenced from `op` or the ops nested in it.
fn references(ctx: &Context, op: OpId) -> Vec<String> {
    let mut out = Vec::new();
    ctx.walk(op, |o| {
        for &(_, a) in ctx.attrs(o) {
            collect_refs(ctx, a, &mut out);
        }
        if let Some(p) = ctx.properties(o) {
            collect_refs(ctx, p, &mut out);
        }
    });
    out
}

/// Erases the dead private functions directly inside `table`; returns how many.
pub fn run_symbol_dce(ctx: &mut Context, table: OpId) -> u64 {
    if !ctx.is_symbol_table(table) {
        return 0;
    }
    let mut children = Vec::new();
    for &r in ctx.op_regions(table) {
        for &b in ctx.region_blocks(r) {
            children.extend(ctx.block_ops(b));
        }
    }
    let by_name: FxHashMap<String, OpId> = children
        .iter()
        .filter_map(|&c| ctx.symbol_name(c).map(|n| (n.to_string(), c)))
        .collect();
    let mut live: FxHashSet<OpId> = FxHashSet::default();
    let mut worklist: Vec<OpId> = children
        .iter()
        .copied()
        .filter(|&c| !is_private_func(ctx, c))
        .collect();
    live.extend(worklist.iter().copied());
    while let Some(op) = worklist.pop() {
        for name in references(ctx, op) {
            if let Some(&target) = by_name.get(&name) {
                if live.insert(target) {
                    worklist.push(target);
                }
            }
        }
    }
    let mut erased = 0;
    for c in children {
        if !live.contains(&c) {
            ctx.erase_op(c);
            erased += 1;
        }
    }
    erased
}

impl Pass for SymbolDce {
    fn info(&self) -> &'static PassInfo {
        &SYMBOL_DCE
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let n = run_symbol_dce(ctx, op);
        env.add_stat("num-dce'd", n);
        Ok(())
    }
}
