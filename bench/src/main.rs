//! `gen-bench [--ops N] [--form generic|custom|mixed] [-o FILE]`: writes a deterministic,
//! valid commlir program of about N operations (default 200 000, ~20 MB) with locations, the
//! shape of a
//! traced tensor-parallel + data-parallel transformer: a module with `coll.group` symbols and
//! functions made of layers of matmuls, elementwise ops, all_reduce / all_gather /
//! reduce_scatter and their waits. The same file is read by commlir-opt and by mlir-opt
//! (`--allow-unregistered-dialect`), which is what bench/run.sh times.
//!
//! `--form` picks the spelling of the same module: `generic` (default; what mlir-opt reads),
//! `custom` (the uniform custom form and `module` / `func.func` / `return`, as commlir prints
//! and people write) or `mixed` (custom structure, ops alternating between the two forms, as
//! hand-written tests mix them). Every op carries the location of its line in the generic
//! file, so that all three parse to the same IR and print byte-identically.

use std::fmt::Write as _;
use std::io::Write as _;

const B: u64 = 8;
const H: u64 = 1024;
const F: u64 = 4096;
/// Sizes of the groups: @tp (tensor parallel) and @dp (data parallel).
const TP: u64 = 2;
const DP: u64 = 4;
const LAYERS_PER_FUNC: usize = 100;
const OPS_PER_LAYER: usize = 14;

/// How ops are spelled.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    Generic,
    Custom,
    Mixed,
}

struct Gen {
    form: Form,
    out: String,
    line: usize,
    next_value: usize,
    ops: usize,
    /// Deterministic variety (xorshift64).
    rng: u64,
}

fn t(d0: u64, d1: u64) -> String {
    format!("tensor<{d0}x{d1}xbf16>")
}

impl Gen {
    fn rand(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn line(&mut self, indent: usize, text: &str) {
        self.line += 1;
        for _ in 0..indent {
            self.out.push(' ');
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// Whether the next op is written in the generic form.
    fn generic_op(&self) -> bool {
        match self.form {
            Form::Generic => true,
            Form::Custom => false,
            Form::Mixed => self.ops.is_multiple_of(2),
        }
    }

    /// One op: `%N = "name"(operands) {attrs} : (in) -> out loc("gen.mlir":L:5)`, or in the
    /// custom form `%N = name operands {attrs} : (in) -> out loc(...)` (`: T` where all types
    /// are one).
    fn op(
        &mut self,
        name: &str,
        operands: &[&str],
        attrs: &str,
        ins: &[&str],
        out: &str,
    ) -> String {
        let v = format!("%{}", self.next_value);
        self.next_value += 1;
        self.ops += 1;
        let mut s = String::with_capacity(160);
        let generic = self.generic_op();
        if generic {
            let _ = write!(s, "{v} = \"{name}\"({})", operands.join(", "));
        } else {
            let _ = write!(s, "{v} = {name} {}", operands.join(", "));
        }
        if !attrs.is_empty() {
            let _ = write!(s, " {{{attrs}}}");
        }
        if !generic && ins.iter().all(|t| *t == out) {
            let _ = write!(s, " : {out}");
        } else {
            let _ = write!(s, " : ({}) -> {out}", ins.join(", "));
        }
        let _ = write!(s, " loc(\"gen.mlir\":{}:5)", self.line + 1);
        self.line(4, &s);
        v
    }

    /// One layer: 14 ops, input and output `tensor<8x1024xbf16>`.
    fn layer(&mut self, x: &str, w1: &str, w2: &str) -> String {
        let (xh, hf, fh, xf) = (t(B, H), t(H, F), t(F, H), t(B, F));
        let gathered = t(B * DP, H);
        let h = self.op("compute.matmul", &[x, w1], "", &[&xh, &hf], &xf);
        let a = self.op("compute.gelu", &[&h], "", &[&xf], &xf);
        let cost = 1000 + self.rand() % 9000;
        let o = self.op(
            "compute.matmul",
            &[&a, w2],
            &format!("cost_ns = {cost} : i64"),
            &[&xf, &fh],
            &xh,
        );
        let r = self.op(
            "coll.all_reduce",
            &[&o],
            "group = @tp, reduce_op = \"sum\"",
            &[&xh],
            &xh,
        );
        let n = self.op("compute.neg", &[x], "", &[&xh], &xh);
        let y = self.op("coll.wait_tensor", &[&r], "", &[&xh], &xh);
        let s = self.op("compute.add", &[&y, &n], "", &[&xh, &xh], &xh);
        let g = self.op(
            "coll.all_gather_into_tensor",
            &[&s],
            "group = @dp",
            &[&xh],
            &gathered,
        );
        let e = self.op("compute.silu", &[&s], "", &[&xh], &xh);
        let gw = self.op("coll.wait_tensor", &[&g], "", &[&gathered], &gathered);
        let rs = self.op(
            "coll.reduce_scatter_tensor",
            &[&gw],
            "group = @dp, reduce_op = \"avg\"",
            &[&gathered],
            &xh,
        );
        let rw = self.op("coll.wait_tensor", &[&rs], "", &[&xh], &xh);
        let factor = ["5.000000e-01", "2.500000e-01", "1.250000e-01"][(self.rand() % 3) as usize];
        let sc = self.op(
            "compute.scale",
            &[&rw],
            &format!("factor = {factor} : f64"),
            &[&xh],
            &xh,
        );
        self.op("compute.mul", &[&sc, &e], "", &[&xh, &xh], &xh)
    }

    fn function(&mut self, index: usize, layers: usize) {
        let (xh, hf, fh) = (t(B, H), t(H, F), t(F, H));
        let ty = format!("({xh}, {hf}, {fh}) -> {xh}");
        self.ops += 1;
        let l = self.line + 1;
        let arg_loc = format!("loc(\"gen.mlir\":{l}:3)");
        if self.form == Form::Generic {
            self.line(2, &format!("\"func.func\"() <{{function_type = {ty}, sym_name = \"layer_block_{index}\"}}> ({{"));
            self.line(
                2,
                &format!(
                    "^bb0(%arg0: {xh} {arg_loc}, %arg1: {hf} {arg_loc}, %arg2: {fh} {arg_loc}):"
                ),
            );
        } else {
            // One line for the two of the generic form: the numbering stays the generic one.
            self.line += 1;
            self.line(2, &format!(
                "func.func @layer_block_{index}(%arg0: {xh} {arg_loc}, %arg1: {hf} {arg_loc}, %arg2: {fh} {arg_loc}) -> {xh} {{"
            ));
        }
        self.next_value = 0;
        let mut x = "%arg0".to_string();
        for _ in 0..layers {
            x = self.layer(&x, "%arg1", "%arg2");
        }
        self.ops += 1;
        let l = self.line + 1;
        if self.form == Form::Generic {
            self.line(
                4,
                &format!("\"func.return\"({x}) : ({xh}) -> () loc(\"gen.mlir\":{l}:5)"),
            );
            self.line(2, &format!("}}) : () -> () loc(\"gen.mlir\":{}:3)", l - 1));
        } else {
            self.line(4, &format!("return {x} : {xh} loc(\"gen.mlir\":{l}:5)"));
            self.line(2, &format!("}} loc(\"gen.mlir\":{}:3)", l - 1));
        }
    }
}

fn main() {
    let mut ops_target: usize = 200_000;
    let mut output: Option<String> = None;
    let mut form = Form::Generic;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--ops" => ops_target = args.next().and_then(|v| v.parse().ok()).expect("--ops N"),
            "-o" => output = Some(args.next().expect("-o FILE")),
            "--form" => {
                form = match args.next().as_deref() {
                    Some("generic") => Form::Generic,
                    Some("custom") => Form::Custom,
                    Some("mixed") => Form::Mixed,
                    _ => panic!("--form generic|custom|mixed"),
                }
            }
            "-h" | "--help" => {
                println!("gen-bench [--ops N] [--form generic|custom|mixed] [-o FILE]   (default: 200000 generic-form ops to stdout)");
                return;
            }
            other => panic!("unknown argument {other} (try --help)"),
        }
    }
    let mut g = Gen {
        form,
        out: String::with_capacity(ops_target * 130),
        line: 0,
        next_value: 0,
        ops: 0,
        rng: 0x2545_F491_4F6C_DD1D,
    };
    if form == Form::Generic {
        g.line(0, "\"builtin.module\"() ({");
    } else {
        g.line(0, "module {");
    }
    g.ops += 1;
    for (name, size) in [("tp", TP), ("dp", DP)] {
        let l = g.line + 1;
        g.ops += 1;
        let text = if g.generic_op() {
            format!("\"coll.group\"() {{size = {size} : i64, sym_name = \"{name}\"}} : () -> () loc(\"gen.mlir\":{l}:3)")
        } else {
            format!("coll.group @{name} {{size = {size} : i64}} loc(\"gen.mlir\":{l}:3)")
        };
        g.line(2, &text);
    }
    let per_func = LAYERS_PER_FUNC * OPS_PER_LAYER + 2;
    let mut index = 0;
    while g.ops + per_func <= ops_target {
        g.function(index, LAYERS_PER_FUNC);
        index += 1;
    }
    // The remainder as a shorter function, so that the total is close to the target.
    let left = ops_target.saturating_sub(g.ops + 2) / OPS_PER_LAYER;
    if left > 0 {
        g.function(index, left);
    }
    if form == Form::Generic {
        g.line(0, "}) : () -> () loc(\"gen.mlir\":1:1)");
    } else {
        g.line(0, "} loc(\"gen.mlir\":1:1)");
    }
    match output {
        Some(path) => std::fs::write(&path, &g.out).expect("write output"),
        None => std::io::stdout()
            .write_all(g.out.as_bytes())
            .expect("write stdout"),
    }
    eprintln!(
        "gen-bench: {} ops, {} lines, {} bytes",
        g.ops,
        g.line,
        g.out.len()
    );
}
