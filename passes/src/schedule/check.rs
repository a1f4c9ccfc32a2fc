//! Checks a schedule against the contracts of DESIGN §4: dependencies kept, the relative order
//! of collectives on every group kept (SPMD safety), pins kept. Used by debug assertions in
//! the passes and by the tests.

use super::graph::{DepGraph, NodeKind, PIN_ATTR};
use commlir_ir::{BlockId, Context, OpId, Trait};
use std::collections::BTreeMap;

/// The collectives of `block` per group name, in program order ("?" for a collective whose
/// group is unknown).
pub fn collectives_by_group(ctx: &Context, block: BlockId) -> BTreeMap<String, Vec<OpId>> {
    let mut m: BTreeMap<String, Vec<OpId>> = BTreeMap::new();
    for op in ctx.block_ops(block) {
        if !ctx.op_has_trait(op, Trait::Collective) {
            continue;
        }
        let g = ctx
            .inherent_attr(op, "group")
            .and_then(|a| ctx.attr_as_symbol(a))
            .unwrap_or("?");
        m.entry(g.to_string()).or_default().push(op);
    }
    m
}

/// A violated constraint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// `after` must come after `before` but does not (or an op went missing).
    Dependency { before: OpId, after: OpId },
    /// The order of collectives on `group` changed.
    GroupOrder { group: String },
    /// Pinned collectives are out of their pinned order.
    Pin { op: OpId },
}

/// Checks the current order of `block` against `graph` (built from an earlier order of the
/// same ops): every edge must still point forward.
pub fn check_dependencies(
    ctx: &Context,
    block: BlockId,
    graph: &DepGraph,
) -> Result<(), Violation> {
    let mut pos = vec![usize::MAX; graph.len()];
    for (p, op) in ctx.block_ops(block).enumerate() {
        if let Some(n) = graph.node(op) {
            pos[n as usize] = p;
        }
    }
    for a in 0..graph.len() as u32 {
        for &b in graph.succs(a) {
            if pos[a as usize] == usize::MAX
                || pos[b as usize] == usize::MAX
                || pos[a as usize] >= pos[b as usize]
            {
                return Err(Violation::Dependency {
                    before: graph.ops[a as usize],
                    after: graph.ops[b as usize],
                });
            }
        }
    }
    Ok(())
}

/// Checks that the per-group collective order of `block` equals `before`.
pub fn check_group_order(
    ctx: &Context,
    block: BlockId,
    before: &BTreeMap<String, Vec<OpId>>,
) -> Result<(), Violation> {
    let now = collectives_by_group(ctx, block);
    for (g, ops) in before {
        if now.get(g) != Some(ops) {
            return Err(Violation::GroupOrder { group: g.clone() });
        }
    }
    match now.keys().find(|g| !before.contains_key(*g)) {
        Some(g) => Err(Violation::GroupOrder { group: g.clone() }),
        None => Ok(()),
    }
}

/// Checks that pinned collectives appear in increasing `comm_order`.
pub fn check_pins(ctx: &Context, block: BlockId) -> Result<(), Violation> {
    let mut last = i64::MIN;
    for op in ctx.block_ops(block) {
        if let Some(v) = ctx.get_attr(op, PIN_ATTR).and_then(|a| ctx.attr_as_i64(a)) {
            if v < last {
                return Err(Violation::Pin { op });
            }
            last = v;
        }
    }
    Ok(())
}

/// Whether `order` (node numbers of `graph`) is a topological order of it: every node once,
/// every edge forward.
pub fn is_topological(graph: &DepGraph, order: &[u32]) -> bool {
    if order.len() != graph.len() {
        return false;
    }
    let mut pos = vec![usize::MAX; graph.len()];
    for (p, &n) in order.iter().enumerate() {
        if pos[n as usize] != usize::MAX {
            return false;
        }
        pos[n as usize] = p;
    }
    (0..graph.len() as u32).all(|a| {
        graph
            .succs(a)
            .iter()
            .all(|&b| pos[a as usize] < pos[b as usize])
    })
}

/// Whether `order` keeps the relative order of the collectives of every group of `graph`.
pub fn keeps_group_order(graph: &DepGraph, order: &[u32]) -> bool {
    let mut last: Vec<u32> = vec![0; graph.group_names.len() + 1];
    let unknown = graph.group_names.len();
    for &n in order {
        if graph.kind[n as usize] != NodeKind::Collective {
            continue;
        }
        let g = graph.group[n as usize];
        let slot = if g == super::graph::NONE {
            unknown
        } else {
            g as usize
        };
        // Original node numbers increase along each group's original order.
        if n + 1 < last[slot] {
            return false;
        }
        last[slot] = n + 1;
    }
    true
}
