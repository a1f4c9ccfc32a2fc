//! Pass pipelines from code and from MLIR's textual pipeline strings, run on a module.
//!
//! A [`Pipeline`] wraps the IR core's [`PassManager`] (a tree of pipelines anchored on op
//! names, as MLIR's) with what embedders need: parse a pipeline string with MLIR-shaped
//! errors, add registered passes by name or with typed options, add pass instances of your
//! own, and run with diagnostics rendered against the source text. The textual form of any
//! pipeline is [`Pipeline::to_pipeline_string`], so the two ways of building one meet.
//!
//! ```rust
//! use commlir::passes::schedule::iterative::IterOptions;
//! use commlir::{CollToCommOptions, Pipeline};
//!
//! // From code: function passes added to a module pipeline nest into `func.func(...)`.
//! let mut from_code = Pipeline::new();
//! from_code
//!     .coll_to_comm(&CollToCommOptions::default())?
//!     .reorder_peak_memory(&IterOptions { peak_memory_budget: 0.1, ..Default::default() })?
//!     .add("comm-sink-waits-iterative")?;
//! let text = from_code.to_pipeline_string();
//! assert!(text.starts_with("builtin.module(func.func(coll-to-comm{machine= one-shot-threshold=-1 symm-algo=auto},comm-reorder-peak-memory{"), "{text}");
//! assert!(text.contains("peak-memory-budget=1.000000e-01"), "{text}");
//!
//! // From a string: the same pipeline.
//! let from_string = Pipeline::parse(&text)?;
//! assert_eq!(from_string.to_pipeline_string(), text);
//!
//! // Errors are rendered as mlir-opt renders them, with a caret under the column.
//! let err = Pipeline::parse("builtin.module(func.func(no-such-pass))").unwrap_err();
//! assert!(err.to_string().contains("'no-such-pass' does not refer to a registered pass"), "{err}");
//! # Ok::<(), commlir::Diagnostics>(())
//! ```

use crate::diagnostics::Diagnostics;
use commlir_ir::pass::options::format_double;
use commlir_ir::pass::{
    parse_elements_into, parse_pipeline, Pass, PassInfo, PassInstrumentation, PassManager,
    PassOptions, PassRegistry, PipelineError,
};
use commlir_ir::{Context, OpId, SourceMgr};
use commlir_passes::coll_to_comm::{CollToCommOptions, COLL_TO_COMM};
use commlir_passes::comm_plan_pools::{PlanPoolsOptions, COMM_PLAN_POOLS};
use commlir_passes::comm_reorder_peak_memory::COMM_REORDER_PEAK_MEMORY;
use commlir_passes::comm_sink_waits_iterative::COMM_SINK_WAITS_ITERATIVE;
use commlir_passes::schedule::iterative::IterOptions;

/// A pass pipeline: passes and nested pipelines, anchored on `builtin.module` unless parsed
/// from a string with another anchor.
pub struct Pipeline {
    pm: PassManager,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pipeline({})", self.to_pipeline_string())
    }
}

impl Default for Pipeline {
    fn default() -> Self {
        Self::new()
    }
}

impl Pipeline {
    /// An empty pipeline running on a `builtin.module`.
    pub fn new() -> Pipeline {
        crate::register_all();
        Pipeline {
            pm: PassManager::new("builtin.module"),
        }
    }

    /// Parses a textual pipeline, e.g.
    /// `builtin.module(func.func(coll-to-comm,comm-sink-waits-iterative{max-moves=8}))`.
    /// Errors are rendered as MLIR renders them (`MLIR Textual PassPipeline Parser:1:COL:`).
    pub fn parse(text: &str) -> Result<Pipeline, Diagnostics> {
        crate::register_all();
        let opm = parse_pipeline(text).map_err(|e| pipeline_error(&e, text))?;
        Ok(Pipeline {
            pm: PassManager::from_pipeline(opm),
        })
    }

    /// Wraps an existing pass manager (e.g. one an instrumented driver set up).
    pub fn from_pass_manager(pm: PassManager) -> Pipeline {
        Pipeline { pm }
    }

    /// Appends pipeline elements given as text without the anchor: one or more registered
    /// passes with optional `{options}` and nested pipelines, comma-separated
    /// (`cse`, `comm-plan-pools{alignment=256}`, `func.func(dce),symbol-dce`). Function
    /// passes nest into `func.func(...)` on their own, as with mlir-opt's pass flags.
    pub fn add(&mut self, elements: &str) -> Result<&mut Self, Diagnostics> {
        parse_elements_into(self.pm.pipeline_mut(), elements)
            .map_err(|e| pipeline_error(&e, elements))?;
        Ok(self)
    }

    /// Appends the registered pass `info` with explicit options (start from
    /// [`PassInfo::default_options`] and [`PassOptions::set`] what differs).
    pub fn add_registered(
        &mut self,
        info: &'static PassInfo,
        options: PassOptions,
    ) -> Result<&mut Self, Diagnostics> {
        self.pm
            .pipeline_mut()
            .add_registered(info, options)
            .map_err(|m| pass_error(info.argument, m))?;
        Ok(self)
    }

    /// Appends a pass instance (your own [`Pass`], registered or not) with its default
    /// options.
    pub fn add_pass(&mut self, pass: Box<dyn Pass>) -> Result<&mut Self, Diagnostics> {
        let arg = pass.info().argument;
        self.pm
            .pipeline_mut()
            .add_pass(pass)
            .map_err(|m| pass_error(arg, m))?;
        Ok(self)
    }

    /// Appends `coll-to-comm` with typed options.
    pub fn coll_to_comm(&mut self, o: &CollToCommOptions) -> Result<&mut Self, Diagnostics> {
        let mut opts = COLL_TO_COMM.default_options();
        // -1: not given (the cost model decides); thresholds beyond i64 mean "every size".
        let threshold = o
            .one_shot_threshold
            .map_or(-1, |t| i64::try_from(t).unwrap_or(i64::MAX));
        set(&mut opts, "one-shot-threshold", &threshold.to_string())?;
        set(&mut opts, "symm-algo", o.symm_algo.as_str())?;
        self.add_registered(&COLL_TO_COMM, opts)
    }

    /// Appends `comm-reorder-peak-memory` with typed options.
    pub fn reorder_peak_memory(&mut self, o: &IterOptions) -> Result<&mut Self, Diagnostics> {
        let opts = iter_options(&COMM_REORDER_PEAK_MEMORY, o)?;
        self.add_registered(&COMM_REORDER_PEAK_MEMORY, opts)
    }

    /// Appends `comm-sink-waits-iterative` with typed options.
    pub fn sink_waits_iterative(&mut self, o: &IterOptions) -> Result<&mut Self, Diagnostics> {
        let opts = iter_options(&COMM_SINK_WAITS_ITERATIVE, o)?;
        self.add_registered(&COMM_SINK_WAITS_ITERATIVE, opts)
    }

    /// Appends `comm-plan-pools` with typed options.
    pub fn plan_pools(&mut self, o: &PlanPoolsOptions) -> Result<&mut Self, Diagnostics> {
        let mut opts = COMM_PLAN_POOLS.default_options();
        set(&mut opts, "alignment", &o.alignment.to_string())?;
        self.add_registered(&COMM_PLAN_POOLS, opts)
    }

    /// Whether to verify the IR after every pass (on by default, as mlir-opt's
    /// `--verify-each`).
    pub fn verify_each(&mut self, on: bool) -> &mut Self {
        self.pm.verify_each = on;
        self
    }

    /// Adds an instrumentation (IR printing, timing, your own hooks around each pass).
    pub fn add_instrumentation(&mut self, i: Box<dyn PassInstrumentation>) -> &mut Self {
        self.pm.add_instrumentation(i);
        self
    }

    /// The pipeline in MLIR's canonical textual form, every option with its value; parsing
    /// it back gives the same pipeline.
    pub fn to_pipeline_string(&self) -> String {
        self.pm.pipeline().to_pipeline_string()
    }

    /// The underlying pass manager.
    pub fn pass_manager(&self) -> &PassManager {
        &self.pm
    }

    /// The underlying pass manager, for what this type does not wrap.
    pub fn pass_manager_mut(&mut self) -> &mut PassManager {
        &mut self.pm
    }

    /// The statistics of every pass so far, in MLIR's "Pass statistics report" layout.
    pub fn statistics_report(&self) -> String {
        self.pm.statistics_report()
    }

    /// Runs the pipeline on `op` (usually a module). `Ok` carries the non-fatal diagnostics
    /// the passes emitted (remarks, warnings); `Err` every diagnostic, the errors among them.
    /// Diagnostics are rendered without source lines; [`Module::run`](crate::Module::run)
    /// renders them with the source text.
    pub fn run(&mut self, ctx: &mut Context, op: OpId) -> Result<Diagnostics, Diagnostics> {
        self.run_with_sources(ctx, op, &SourceMgr::default())
    }

    /// [`Pipeline::run`], rendering diagnostics against the files in `sources`.
    pub fn run_with_sources(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        sources: &SourceMgr,
    ) -> Result<Diagnostics, Diagnostics> {
        let result = self.pm.run(ctx, op);
        match result {
            Ok(ds) => Ok(Diagnostics::new(ctx, sources, &ds)),
            Err(ds) => Err(Diagnostics::new(ctx, sources, &ds)),
        }
    }
}

/// Every registered pass, sorted by argument (what `commlir-opt --list-passes` lists),
/// including those of any crate linked into the binary.
pub fn registered_passes() -> Vec<&'static PassInfo> {
    crate::register_all();
    PassRegistry::global().passes().collect()
}

fn pipeline_error(e: &PipelineError, text: &str) -> Diagnostics {
    Diagnostics::message(e.to_string(), e.render(text))
}

fn pass_error(pass: &str, message: String) -> Diagnostics {
    let rendered = format!("error: pass '{pass}': {message}\n");
    Diagnostics::message(message, rendered)
}

fn set(opts: &mut PassOptions, key: &str, value: &str) -> Result<(), Diagnostics> {
    opts.set(key, Some(value))
        .map_err(|m| Diagnostics::message(m.clone(), format!("error: {m}\n")))
}

/// The [`PassOptions`] of an iterative scheduling pass holding `o`.
fn iter_options(info: &'static PassInfo, o: &IterOptions) -> Result<PassOptions, Diagnostics> {
    let mut opts = info.default_options();
    let b = |v: bool| if v { "true" } else { "false" };
    set(
        &mut opts,
        "peak-memory-budget",
        &format_double(o.peak_memory_budget),
    )?;
    set(&mut opts, "extra-overlap", b(o.extra_overlap))?;
    set(
        &mut opts,
        "use-runtime-estimates",
        b(o.use_runtime_estimates),
    )?;
    set(
        &mut opts,
        "unsafe-collective-reorder",
        b(o.unsafe_collective_reorder),
    )?;
    set(&mut opts, "verify-memory", b(o.verify_memory))?;
    set(&mut opts, "remarks", b(o.remarks))?;
    set(&mut opts, "max-moves", &o.max_moves.to_string())?;
    set(&mut opts, "revert-if-slower", b(o.revert_if_slower))?;
    set(&mut opts, "annotate", b(o.annotate))?;
    Ok(opts)
}
