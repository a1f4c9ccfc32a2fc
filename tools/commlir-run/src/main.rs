//! `commlir-run`: executes a commlir program on N simulated ranks (`--backend sim`) and
//! prints one line per rank and result:
//! `rank R result I: <type> digest=<hex> sum=<float> max_abs=<float>`.
//!
//! Everything but argument handling lives in `commlir-runtime`; this binary parses, verifies
//! and prints diagnostics the way `commlir-opt` does, with exit code 1 on any error.

use clap::{Parser, ValueEnum};
use commlir_ir::{parser, verify, Context, SourceFile, SourceMgr};
use commlir_runtime::{format_results, sim, PrintMode};
use std::io::Read;
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
    /// The program (`-` reads standard input).
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
    /// Check the results: with `sim`, run twice and require identical results.
    #[arg(long)]
    check: bool,
}

/// Runs the tool; `Err` holds the rendered diagnostics.
fn run(args: &Args) -> Result<String, String> {
    if args.backend == Backend::Cuda {
        return Err("error: the cuda backend is not built yet; use --backend sim\n".into());
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
    let mode = match args.print {
        Print::Digest => PrintMode::Digest,
        Print::Full => PrintMode::Full,
    };
    let results = sim::run(&ctx, module, &opts).map_err(|d| sources.render(&ctx, &d))?;
    if args.check {
        let again = sim::run(&ctx, module, &opts).map_err(|d| sources.render(&ctx, &d))?;
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
            ExitCode::FAILURE
        }
    }
}
