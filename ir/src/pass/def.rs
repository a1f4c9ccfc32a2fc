//! What a pass is: its static description ([`PassInfo`]: argument, display name, summary,
//! options, statistics, the op it anchors on, a constructor), the [`Pass`] trait its instances
//! implement, and the [`PassEnv`] a running pass reports statistics and diagnostics through.

use super::analysis::AnalysisCache;
use super::options::{OptionDef, PassOptions};
use super::statistics::{StatisticDef, Statistics};
use crate::context::Context;
use crate::diag::Diagnostic;
use crate::entity::OpId;
use std::any::Any;

/// The op a pass runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// Any op (an op-agnostic pass, such as `cse`).
    Any,
    /// Only ops of this name (`builtin.module`, `func.func`, ...).
    Op(&'static str),
}

impl Anchor {
    /// Passes that run on a module.
    pub const MODULE: Anchor = Anchor::Op("builtin.module");
    /// Passes that run on each function.
    pub const FUNC: Anchor = Anchor::Op("func.func");

    /// The anchor as written in pipelines (`any` for op-agnostic passes).
    pub fn name(self) -> &'static str {
        match self {
            Anchor::Any => "any",
            Anchor::Op(n) => n,
        }
    }
}

/// Builds a pass instance from its parsed options. An `Err` is an explanation of why the
/// option combination is invalid (reported as a pipeline error).
pub type PassCtor = fn(&PassOptions) -> Result<Box<dyn Pass>, String>;

/// The static description of a pass, registered with [`register_pass!`](crate::register_pass).
#[derive(Debug)]
pub struct PassInfo {
    /// The name used in pipelines and as a command-line flag (`cse`).
    pub argument: &'static str,
    /// The display name used in reports and IR dumps (`CSE`).
    pub name: &'static str,
    /// One line for `--help` and `--list-passes`.
    pub summary: &'static str,
    /// Longer documentation (for the generated docs).
    pub description: &'static str,
    pub anchor: Anchor,
    pub options: &'static [OptionDef],
    pub statistics: &'static [StatisticDef],
    pub create: PassCtor,
}

impl PassInfo {
    /// Every option at its default.
    pub fn default_options(&'static self) -> PassOptions {
        PassOptions::defaults(self.options)
    }

    /// Looks an option declaration up by name.
    pub fn option(&self, name: &str) -> Option<&'static OptionDef> {
        self.options.iter().find(|o| o.name == name)
    }
}

/// What a running pass can report besides its result: statistics and diagnostics that do not
/// stop the pipeline (warnings, remarks, notes, or errors emitted before failing).
pub struct PassEnv<'a> {
    pub(crate) stats: &'a mut Statistics,
    pub(crate) diagnostics: &'a mut Vec<Diagnostic>,
    pub(crate) root: OpId,
    /// Set by [`PassEnv::mark_unchanged`].
    pub(crate) unchanged: bool,
    /// Set by [`PassEnv::mark_reordered_only`].
    pub(crate) reordered_only: bool,
    /// The run's analysis cache (`None` for a pass run by hand: nothing is cached).
    pub(crate) analyses: Option<&'a mut AnalysisCache>,
}

impl<'a> PassEnv<'a> {
    /// An environment writing into the given statistics and diagnostic list (for running a
    /// pass by hand, e.g. in tests).
    pub fn new(
        stats: &'a mut Statistics,
        diagnostics: &'a mut Vec<Diagnostic>,
        root: OpId,
    ) -> Self {
        PassEnv {
            stats,
            diagnostics,
            root,
            unchanged: false,
            reordered_only: false,
            analyses: None,
        }
    }

    /// Adds `n` to the declared statistic `name`.
    pub fn add_stat(&mut self, name: &str, n: u64) {
        self.stats.add(name, n);
    }

    /// Emits a diagnostic without failing the pass.
    pub fn emit(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }

    /// Declares that this run left the IR exactly as it found it (MLIR's
    /// `markAllAnalysesPreserved`), so the pass manager skips verifying it again. Only a
    /// truthful claim is allowed: an op moved and moved back, or an attribute set to the value
    /// it had, is fine; anything else must leave the default ("changed"), which is always
    /// verified. Debug builds check the claim against a fingerprint of the IR.
    pub fn mark_unchanged(&mut self) {
        self.unchanged = true;
    }

    /// Whether [`PassEnv::mark_unchanged`] was called in this run.
    pub fn is_marked_unchanged(&self) -> bool {
        self.unchanged
    }

    /// Declares that this run only moved ops within their blocks: the same ops, with the same
    /// operands, results, attributes, properties, locations and regions, in the same blocks,
    /// possibly in another order. The pass manager then verifies only what a permutation can
    /// break ([`verify_order`](crate::verify::verify_order): dominance, terminator placement
    /// and the ops whose verifier reads the order of others), with the diagnostics the full
    /// verifier would give. [`PassEnv::mark_unchanged`] takes precedence when both are called.
    /// Debug builds check the claim against an order-insensitive fingerprint of the IR.
    pub fn mark_reordered_only(&mut self) {
        self.reordered_only = true;
    }

    /// Whether [`PassEnv::mark_reordered_only`] was called in this run.
    pub fn is_marked_reordered_only(&self) -> bool {
        self.reordered_only
    }

    /// An analysis of `op` a previous pass of this run stored and nothing has invalidated
    /// since ([`AnalysisCache`]); it describes the IR as it is now.
    pub fn cached_analysis<T: Any>(&self, op: OpId) -> Option<&T> {
        self.analyses.as_deref().and_then(|a| a.get(op))
    }

    /// Takes a cached analysis out (see [`PassEnv::cached_analysis`]), to use by value and
    /// store back with [`PassEnv::cache_analysis`] if it still holds after the pass.
    pub fn take_cached_analysis<T: Any>(&mut self, op: OpId) -> Option<T> {
        self.analyses.as_deref_mut().and_then(|a| a.take(op))
    }

    /// Stores an analysis of `op` for later passes. The pass promises it describes the IR as
    /// the pass leaves it (store it after the last change); the pass manager drops it when a
    /// later pass changes `op`, an op nested in it or one enclosing it.
    pub fn cache_analysis<T: Any>(&mut self, op: OpId, value: T) {
        if let Some(a) = self.analyses.as_deref_mut() {
            a.insert(op, value);
        }
    }

    /// The top-level op the whole pipeline runs on (usually the module).
    pub fn root(&self) -> OpId {
        self.root
    }
}

/// A pass instance. The pass manager calls [`Pass::run`] once per op the pass is anchored
/// on; statistics go through the [`PassEnv`]. Returning `Err` fails the pipeline with that
/// diagnostic (MLIR's `signalPassFailure` plus the error).
pub trait Pass {
    /// The pass's static description.
    fn info(&self) -> &'static PassInfo;

    /// Runs on `op`, an op matching the pass's anchor.
    fn run(&mut self, ctx: &mut Context, op: OpId, env: &mut PassEnv<'_>)
        -> Result<(), Diagnostic>;
}

/// Declares a [`PassInfo`] and registers it globally, so that it is available by name in
/// pipelines and as a `commlir-opt` flag from any crate linked into the binary.
///
/// ```ignore
/// commlir_ir::register_pass!(pub CSE = PassInfo {
///     argument: "cse",
///     name: "CSE",
///     summary: "Eliminate common sub-expressions",
///     description: "",
///     anchor: Anchor::Any,
///     options: &[],
///     statistics: &[],
///     create: |_| Ok(Box::new(Cse)),
/// });
/// ```
#[macro_export]
macro_rules! register_pass {
    ($(#[$m:meta])* $vis:vis $id:ident = $def:expr) => {
        $(#[$m])*
        $vis static $id: $crate::pass::PassInfo = $def;
        $crate::inventory::submit! { $crate::pass::registry::PassRegistration(&$id) }
    };
}
