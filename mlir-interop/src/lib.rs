//! commlir-mlir-interop: commlir and real MLIR (MLIR 22, through melior 0.27).
//!
//! - [`import_mlir`]: any MLIR file, parsed and verified by real MLIR (upstream dialects in
//!   their custom syntax), into commlir IR; `commlir-translate --import-mlir`.
//! - [`export_mlir`]: commlir IR as MLIR that real MLIR has parsed and verified (commlir's
//!   dialects in the generic form); `commlir-translate --export-mlir`.
//! - [`commlir_pass`] / [`add_pipeline`]: commlir pipelines as MLIR external passes in a
//!   melior `PassManager`, from code or from a pipeline string mixing both sides' passes.
//!
//! With `shard-to-coll` and `arith-to-compute` (in `commlir-passes`), an upstream SPMD program
//! written with `shard` collectives on grids runs on the sim backend and, through NCCL, on
//! GPUs, where upstream lowers `shard` only to MPI:
//!
//! ```text
//! commlir-translate --import-mlir up.mlir \
//!   --pass-pipeline='builtin.module(shard-to-coll,func.func(arith-to-compute,coll-to-comm,comm-plan-pools))' \
//!   --emit=artifact -o up.commlir
//! ```
//!
//! The two sides meet in MLIR's generic form with every location (both print and read it
//! byte-exactly); types and attributes commlir does not model keep their text.

pub mod export;
pub mod external;
pub mod guard;
pub mod import;
pub mod session;

pub use export::{export_mlir, ExportOptions};
pub use external::{add_pipeline, commlir_pass, CommlirPass};
pub use import::import_mlir;
pub use session::{MlirDiagnostic, MlirSession};

/// Forces commlir's dialects and passes to be linked (see `commlir_passes::link`).
pub fn link() {
    commlir_passes::link();
}
