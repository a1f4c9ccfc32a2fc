//! `commlir-run`: executes a commlir program on N simulated ranks (`--backend sim`, a `.mlir`
//! file) or a compiled artifact on N GPUs (`--backend cuda`, a `.commlir` file from
//! `commlir-translate --emit=artifact`), and prints one line per rank and result:
//! `rank R result I: <type> digest=<hex> sum=<float> max_abs=<float>`.
//!
//! Everything but argument handling lives in `commlir-runtime`; this binary parses, verifies
//! and prints diagnostics the way `commlir-opt` does, with exit code 1 on any error.

use clap::{Parser, ValueEnum};
use commlir_ir::{parser, verify, Context, SourceFile, SourceMgr};
use commlir_runtime::{cuda, format_results, sim, tensor_file, PrintMode};
use std::io::Read;

mod calibrate_file;
mod profile_file;
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// CPU reference interpreter over in-process ranks.
    Sim,
    /// CUDA + NCCL on real GPUs.
    Cuda,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Print {
    /// One summary line per rank and result.
    Digest,
    /// The summary lines and every element.
    Full,
}

/// Run a commlir program on N ranks.
#[derive(Debug, Parser)]
#[command(name = "commlir-run", version)]
struct Args {
    /// The program (`-` reads standard input; ignored with `--nccl-baseline`).
    #[arg(default_value = "-")]
    file: String,
    /// Which backend executes the program.
    #[arg(long, value_enum, default_value = "sim")]
    backend: Backend,
    /// Number of ranks.
    #[arg(long, default_value_t = 2)]
    ranks: usize,
    /// The function to run (default: the only public function, else `main`, else the first).
    #[arg(long)]
    entry: Option<String>,
    /// Seed of the generated arguments.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// What to print for each result.
    #[arg(long, value_enum, default_value = "digest")]
    print: Print,
    /// Check the results: with `sim`, run twice and require identical results; with `cuda`,
    /// compare with the sim backend within a tolerance by element type.
    #[arg(long)]
    check: bool,
    /// Read the entry function's arguments from safetensors files instead of generating
    /// them: `{rank}` in the name stands for the rank (`in_{rank}.safetensors`), a name
    /// without it is one file for every rank. Tensors match arguments by their SSA name
    /// (`%x` → `x`) or by `arg{i}`; element type and shape must match exactly.
    #[arg(long, value_name = "PATTERN")]
    inputs: Option<String>,
    /// With `--inputs`: generate the arguments the files lack instead of failing.
    #[arg(long, requires = "inputs")]
    inputs_partial: bool,
    /// Write each rank's results to a safetensors file, as `result0`, `result1`, …, in their
    /// exact element types; `{rank}` in the name stands for the rank (required with more
    /// than one rank).
    #[arg(long, value_name = "PATTERN")]
    outputs: Option<String>,
    /// cuda: the source program the sim runs for `--check` when the artifact embeds none.
    #[arg(long, value_name = "FILE.mlir")]
    check_against: Option<String>,
    /// cuda: abort the NCCL communicators and fail after this many seconds.
    #[arg(long, default_value_t = 60)]
    timeout_s: u64,
    /// cuda: time this many calls of the program after the checked one (end to end), then as
    /// many again with CUDA events around every op (per-op times and collective bus bandwidth).
    #[arg(long, default_value_t = 0)]
    bench_iters: usize,
    /// cuda: untimed calls before the timed ones.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// cuda: ignore the artifact's argument/result slots (the program copies its arguments
    /// into the comm pool and its results out, as with a runner that knows no slots).
    #[arg(long)]
    no_slots: bool,
    /// cuda: after the warm-up calls capture one call as a CUDA graph (both streams) and
    /// replay it: the printed (and `--check`ed) results come from one replay, the timed calls
    /// are replays; the per-op pass stays on ordinary calls. Rejected with `--backend sim`
    /// and `--nccl-baseline`.
    #[arg(long)]
    cuda_graph: bool,
    /// cuda, with `--cuda-graph`: capture this many calls back to back in the timed graph
    /// (each replay then counts as that many calls), so that the per-call device time holds
    /// no graph-launch gap, as a benchmark capturing 100 calls in one graph measures it.
    #[arg(long, default_value_t = 1)]
    graph_calls: usize,
    /// cuda, with `--bench-iters`: write the per-op pass's measured timeline (each op's mean
    /// start and duration on its stream, per rank) as Chrome trace events, in the layout of
    /// `commlir-opt --comm-timeline=FILE.json`, to open side by side in Perfetto.
    #[arg(long, value_name = "FILE.json")]
    trace: Option<String>,
    /// Write each op's time as a profile (JSON) that `comm-apply-profile{file=FILE}` reads
    /// back into `cost_ns`: with `--backend sim` the cost model's times on the program's
    /// machine (its `commlir.machine`, else the default); with `--backend cuda` the per-op
    /// pass's measured times (needs `--bench-iters N`), averaged over the ranks.
    #[arg(long, value_name = "FILE.json")]
    profile: Option<String>,
    /// cuda, no program: measure the cost model's numbers on the GPUs (NCCL collectives by
    /// size on the `--ranks` GPUs, cuBLAS GEMMs, memory bandwidth, launch overhead, the
    /// slowdown of GEMMs and collectives run together) and write them as a machine file
    /// (docs/cost-model.md); with `--ranks 1` the collective keys come from the base machine.
    #[arg(long, value_name = "FILE.json")]
    calibrate: Option<String>,
    /// cuda, no program: raw NCCL baseline of these collectives (comma-separated:
    /// all_reduce, all_gather, reduce_scatter), `--bench-iters` back-to-back bf16 calls per
    /// size after `--warmup`, CUDA events around the loop, mean over ranks.
    #[arg(long, value_name = "OPS")]
    nccl_baseline: Option<String>,
    /// Sizes for `--nccl-baseline`, in MiB (comma-separated).
    #[arg(long, default_value = "1,4,16,64,256,1024")]
    sizes_mib: String,
    /// Buffers for `--nccl-baseline`: registered (ncclMemAlloc + ncclCommRegister, like
    /// commlir's pools), plain (cuMemAlloc, nccl-tests' default) or both.
    #[arg(long, default_value = "both")]
    buffers: String,
    /// With `--nccl-baseline`: also record a CUDA event on the stream after every call (what
    /// a compiled program adds for the wait of each collective).
    #[arg(long)]
    baseline_events: bool,
    /// cuda: `gpu` pins each rank's host thread to the CPUs local to its GPU (its NUMA node,
    /// from sysfs, within the process's cpuset), as NCCL pins its proxy threads; `none`
    /// leaves thread placement to the OS (e.g. under a launcher that binds).
    #[arg(long, value_enum, default_value_t = Affinity::Gpu)]
    cpu_affinity: Affinity,
    /// cuda: `on` registers symm_mem pools as NCCL symmetric windows
    /// (`ncclCommWindowRegister`, NCCL 2.27+; falls back to `ncclCommRegister` with a note
    /// where unavailable), so NCCL may run its symmetric-memory kernels on them; `off`
    /// registers them like nccl pools.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    symm_windows: OnOff,
    /// cuda: `on` maps every symm_mem pool on every rank of its group (CUDA VMM export and
    /// import, a signal pad per pool) and runs the symm ops as commlir's generated kernels
    /// (falls back to NCCL with a note where peers cannot be mapped); `off` runs them as
    /// NCCL collectives on the compute stream.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    symm_kernels: OnOff,
}

/// `--symm-windows`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
}

/// `--cpu-affinity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Affinity {
    Gpu,
    None,
}

/// Parses and verifies `text`; errors are rendered diagnostics.
fn load(ctx: &mut Context, name: &str, text: &str) -> Result<commlir_ir::OpId, String> {
    let mut sources = SourceMgr::default();
    sources.add(SourceFile::new(name, text.to_string()));
    let module = parser::parse_source(ctx, name, text.as_bytes(), &parser::ParseOptions::default())
        .map_err(|d| sources.render(ctx, &d))?;
    verify::verify(ctx, module).map_err(|errs| {
        errs.iter()
            .map(|d| sources.render(ctx, d))
            .collect::<String>()
    })?;
    Ok(module)
}

/// `--inputs`, `--inputs-partial`.
fn input_files(args: &Args) -> Option<tensor_file::InputFiles> {
    args.inputs.as_ref().map(|pattern| tensor_file::InputFiles {
        pattern: pattern.clone(),
        partial: args.inputs_partial,
    })
}

/// The names of the entry function's arguments in `text` (an artifact's embedded source, or
/// `--check-against`), for matching `--inputs` tensors; empty (only `arg{i}` matches) when
/// the source does not parse or has no such function.
fn source_arg_names(name: &str, text: &str, entry: Option<&str>) -> Vec<Option<String>> {
    commlir_dialects::link();
    let mut ctx = Context::new();
    let Ok(module) = parser::parse_source(
        &mut ctx,
        name,
        text.as_bytes(),
        &parser::ParseOptions::default(),
    ) else {
        return Vec::new();
    };
    sim::find_entry(&ctx, module, entry)
        .map(|f| tensor_file::entry_arg_names(&ctx, f, Some(text)))
        .unwrap_or_default()
}

/// `--backend cuda`: runs the artifact, optionally checks against the sim backend.
fn run_cuda(args: &Args, mode: PrintMode) -> Result<String, String> {
    let bytes = std::fs::read(&args.file)
        .map_err(|e| format!("error: cannot read '{}': {e}\n", args.file))?;
    let mut opts = cuda::CudaOptions {
        ranks: args.ranks,
        entry: args.entry.clone(),
        seed: args.seed,
        timeout: std::time::Duration::from_secs(args.timeout_s.max(1)),
        bench_iters: args.bench_iters,
        warmup: args.warmup,
        slots: !args.no_slots,
        cuda_graph: args.cuda_graph,
        graph_calls: args.graph_calls.max(1),
        inputs: input_files(args),
        arg_names: Vec::new(),
    };
    // The program's source: the manifest's embedded text, else --check-against. The sim
    // runs it for --check; --inputs reads the arguments' names from it.
    let source = if args.check || args.inputs.is_some() {
        let art = cuda::artifact::parse(&bytes).map_err(|e| format!("error: {e}\n"))?;
        match (&args.check_against, art.manifest.source) {
            (Some(f), _) => Some((
                f.clone(),
                std::fs::read_to_string(f).map_err(|e| format!("error: cannot read '{f}': {e}\n"))?,
            )),
            (None, Some(s)) => Some(("<artifact source>".to_string(), s)),
            (None, None) if args.check => {
                return Err("error: --check needs the program's source: this artifact embeds none, give --check-against FILE.mlir\n".into())
            }
            (None, None) => None,
        }
    } else {
        None
    };
    let manifest_entry = || cuda::artifact::parse(&bytes).ok().map(|a| a.manifest.entry);
    let entry_name = args.entry.clone().or_else(manifest_entry);
    if args.inputs.is_some() {
        if let Some((name, text)) = &source {
            opts.arg_names = source_arg_names(name, text, entry_name.as_deref());
        }
    }
    let run = cuda::run(&bytes, &opts).map_err(|e| format!("{e}\n"))?;
    if let Some(pattern) = &args.outputs {
        tensor_file::write_results(
            pattern,
            &run.results,
            entry_name.as_deref().unwrap_or_default(),
            run.world,
        )
        .map_err(|e| format!("error: {e}\n"))?;
    }
    eprintln!("{}", run.info);
    for n in &run.notes {
        eprintln!("note: {n}");
    }
    let mut out = format_results(&run.results, mode);
    if let Some(t) = run.seconds_per_call {
        out.push_str(&format!(
            "time: {:.3} us per call ({} timed calls after {} warm-up, slowest rank)\n",
            t * 1e6,
            args.bench_iters,
            args.warmup
        ));
        if let Some(e) = run.event_seconds_per_call {
            let what = if args.cuda_graph {
                format!(
                    "graph replays of {} captured call(s)",
                    args.graph_calls.max(1)
                )
            } else {
                "calls".to_string()
            };
            out.push_str(&format!(
                "time(events): {:.3} us per call (events around the {} back-to-back {what}, mean over ranks; host enqueue {:.3} us per call; slots: {} argument(s), {} result(s))\n",
                e * 1e6,
                args.bench_iters,
                run.enqueue_seconds_per_call.unwrap_or(0.0) * 1e6,
                run.slots_used.0,
                run.slots_used.1
            ));
        }
        if let Some([compute, comm]) = run.work_per_call {
            out.push_str(&format!(
                "work per call: {} on the compute stream, {comm} on the comm stream (kernel launches, GEMM and attention calls, copies, collectives; the rank issuing the most)\n",
                compute
            ));
        }
        if let Some((stream_ordered, held)) = run.device_memory {
            let mib = |b: u64| b as f64 / 1048576.0;
            out.push_str(&format!(
                "device memory: peak {:.1} MiB (rank using the most): {:.1} MiB stream-ordered allocations at their high-water mark over the timed calls + {:.1} MiB comm pools and arguments\n",
                mib(stream_ordered + held),
                mib(stream_ordered),
                mib(held)
            ));
        }
        if let Some(p) = &run.host_profile {
            out.push_str(&p.line());
            out.push('\n');
        }
        out.push_str(&cuda::format_op_times(&run.op_times));
    }
    if let Some(path) = &args.trace {
        let entry = args
            .entry
            .clone()
            .or_else(|| cuda::artifact::parse(&bytes).ok().map(|a| a.manifest.entry))
            .unwrap_or_default();
        let text = cuda::trace::chrome_trace(&entry, &run.op_times_by_rank);
        std::fs::write(path, text)
            .map_err(|e| format!("error: cannot write the trace '{path}': {e}\n"))?;
    }
    if let Some(path) = &args.profile {
        let entry = entry_name.clone().unwrap_or_default();
        let ops = cuda::op_profile::measured_ops(&run.op_times_by_rank);
        let text = profile_file::measured(&entry, &run.info, &ops).to_json();
        std::fs::write(path, text)
            .map_err(|e| format!("error: cannot write the profile '{path}': {e}\n"))?;
    }
    if let Some((name, text)) = source {
        commlir_dialects::link();
        let mut ctx = Context::new();
        let module = load(&mut ctx, &name, &text)?;
        let entry = args
            .entry
            .clone()
            .or_else(|| cuda::artifact::parse(&bytes).ok().map(|a| a.manifest.entry));
        let sim_opts = sim::SimOptions {
            ranks: run.world,
            entry,
            seed: args.seed,
        };
        let files = input_files(args);
        let inputs = files.as_ref().map(|files| sim::FileInputs {
            files,
            source: Some(&text),
        });
        let mut reference = sim::run_with_inputs(&ctx, module, &sim_opts, inputs)
            .map_err(|d| format!("error: the sim reference failed: {d}\n"))?;
        reference.retain(|r| run.results.iter().any(|g| g.rank == r.rank));
        let least = sim::find_entry(&ctx, module, sim_opts.entry.as_deref())
            .map(|f| cuda::check::least_precise_inputs(&ctx, f))
            .unwrap_or_default();
        let report = cuda::check::compare_with(&run.results, &reference, &least);
        for p in &report.problems {
            out.push_str(&format!("check: {p}\n"));
        }
        out.push_str(&report.summary());
        out.push('\n');
        if !report.passed() {
            print!("{out}");
            return Err("error: --check failed: the GPU results differ from the sim backend's beyond the tolerance\n".into());
        }
    }
    Ok(out)
}

/// `--nccl-baseline`: raw NCCL, one line per (buffers, collective, size).
fn run_baseline(args: &Args, ops: &str) -> Result<String, String> {
    let ops: Vec<String> = ops.split(',').map(|s| s.trim().to_string()).collect();
    let sizes = args
        .sizes_mib
        .split(',')
        .map(|s| s.trim().parse::<u64>().map(|m| m << 20))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("error: --sizes-mib: {e}\n"))?;
    let kinds: Vec<bool> = match args.buffers.as_str() {
        "registered" => vec![true],
        "plain" => vec![false],
        "both" => vec![true, false],
        b => return Err(format!("error: --buffers {b}: registered, plain or both\n")),
    };
    let iters = args.bench_iters.max(1);
    let rows = cuda::baseline::run(
        args.ranks,
        &ops,
        &sizes,
        iters,
        args.warmup,
        &kinds,
        args.baseline_events,
    )
    .map_err(|e| format!("{e}\n"))?;
    let mut out = String::new();
    for r in rows {
        out.push_str(&r.line());
        out.push_str(&format!(
            " ({iters} calls after {} warm-up, mean over ranks)\n",
            args.warmup
        ));
        if let Some(p) = &r.profile {
            out.push_str(&p.line());
            out.push('\n');
        }
    }
    Ok(out)
}

/// Runs the tool; `Err` holds the rendered diagnostics.
fn run(args: &Args) -> Result<String, String> {
    cuda::affinity::set_enabled(args.cpu_affinity == Affinity::Gpu);
    cuda::rank::set_symm_windows(args.symm_windows == OnOff::On);
    cuda::symm::set_peer_map(args.symm_kernels == OnOff::On);
    if args.graph_calls > 1 && !args.cuda_graph {
        return Err("error: --graph-calls needs --cuda-graph\n".into());
    }
    if args.cuda_graph && args.nccl_baseline.is_some() {
        return Err("error: --cuda-graph applies to programs, not to --nccl-baseline\n".into());
    }
    if args.cuda_graph && args.backend != Backend::Cuda {
        return Err(
            "error: --cuda-graph needs --backend cuda (the sim backend has no CUDA graphs)\n"
                .into(),
        );
    }
    if let Some(path) = &args.trace {
        let json = std::path::Path::new(path)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if !json {
            return Err(format!("error: --trace: cannot tell the format of '{path}': expected a file ending in .json (Chrome trace events)\n"));
        }
        if args.backend != Backend::Cuda || args.nccl_baseline.is_some() {
            return Err(
                "error: --trace needs --backend cuda and a program (it records the measured run)\n"
                    .into(),
            );
        }
        if args.bench_iters == 0 {
            return Err("error: --trace needs --bench-iters N (the per-op pass of N calls records the times)\n".into());
        }
    }
    if args.profile.is_some() {
        if args.nccl_baseline.is_some() {
            return Err("error: --profile needs a program (it records the program's ops)\n".into());
        }
        if args.backend == Backend::Cuda && args.bench_iters == 0 {
            return Err("error: --profile with --backend cuda needs --bench-iters N (the per-op pass of N calls measures the times)\n".into());
        }
    }
    if let Some(path) = &args.calibrate {
        if args.backend != Backend::Cuda {
            return Err("error: --calibrate needs --backend cuda (it measures the GPUs)\n".into());
        }
        if args.nccl_baseline.is_some() || args.profile.is_some() || args.trace.is_some() {
            return Err("error: --calibrate takes no program and no --nccl-baseline, --profile or --trace\n".into());
        }
        return calibrate_file::run(args.ranks, path);
    }
    if let Some(ops) = &args.nccl_baseline {
        return run_baseline(args, ops);
    }
    let mode = match args.print {
        Print::Digest => PrintMode::Digest,
        Print::Full => PrintMode::Full,
    };
    if args.backend == Backend::Cuda {
        return run_cuda(args, mode);
    }
    let text = if args.file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("error: cannot read standard input: {e}\n"))?;
        s
    } else {
        std::fs::read_to_string(&args.file)
            .map_err(|e| format!("error: cannot read '{}': {e}\n", args.file))?
    };
    let name = if args.file == "-" {
        "<stdin>"
    } else {
        args.file.as_str()
    };
    commlir_dialects::link();
    let mut ctx = Context::new();
    let mut sources = SourceMgr::default();
    sources.add(SourceFile::new(name, text.clone()));
    let module = parser::parse_source(
        &mut ctx,
        name,
        text.as_bytes(),
        &parser::ParseOptions::default(),
    )
    .map_err(|d| sources.render(&ctx, &d))?;
    verify::verify(&ctx, module).map_err(|errs| {
        errs.iter()
            .map(|d| sources.render(&ctx, d))
            .collect::<String>()
    })?;
    let opts = sim::SimOptions {
        ranks: args.ranks,
        entry: args.entry.clone(),
        seed: args.seed,
    };
    let files = input_files(args);
    let inputs = files.as_ref().map(|files| sim::FileInputs {
        files,
        source: Some(&text),
    });
    let results =
        sim::run_with_inputs(&ctx, module, &opts, inputs).map_err(|d| sources.render(&ctx, &d))?;
    if let Some(pattern) = &args.outputs {
        let entry = sim::find_entry(&ctx, module, args.entry.as_deref())
            .ok()
            .and_then(|f| ctx.symbol_name(f))
            .unwrap_or_default()
            .to_string();
        tensor_file::write_results(pattern, &results, &entry, args.ranks)
            .map_err(|e| format!("error: {e}\n"))?;
    }
    if let Some(path) = &args.profile {
        let text = profile_file::modelled(&ctx, module, args.entry.as_deref(), |d| {
            sources.render(&ctx, d)
        })?;
        std::fs::write(path, text)
            .map_err(|e| format!("error: cannot write the profile '{path}': {e}\n"))?;
    }
    if args.check {
        let again = sim::run_with_inputs(&ctx, module, &opts, inputs)
            .map_err(|d| sources.render(&ctx, &d))?;
        if again != results {
            return Err(
                "error: --check: two runs of the sim backend gave different results\n".into(),
            );
        }
    }
    Ok(format_results(&results, mode))
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Programs may nest deeply; the interpreter itself is iterative, but the parser and the
    // verifier get a generous stack.
    let worker = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || run(&args));
    let outcome = match worker {
        Ok(handle) => handle
            .join()
            .unwrap_or_else(|_| Err("error: internal error in commlir-run\n".into())),
        Err(e) => Err(format!("error: cannot start the worker thread: {e}\n")),
    };
    match outcome {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(diags) => {
            eprint!("{diags}");
            // A CUDA run whose watchdog abandoned its rank threads ends here, at once.
            commlir_runtime::cuda::crash::exit_if_abandoned(1);
            ExitCode::FAILURE
        }
    }
}
