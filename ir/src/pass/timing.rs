//! Wall-clock timing of a run (`--mlir-timing`): a tree of named timers, merged by key (a
//! pass that runs on every function shows once, with the sum), reported in MLIR's "Execution
//! time report" layout. [`TimingInstrumentation`] feeds the tree from the pass manager; the
//! driver adds its own phases (parsing, output) to the same tree.

use super::instrumentation::{PassInstrumentation, PassRef};
use super::statistics::report_banner;
use crate::context::Context;
use crate::entity::OpId;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Node {
    key: String,
    name: String,
    total: Duration,
    children: Vec<usize>,
}

/// A tree of timers. Node 0 is the root; [`TimingTree::start`] opens a child of the innermost
/// open timer (reusing the child with the same key), [`TimingTree::stop`] closes it.
#[derive(Debug)]
pub struct TimingTree {
    nodes: Vec<Node>,
    open: Vec<(usize, Instant)>,
    created: Instant,
}

impl Default for TimingTree {
    fn default() -> Self {
        Self::new()
    }
}

impl TimingTree {
    /// An empty tree; the total time counts from now.
    pub fn new() -> Self {
        let root = Node {
            key: String::new(),
            name: "Total".into(),
            total: Duration::ZERO,
            children: Vec::new(),
        };
        TimingTree {
            nodes: vec![root],
            open: Vec::new(),
            created: Instant::now(),
        }
    }

    /// Starts timer `key` (displayed as `name`) under the innermost open one.
    pub fn start(&mut self, key: &str, name: &str) {
        let parent = self.open.last().map_or(0, |(n, _)| *n);
        let existing = self.nodes[parent]
            .children
            .iter()
            .copied()
            .find(|&c| self.nodes[c].key == key);
        let node = existing.unwrap_or_else(|| {
            self.nodes.push(Node {
                key: key.into(),
                name: name.into(),
                total: Duration::ZERO,
                children: Vec::new(),
            });
            let id = self.nodes.len() - 1;
            self.nodes[parent].children.push(id);
            id
        });
        self.open.push((node, Instant::now()));
    }

    /// Stops the innermost open timer.
    pub fn stop(&mut self) {
        if let Some((node, since)) = self.open.pop() {
            self.nodes[node].total += since.elapsed();
        }
    }

    /// Times `f` as a top-level or nested phase named `name`.
    pub fn time<R>(&mut self, name: &str, f: impl FnOnce() -> R) -> R {
        self.start(name, name);
        let r = f();
        self.stop();
        r
    }

    /// The report in MLIR's layout; the total is the time since the tree was created.
    pub fn report(&self) -> String {
        let total = self.created.elapsed();
        let secs = total.as_secs_f64();
        let mut out = report_banner("... Execution time report ...");
        out.push_str(&format!("  Total Execution Time: {secs:.4} seconds\n\n"));
        out.push_str("  ----Wall Time----  ----Name----\n");
        let line = |out: &mut String, d: Duration, depth: usize, name: &str| {
            let pct = if secs > 0.0 {
                d.as_secs_f64() / secs * 100.0
            } else {
                0.0
            };
            out.push_str(&format!(
                "  {:8.4} ({pct:5.1}%)  {:indent$}{name}\n",
                d.as_secs_f64(),
                "",
                indent = depth * 2
            ));
        };
        // Iterative pre-order walk (children in first-start order).
        let mut stack: Vec<(usize, usize)> = self.nodes[0]
            .children
            .iter()
            .rev()
            .map(|&c| (c, 0))
            .collect();
        while let Some((n, depth)) = stack.pop() {
            line(&mut out, self.nodes[n].total, depth, &self.nodes[n].name);
            stack.extend(self.nodes[n].children.iter().rev().map(|&c| (c, depth + 1)));
        }
        let measured: Duration = self.nodes[0]
            .children
            .iter()
            .map(|&c| self.nodes[c].total)
            .sum();
        line(&mut out, total.saturating_sub(measured), 0, "Rest");
        line(&mut out, total, 0, "Total");
        out
    }
}

/// Feeds a shared [`TimingTree`] from pass-manager events: one node per nested pipeline
/// (`'func.func' Pipeline`), per pass (its display name) and for verification (`Verifier`).
pub struct TimingInstrumentation {
    tree: Rc<RefCell<TimingTree>>,
}

impl TimingInstrumentation {
    /// Records into `tree`.
    pub fn new(tree: Rc<RefCell<TimingTree>>) -> Self {
        TimingInstrumentation { tree }
    }
}

impl PassInstrumentation for TimingInstrumentation {
    fn before_pipeline(&mut self, anchor: &str, id: usize, _ctx: &Context, _op: OpId) {
        self.tree
            .borrow_mut()
            .start(&format!("pipeline{id}"), &format!("'{anchor}' Pipeline"));
    }
    fn after_pipeline(&mut self, _anchor: &str, _id: usize, _ctx: &Context, _op: OpId) {
        self.tree.borrow_mut().stop();
    }
    fn before_pass(&mut self, pass: PassRef<'_>, _ctx: &Context, _op: OpId) {
        self.tree
            .borrow_mut()
            .start(&format!("pass{}", pass.id), pass.info.name);
    }
    fn after_pass(&mut self, _pass: PassRef<'_>, _ctx: &Context, _op: OpId) {
        self.tree.borrow_mut().stop();
    }
    fn after_pass_failed(&mut self, _pass: PassRef<'_>, _ctx: &Context, _op: OpId) {
        self.tree.borrow_mut().stop();
    }
    fn before_verify(&mut self, _ctx: &Context, _op: OpId) {
        self.tree.borrow_mut().start("verifier", "Verifier");
    }
    fn after_verify(&mut self, _ctx: &Context, _op: OpId) {
        self.tree.borrow_mut().stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_by_key_and_reports_in_order() {
        let mut t = TimingTree::new();
        t.time("Parser", || ());
        for _ in 0..2 {
            t.start("pipeline1", "'func.func' Pipeline");
            t.time("CSE", || ());
            t.stop();
        }
        t.time("Output", || ());
        let r = t.report();
        let names: Vec<&str> = r.lines().skip(6).map(|l| l[21..].trim_end()).collect();
        assert_eq!(
            names,
            [
                "Parser",
                "'func.func' Pipeline",
                "  CSE",
                "Output",
                "Rest",
                "Total"
            ]
        );
        assert!(r.contains("... Execution time report ..."));
        assert!(r.contains("  Total Execution Time: "));
    }
}
