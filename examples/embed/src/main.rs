//! `cargo run -p commlir-embed-example`: parses a program using Acme's fused op, lowers and
//! schedules it with commlir's passes, once with the pipeline built in code and once from
//! the pipeline string, and prints the IR and the communication report.

use commlir::{Diagnostics, Module};
use commlir_embed_example::{pipeline, PIPELINE, PROGRAM};
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprint!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Diagnostics> {
    let mut module = Module::parse("block.mlir", PROGRAM)?;
    let before = module.report();

    let mut p = pipeline()?;
    println!("// pipeline: {}", p.to_pipeline_string());
    module.run(&mut p)?;
    println!("{}", module.print());

    // The string form gives the same IR.
    let mut again = Module::parse("block.mlir", PROGRAM)?;
    again.run_pipeline(PIPELINE)?;
    assert_eq!(
        again.print(),
        module.print(),
        "code and string pipelines differ"
    );

    let after = module.report();
    let (b, a) = (&before.functions[0], &after.functions[0]);
    eprintln!(
        "makespan {:.0} -> {:.0} ns, exposed communication {:.0} -> {:.0} ns, peak memory {} -> {} bytes",
        b.makespan_ns,
        a.makespan_ns,
        b.exposed_comm_ns,
        a.exposed_comm_ns,
        b.peak_memory_bytes,
        a.peak_memory_bytes
    );
    println!("{}", after.to_json());
    Ok(())
}
