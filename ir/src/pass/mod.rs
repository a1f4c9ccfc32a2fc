//! The pass manager, the pass registry and MLIR's textual pipelines.
//!
//! - [`def`]: the [`Pass`] trait, the static [`PassInfo`] every pass declares, and the
//!   [`register_pass!`](crate::register_pass) macro that makes it known by name.
//! - [`options`] / [`statistics`]: declared options (typed, with defaults and help) and
//!   named counters.
//! - [`registry`]: every registered pass, found through `inventory`.
//! - [`pipeline`]: parsing `builtin.module(func.func(cse,p{opt=1}))` into an
//!   [`OpPassManager`]; printing is [`OpPassManager::to_pipeline_string`].
//! - [`manager`]: running pipelines with verification and instrumentation.
//! - [`instrumentation`], [`timing`], [`fingerprint`]: IR printing, timing reports and
//!   change detection.

pub mod analysis;
pub mod def;
pub mod fingerprint;
pub mod instrumentation;
pub mod manager;
pub mod options;
pub mod pipeline;
pub mod registry;
pub mod statistics;
pub mod timing;

pub use analysis::AnalysisCache;
pub use def::{Anchor, Pass, PassCtor, PassEnv, PassInfo};
pub use instrumentation::{IrPrintConfig, IrPrinter, PassInstrumentation, PassRef};
pub use manager::{OpPassManager, PassEntry, PassManager, PipelineElement};
pub use options::{OptionDef, OptionKind, OptionValue, PassOptions};
pub use pipeline::{add_pass_with_options, parse_elements_into, parse_pipeline, PipelineError};
pub use registry::PassRegistry;
pub use statistics::{StatisticDef, Statistics};
pub use timing::{TimingInstrumentation, TimingTree};

#[cfg(test)]
mod tests;
