//! The `commlir-opt` driver: reads a file (or stdin), optionally splits it into chunks, parses
//! each chunk into a module, runs the pass pipeline given by `--pass-pipeline` or by pass
//! flags, and prints the result; diagnostics go to stderr in MLIR's shape and any error gives
//! exit code 1. The binary itself only calls [`opt_main`].
//!
//! Robustness: everything runs on a thread with a 512 MiB stack (deep inputs cannot overflow
//! it), and a panic, which is a bug, becomes an "internal error" diagnostic and exit code 1.

mod cli;

use commlir_ir::driver::{split, verify_diagnostics, Diag};
use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::pass::instrumentation::IrPrintConfig;
use commlir_ir::pass::{
    add_pass_with_options, parse_pipeline, IrPrinter, OpPassManager, PassManager, PassRegistry,
    TimingInstrumentation, TimingTree,
};
use commlir_ir::printer::{print_op, PrintOptions};
use commlir_ir::{Context, Diagnostic, Registry, SourceFile, SourceMgr};
use commlir_passes::analysis::svg;
use commlir_passes::analysis::trace::{self, TimelineView};
use std::borrow::Cow;
use std::cell::RefCell;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Mutex;

/// Stack size of the thread doing the work.
const STACK_SIZE: usize = 512 << 20;

/// Runs `commlir-opt` with the process's arguments. The process ends right after, so the IR
/// is not freed piece by piece (clang's `-disable-free`): at 100k ops that is a twentieth of
/// the run.
pub fn opt_main() -> ExitCode {
    opt_main_impl(std::env::args_os().collect(), true)
}

/// The last panic's message and location, recorded by the hook instead of printed.
static PANIC_MESSAGE: Mutex<Option<String>> = Mutex::new(None);

/// Runs `commlir-opt` with `args` (the first being the program name). Everything it allocates
/// is freed, so a host process may call it any number of times.
pub fn opt_main_with_args(args: Vec<OsString>) -> ExitCode {
    opt_main_impl(args, false)
}

fn opt_main_impl(args: Vec<OsString>, disable_free: bool) -> ExitCode {
    crate::register_all();
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if let Ok(mut slot) = PANIC_MESSAGE.lock() {
            *slot = Some(format!("{msg}{at}"));
        }
    }));
    let worker = std::thread::Builder::new()
        .stack_size(STACK_SIZE)
        .spawn(move || run(args, disable_free));
    let code = match worker.map(|h| h.join()) {
        Ok(Ok(code)) => code,
        Ok(Err(_)) => {
            let msg = PANIC_MESSAGE
                .lock()
                .ok()
                .and_then(|mut m| m.take())
                .unwrap_or_default();
            eprintln!("commlir-opt: error: internal error: {msg}");
            1
        }
        Err(e) => {
            eprintln!("commlir-opt: error: could not start the worker thread: {e}");
            1
        }
    };
    let _ = std::io::stdout().flush();
    ExitCode::from(code)
}

/// The format of `--comm-timeline`, from the file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TimelineFormat {
    /// Chrome trace events.
    Json,
    Svg,
}

impl TimelineFormat {
    fn from_path(path: &str) -> Result<Self, String> {
        let ext = std::path::Path::new(path)
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("json") => Ok(TimelineFormat::Json),
            Some("svg") => Ok(TimelineFormat::Svg),
            _ => Err(format!(
                "--comm-timeline: cannot tell the format of '{path}': expected a file ending in .json (Chrome trace events) or .svg"
            )),
        }
    }
}

/// What the analyses of each chunk add to (`--comm-report`, `--comm-timeline`).
struct Analyses<'a> {
    report: &'a mut commlir_passes::analysis::report::Report,
    timeline: &'a mut TimelineView,
}

/// Everything the command line asks for, besides the pipeline.
struct Config {
    input: String,
    output: String,
    split_marker: Option<String>,
    output_split_marker: String,
    verify_diagnostics: bool,
    allow_unregistered: bool,
    verify_after_parse: bool,
    print: PrintOptions,
    timing: bool,
    statistics: bool,
    comm_report: Option<String>,
    /// `--comm-timeline`: the file and its format.
    comm_timeline: Option<(String, TimelineFormat)>,
    /// `--machine`: the machine of the analyses (`None`: the module's, else the default).
    machine: Option<commlir_passes::analysis::cost::Machine>,
    /// Leak each chunk's IR instead of freeing it (the process is about to exit).
    disable_free: bool,
}

fn run(args: Vec<OsString>, disable_free: bool) -> u8 {
    let registry = PassRegistry::global();
    let cmd = cli::command(registry);
    let args = cli::normalize_args(&cmd, args);
    let matches = match cmd.try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 1 } else { 0 };
        }
    };
    if matches.get_flag("show-dialects") {
        let names: Vec<&str> = Registry::global()
            .dialects()
            .iter()
            .map(|(n, _, _)| *n)
            .collect();
        println!("Available Dialects: {}", names.join(", "));
        return 0;
    }
    if matches.get_flag("list-passes") {
        print!("{}", cli::list_passes(registry));
        return 0;
    }
    if matches.get_flag("list-machines") {
        print!("{}", commlir_passes::analysis::machine::list());
        return 0;
    }
    let flag = |n: &str| matches.get_flag(n);
    let strings = |n: &str| -> Vec<String> {
        matches
            .get_many::<String>(n)
            .map(|v| v.cloned().collect())
            .unwrap_or_default()
    };
    let mut config = Config {
        input: matches
            .get_one::<String>("input")
            .cloned()
            .unwrap_or_else(|| "-".into()),
        output: matches
            .get_one::<String>("output")
            .cloned()
            .unwrap_or_else(|| "-".into()),
        split_marker: matches.get_one::<String>("split-input-file").cloned(),
        comm_report: matches.get_one::<String>("comm-report").cloned(),
        comm_timeline: None,
        machine: None,
        output_split_marker: matches
            .get_one::<String>("output-split-marker")
            .cloned()
            .unwrap_or_default(),
        verify_diagnostics: flag("verify-diagnostics"),
        allow_unregistered: flag("allow-unregistered-dialect"),
        verify_after_parse: !flag("mlir-very-unsafe-disable-verifier-on-parsing"),
        print: PrintOptions {
            generic: flag("mlir-print-op-generic"),
            debug_info: flag("mlir-print-debuginfo"),
        },
        timing: flag("mlir-timing"),
        statistics: flag("mlir-pass-statistics"),
        disable_free,
    };
    if let Some(spec) = matches.get_one::<String>("machine") {
        match commlir_passes::analysis::machine::load(spec) {
            Ok(m) => config.machine = Some(m),
            Err(e) => {
                eprint!("commlir-opt: {e}");
                return 1;
            }
        }
    }
    if let Some(path) = matches.get_one::<String>("comm-timeline") {
        match TimelineFormat::from_path(path) {
            Ok(format) => config.comm_timeline = Some((path.clone(), format)),
            Err(e) => {
                eprintln!("commlir-opt: error: {e}");
                return 1;
            }
        }
    }

    // The pipeline: either --pass-pipeline or the pass flags, not both (as mlir-opt).
    let pass_flags = cli::pass_flags(&matches, registry);
    let pipeline = match matches.get_one::<String>("pass-pipeline") {
        Some(_) if !pass_flags.is_empty() => {
            eprintln!("commlir-opt: error: '--pass-pipeline' option can't be used with individual pass options");
            return 1;
        }
        Some(text) => match parse_pipeline(text) {
            Ok(pm) => pm,
            Err(e) => {
                eprint!("{}", e.render(text));
                return 1;
            }
        },
        None => {
            let mut pm = OpPassManager::new("builtin.module");
            for (info, options) in &pass_flags {
                if let Err(e) = add_pass_with_options(&mut pm, info, options) {
                    let prefix = format!("--{}=", info.argument);
                    eprint!(
                        "{}",
                        e.shifted(prefix.len())
                            .render(&format!("{prefix}{options}"))
                    );
                    return 1;
                }
            }
            pm
        }
    };
    let ir_print = IrPrintConfig {
        before: strings("mlir-print-ir-before"),
        after: strings("mlir-print-ir-after"),
        before_all: flag("mlir-print-ir-before-all"),
        after_all: flag("mlir-print-ir-after-all"),
        after_change: flag("mlir-print-ir-after-change"),
        after_failure: flag("mlir-print-ir-after-failure"),
        module_scope: flag("mlir-print-ir-module-scope"),
        print: config.print.clone(),
    };
    for name in ir_print.before.iter().chain(&ir_print.after) {
        if registry.get(name).is_none() {
            eprintln!("commlir-opt: error: '{name}' does not refer to a registered pass");
            return 1;
        }
    }
    let mut pm = PassManager::from_pipeline(pipeline);
    pm.verify_each = matches
        .get_one::<bool>("verify-each")
        .copied()
        .unwrap_or(true);
    if flag("dump-pass-pipeline") {
        eprintln!(
            "Pass Manager with {} passes:\n{}",
            pm.pipeline().len(),
            pm.pipeline().to_pipeline_string()
        );
    }
    if ir_print.is_enabled() {
        pm.add_instrumentation(Box::new(IrPrinter::new(
            ir_print,
            Box::new(|s| eprint!("{s}")),
        )));
    }
    let timing = Rc::new(RefCell::new(TimingTree::new()));
    if config.timing {
        pm.add_instrumentation(Box::new(TimingInstrumentation::new(timing.clone())));
    }

    let code = process_input(&config, &mut pm, &timing);
    if config.statistics {
        eprint!("{}", pm.statistics_report());
    }
    if config.timing {
        eprint!("{}", timing.borrow().report());
    }
    code
}

fn read_input(path: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    let res = if path == "-" {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map(|_| ())
    };
    res.map(|_| bytes)
        .map_err(|e| format!("commlir-opt: error: could not open input file '{path}': {e}"))
}

/// Processes every chunk of the input; writes the output and returns the exit code.
fn process_input(config: &Config, pm: &mut PassManager, timing: &Rc<RefCell<TimingTree>>) -> u8 {
    let input = match read_input(&config.input) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let file_name = if config.input == "-" {
        "<stdin>".to_string()
    } else {
        config.input.clone()
    };
    // Valid UTF-8 (the usual case) is moved into the source manager and parsed from there; only
    // invalid input keeps its bytes apart, for the parser to point at the bad one.
    let (invalid_bytes, text) = match String::from_utf8(input) {
        Ok(text) => (None, text),
        Err(e) => {
            let bytes = e.into_bytes();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            (Some(bytes), text)
        }
    };
    let mut sm = SourceMgr::default();
    sm.add(SourceFile::new(file_name.clone(), text));
    let input: &[u8] = match &invalid_bytes {
        Some(bytes) => bytes,
        None => sm.get(&file_name).map_or(&[], |f| f.text.as_bytes()),
    };

    let chunks: Vec<Cow<[u8]>> = match &config.split_marker {
        Some(marker) => split::split_input(input, marker)
            .into_iter()
            .map(|c| Cow::Owned(c.bytes))
            .collect(),
        None => vec![Cow::Borrowed(input)],
    };
    let mut outputs: Vec<String> = Vec::new();
    let mut failed = false;
    let mut report = commlir_passes::analysis::report::Report {
        functions: Vec::new(),
    };
    let mut timeline = TimelineView::default();
    for chunk in &chunks {
        let mut analyses = Analyses {
            report: &mut report,
            timeline: &mut timeline,
        };
        let (output, diags) =
            process_chunk(config, pm, &file_name, chunk, &sm, timing, &mut analyses);
        if config.verify_diagnostics {
            let text = String::from_utf8_lossy(chunk);
            let problems = verify_diagnostics::verify(&text, &diags, &file_name, &sm);
            failed |= !problems.is_empty();
            for p in problems {
                eprint!("{p}");
            }
        } else {
            for d in &diags {
                eprint!("{}", d.rendered);
            }
            failed |= output.is_none();
        }
        outputs.push(output.unwrap_or_default());
    }
    let separator = format!("{}\n", config.output_split_marker);
    let write_all = |out: &mut dyn Write| -> std::io::Result<()> {
        for (i, text) in outputs.iter().enumerate() {
            if i > 0 {
                out.write_all(separator.as_bytes())?;
            }
            out.write_all(text.as_bytes())?;
        }
        out.flush()
    };
    if config.output == "-" {
        if write_all(&mut std::io::stdout().lock()).is_err() {
            return 1;
        }
    } else if !failed {
        let written = std::fs::File::create(&config.output).and_then(|f| {
            let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
            write_all(&mut out)
        });
        if let Err(e) = written {
            eprintln!(
                "commlir-opt: error: could not write output file '{}': {e}",
                config.output
            );
            return 1;
        }
    }
    if let Some(path) = &config.comm_report {
        if let Err(e) = std::fs::write(path, report.to_json() + "\n") {
            eprintln!("commlir-opt: error: could not write comm report '{path}': {e}");
            return 1;
        }
    }
    if let Some((path, format)) = &config.comm_timeline {
        let text = match format {
            TimelineFormat::Json => trace::to_chrome_json(&timeline),
            TimelineFormat::Svg => svg::to_svg(&timeline),
        };
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("commlir-opt: error: could not write comm timeline '{path}': {e}");
            return 1;
        }
    }
    if config.disable_free {
        std::mem::forget(outputs);
        std::mem::forget(sm);
    }
    u8::from(failed)
}

/// Parses, verifies, transforms and prints one chunk. Returns the printed module (`None` if
/// anything failed) and every diagnostic emitted, in order.
fn process_chunk(
    config: &Config,
    pm: &mut PassManager,
    file_name: &str,
    bytes: &[u8],
    sm: &SourceMgr,
    timing: &Rc<RefCell<TimingTree>>,
    analyses: &mut Analyses,
) -> (Option<String>, Vec<Diag>) {
    let mut ctx = Context::new();
    ctx.allow_unregistered = config.allow_unregistered;
    let result = process_chunk_in(&mut ctx, config, pm, file_name, bytes, sm, timing, analyses);
    if config.disable_free {
        std::mem::forget(ctx);
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn process_chunk_in(
    ctx: &mut Context,
    config: &Config,
    pm: &mut PassManager,
    file_name: &str,
    bytes: &[u8],
    sm: &SourceMgr,
    timing: &Rc<RefCell<TimingTree>>,
    analyses: &mut Analyses,
) -> (Option<String>, Vec<Diag>) {
    let plain = |ctx: &Context, ds: &[Diagnostic]| {
        ds.iter().map(|d| Diag::new(ctx, sm, d)).collect::<Vec<_>>()
    };

    let parsed = timing.borrow_mut().time("Parser", || {
        parse_source(ctx, file_name, bytes, &ParseOptions::default())
    });
    let module = match parsed {
        Ok(m) => m,
        Err(d) => return (None, plain(ctx, &[d])),
    };
    if config.verify_after_parse {
        let verified = timing
            .borrow_mut()
            .time("Verifier", || commlir_ir::verify::verify(ctx, module));
        if let Err(errors) = verified {
            return (None, plain(ctx, &errors));
        }
    }
    match pm.run(ctx, module) {
        Ok(diags) => {
            if config.comm_report.is_some() || config.comm_timeline.is_some() {
                // The analyses simulate on the machine the passes would pick by default.
                let machine = match commlir_passes::analysis::machine::for_op(
                    ctx,
                    module,
                    config.machine.as_ref(),
                ) {
                    Ok(m) => m,
                    Err(d) => return (None, plain(ctx, &[d])),
                };
                if config.comm_report.is_some() {
                    let r = commlir_passes::analysis::report::build(ctx, &machine, module);
                    analyses.report.functions.extend(r.functions);
                }
                if config.comm_timeline.is_some() {
                    let t = trace::build(ctx, &machine, module);
                    analyses.timeline.functions.extend(t.functions);
                }
            }
            let text = timing
                .borrow_mut()
                .time("Output", || print_op(ctx, module, &config.print));
            (Some(text), plain(ctx, &diags))
        }
        Err(diags) => (None, plain(ctx, &diags)),
    }
}
