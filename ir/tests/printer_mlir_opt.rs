//! Checks the printer against real MLIR: `mlir-opt-22 --allow-unregistered-dialect` must
//! accept what we print, and print it back identically up to formatting (its float
//! spelling, its string escapes). Skipped, with a message, when mlir-opt-22 is missing.

mod printer_common;

use commlir_ir::printer::{print_op, PrintOptions};
use commlir_ir::{Context, OpId, OpState};
use regex::Regex;
use std::path::PathBuf;
use std::process::Command;

fn mlir_opt() -> Option<PathBuf> {
    let from_env = std::env::var_os("MLIR_OPT").map(PathBuf::from);
    let candidates = from_env
        .into_iter()
        .chain([PathBuf::from("/usr/bin/mlir-opt-22")]);
    for c in candidates {
        if c.is_file() {
            return Some(c);
        }
    }
    // Fall back to PATH.
    Command::new("mlir-opt-22")
        .arg("--version")
        .output()
        .ok()
        .map(|_| PathBuf::from("mlir-opt-22"))
}

/// Runs mlir-opt on `text` with `flags`; panics with its stderr when it rejects the input.
fn run_mlir_opt(tool: &PathBuf, name: &str, text: &str, flags: &[&str]) -> String {
    let path = std::env::temp_dir().join(format!(
        "commlir-printer-{}-{name}.mlir",
        std::process::id()
    ));
    std::fs::write(&path, text).unwrap();
    let out = Command::new(tool)
        .arg("--allow-unregistered-dialect")
        .args(flags)
        .arg(&path)
        .output()
        .expect("running mlir-opt");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "mlir-opt rejected our output:\n{}\n--- input ---\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Canonicalizes what both printers may spell differently: float literals (compared to 6
/// significant digits, which is what MLIR prints for narrow types) and string escapes
/// (`\"`, `\n`, `\t` vs MLIR's `\22`, `\0A`, `\09`).
fn normalize(text: &str) -> String {
    let mut unescaped = String::with_capacity(text.len());
    let mut in_string = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (in_string, c) {
            (_, '"') => {
                in_string = !in_string;
                unescaped.push(c);
            }
            (true, '\\') => match chars.next() {
                Some('"') => unescaped.push_str("\\22"),
                Some('n') => unescaped.push_str("\\0A"),
                Some('t') => unescaped.push_str("\\09"),
                Some(other) => {
                    unescaped.push('\\');
                    unescaped.push(other);
                }
                None => unescaped.push('\\'),
            },
            _ => unescaped.push(c),
        }
    }
    let float = Regex::new(r"-?[0-9]+\.[0-9]*([eE][-+]?[0-9]+)?").unwrap();
    let floats = float.replace_all(&unescaped, |c: &regex::Captures| {
        let v: f64 = c[0].parse().unwrap();
        format!("{v:.5e}")
    });
    floats
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn check_generic(ctx: &Context, root: OpId, name: &str) {
    let Some(tool) = mlir_opt() else {
        eprintln!("mlir-opt-22 not found: skipping the MLIR round-trip check");
        return;
    };
    for debug_info in [false, true] {
        let ours = print_op(
            ctx,
            root,
            &PrintOptions {
                generic: true,
                debug_info,
            },
        );
        // Local scope: no `#loc`/`#map` aliases, everything inline as we print it.
        let mut flags = vec!["--mlir-print-op-generic", "--mlir-print-local-scope"];
        if debug_info {
            flags.push("--mlir-print-debuginfo");
        }
        let theirs = run_mlir_opt(&tool, name, &ours, &flags);
        assert_eq!(
            normalize(&ours),
            normalize(&theirs),
            "debug_info = {debug_info}"
        );
    }
}

#[test]
fn generic_sample_module_round_trips_through_mlir() {
    let mut ctx = printer_common::context();
    let m = printer_common::sample_module(&mut ctx);
    check_generic(&ctx, m, "sample");
}

#[test]
fn every_type_attr_and_loc_round_trips_through_mlir() {
    let mut ctx = printer_common::context();
    let loc = ctx.unknown_loc();
    let (m, body) = printer_common::module(&mut ctx, loc);
    let types = printer_common::type_zoo(&mut ctx);
    printer_common::op(&mut ctx, body, "x.types", &[], &types, &[], 1);
    let type_attrs: Vec<_> = types.iter().map(|t| ctx.type_attr(*t)).collect();
    let names: Vec<String> = (0..type_attrs.len()).map(|i| format!("t{i:02}")).collect();
    let named: Vec<(&str, _)> = names.iter().map(|n| n.as_str()).zip(type_attrs).collect();
    printer_common::op(&mut ctx, body, "x.type_attrs", &[], &[], &named, 2);
    let zoo = printer_common::attr_zoo(&mut ctx);
    printer_common::op(&mut ctx, body, "x.attrs", &[], &[], &zoo, 3);
    for l in printer_common::loc_zoo(&mut ctx) {
        let name = ctx.ident("x.located");
        let op = ctx.create_op(OpState::new(name, l));
        ctx.append_op(body, op);
    }
    check_generic(&ctx, m, "zoo");
}

#[test]
fn custom_structural_ops_match_mlir() {
    let Some(tool) = mlir_opt() else {
        eprintln!("mlir-opt-22 not found: skipping the MLIR custom-form check");
        return;
    };
    // Only ops mlir-opt knows (module, func, return, call) and unregistered ops, which both
    // printers print generically.
    let mut ctx = printer_common::context();
    let m = printer_common::sample_module(&mut ctx);
    let mut dropped = Vec::new();
    ctx.walk(m, |op| {
        let name = ctx.op_name(op);
        if name.starts_with("coll.") || name.starts_with("compute.") {
            dropped.push(op);
        }
    });
    // Replace our dialects' ops by unregistered stand-ins with the same operands/results.
    for op in dropped {
        let name = ctx.ident(&format!("x.{}", ctx.op_name(op).replace('.', "_")));
        let mut st = OpState::new(name, ctx.op_loc(op));
        st.operands = ctx.operands(op).to_vec();
        st.result_types = ctx.results(op).iter().map(|v| ctx.value_type(*v)).collect();
        st.attrs = ctx
            .attrs(op)
            .iter()
            .filter(|(k, _)| ctx.ident_str(*k) != "sym_name")
            .copied()
            .collect();
        let new = ctx.create_op(st);
        ctx.insert_before(op, new);
        let new_results = ctx.results(new).to_vec();
        ctx.replace_op(op, &new_results);
    }
    for debug_info in [false, true] {
        let ours = print_op(
            &ctx,
            m,
            &PrintOptions {
                generic: false,
                debug_info,
            },
        );
        let mut flags = vec!["--mlir-print-local-scope"];
        if debug_info {
            flags.push("--mlir-print-debuginfo");
        }
        let theirs = run_mlir_opt(&tool, "custom", &ours, &flags);
        // Inside a function MLIR drops the default dialect's prefix from `func.call` too; we
        // keep it, as the design's spelling.
        let ours = ours.replace("func.call @", "call @");
        assert_eq!(
            normalize(&ours),
            normalize(&theirs),
            "debug_info = {debug_info}"
        );
    }
}
