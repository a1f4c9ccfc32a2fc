//! Routes `commlir-translate`'s modes: the code generation stages of
//! [`commlir_codegen::translate`] (`--emit=...`), and the MLIR bridge of
//! [`commlir_mlir_interop`]: `--import-mlir` (real MLIR reads the input; the result is
//! commlir IR, or any `--emit` stage of it) and `--export-mlir` (commlir IR out as MLIR that
//! real MLIR has parsed and verified).

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser};
use commlir_codegen::translate::{read_input, run_source, write_output, Args};
use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::pass::{parse_pipeline, PassManager};
use commlir_ir::printer::{print_op, PrintOptions};
use commlir_ir::{Context, Diagnostic, OpId, SourceFile, SourceMgr};
use commlir_mlir_interop::{export_mlir, import_mlir, ExportOptions};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "commlir-translate",
    about = "Translate commlir IR to runtime calls, NVPTX kernels, host LLVM IR and the runner artifact; read and write real MLIR"
)]
struct Cli {
    #[command(flatten)]
    base: Args,
    /// Read the input with real MLIR (any upstream dialect, custom syntax) into commlir IR;
    /// prints commlir IR unless `--emit` names a stage.
    #[arg(long = "import-mlir", conflicts_with = "export_mlir")]
    import_mlir: bool,
    /// Write commlir IR as MLIR that real MLIR parses and verifies.
    #[arg(long = "export-mlir")]
    export_mlir: bool,
    /// Print locations (import and export).
    #[arg(long = "mlir-print-debuginfo")]
    debug_info: bool,
    /// Print every op in the generic form (import and export).
    #[arg(long = "mlir-print-op-generic")]
    generic: bool,
}

/// The entry point of the binary.
pub fn main() -> ExitCode {
    commlir_mlir_interop::link();
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let emit_given = matches.value_source("emit") == Some(ValueSource::CommandLine);
    let result = if cli.import_mlir {
        import(&cli, emit_given)
    } else if cli.export_mlir {
        export(&cli)
    } else {
        read_input(&cli.base.file).and_then(|(name, text)| run_source(&cli.base, &name, &text))
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprint!("{msg}");
            if !msg.ends_with('\n') {
                eprintln!();
            }
            ExitCode::FAILURE
        }
    }
}

fn render(ctx: &Context, sources: &SourceMgr, ds: &[Diagnostic]) -> String {
    ds.iter().map(|d| sources.render(ctx, d)).collect()
}

fn run_pipeline(
    ctx: &mut Context,
    module: OpId,
    pipeline: &str,
    sources: &SourceMgr,
) -> Result<(), String> {
    let opm = parse_pipeline(pipeline).map_err(|e| e.render(pipeline))?;
    let mut pm = PassManager::from_pipeline(opm);
    pm.run(ctx, module)
        .map(|_| ())
        .map_err(|ds| render(ctx, sources, &ds))
}

fn import(cli: &Cli, emit_given: bool) -> Result<(), String> {
    let (name, text) = read_input(&cli.base.file)?;
    let mut sources = SourceMgr::default();
    sources.add(SourceFile::new(name.clone(), text.clone()));
    let mut ctx = Context::new();
    let module = import_mlir(&mut ctx, &name, &text).map_err(|ds| render(&ctx, &sources, &ds))?;
    // The pipeline runs here, where upstream ops are allowed, before any code generation.
    if let Some(p) = &cli.base.pipeline {
        run_pipeline(&mut ctx, module, p, &sources)?;
    }
    if emit_given {
        // Hand the program to the code generator as text, with its locations, so that its
        // diagnostics still point into the MLIR file.
        let ir = print_op(
            &ctx,
            module,
            &PrintOptions {
                generic: false,
                debug_info: true,
            },
        );
        let args = Args {
            file: cli.base.file.clone(),
            emit: cli.base.emit,
            output: cli.base.output.clone(),
            pipeline: None,
            entry: cli.base.entry.clone(),
            split_input_file: false,
            verify_diagnostics: false,
        };
        return run_source(&args, &format!("<commlir IR of {name}>"), &ir);
    }
    let out = print_op(
        &ctx,
        module,
        &PrintOptions {
            generic: cli.generic,
            debug_info: cli.debug_info,
        },
    );
    write_output(cli.base.output.as_deref(), out.as_bytes())
}

fn export(cli: &Cli) -> Result<(), String> {
    let (name, text) = read_input(&cli.base.file)?;
    let mut sources = SourceMgr::default();
    sources.add(SourceFile::new(name.clone(), text.clone()));
    let mut ctx = Context::new();
    // Upstream ops are welcome here: real MLIR verifies them on the way out.
    ctx.allow_unregistered = true;
    let module = parse_source(&mut ctx, &name, text.as_bytes(), &ParseOptions::default())
        .map_err(|d| render(&ctx, &sources, &[d]))?;
    commlir_ir::verify::verify(&ctx, module).map_err(|ds| render(&ctx, &sources, &ds))?;
    if let Some(p) = &cli.base.pipeline {
        run_pipeline(&mut ctx, module, p, &sources)?;
    }
    let out = export_mlir(
        &mut ctx,
        module,
        ExportOptions {
            debug_info: cli.debug_info,
            generic: cli.generic,
        },
    )
    .map_err(|ds| render(&ctx, &sources, &ds))?;
    write_output(cli.base.output.as_deref(), out.as_bytes())
}
