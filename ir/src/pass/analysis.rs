//! Analyses kept from one pass for the next (a reduced form of MLIR's analysis manager).
//!
//! A pass that computed something about an op, and knows it still holds for the IR as the pass
//! leaves it, stores it ([`PassEnv::cache_analysis`](super::PassEnv::cache_analysis)); a later
//! pass of the same run asks for it instead of recomputing it. The scheduling passes keep the
//! op costs of a function body and the makespan of its current order this way: three of them
//! in a row on a 100k-op function otherwise cost every op three times.
//!
//! Invalidation is by what the pass manager sees, so a pass cannot forget it: after a pass
//! that changed the IR (did not call `mark_unchanged`), every analysis of the op it ran on, of
//! the ops enclosing it and of the ops nested in it is dropped, except those the pass itself
//! stored during that run. Analyses of unrelated ops (a sibling function) stay.

use crate::context::Context;
use crate::entity::OpId;
use std::any::Any;

/// The analyses of one pass-manager run, by op and type.
#[derive(Default)]
pub struct AnalysisCache {
    entries: Vec<Entry>,
    /// Numbers the pass runs: an entry stored in the current run survives its invalidation.
    run: u64,
}

struct Entry {
    op: OpId,
    value: Box<dyn Any>,
    stored_in: u64,
}

impl AnalysisCache {
    /// The cached `T` of `op`, if any.
    pub fn get<T: Any>(&self, op: OpId) -> Option<&T> {
        self.entries
            .iter()
            .find(|e| e.op == op && e.value.is::<T>())
            .and_then(|e| e.value.downcast_ref())
    }

    /// Removes and returns the cached `T` of `op` (to use it by value and store it back).
    pub fn take<T: Any>(&mut self, op: OpId) -> Option<T> {
        let i = self
            .entries
            .iter()
            .position(|e| e.op == op && e.value.is::<T>())?;
        self.entries
            .swap_remove(i)
            .value
            .downcast()
            .ok()
            .map(|b| *b)
    }

    /// Stores `value` as `op`'s `T` (replacing any), valid for the IR as the running pass
    /// leaves it.
    pub fn insert<T: Any>(&mut self, op: OpId, value: T) {
        let _ = self.take::<T>(op);
        self.entries.push(Entry {
            op,
            value: Box::new(value),
            stored_in: self.run,
        });
    }

    /// How many analyses are cached.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Before a pass runs.
    pub(crate) fn begin_pass(&mut self) {
        self.run += 1;
    }

    /// After a pass ran on `anchor`: when it changed the IR, drops what it may have
    /// invalidated (see the module docs).
    pub(crate) fn end_pass(&mut self, ctx: &Context, anchor: OpId, changed: bool) {
        if !changed {
            return;
        }
        let run = self.run;
        self.entries.retain(|e| {
            if ctx.is_erased(e.op) {
                return false;
            }
            if e.op == anchor {
                return e.stored_in == run;
            }
            !encloses(ctx, e.op, anchor) && !encloses(ctx, anchor, e.op)
        });
    }
}

/// Whether `outer` is a proper ancestor of `inner`.
fn encloses(ctx: &Context, outer: OpId, inner: OpId) -> bool {
    let mut cur = ctx.parent_op(inner);
    while let Some(p) = cur {
        if p == outer {
            return true;
        }
        cur = ctx.parent_op(p);
    }
    false
}
