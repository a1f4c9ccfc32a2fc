//! Hooks around pass execution (MLIR's `PassInstrumentation`) and the IR-printing
//! instrumentation behind `--mlir-print-ir-before/after[-all|-change|-failure]`.

use super::def::PassInfo;
use super::fingerprint::fingerprint;
use super::options::PassOptions;
use crate::context::Context;
use crate::entity::OpId;
use crate::printer::{print_op, PrintOptions};

/// The pass a hook is about: its description, options and a number that is unique within the
/// pipeline (so that two instances of the same pass can be told apart).
#[derive(Clone, Copy, Debug)]
pub struct PassRef<'a> {
    pub info: &'static PassInfo,
    pub options: &'a PassOptions,
    pub id: usize,
}

/// Callbacks the pass manager invokes around pipelines, passes and verification. Every hook
/// has an empty default so an instrumentation implements only what it needs.
pub trait PassInstrumentation {
    /// Before a nested pipeline anchored on `anchor` runs on `op`.
    fn before_pipeline(&mut self, _anchor: &str, _id: usize, _ctx: &Context, _op: OpId) {}
    /// After a nested pipeline ran on `op` (successfully or not).
    fn after_pipeline(&mut self, _anchor: &str, _id: usize, _ctx: &Context, _op: OpId) {}
    /// Before a pass runs on `op`.
    fn before_pass(&mut self, _pass: PassRef<'_>, _ctx: &Context, _op: OpId) {}
    /// After a pass succeeded on `op`.
    fn after_pass(&mut self, _pass: PassRef<'_>, _ctx: &Context, _op: OpId) {}
    /// After a pass failed on `op`.
    fn after_pass_failed(&mut self, _pass: PassRef<'_>, _ctx: &Context, _op: OpId) {}
    /// Before the verifier runs on `op` after a pass.
    fn before_verify(&mut self, _ctx: &Context, _op: OpId) {}
    /// After the verifier ran on `op`.
    fn after_verify(&mut self, _ctx: &Context, _op: OpId) {}
}

/// Which passes to print the IR around.
#[derive(Clone, Debug, Default)]
pub struct IrPrintConfig {
    /// Pass arguments to print before.
    pub before: Vec<String>,
    /// Pass arguments to print after.
    pub after: Vec<String>,
    pub before_all: bool,
    pub after_all: bool,
    /// Print after a pass only if it changed the IR.
    pub after_change: bool,
    /// Print after a pass that failed.
    pub after_failure: bool,
    /// Print the whole top-level op rather than the op the pass ran on.
    pub module_scope: bool,
    pub print: PrintOptions,
}

impl IrPrintConfig {
    /// Whether any printing is requested.
    pub fn is_enabled(&self) -> bool {
        self.before_all
            || self.after_all
            || self.after_failure
            || !self.before.is_empty()
            || !self.after.is_empty()
    }
    fn prints_before(&self, argument: &str) -> bool {
        self.before_all || self.before.iter().any(|a| a == argument)
    }
    fn prints_after(&self, argument: &str) -> bool {
        self.after_all || self.after.iter().any(|a| a == argument)
    }
}

/// Prints the IR around passes, in MLIR's format:
/// `// -----// IR Dump After CSE (cse) //----- //` followed by the op.
pub struct IrPrinter {
    config: IrPrintConfig,
    sink: Box<dyn FnMut(&str)>,
    fingerprints: Vec<u64>,
}

impl IrPrinter {
    /// Prints into `sink` (the driver passes one writing to stderr).
    pub fn new(config: IrPrintConfig, sink: Box<dyn FnMut(&str)>) -> Self {
        IrPrinter {
            config,
            sink,
            fingerprints: Vec::new(),
        }
    }

    fn dump(&mut self, when: &str, pass: PassRef<'_>, ctx: &Context, op: OpId) {
        let mut target = op;
        if self.config.module_scope {
            while let Some(p) = ctx.parent_op(target) {
                target = p;
            }
        }
        let mut text = format!(
            "// -----// IR Dump {when} {} ({}) //----- //\n",
            pass.info.name, pass.info.argument
        );
        text.push_str(&print_op(ctx, target, &self.config.print));
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push('\n');
        (self.sink)(&text);
    }
}

impl PassInstrumentation for IrPrinter {
    fn before_pass(&mut self, pass: PassRef<'_>, ctx: &Context, op: OpId) {
        if self.config.after_change {
            self.fingerprints.push(fingerprint(ctx, op));
        }
        if self.config.prints_before(pass.info.argument) {
            self.dump("Before", pass, ctx, op);
        }
    }

    fn after_pass(&mut self, pass: PassRef<'_>, ctx: &Context, op: OpId) {
        let before = if self.config.after_change {
            self.fingerprints.pop()
        } else {
            None
        };
        if !self.config.prints_after(pass.info.argument) {
            return;
        }
        if before.is_some_and(|fp| fp == fingerprint(ctx, op)) {
            return;
        }
        self.dump("After", pass, ctx, op);
    }

    fn after_pass_failed(&mut self, pass: PassRef<'_>, ctx: &Context, op: OpId) {
        if self.config.after_change {
            self.fingerprints.pop();
        }
        if self.config.after_failure {
            self.dump("After Failed", pass, ctx, op);
        }
    }
}
