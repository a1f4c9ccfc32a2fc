//! The pass manager: a tree of pipelines, each anchored on an op name (or `any`), holding
//! passes and nested pipelines, as MLIR's `OpPassManager`. A nested pipeline runs on every op
//! of its anchor directly inside the regions of the op its parent runs on.
//!
//! Passes are added with implicit nesting (mlir-opt's behaviour for pass flags): a pass
//! anchored on `func.func` added to a module pipeline goes into a `func.func(...)` pipeline.

use super::def::{Anchor, Pass, PassEnv, PassInfo};
use super::instrumentation::{PassInstrumentation, PassRef};
use super::options::PassOptions;
use super::statistics::{report_banner, Statistics};
use crate::context::Context;
use crate::diag::Diagnostic;
use crate::entity::OpId;

/// One pass in a pipeline, with its options and accumulated statistics.
pub struct PassEntry {
    pub info: &'static PassInfo,
    pub options: PassOptions,
    pub stats: Statistics,
    pass: Box<dyn Pass>,
    id: usize,
}

impl std::fmt::Debug for PassEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PassEntry({})", self.info.argument)
    }
}

/// An element of a pipeline.
#[derive(Debug)]
pub enum PipelineElement {
    Pass(PassEntry),
    Nested(OpPassManager),
}

/// A pipeline anchored on one op name (or `any`).
#[derive(Debug)]
pub struct OpPassManager {
    anchor: String,
    elements: Vec<PipelineElement>,
    id: usize,
}

impl OpPassManager {
    /// An empty pipeline running on ops named `anchor` (`any` for every op).
    pub fn new(anchor: impl Into<String>) -> Self {
        OpPassManager {
            anchor: anchor.into(),
            elements: Vec::new(),
            id: 0,
        }
    }

    /// The op name this pipeline runs on.
    pub fn anchor(&self) -> &str {
        &self.anchor
    }

    /// The elements, in order.
    pub fn elements(&self) -> &[PipelineElement] {
        &self.elements
    }

    /// Number of top-level elements (a nested pipeline counts as one, as in MLIR).
    pub fn len(&self) -> usize {
        self.elements.len()
    }

    /// Whether the pipeline has no elements.
    pub fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }

    /// Appends a new nested pipeline on `anchor` and returns it.
    pub fn nest(&mut self, anchor: impl Into<String>) -> &mut OpPassManager {
        self.elements
            .push(PipelineElement::Nested(OpPassManager::new(anchor)));
        match self.elements.last_mut() {
            Some(PipelineElement::Nested(pm)) => pm,
            _ => unreachable!("just pushed a nested pipeline"),
        }
    }

    /// Adds a pass built with its default options.
    pub fn add_pass(&mut self, pass: Box<dyn Pass>) -> Result<(), String> {
        let info = pass.info();
        self.add_entry(PassEntry {
            info,
            options: info.default_options(),
            stats: Statistics::new(info.statistics),
            pass,
            id: 0,
        })
    }

    /// Builds a registered pass from `options` and adds it.
    pub fn add_registered(
        &mut self,
        info: &'static PassInfo,
        options: PassOptions,
    ) -> Result<(), String> {
        let pass = (info.create)(&options)?;
        self.add_entry(PassEntry {
            info,
            options,
            stats: Statistics::new(info.statistics),
            pass,
            id: 0,
        })
    }

    fn add_entry(&mut self, entry: PassEntry) -> Result<(), String> {
        let wanted = match entry.info.anchor {
            Anchor::Any => None,
            Anchor::Op(name) if name == self.anchor => None,
            Anchor::Op(name) => Some(name),
        };
        let Some(wanted) = wanted else {
            self.elements.push(PipelineElement::Pass(entry));
            return Ok(());
        };
        // Only containers nest implicitly; putting a module pass inside a function pipeline
        // is a mistake worth reporting.
        if self.anchor != "builtin.module" && self.anchor != "any" {
            return Err(format!(
                "can't add pass '{}' restricted to '{wanted}' to a pipeline anchored on '{}'",
                entry.info.argument, self.anchor
            ));
        }
        match self.elements.last_mut() {
            Some(PipelineElement::Nested(pm)) if pm.anchor == wanted => pm.add_entry(entry),
            _ => self.nest(wanted).add_entry(entry),
        }
    }

    /// The pipeline in MLIR's canonical textual form: `anchor(p1,p2{opt=1},nested(p3))`,
    /// every option printed with its value.
    pub fn to_pipeline_string(&self) -> String {
        let mut out = String::new();
        self.print_into(&mut out);
        out
    }

    fn print_into(&self, out: &mut String) {
        out.push_str(&self.anchor);
        out.push('(');
        for (i, e) in self.elements.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match e {
                PipelineElement::Pass(p) => {
                    out.push_str(p.info.argument);
                    if !p.options.is_empty() {
                        out.push('{');
                        out.push_str(&p.options.to_option_string());
                        out.push('}');
                    }
                }
                PipelineElement::Nested(pm) => pm.print_into(out),
            }
        }
        out.push(')');
    }

    /// Numbers pipelines and passes in pre-order, so instrumentations can key on them.
    fn number(&mut self, next: &mut usize) {
        self.id = *next;
        *next += 1;
        for e in &mut self.elements {
            match e {
                PipelineElement::Pass(p) => {
                    p.id = *next;
                    *next += 1;
                }
                PipelineElement::Nested(pm) => pm.number(next),
            }
        }
    }

    /// Whether this pipeline runs on ops named `name`.
    fn matches(&self, name: &str) -> bool {
        self.anchor == "any" || self.anchor == name
    }

    fn render_statistics(&self, indent: usize, out: &mut String) {
        for e in &self.elements {
            match e {
                PipelineElement::Pass(p) => {
                    out.push_str(&format!("{:indent$}{}\n", "", p.info.name));
                    p.stats.render(indent + 2, out);
                }
                PipelineElement::Nested(pm) => {
                    out.push_str(&format!("{:indent$}'{}' Pipeline\n", "", pm.anchor));
                    pm.render_statistics(indent + 2, out);
                }
            }
        }
    }
}

/// Shared state of one run: what the recursion needs besides the pipeline itself.
struct RunState<'a> {
    instrumentations: &'a mut [Box<dyn PassInstrumentation>],
    verify_each: bool,
    root: OpId,
    diagnostics: Vec<Diagnostic>,
    /// What passes of this run computed for later ones (`analysis.rs`).
    analyses: super::analysis::AnalysisCache,
}

/// The top-level pass manager: a root pipeline plus run-wide settings and instrumentations.
pub struct PassManager {
    root: OpPassManager,
    /// Verify the IR after each pass (mlir-opt's `--verify-each`, on by default).
    pub verify_each: bool,
    instrumentations: Vec<Box<dyn PassInstrumentation>>,
}

impl std::fmt::Debug for PassManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PassManager({})", self.root.to_pipeline_string())
    }
}

impl PassManager {
    /// A pass manager whose root pipeline runs on ops named `anchor`.
    pub fn new(anchor: impl Into<String>) -> Self {
        Self::from_pipeline(OpPassManager::new(anchor))
    }

    /// A pass manager around an existing pipeline (e.g. a parsed one).
    pub fn from_pipeline(root: OpPassManager) -> Self {
        PassManager {
            root,
            verify_each: true,
            instrumentations: Vec::new(),
        }
    }

    /// The root pipeline.
    pub fn pipeline(&self) -> &OpPassManager {
        &self.root
    }

    /// The root pipeline, for adding passes.
    pub fn pipeline_mut(&mut self) -> &mut OpPassManager {
        &mut self.root
    }

    /// Adds an instrumentation; hooks run in the order instrumentations were added.
    pub fn add_instrumentation(&mut self, i: Box<dyn PassInstrumentation>) {
        self.instrumentations.push(i);
    }

    /// Runs the pipeline on `op`. `Ok` carries the non-fatal diagnostics passes emitted;
    /// `Err` carries every diagnostic, the errors that failed the run among them.
    pub fn run(&mut self, ctx: &mut Context, op: OpId) -> Result<Vec<Diagnostic>, Vec<Diagnostic>> {
        if !self.root.matches(ctx.op_name(op)) {
            let msg = format!(
                "can't run '{}' pass manager on '{}' op",
                self.root.anchor,
                ctx.op_name(op)
            );
            return Err(vec![Diagnostic::error(ctx.op_loc(op), msg)]);
        }
        let mut next = 0;
        self.root.number(&mut next);
        let mut st = RunState {
            instrumentations: &mut self.instrumentations,
            verify_each: self.verify_each,
            root: op,
            diagnostics: Vec::new(),
            analyses: Default::default(),
        };
        let ok = run_pipeline(&mut self.root, ctx, op, &mut st);
        if ok {
            Ok(st.diagnostics)
        } else {
            Err(st.diagnostics)
        }
    }

    /// The statistics of every pass in MLIR's "Pass statistics report" layout (pipeline view:
    /// counters summed over every op a pass ran on).
    pub fn statistics_report(&self) -> String {
        let mut out = report_banner("... Pass statistics report ...");
        self.root.render_statistics(0, &mut out);
        out
    }
}

fn run_pipeline(
    pm: &mut OpPassManager,
    ctx: &mut Context,
    op: OpId,
    st: &mut RunState<'_>,
) -> bool {
    for element in &mut pm.elements {
        match element {
            PipelineElement::Pass(entry) => {
                if !run_pass(entry, ctx, op, st) {
                    return false;
                }
            }
            PipelineElement::Nested(nested) => {
                // Collect the targets first: a pass may not add or erase siblings of the op it
                // runs on, but collecting keeps the traversal independent of what it does.
                let mut targets = Vec::new();
                for &r in ctx.op_regions(op) {
                    for &b in ctx.region_blocks(r) {
                        targets
                            .extend(ctx.block_ops(b).filter(|&c| nested.matches(ctx.op_name(c))));
                    }
                }
                // Like mlir-opt's multi-threaded default, every target runs even when one
                // fails, so all their diagnostics are reported.
                let mut ok = true;
                // The children's passes leave `op`'s symbols alone: index them once for all
                // the lookups (and verifications) of the run, not once per child.
                let pin = !targets.is_empty() && ctx.is_symbol_table(op);
                if pin {
                    ctx.pin_symbol_table(op);
                }
                for t in targets {
                    if ctx.is_erased(t) {
                        continue;
                    }
                    let anchor = nested.anchor.clone();
                    let id = nested.id;
                    for i in st.instrumentations.iter_mut() {
                        i.before_pipeline(&anchor, id, ctx, t);
                    }
                    ok &= run_pipeline(nested, ctx, t, st);
                    for i in st.instrumentations.iter_mut() {
                        i.after_pipeline(&anchor, id, ctx, t);
                    }
                }
                if pin {
                    ctx.unpin_symbol_table(op);
                }
                if !ok {
                    return false;
                }
            }
        }
    }
    true
}

fn run_pass(entry: &mut PassEntry, ctx: &mut Context, op: OpId, st: &mut RunState<'_>) -> bool {
    let PassEntry {
        info,
        options,
        stats,
        pass,
        id,
    } = entry;
    let pref = PassRef {
        info,
        options,
        id: *id,
    };
    for i in st.instrumentations.iter_mut() {
        i.before_pass(pref, ctx, op);
    }
    // Debug builds hold passes to their "unchanged" and "reordered only" claims.
    #[cfg(debug_assertions)]
    let before = (
        super::fingerprint::fingerprint(ctx, op),
        super::fingerprint::unordered_fingerprint(ctx, op),
    );
    st.analyses.begin_pass();
    let (result, unchanged, reordered_only) = {
        let mut env = PassEnv {
            stats,
            diagnostics: &mut st.diagnostics,
            root: st.root,
            unchanged: false,
            reordered_only: false,
            analyses: Some(&mut st.analyses),
        };
        let r = pass.run(ctx, op, &mut env);
        (r, env.unchanged, env.reordered_only)
    };
    st.analyses.end_pass(ctx, op, !unchanged);
    #[cfg(debug_assertions)]
    if result.is_ok() {
        if unchanged {
            assert_eq!(
                before.0,
                super::fingerprint::fingerprint(ctx, op),
                "pass '{}' marked the IR unchanged but changed it",
                info.argument
            );
        } else if reordered_only {
            assert_eq!(
                before.1,
                super::fingerprint::unordered_fingerprint(ctx, op),
                "pass '{}' marked the IR reordered-only but changed it",
                info.argument
            );
        }
    }
    if let Err(d) = result {
        st.diagnostics.push(d);
        for i in st.instrumentations.iter_mut() {
            i.after_pass_failed(pref, ctx, op);
        }
        return false;
    }
    for i in st.instrumentations.iter_mut() {
        i.after_pass(pref, ctx, op);
    }
    // IR a pass left as it found it was verified already (after the previous pass, or by
    // whoever handed it to the pass manager), so it is not verified again; IR it only
    // reordered needs only the checks a permutation can fail.
    if st.verify_each && !unchanged {
        for i in st.instrumentations.iter_mut() {
            i.before_verify(ctx, op);
        }
        let verified = if reordered_only {
            crate::verify::verify_order(ctx, op)
        } else {
            crate::verify::verify(ctx, op)
        };
        for i in st.instrumentations.iter_mut() {
            i.after_verify(ctx, op);
        }
        if let Err(errors) = verified {
            st.diagnostics.extend(errors);
            return false;
        }
    }
    true
}
