//! commlir-runtime: executes commlir programs.
//!
//! The [`sim`] backend is the reference semantics every compiler pass is checked against:
//! it runs a module on N simulated ranks in one process, deterministically and bit-exactly,
//! at every dialect level that still has tensor values (`coll`, `comm`, `symm`, `compute`,
//! `func`). Run a program before and after a pass, compare [`format_results`]: the lines
//! must be identical.
//!
//! ```no_run
//! # fn demo(ctx: &commlir_ir::Context, module: commlir_ir::OpId) {
//! use commlir_runtime::{format_results, sim, PrintMode};
//! let results = sim::run(ctx, module, &sim::SimOptions { ranks: 4, ..Default::default() });
//! match results {
//!     Ok(r) => print!("{}", format_results(&r, PrintMode::Digest)),
//!     Err(diag) => eprintln!("{diag}"),
//! }
//! # }
//! ```
//!
//! The crate depends on the IR and the dialects only (never on LLVM or MLIR), so the runner
//! can be deployed to GPU nodes on its own. The [`cuda`] backend runs a compiled artifact on
//! real GPUs (CUDA driver, cuBLAS and NCCL, all loaded at run time: no CUDA at build time).
//!
//! Modules: [`tensor`] and [`numeric`] (element storage and rounding), [`inputs`] (generated
//! arguments), [`tensor_file`] (arguments and results in safetensors files), [`output`]
//! (digests and result lines), [`error`] (runtime errors as
//! diagnostics), [`sim`] (interpreter, collective engine and scheduler), [`cuda`] (the GPU
//! runner: artifact loader, C ABI implementation, NCCL communicators, `--check` tolerances).

pub mod cuda;
pub mod error;
pub mod inputs;
pub mod numeric;
pub mod output;
pub mod sim;
pub mod tensor;
pub mod tensor_file;

pub use error::SimError;
pub use output::{digest, format_results, PrintMode, RankResults};
pub use sim::{find_entry, run, run_with_inputs, try_run, FileInputs, SimOptions};
pub use tensor::{Data, ElemType, Tensor, TensorType};
