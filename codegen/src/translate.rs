//! The `commlir-translate` driver: reads a program, optionally runs a pipeline (e.g. the
//! lowering to planned comm IR), runs `comm-to-rt`, and prints or writes one stage:
//!
//! | `--emit`     | output |
//! |--------------|--------|
//! | `rt`         | the module in the `rt` dialect (text) |
//! | `llvm-ir`    | the kernels' LLVM IR (NVPTX, optimized, verified) |
//! | `ptx`        | the kernels' PTX |
//! | `host-ll`    | the host program's LLVM IR (verified) |
//! | `object`     | the host program as a relocatable object (binary; needs `-o`) |
//! | `shared-lib` | the host program as a shared library, linked by `clang-22 -shared` (needs `-o`) |
//! | `artifact`   | the runner's single-file artifact (needs `-o`; see [`crate::artifact`]) |

use crate::{artifact, host, kernels, lower_to_rt};
use clap::{Parser, ValueEnum};
use commlir_ir::driver::{split, verify_diagnostics, Diag};
use commlir_ir::pass::{parse_pipeline, PassManager};
use commlir_ir::printer::{print_op, PrintOptions};
use commlir_ir::{parser, verify, Context, OpId, Severity, SourceFile, SourceMgr};
use std::io::{Read, Write};
use std::path::Path;

/// What to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    Rt,
    LlvmIr,
    Ptx,
    HostLl,
    Object,
    SharedLib,
    Artifact,
}

/// Command line of `commlir-translate`.
#[derive(Parser, Debug)]
#[command(
    name = "commlir-translate",
    about = "Translate planned comm-level IR to runtime calls, NVPTX kernels, host LLVM IR and the runner artifact"
)]
pub struct Args {
    /// Input file (`-` for standard input).
    pub file: String,
    /// The stage to emit.
    #[arg(long, value_enum, default_value = "rt")]
    pub emit: Emit,
    /// Output file (default: standard output; required for binary stages).
    #[arg(short = 'o')]
    pub output: Option<String>,
    /// A pipeline to run before `comm-to-rt`, e.g.
    /// `builtin.module(func.func(coll-to-comm,comm-plan-pools))`.
    #[arg(long = "pass-pipeline")]
    pub pipeline: Option<String>,
    /// The function `commlir_main` runs (default: the only public function with a body, else `@main`, else the first function with a body; as `commlir-run`).
    #[arg(long)]
    pub entry: Option<String>,
    /// Split the input at `// -----` lines and translate each chunk on its own (text stages;
    /// the outputs are joined with `// -----`), as `mlir-translate --split-input-file`.
    #[arg(long = "split-input-file")]
    pub split_input_file: bool,
    /// Check the diagnostics against the input's `expected-error` / `expected-warning` /
    /// `expected-note` / `expected-remark` designators instead of printing them; exit code 0
    /// when they match (text stages).
    #[arg(long = "verify-diagnostics")]
    pub verify_diagnostics: bool,
}

/// Everything one compilation produces, up to the requested stage.
pub struct Compiled {
    pub rt: String,
    pub device: kernels::DeviceCode,
    pub host: Option<host::HostCode>,
}

/// Parses, lowers and compiles `text`; errors are rendered diagnostics.
pub fn compile_source(
    name: &str,
    text: &str,
    pipeline: Option<&str>,
    entry: Option<&str>,
    emit: Emit,
) -> Result<Compiled, String> {
    compile_detached(name, text, pipeline, entry, emit)
        .map_err(|ds| ds.iter().map(|d| d.rendered.as_str()).collect())
}

/// [`compile_source`], with the errors as detached diagnostics (for `--verify-diagnostics`).
pub fn compile_detached(
    name: &str,
    text: &str,
    pipeline: Option<&str>,
    entry: Option<&str>,
    emit: Emit,
) -> Result<Compiled, Vec<Diag>> {
    crate::link();
    let mut ctx = Context::new();
    let mut sources = SourceMgr::default();
    sources.add(SourceFile::new(name, text.to_string()));
    let render = |ctx: &Context, ds: &[commlir_ir::Diagnostic]| -> Vec<Diag> {
        ds.iter().map(|d| Diag::new(ctx, &sources, d)).collect()
    };
    let module = parser::parse_source(
        &mut ctx,
        name,
        text.as_bytes(),
        &parser::ParseOptions::default(),
    )
    .map_err(|d| render(&ctx, &[d]))?;
    verify::verify(&ctx, module).map_err(|e| render(&ctx, &e))?;
    if let Some(p) = pipeline {
        let opm = parse_pipeline(p).map_err(|e| {
            vec![Diag {
                severity: Severity::Error,
                position: None,
                message: e.to_string(),
                rendered: e.render(p),
                notes: Vec::new(),
            }]
        })?;
        let mut pm = PassManager::from_pipeline(opm);
        pm.run(&mut ctx, module).map_err(|e| render(&ctx, &e))?;
    }
    lower(&mut ctx, module).map_err(|d| render(&ctx, &[d]))?;
    verify::verify(&ctx, module).map_err(|e| render(&ctx, &e))?;
    let rt = print_op(&ctx, module, &PrintOptions::default());
    if emit == Emit::Rt {
        return Ok(Compiled {
            rt,
            device: kernels::DeviceCode::default(),
            host: None,
        });
    }
    let device = kernels::compile(&ctx, module).map_err(|d| render(&ctx, &[d]))?;
    let host = if matches!(emit, Emit::LlvmIr | Emit::Ptx) {
        None
    } else {
        let obj = matches!(emit, Emit::Object | Emit::SharedLib | Emit::Artifact);
        Some(host::compile(&ctx, module, &device, entry, obj).map_err(|d| render(&ctx, &[d]))?)
    };
    Ok(Compiled { rt, device, host })
}

/// Runs `comm-to-rt` on a module. `COMMLIR_ATTENTION=generated` in the environment takes
/// commlir's own attention kernels instead of cuDNN (the pass option `attention`), to
/// compare the two.
pub fn lower(
    ctx: &mut Context,
    module: OpId,
) -> Result<lower_to_rt::LowerStats, commlir_ir::Diagnostic> {
    let mut opts = lower_to_rt::LowerOptions::default();
    if std::env::var("COMMLIR_ATTENTION").is_ok_and(|v| v == "generated") {
        opts.attention = lower_to_rt::AttentionLowering::Generated;
    }
    lower_to_rt::lower_module_with(ctx, module, opts)
}

/// Reads `file` (`-`: standard input); returns the name diagnostics use and the text.
pub fn read_input(file: &str) -> Result<(String, String), String> {
    if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("error: cannot read standard input: {e}"))?;
        Ok(("<stdin>".into(), s))
    } else {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("error: cannot read '{file}': {e}"))?;
        Ok((file.to_string(), text))
    }
}

/// Writes `bytes` to `output` (`None` or `-`: standard output).
pub fn write_output(output: Option<&str>, bytes: &[u8]) -> Result<(), String> {
    match output {
        Some(o) if o != "-" => {
            std::fs::write(o, bytes).map_err(|e| format!("error: cannot write '{o}': {e}"))
        }
        _ => std::io::stdout()
            .write_all(bytes)
            .map_err(|e| format!("error: cannot write the output: {e}")),
    }
}

/// Compiles `text` (named `name` in diagnostics) to the stage `args` asks for and writes it
/// where `args` says (`commlir-translate` after reading its input, or after a front end such as
/// `--import-mlir` produced the text).
pub fn run_source(args: &Args, name: &str, text: &str) -> Result<(), String> {
    let binary = matches!(args.emit, Emit::Object | Emit::SharedLib | Emit::Artifact);
    if (args.split_input_file || args.verify_diagnostics) && binary {
        return Err("error: --split-input-file and --verify-diagnostics apply to the text stages (rt, llvm-ir, ptx, host-ll)".into());
    }
    if args.split_input_file || args.verify_diagnostics {
        return run_chunks(args, name, text);
    }
    if binary && args.output.is_none() {
        return Err("error: this --emit stage is binary: give an output file with -o".into());
    }
    let c = compile_source(
        name,
        text,
        args.pipeline.as_deref(),
        args.entry.as_deref(),
        args.emit,
    )?;
    let bytes: Vec<u8> = match args.emit {
        Emit::Rt => c.rt.into_bytes(),
        Emit::LlvmIr => c.device.llvm_ir.into_bytes(),
        Emit::Ptx => c.device.ptx.into_bytes(),
        Emit::HostLl => c.host.map(|h| h.llvm_ir).unwrap_or_default().into_bytes(),
        Emit::Object => c.host.map(|h| h.object).unwrap_or_default(),
        Emit::SharedLib => shared_lib(&c.host.map(|h| h.object).unwrap_or_default())?,
        Emit::Artifact => {
            let h = c.host.ok_or("error: no host program")?;
            let so = shared_lib(&h.object)?;
            let replicated = replicated_args(name, text, &h);
            let manifest = manifest(&h, &c.device, &replicated);
            let mut ptx = c.device.ptx.clone().into_bytes();
            ptx.push(0);
            artifact::write(&[
                (artifact::MANIFEST, manifest.as_bytes()),
                (artifact::PTX, &ptx),
                (artifact::HOST, &so),
                (artifact::RT_IR, c.rt.as_bytes()),
            ])
        }
    };
    write_output(args.output.as_deref(), &bytes)
}

/// The text of a text stage.
fn stage_text(c: Compiled, emit: Emit) -> String {
    match emit {
        Emit::Rt => c.rt,
        Emit::LlvmIr => c.device.llvm_ir,
        Emit::Ptx => c.device.ptx,
        _ => c.host.map(|h| h.llvm_ir).unwrap_or_default(),
    }
}

/// `--split-input-file` / `--verify-diagnostics`: each chunk (the whole input without
/// splitting) is compiled on its own, its line numbers those of the input; the outputs of the
/// chunks that compiled are joined with `// -----`. Without `--verify-diagnostics` every
/// chunk's errors are printed and any error fails the run; with it, the errors are checked
/// against the chunk's `expected-*` designators and only mismatches are reported.
fn run_chunks(args: &Args, name: &str, text: &str) -> Result<(), String> {
    const MARKER: &str = "// -----";
    let chunks: Vec<String> = if args.split_input_file {
        split::split_input(text.as_bytes(), MARKER)
            .into_iter()
            .map(|c| String::from_utf8_lossy(&c.bytes).into_owned())
            .collect()
    } else {
        vec![text.to_string()]
    };
    let mut sources = SourceMgr::default();
    sources.add(SourceFile::new(name, text.to_string()));
    let (mut outputs, mut errors) = (Vec::new(), String::new());
    for chunk in &chunks {
        let (output, diags) = match compile_detached(
            name,
            chunk,
            args.pipeline.as_deref(),
            args.entry.as_deref(),
            args.emit,
        ) {
            Ok(c) => (stage_text(c, args.emit), Vec::new()),
            Err(ds) => (String::new(), ds),
        };
        if args.verify_diagnostics {
            for p in verify_diagnostics::verify(chunk, &diags, name, &sources) {
                errors.push_str(&p);
            }
        } else {
            for d in &diags {
                errors.push_str(&d.rendered);
            }
        }
        outputs.push(output);
    }
    let joined = outputs.join(&format!("{MARKER}\n"));
    write_output(args.output.as_deref(), joined.as_bytes())?;
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// For each of the host program's functions, per argument, the index in `h.groups` of the
/// group its `coll.replicated` attribute names (read from the source, whose argument
/// attributes the lowering does not carry), so that the runner generates such an argument
/// identically on the ranks of that group, as the sim does. Unparsable text or an unknown
/// function gives no entries (every argument then differs per rank).
fn replicated_args(name: &str, text: &str, h: &host::HostCode) -> Vec<Vec<Option<usize>>> {
    crate::link();
    let mut ctx = Context::new();
    let Ok(module) = parser::parse_source(
        &mut ctx,
        name,
        text.as_bytes(),
        &parser::ParseOptions::default(),
    ) else {
        return Vec::new();
    };
    let mut funcs: Vec<OpId> = Vec::new();
    ctx.walk(module, |op| {
        if ctx.op_name(op) == "func.func" {
            funcs.push(op);
        }
    });
    h.functions
        .iter()
        .map(|(fname, args, _)| {
            let Some(&f) = funcs
                .iter()
                .find(|&&f| ctx.symbol_name(f) == Some(fname.as_str()))
            else {
                return Vec::new();
            };
            (0..args.len())
                .map(|i| {
                    let g = commlir_dialects::coll::replicated_arg_group(&ctx, f, i)?;
                    h.groups.iter().position(|e| e.name == g)
                })
                .collect()
        })
        .collect()
}

/// The artifact's JSON manifest (docs/codegen.md lists the fields).
pub fn manifest(
    h: &host::HostCode,
    d: &kernels::DeviceCode,
    replicated: &[Vec<Option<usize>>],
) -> String {
    let groups: Vec<_> = h
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            serde_json::json!({"index": i, "name": g.name, "size": g.size,
                "ranks": g.ranks, "symm_mem": g.symm_mem})
        })
        .collect();
    let slot = |s: &crate::slots::Slot| serde_json::json!({"index": s.index, "pool": s.pool, "offset": s.offset, "bytes": s.bytes});
    let funcs: Vec<_> = h
        .functions
        .iter()
        .enumerate()
        .map(|(i, (n, a, r))| {
            let sl = h.slots.get(i).cloned().unwrap_or_default();
            let pools: Vec<_> = sl
                .pools
                .iter()
                .map(|p| serde_json::json!({"kind": p.kind, "group": p.group, "size": p.size, "alignment": p.alignment}))
                .collect();
            let args: Vec<_> = sl.args.iter().map(slot).collect();
            let results: Vec<_> = sl.results.iter().map(slot).collect();
            let rep = replicated.get(i).cloned().unwrap_or_default();
            serde_json::json!({"name": n, "symbol": format!("commlir_fn_{n}"), "args": a, "results": r,
                "pools": pools, "arg_slots": args, "result_slots": results, "arg_replicated": rep})
        })
        .collect();
    let v = serde_json::json!({
        "format": "commlir-artifact",
        "format_version": artifact::FORMAT_VERSION,
        "abi_version": crate::abi::ABI_VERSION,
        "entry": h.entry,
        "entry_symbol": crate::abi::MAIN_SYMBOL,
        "target": {"triple": kernels::TRIPLE, "cpu": kernels::CPU, "ptx_features": kernels::FEATURES},
        "block_size": lower_to_rt::BLOCK,
        "kernels": d.kernels,
        "num_events": h.num_events,
        "groups": groups,
        "functions": funcs,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// The compiler driver that links shared libraries (`COMMLIR_CLANG`, else `clang-22`, else
/// `clang`).
fn clang() -> String {
    if let Ok(c) = std::env::var("COMMLIR_CLANG") {
        return c;
    }
    for c in ["clang-22", "/usr/lib/llvm-22/bin/clang", "clang"] {
        let ok = std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return c.to_string();
        }
    }
    "clang".into()
}

/// Links a host object into a shared library (no libc: the program calls only the API table).
pub fn shared_lib(object: &[u8]) -> Result<Vec<u8>, String> {
    let dir = std::env::temp_dir().join(format!("commlir-translate-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("error: cannot create {}: {e}", dir.display()))?;
    let obj = dir.join("host.o");
    let so = dir.join("host.so");
    std::fs::write(&obj, object)
        .map_err(|e| format!("error: cannot write {}: {e}", obj.display()))?;
    let cc = clang();
    let out = std::process::Command::new(&cc)
        .args(["-shared", "-nostdlib", "-fuse-ld=lld", "-o"])
        .arg(&so)
        .arg(&obj)
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        _ => std::process::Command::new(&cc)
            .args(["-shared", "-nostdlib", "-o"])
            .arg(&so)
            .arg(&obj)
            .output()
            .map_err(|e| format!("error: cannot run {cc}: {e}"))?,
    };
    if !out.status.success() {
        return Err(format!(
            "error: linking the host library with {cc} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let bytes =
        std::fs::read(&so).map_err(|e| format!("error: cannot read {}: {e}", so.display()))?;
    let _ = std::fs::remove_dir_all(Path::new(&dir));
    Ok(bytes)
}
