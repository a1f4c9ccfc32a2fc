//! A structural fingerprint of an op and everything nested in it, to tell whether a pass
//! changed the IR (`--mlir-print-ir-after-change`) without printing it.
//!
//! It hashes what the printer would show: op identity and names, operands, result types,
//! attributes, properties, locations, successors and the block/region structure, in order.
//! Types and attributes are interned, so hashing their ids is hashing their content.

use crate::context::Context;
use crate::entity::OpId;
use std::hash::{Hash, Hasher};

/// The fingerprint of `root` and its nested IR.
pub fn fingerprint(ctx: &Context, root: OpId) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    ctx.walk(root, |op| {
        op.hash(&mut h);
        ctx.op_name_ident(op).hash(&mut h);
        ctx.operands(op).hash(&mut h);
        for &r in ctx.results(op) {
            r.hash(&mut h);
            ctx.value_type(r).hash(&mut h);
        }
        ctx.attrs(op).hash(&mut h);
        ctx.properties(op).hash(&mut h);
        ctx.op_loc(op).hash(&mut h);
        ctx.successors(op).hash(&mut h);
        ctx.op_parent(op).hash(&mut h);
        for &region in ctx.op_regions(op) {
            region.hash(&mut h);
            for &b in ctx.region_blocks(region) {
                b.hash(&mut h);
                for &a in ctx.block_args(b) {
                    a.hash(&mut h);
                    ctx.value_type(a).hash(&mut h);
                    ctx.value_loc(a).hash(&mut h);
                }
                ctx.block_len(b).hash(&mut h);
            }
        }
    });
    h.finish()
}
