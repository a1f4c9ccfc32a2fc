//! A structural fingerprint of an op and everything nested in it, to tell whether a pass
//! changed the IR (`--mlir-print-ir-after-change`) without printing it.
//!
//! It hashes what the printer would show: op identity and names, operands, result types,
//! attributes, properties, locations, successors and the block/region structure, in order.
//! Types and attributes are interned, so hashing their ids is hashing their content.
//!
//! [`unordered_fingerprint`] hashes the same things but not the order of ops within their
//! blocks, to check a pass's claim that it only reordered ops.

use crate::context::Context;
use crate::entity::OpId;
use rustc_hash::FxHasher;
use std::hash::{Hash, Hasher};

/// The fingerprint of `root` and its nested IR.
pub fn fingerprint(ctx: &Context, root: OpId) -> u64 {
    let mut h = FxHasher::default();
    ctx.walk(root, |op| hash_op(ctx, op, &mut h));
    h.finish()
}

/// The fingerprint of `root` and its nested IR up to the order of ops in each block: equal
/// for IR that differs only by moves of ops within their blocks.
///
/// Each op's hash covers its block (not its place in it), so the sorted list of those hashes
/// is a per-block multiset of ops; sorting rather than summing leaves no cancellations.
pub fn unordered_fingerprint(ctx: &Context, root: OpId) -> u64 {
    let mut ops = Vec::new();
    ctx.walk(root, |op| {
        let mut h = FxHasher::default();
        hash_op(ctx, op, &mut h);
        ops.push(h.finish());
    });
    ops.sort_unstable();
    let mut h = FxHasher::default();
    ops.hash(&mut h);
    h.finish()
}

/// Hashes everything of `op` but its nested ops and its place in its block.
fn hash_op(ctx: &Context, op: OpId, h: &mut FxHasher) {
    op.hash(h);
    ctx.op_name_ident(op).hash(h);
    ctx.operands(op).hash(h);
    for &r in ctx.results(op) {
        r.hash(h);
        ctx.value_type(r).hash(h);
    }
    ctx.attrs(op).hash(h);
    ctx.properties(op).hash(h);
    ctx.op_loc(op).hash(h);
    ctx.successors(op).hash(h);
    ctx.op_parent(op).hash(h);
    for &region in ctx.op_regions(op) {
        region.hash(h);
        for &b in ctx.region_blocks(region) {
            b.hash(h);
            for &a in ctx.block_args(b) {
                a.hash(h);
                ctx.value_type(a).hash(h);
                ctx.value_loc(a).hash(h);
            }
            ctx.block_len(b).hash(h);
        }
    }
}
