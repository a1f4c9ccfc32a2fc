//! Generates the dialect reference pages (`docs/dialects/<dialect>.md`) from the op
//! definitions, so the docs cannot drift from the code: a test regenerates them and fails
//! when the committed pages differ (`UPDATE_DOCS=1 cargo test -p commlir-dialects` rewrites).

use commlir_ir::{Arity, OpDef, Registry};
use std::fmt::Write as _;

/// The Markdown reference page of `dialect`.
pub fn dialect_page(registry: &Registry, dialect: &str) -> String {
    let mut out = String::new();
    let (summary, description) = registry
        .dialects()
        .into_iter()
        .find(|(n, _, _)| *n == dialect)
        .map(|(_, s, d)| (s, d))
        .unwrap_or(("", ""));
    let _ = writeln!(out, "# `{dialect}` dialect\n");
    let _ = writeln!(out, "<!-- Generated from the op definitions by `UPDATE_DOCS=1 cargo test -p commlir-dialects`; do not edit. -->\n");
    if !summary.is_empty() {
        let _ = writeln!(out, "{summary}\n");
    }
    if !description.is_empty() {
        let _ = writeln!(out, "{description}\n");
    }
    let ops: Vec<&OpDef> = registry
        .ops()
        .into_iter()
        .filter(|d| d.dialect() == dialect)
        .collect();
    let _ = writeln!(out, "## Operations\n");
    for d in &ops {
        let _ = writeln!(out, "- [`{}`](#{}): {}", d.name, anchor(d.name), d.summary);
    }
    out.push('\n');
    for d in ops {
        op_section(d, &mut out);
    }
    out
}

fn anchor(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_alphanumeric() || *c == '_')
        .collect::<String>()
        .to_lowercase()
}

fn arity(a: Arity) -> &'static str {
    match a {
        Arity::One => "",
        Arity::Optional => " (optional)",
        Arity::Variadic => " (variadic)",
    }
}

fn op_section(d: &OpDef, out: &mut String) {
    let _ = writeln!(out, "### `{}`\n", d.name);
    let _ = writeln!(out, "{}\n", d.summary);
    if !d.description.is_empty() {
        let _ = writeln!(out, "{}\n", d.description);
    }
    if !d.example.is_empty() {
        let _ = writeln!(out, "```mlir\n{}\n```\n", d.example);
    }
    if !d.operands.is_empty() {
        let _ = writeln!(out, "| operand | type |\n|---|---|");
        for a in d.operands {
            let _ = writeln!(
                out,
                "| `{}`{} | {} |",
                a.name,
                arity(a.arity),
                a.ty.describe()
            );
        }
        out.push('\n');
    }
    if !d.results.is_empty() {
        let _ = writeln!(out, "| result | type |\n|---|---|");
        for a in d.results {
            let _ = writeln!(
                out,
                "| `{}`{} | {} |",
                a.name,
                arity(a.arity),
                a.ty.describe()
            );
        }
        out.push('\n');
    }
    if !d.attributes.is_empty() {
        let _ = writeln!(
            out,
            "| attribute | constraint | description |\n|---|---|---|"
        );
        for a in d.attributes {
            let opt = if a.optional { " (optional)" } else { "" };
            let _ = writeln!(
                out,
                "| `{}`{opt} | {} | {} |",
                a.name,
                a.constraint.describe(),
                a.description
            );
        }
        out.push('\n');
    }
    if !d.comm_buffer_operands.is_empty() {
        let _ = writeln!(out, "Comm-buffer operands (realized by `coll-to-comm`):\n");
        for c in d.comm_buffer_operands {
            let _ = writeln!(
                out,
                "- `{}`: `{}` buffer of the group in `{}`",
                c.operand,
                crate::comm::encoding_kind_str(c.kind),
                c.group_attr
            );
        }
        out.push('\n');
    }
    if !d.traits.is_empty() {
        let t: Vec<String> = d.traits.iter().map(|t| format!("`{t:?}`")).collect();
        let _ = writeln!(out, "Traits: {}\n", t.join(", "));
    }
}

/// The dialects that get a page.
pub const DOCUMENTED: &[&str] = &[
    "builtin", "func", "compute", "coll", "comm", "symm", "rt", "shard", "arith", "math",
];
