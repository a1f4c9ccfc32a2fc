//! The fast path of the parser against the pest front end, the reference.
//!
//! For every input (the files under `ir/tests/inputs/`, `test/` and `examples/`, each chunk of
//! a split file, their prints in the generic and the custom form with and without debug info,
//! and generated programs in the generic form, the custom form and a mix of both) the file is
//! parsed with each front end alone and the results printed in the generic form with debug
//! info: where the fast path succeeds the prints must be byte-identical, and it must succeed
//! on everything our printer writes and on every input pest reads as written. Truncated and
//! corrupted inputs (of both forms) must get the same success or failure from both (where the
//! fast path fails on input pest accepts, `Auto` must still equal pest), and nothing may
//! panic.

use commlir_ir::parser::{parse_source_with, FrontEnd, ParseOptions};
use commlir_ir::printer::{print_op, PrintOptions};
use commlir_ir::Context;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Parses `src` with one front end and prints the result in the generic form with debug info,
/// or returns the diagnostic's message and line:col.
fn parse_print(src: &str, front_end: FrontEnd) -> Result<String, String> {
    let mut ctx = Context::new();
    ctx.allow_unregistered = true;
    match parse_source_with(
        &mut ctx,
        "t.mlir",
        src.as_bytes(),
        &ParseOptions::default(),
        front_end,
    ) {
        Ok(m) => Ok(print_op(
            &ctx,
            m,
            &PrintOptions {
                generic: true,
                debug_info: true,
            },
        )),
        Err(d) => {
            let pos = commlir_ir::diag::file_line_col(&ctx, d.loc).unwrap_or_default();
            Err(format!("{}:{}: {}", pos.1, pos.2, d.message))
        }
    }
}

/// `src` printed generic, with or without debug info, when pest accepts it.
fn generic_print(src: &str, debug_info: bool) -> Option<String> {
    form_print(src, true, debug_info)
}

/// `src` printed in the custom form (our printer's default), with or without debug info,
/// when pest accepts it.
fn custom_print(src: &str, debug_info: bool) -> Option<String> {
    form_print(src, false, debug_info)
}

/// `src` printed in the generic or the custom form when pest accepts it.
fn form_print(src: &str, generic: bool, debug_info: bool) -> Option<String> {
    let mut ctx = Context::new();
    ctx.allow_unregistered = true;
    let m = parse_source_with(
        &mut ctx,
        "t.mlir",
        src.as_bytes(),
        &ParseOptions::default(),
        FrontEnd::PestOnly,
    )
    .ok()?;
    Some(print_op(
        &ctx,
        m,
        &PrintOptions {
            generic,
            debug_info,
        },
    ))
}

/// Checks the two front ends agree on `src`; `must_take`: the fast path must accept it.
/// Returns whether the fast path took it.
fn check(what: &str, src: &str, must_take: bool) -> bool {
    let pest = parse_print(src, FrontEnd::PestOnly);
    let fast = parse_print(src, FrontEnd::FastOnly);
    let auto = parse_print(src, FrontEnd::Auto);
    if let Err(e) = &fast {
        assert!(
            !e.contains("internal parser error"),
            "{what}: the fast path panicked"
        );
    }
    assert_eq!(auto, pest, "{what}: Auto differs from pest");
    match (&fast, &pest) {
        (Ok(f), Ok(p)) => {
            assert_eq!(f, p, "{what}: fast path and pest print differently\n{src}");
            true
        }
        (Ok(_), Err(e)) => panic!("{what}: the fast path accepts what pest rejects ({e})\n{src}"),
        (Err(e), Ok(_)) => {
            assert!(!must_take, "{what}: the fast path rejects it ({e})\n{src}");
            false
        }
        (Err(_), Err(_)) => false,
    }
}

fn mlir_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            mlir_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "mlir") {
            out.push(p);
        }
    }
}

/// The inputs: every `.mlir` of the test and example trees, split at `// -----`, without the
/// files that are about diagnostics.
fn corpus() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for d in ["tests/inputs", "../test", "../examples"] {
        mlir_files(&root.join(d), &mut files);
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        if text.contains("expected-error") {
            continue;
        }
        for (i, chunk) in text.split("// -----").enumerate() {
            out.push((format!("{}#{i}", f.display()), chunk.to_string()));
        }
    }
    out
}

#[test]
fn corpus_and_its_generic_prints() {
    let corpus = corpus();
    assert!(corpus.len() > 20, "corpus too small: {}", corpus.len());
    let (mut taken, mut printed) = (0, 0);
    for (name, src) in &corpus {
        taken += check(name, src, false) as usize;
        for debug_info in [true, false] {
            if let Some(g) = generic_print(src, debug_info) {
                printed += 1;
                check(&format!("{name} (generic, debug {debug_info})"), &g, true);
            }
            // Our custom-form print (unregistered ops stay generic: a mixed file).
            if let Some(c) = custom_print(src, debug_info) {
                check(&format!("{name} (custom, debug {debug_info})"), &c, true);
            }
        }
    }
    // Every input pest reads as written is the custom form, the generic form or both mixed,
    // all of which the fast path reads.
    let pest_ok = corpus
        .iter()
        .filter(|(_, s)| parse_print(s, FrontEnd::PestOnly).is_ok())
        .count();
    assert_eq!(
        taken, pest_ok,
        "the fast path left inputs as written to pest"
    );
    assert!(printed > 20, "too few inputs parse: {printed}");
    eprintln!(
        "{} inputs ({taken} taken by the fast path as written), {printed} generic prints",
        corpus.len()
    );
}

/// A deterministic pseudo-random generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'t>(&mut self, items: &[&'t str]) -> &'t str {
        items[self.below(items.len())]
    }
}

const TYPES: &[&str] = &[
    "i32",
    "f32",
    "index",
    "tensor<4x8xf32>",
    "tensor<?x8xbf16>",
    "memref<4xf32>",
    "!d.t<\"x, y\">",
    "vector<4xf32>",
    "tuple<i32, f32>",
    "!t",
];

const ATTRS: &[&str] = &[
    "1 : i64",
    "-3 : i8",
    "2.5 : f32",
    "\"s,t}\"",
    "\"esc\\\"\\n\"",
    "@sym",
    "@a::@b",
    "[1, 2, [3]]",
    "{k = 1, u}",
    "array<i64: 1, 2>",
    "dense<[1, 2]> : tensor<2xi32>",
    "true",
    "unit",
    "affine_map<(d0) -> (d0 >= 0)>",
    "#map",
    "#d.a<{x = [1]}>",
    "(i32) -> f32",
    "tensor<2xf32>",
    "loc(\"a\":1:2)",
];

const LOCS: &[&str] = &[
    "loc(\"g.mlir\":3:4)",
    "loc(\"g.mlir\":7)",
    "loc(\"a\":1:2 to 3:4)",
    "loc(unknown)",
    "loc(\"name\")",
    "loc(\"n\"(\"f\":1:2))",
    "loc(callsite(\"x\" at \"y\":1:2))",
    "loc(fused[\"a\":1:2, \"b\"])",
    "loc(#loc_early)",
    "loc(#loc_late)",
    "loc( \"sp\":5:6 )",
];

/// Generates a generic-form program: nested regions, blocks with arguments and successors,
/// forward references, multiple result groups, properties, attributes, locations (some
/// naming aliases defined at the end), comments and odd whitespace.
fn generate(seed: u64, ops: usize) -> String {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut s = String::new();
    s.push_str("// generated\n#map = affine_map<(d0) -> (d0)>\n!t = tensor<2x?xf32>\n");
    s.push_str("#loc_early = loc(\"early.mlir\":1:1)\n{-# meta: \"#-}\" #-}\n");
    let mut counter = 0usize;
    gen_region_ops(&mut r, &mut s, &mut counter, ops, 0, &[]);
    s.push_str("#loc_late = loc(\"late.mlir\":9:9)\n");
    s
}

/// Appends `n` ops at nesting `depth`; `visible` are values of type i32 in scope.
fn gen_region_ops(
    r: &mut Rng,
    s: &mut String,
    counter: &mut usize,
    n: usize,
    depth: usize,
    visible: &[String],
) {
    let mut vis: Vec<String> = visible.to_vec();
    let indent = "  ".repeat(depth);
    for _ in 0..n {
        *counter += 1;
        let id = *counter;
        let nres = r.below(3);
        let mut line = indent.clone();
        let mut results = Vec::new();
        if nres > 0 {
            if r.below(2) == 0 {
                let _ = write!(line, "%v{id}:{nres} = ");
                for i in 0..nres {
                    results.push(format!("%v{id}#{i}"));
                }
            } else {
                let names: Vec<String> = (0..nres).map(|i| format!("%v{id}_{i}")).collect();
                let _ = write!(line, "{} = ", names.join(", "));
                results = names;
            }
        }
        let name = r.pick(&["t.op", "t.other", "x.y.z", "t.quoted\\\"name"]);
        let _ = write!(line, "\"{name}\"(");
        let nops = if vis.is_empty() { 0 } else { r.below(3) };
        let operands: Vec<String> = (0..nops).map(|_| vis[r.below(vis.len())].clone()).collect();
        line.push_str(&operands.join(if r.below(2) == 0 { ", " } else { " ,\n " }));
        line.push(')');
        if r.below(5) == 0 {
            line.push_str(" <{");
            let k = r.below(3);
            let entries: Vec<String> = (0..k)
                .map(|i| format!("p{i} = {}", r.pick(ATTRS)))
                .collect();
            line.push_str(&entries.join(", "));
            line.push_str("}>");
        }
        let nested = depth < 3 && r.below(6) == 0;
        if nested {
            line.push_str(" ({\n");
            s.push_str(&line);
            line.clear();
            let inner = 1 + r.below(4);
            gen_region_ops(r, s, counter, inner, depth + 1, &vis);
            if r.below(2) == 0 {
                // A second block, with arguments, reached by a successor.
                let _ = writeln!(
                    s,
                    "{indent}  \"t.br\"()[^bb1] : () -> ()\n{indent}^bb1(%a{id}: i32 {}, %b{id}: {}):",
                    r.pick(LOCS),
                    r.pick(TYPES)
                );
                let mut inner_vis = vis.clone();
                inner_vis.push(format!("%a{id}"));
                let k = 1 + r.below(2);
                gen_region_ops(r, s, counter, k, depth + 1, &inner_vis);
            }
            if r.below(3) == 0 {
                let _ = write!(s, "{indent}}}, {{\n{indent}}})");
            } else {
                let _ = write!(s, "{indent}}})");
            }
        }
        if r.below(3) == 0 {
            let k = 1 + r.below(3);
            let entries: Vec<String> = (0..k)
                .map(|i| {
                    if r.below(4) == 0 {
                        format!("flag{i}")
                    } else {
                        format!("a{i} = {}", r.pick(ATTRS))
                    }
                })
                .collect();
            let _ = write!(line, " {{{}}}", entries.join(", "));
        }
        let ins = vec!["i32"; nops].join(", ");
        let outs = vec!["i32"; results.len()].join(", ");
        let _ = write!(line, " : ({ins}) -> ({outs})");
        if r.below(3) != 0 {
            let _ = write!(line, " {}", r.pick(LOCS));
        }
        if r.below(8) == 0 {
            line.push_str(" // trailing comment");
        }
        line.push('\n');
        s.push_str(&line);
        vis.extend(results);
    }
    // A use of a value defined later (a forward reference), resolved by the op after it.
    if depth == 0 {
        let _ = writeln!(
            s,
            "\"t.use\"(%late) : (i32) -> ()\n%late = \"t.def\"() : () -> i32"
        );
    }
}

#[test]
fn generated_programs() {
    for seed in 1..=60 {
        let src = generate(seed, 25);
        if let Err(e) = parse_print(&src, FrontEnd::PestOnly) {
            panic!("generated program {seed} does not parse: {e}\n{src}");
        }
        check(&format!("generated seed {seed}"), &src, true);
        for debug_info in [true, false] {
            let g = generic_print(&src, debug_info).expect("generated program parses");
            check(&format!("generated seed {seed}, printed"), &g, true);
        }
    }
}

/// Byte positions to cut or corrupt `src` at: all of them for a small file, a spread
/// otherwise.
fn positions(len: usize, max: usize) -> impl Iterator<Item = usize> {
    let step = (len / max).max(1);
    (0..len).step_by(step)
}

#[test]
fn truncations_and_corruptions_agree() {
    let mut inputs: Vec<(String, String)> = (1..=3)
        .map(|seed| (format!("generated {seed}"), generate(seed, 6)))
        .collect();
    // Custom-form and mixed programs.
    for seed in 1..=3 {
        inputs.push((
            format!("custom {seed}"),
            generate_custom(seed, 1, seed == 2),
        ));
    }
    // A sample of the corpus: every fifth small file, printed generic with debug info, and
    // as written (mostly the custom form).
    let corpus = corpus();
    for (name, src) in corpus.iter().filter(|(_, s)| s.len() < 4000).step_by(5) {
        if let Some(g) = generic_print(src, true) {
            inputs.push((name.clone(), g));
        }
        inputs.push((format!("{name} (as written)"), src.clone()));
    }
    let mut fast_rejected_valid = 0;
    let mut total = 0;
    for (name, src) in &inputs {
        let b = src.as_bytes();
        let mut variants: Vec<Vec<u8>> = positions(b.len(), 80).map(|n| b[..n].to_vec()).collect();
        for i in positions(b.len(), 25) {
            for c in [
                b'(', b')', b'{', b'}', b'<', b'>', b'"', b'%', b'#', b'^', b',', b' ', b'\\',
                b'/', b'0',
            ] {
                let mut v = b.to_vec();
                v[i] = c;
                variants.push(v);
            }
        }
        for v in variants {
            let Ok(text) = String::from_utf8(v) else {
                continue;
            };
            total += 1;
            let pest_ok = parse_print(&text, FrontEnd::PestOnly).is_ok();
            if !check(name, &text, false) && pest_ok {
                fast_rejected_valid += 1;
            }
        }
    }
    eprintln!("{total} variants; the fast path left {fast_rejected_valid} valid ones to pest");
}

/// The fast path finds a repeated signature by looking up the rest of its line (or the text
/// before the line's `loc(...)`) among the type tokens read before: texts that are a known
/// type but where the token goes on, or stops, differently must read as pest reads them.
#[test]
fn repeated_signatures_read_like_pest() {
    let head = "^bb0(%a: i32, %b: () -> i32):\n  %0 = \"t.x\"() : () -> i32\n";
    let tails = [
        "  %1 = \"t.x\"() : () -> i32\n",
        "  %1 = \"t.x\"() : () -> i32   \n",
        "  %1 = \"t.x\"() : () -> i32 loc(\"f\":1:2)\n",
        "  %1 = \"t.x\"() : () -> i32 loc(unknown)\n",
        "  %1 = \"t.x\"() : () -> i32 // note\n",
        "  %1 = \"t.x\"() : () -> i32x\n",
        "  %1 = \"t.x\"() : () -> i32\n    -> i32\n",
        "  %1 = \"t.x\"() : i32\n    -> i32\n",
        "  %1 = \"t.x\"() : () -> i32 -> i32\n",
        "  %1 = \"t.x\"() : () -> i32<4>\n",
        "  %1 = \"t.x\"() : () -> i32(\n",
        "  %1 = \"t.x\"(%a) : (i32) -> i32\n  %2 = \"t.x\"(%a) : (i32) -> i32 loc(#l)\n",
        "  %1 = \"t.x\"() : () -> i32",
    ];
    for (i, tail) in tails.iter().enumerate() {
        let src = format!("\"t.f\"() ({{\n{head}{tail}}}) : () -> ()\n#l = loc(\"g\":3:4)\n");
        // The first ones (and the last) are plain generic form, which the fast path must take.
        check(tail, &src, i < 4 || i == tails.len() - 1);
    }
}

/// Generates a program in the custom form (with `mixed`, some ops in the generic form too):
/// modules with and without a name and attributes, function declarations and definitions
/// with argument and result attributes and locations, uniform ops with symbols, operands,
/// properties, attributes, regions with labeled blocks, both kinds of signature and
/// locations, calls and returns in both spellings, forward references, comments and odd
/// whitespace.
fn generate_custom(seed: u64, funcs: usize, mixed: bool) -> String {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut s = String::from("// generated, custom form\n#map = affine_map<(d0) -> (d0)>\n");
    s.push_str("!t = tensor<2x?xf32>\n#loc_early = loc(\"early.mlir\":1:1)\n");
    let module = r.below(4);
    match module {
        0 => {}
        1 => s.push_str("module {\n"),
        2 => s.push_str("module @m attributes {m.k = 1 : i64, m.u} {\n"),
        _ => s.push_str("builtin.module @\"q m\" {\n"),
    }
    s.push_str("  t.group @g {size = 2 : i64}\n  t.marker\n");
    s.push_str("  func.func private @decl(i32, f32 {a.b}) -> (i32 {r.x = 1})\n");
    let mut counter = 0usize;
    for f in 0..funcs {
        let nargs = 1 + r.below(3);
        let args: Vec<String> = (0..nargs)
            .map(|i| {
                let mut a = format!("%a{f}_{i}: i32");
                if r.below(4) == 0 {
                    a.push_str(" {t.arg = 1 : i64}");
                }
                if r.below(3) == 0 {
                    let _ = write!(a, " {}", r.pick(LOCS));
                }
                a
            })
            .collect();
        let vis = r.pick(&["", "private ", "public "]);
        let res = r.pick(&[" -> i32", " -> (i32)", " -> (i32 {t.res})"]);
        let attrs = if r.below(3) == 0 {
            " attributes {t.fn = \"x\"}"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "  func.func {vis}@f{f}({}){res}{attrs} {{",
            args.join(if r.below(2) == 0 { ", " } else { ",\n      " })
        );
        let vis: Vec<String> = (0..nargs).map(|i| format!("%a{f}_{i}")).collect();
        let n = 3 + r.below(6);
        let last = gen_custom_ops(&mut r, &mut s, &mut counter, n, 2, &vis, mixed);
        let ret = if mixed && r.below(3) == 0 {
            format!("\"func.return\"({last}) : (i32) -> ()")
        } else {
            format!("{} {last} : i32", r.pick(&["return", "func.return"]))
        };
        let loc = if r.below(2) == 0 { r.pick(LOCS) } else { "" };
        let _ = writeln!(
            s,
            "    {ret} {loc}\n  }} {}",
            if r.below(3) == 0 { r.pick(LOCS) } else { "" }
        );
    }
    if module != 0 {
        let _ = writeln!(
            s,
            "}} {}",
            if r.below(2) == 0 {
                "loc(\"m.mlir\":1:1)"
            } else {
                ""
            }
        );
    }
    s.push_str("#loc_late = loc(\"late.mlir\":9:9)\n");
    s
}

/// Appends `n` custom-form ops at nesting `depth`; `visible` are the i32 values in
/// scope. Returns a value defined last (or the first visible one).
fn gen_custom_ops(
    r: &mut Rng,
    s: &mut String,
    counter: &mut usize,
    n: usize,
    depth: usize,
    visible: &[String],
    mixed: bool,
) -> String {
    let mut vis: Vec<String> = visible.to_vec();
    let indent = "  ".repeat(depth);
    // A use of a value defined by the next op (a forward reference).
    *counter += 1;
    let fwd = format!("%fwd{}", *counter);
    let _ = writeln!(s, "{indent}t.use {fwd} : i32");
    let _ = writeln!(s, "{indent}{fwd} = t.def : i32");
    vis.push(fwd);
    for _ in 0..n {
        *counter += 1;
        let id = *counter;
        let nres = r.below(3);
        let nops = r.below(3).min(vis.len());
        let operands: Vec<String> = (0..nops).map(|_| vis[r.below(vis.len())].clone()).collect();
        let mut results = Vec::new();
        let mut line = indent.clone();
        if nres > 0 {
            if r.below(2) == 0 {
                let _ = write!(line, "%c{id}:{nres} = ");
                results.extend((0..nres).map(|i| format!("%c{id}#{i}")));
            } else {
                let names: Vec<String> = (0..nres).map(|i| format!("%c{id}_{i}")).collect();
                let _ = write!(line, "{} = ", names.join(", "));
                results = names;
            }
        }
        let ins = vec!["i32"; nops].join(", ");
        let outs = vec!["i32"; nres].join(", ");
        if mixed && r.below(3) == 0 {
            // The generic form, amid custom ops.
            let _ = write!(
                line,
                "\"t.gen\"({}) : ({ins}) -> ({outs})",
                operands.join(", ")
            );
        } else if r.below(8) == 0 && nres == 1 {
            let callee = if r.below(2) == 0 { "@decl" } else { "@a::@b" };
            let _ = write!(
                line,
                "{} {callee}({}) : ({ins}) -> i32",
                r.pick(&["call", "func.call"]),
                operands.join(", ")
            );
        } else {
            let name = r.pick(&["t.op", "t.other", "x.y.z", "t_u.v$w"]);
            line.push_str(name);
            if r.below(6) == 0 {
                let _ = write!(line, " @s{id}");
            }
            if !operands.is_empty() {
                line.push(' ');
                line.push_str(&operands.join(if r.below(3) == 0 { " ,\n  " } else { ", " }));
            }
            if r.below(5) == 0 {
                let _ = write!(line, " <{{p = {}}}>", r.pick(ATTRS));
            }
            if r.below(3) == 0 {
                let k = 1 + r.below(3);
                let entries: Vec<String> = (0..k)
                    .map(|i| {
                        if r.below(4) == 0 {
                            format!("flag{i}")
                        } else {
                            format!("a{i} = {}", r.pick(ATTRS))
                        }
                    })
                    .collect();
                let _ = write!(line, " {{{}}}", entries.join(", "));
            }
            if depth < 4 && r.below(5) == 0 {
                line.push_str(" ({\n");
                s.push_str(&line);
                line.clear();
                let k = 1 + r.below(3);
                gen_custom_ops(r, s, counter, k, depth + 1, &vis, mixed);
                if r.below(2) == 0 {
                    let _ = writeln!(
                        s,
                        "{indent}  t.br\n{indent}^bb1(%b{id}: i32 {}, %e{id}: {}):",
                        r.pick(LOCS),
                        r.pick(TYPES)
                    );
                    let mut inner = vis.clone();
                    inner.push(format!("%b{id}"));
                    gen_custom_ops(r, s, counter, 1, depth + 1, &inner, mixed);
                }
                let _ = write!(s, "{indent}}}");
                if r.below(3) == 0 {
                    let _ = write!(s, ", {{\n{indent}}}");
                }
                line.push(')');
            }
            if nops + nres > 0 {
                // Every type is i32: the short signature fits any op.
                if r.below(2) == 0 {
                    line.push_str(" : i32");
                } else {
                    let _ = write!(line, " : ({ins}) -> ({outs})");
                }
            }
        }
        if r.below(3) == 0 {
            let _ = write!(line, " {}", r.pick(LOCS));
        }
        if r.below(8) == 0 {
            line.push_str(" // trailing comment");
        }
        line.push('\n');
        s.push_str(&line);
        // `%x:2 = t.op ... : i32` has one result; keep only what the signature gives.
        vis.extend(results);
    }
    vis.last().cloned().unwrap_or_default()
}

#[test]
fn generated_custom_and_mixed_programs() {
    for seed in 1..=60 {
        for mixed in [false, true] {
            let src = generate_custom(seed, 4, mixed);
            if let Err(e) = parse_print(&src, FrontEnd::PestOnly) {
                panic!("generated program {seed} (mixed {mixed}) does not parse: {e}\n{src}");
            }
            check(
                &format!("generated custom seed {seed}, mixed {mixed}"),
                &src,
                true,
            );
        }
    }
}
