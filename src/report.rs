//! The communication report (`commlir-opt --comm-report`) as a value: per function, peak
//! memory, compute / communication / exposed-communication time and makespan from the
//! two-stream timeline simulator, every collective with its timing, and the comm-buffer
//! pools. It is valid at every IR level (functional collectives, comm buffers, planned pools),
//! so it can be compared before and after a pipeline.
//!
//! ```rust
//! let mut module = commlir::Module::parse("r.mlir", r#"
//! coll.group @tp {size = 2 : i64}
//! func.func @f(%x: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
//!   %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<1024x1024xf32>
//!   %y = coll.wait_tensor %r : tensor<1024x1024xf32>
//!   return %y : tensor<1024x1024xf32>
//! }
//! "#)?;
//! let report = module.report();
//! let f = &report.functions[0];
//! assert_eq!(f.name, "f");
//! assert_eq!(f.collectives.len(), 1);
//! assert_eq!(f.collectives[0].op, "coll.all_reduce");
//! assert_eq!(f.collectives[0].bytes, 4 << 20);
//! // Nothing to overlap with: the whole all-reduce is exposed.
//! assert_eq!(f.exposed_comm_ns, f.comm_ns);
//! // The same report as `--comm-report` writes it.
//! assert!(report.to_json().contains("\"exposed_comm_ns\""));
//! # Ok::<(), commlir::Diagnostics>(())
//! ```

use commlir_ir::{Context, OpId};

pub use commlir_passes::analysis::cost::{Machine, H200_NVLINK};
pub use commlir_passes::analysis::report::{CollectiveReport, FunctionReport, PoolReport, Report};

/// The report of every function in `module` on the default machine ([`H200_NVLINK`], the
/// one `commlir-opt --comm-report` uses).
pub fn comm_report(ctx: &Context, module: OpId) -> Report {
    comm_report_on(ctx, &H200_NVLINK, module)
}

/// [`comm_report`] on another machine description.
pub fn comm_report_on(ctx: &Context, machine: &Machine, module: OpId) -> Report {
    commlir_passes::analysis::report::build(ctx, machine, module)
}

/// The report as the pretty-printed JSON `commlir-opt --comm-report=FILE` writes.
pub fn comm_report_json(ctx: &Context, module: OpId) -> String {
    comm_report(ctx, module).to_json()
}
