//! Comm-buffer pools: the `comm.pool` / `comm.pool_release` ops and the `comm.slot`
//! placement attribute that `comm-plan-pools` writes.
//!
//! A planned function allocates one pool per (kind, group) at entry and releases it before
//! returning (PR #138519: comm buffers come from one persistent allocation per pool, and the
//! pool is freed before the graph exits so the allocator can reuse it across graphs). Each
//! op producing a comm buffer then carries `comm.slot = array<i64: OFFSET, SIZE>`: the byte
//! range of the pool its buffer occupies. The pool is found from the buffer's own
//! `#comm.buffer<KIND, @group>` encoding, which is unique per function, so the slot needs no
//! SSA link to the pool.

use super::encoding::{buffer_encoding_ref, kind_str};
use crate::shape::{tensor_bytes, ty_str};
use commlir_ir::{
    register_op, ArgDef, AttrConstraint, AttrDef, AttrKind, CommBufferKind, Context, DenseElem,
    Diagnostic, OpDef, OpId, Trait, Type, TypeConstraint, TypeKind,
};

/// The discardable attribute holding a comm buffer's `(offset, size)` in its pool.
pub const SLOT_ATTR: &str = "comm.slot";

/// A byte range `[offset, offset + size)` of a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolSlot {
    pub offset: u64,
    pub size: u64,
}

impl PoolSlot {
    /// One past the last byte.
    pub fn end(self) -> u64 {
        self.offset + self.size
    }

    /// Whether two slots share a byte (empty slots share none).
    pub fn overlaps(self, other: PoolSlot) -> bool {
        self.size > 0 && other.size > 0 && self.offset < other.end() && other.offset < self.end()
    }
}

/// What a `comm.pool` op declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolInfo {
    pub kind: CommBufferKind,
    pub group: String,
    /// Bytes of the allocation.
    pub size: u64,
    /// Every slot offset is a multiple of this.
    pub alignment: u64,
}

/// The `!comm.pool` handle type.
pub fn pool_type(ctx: &mut Context) -> Type {
    let dialect = ctx.ident("comm");
    ctx.ty(TypeKind::Dialect {
        dialect,
        text: "comm.pool".into(),
    })
}

/// Whether `t` is `!comm.pool`.
pub fn is_pool_type(ctx: &Context, t: Type) -> bool {
    matches!(ctx.type_kind(t), TypeKind::Dialect { text, .. } if text == "comm.pool")
}

/// The slot `op` places its comm-buffer result in, if it carries a well-formed `comm.slot`.
pub fn slot_of(ctx: &Context, op: OpId) -> Option<PoolSlot> {
    slot_from_attr(ctx, ctx.get_attr(op, SLOT_ATTR)?)
}

/// A `comm.slot` value: two non-negative i64 entries (a dense array, or an array of integer
/// attributes), read in place.
fn slot_from_attr(ctx: &Context, a: commlir_ir::Attr) -> Option<PoolSlot> {
    let (o, s) = match ctx.attr_kind(a) {
        AttrKind::DenseArray { values, .. } => match values.as_slice() {
            [DenseElem::Int(o), DenseElem::Int(s)] => (o.as_i64()?, s.as_i64()?),
            _ => return None,
        },
        AttrKind::Array(items) => match items.as_slice() {
            [o, s] => (ctx.attr_as_i64(*o)?, ctx.attr_as_i64(*s)?),
            _ => return None,
        },
        _ => return None,
    };
    (o >= 0 && s >= 0).then_some(PoolSlot {
        offset: o as u64,
        size: s as u64,
    })
}

/// Sets `op`'s `comm.slot` attribute.
pub fn set_slot(ctx: &mut Context, op: OpId, slot: PoolSlot) {
    let elem = ctx.int_type(64);
    let values = [slot.offset, slot.size]
        .iter()
        .map(|v| commlir_ir::DenseElem::Int(commlir_ir::IntValue::Small(i128::from(*v))))
        .collect();
    let a = ctx.attr(AttrKind::DenseArray { elem, values });
    ctx.set_attr(op, SLOT_ATTR, a);
}

/// The declaration of a `comm.pool` op (`None` for any other op, or a malformed one).
pub fn pool_info(ctx: &Context, op: OpId) -> Option<PoolInfo> {
    pool_decl(ctx, op).map(|d| PoolInfo {
        kind: d.kind,
        group: d.group.to_string(),
        size: d.size,
        alignment: d.alignment,
    })
}

/// [`PoolInfo`] with the group name borrowed from the IR (the verifier reads it per op).
struct PoolDecl<'a> {
    kind: CommBufferKind,
    group: &'a str,
    size: u64,
    alignment: u64,
}

fn pool_decl(ctx: &Context, op: OpId) -> Option<PoolDecl<'_>> {
    if ctx.op_name(op) != "comm.pool" {
        return None;
    }
    let kind = match ctx
        .inherent_attr(op, "kind")
        .and_then(|a| ctx.attr_as_str(a))?
    {
        "nccl" => CommBufferKind::Nccl,
        "symm_mem" => CommBufferKind::SymmMem,
        _ => return None,
    };
    let group = ctx
        .inherent_attr(op, "group")
        .and_then(|a| ctx.attr_as_symbol(a))?;
    let size = u64::try_from(
        ctx.inherent_attr(op, "size")
            .and_then(|a| ctx.attr_as_i64(a))?,
    )
    .ok()?;
    let alignment = u64::try_from(
        ctx.inherent_attr(op, "alignment")
            .and_then(|a| ctx.attr_as_i64(a))?,
    )
    .ok()?;
    Some(PoolDecl {
        kind,
        group,
        size,
        alignment,
    })
}

register_op!(
    pub POOL = OpDef {
        name: "comm.pool",
        summary: "The persistent comm-buffer pool of one (kind, group)",
        description: "Allocates, once at function entry, the pool every comm buffer of \
            `#comm.buffer<KIND, @group>` in the function lives in (`size` bytes, from the \
            kind's allocator: `ncclMemAlloc` + registration for `nccl`, symmetric memory for \
            `symm_mem`); the same program gives the same size on every rank. At most one pool \
            per (kind, group) per function, released by exactly one `comm.pool_release` before \
            the function returns, so comm buffers never outlive the function.\n\n\
            Each op producing a comm buffer of the pool carries the discardable attribute \
            `comm.slot = array<i64: OFFSET, SIZE>`: its buffer is the byte range \
            `[OFFSET, OFFSET + SIZE)` of the pool. OFFSET is a multiple of `alignment`, the range \
            lies inside the pool and SIZE covers the buffer's bytes. Slots whose buffers are \
            never live at the same time may overlap (that is the reuse `comm-plan-pools` \
            plans); a slot is live from its producer to its last reader, through a collective \
            that reads or writes it until that collective's `comm.wait`, and through every \
            alias (`comm.wait` results, `comm.shard_dim_alltoall` results).\n\n\
            ```mlir\n\
            %pool = comm.pool {alignment = 64 : i64, group = @tp, kind = \"symm_mem\", size = 192 : i64} : !comm.pool\n\
            %a = compute.add %x, %x {comm.slot = array<i64: 0, 64>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32, #comm.buffer<symm_mem, @tp>>\n\
            ...\n\
            comm.pool_release %pool : !comm.pool\n\
            return %y : tensor<4x4xf32>\n\
            ```",
        results: &[ArgDef::one("pool", TypeConstraint::Any)],
        attributes: &[
            AttrDef::required("kind", AttrConstraint::StrEnum(&["nccl", "symm_mem"]))
                .doc("The comm-buffer kind the pool serves."),
            AttrDef::required("group", AttrConstraint::SymbolRef).doc("The `coll.group`."),
            AttrDef::required("size", AttrConstraint::Integer).doc("Bytes of the allocation."),
            AttrDef::required("alignment", AttrConstraint::Integer)
                .doc("Slot offsets are multiples of this power of two."),
        ],
        traits: &[Trait::MemAlloc, Trait::HasParent("func.func")],
        verify: Some(verify_pool),
        example: "%pool = comm.pool {alignment = 64 : i64, group = @tp, kind = \"symm_mem\", size = 192 : i64} : !comm.pool",
        ..OpDef::EMPTY
    }
);

register_op!(
    pub POOL_RELEASE = OpDef {
        name: "comm.pool_release",
        summary: "Release a comm-buffer pool",
        description: "Frees the pool (to its allocator, which may reuse it for another \
            function's pool); placed right before the function returns. No slot of the pool \
            may be read or written afterwards.",
        operands: &[ArgDef::one("pool", TypeConstraint::Any)],
        traits: &[Trait::MemWrite, Trait::HasParent("func.func")],
        verify: Some(verify_release),
        example: "comm.pool_release %pool : !comm.pool",
        ..OpDef::EMPTY
    }
);

fn verify_pool(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let r = ctx.result(op, 0);
    if !is_pool_type(ctx, ctx.value_type(r)) {
        return Err(ctx.op_error(
            op,
            format!(
                "result must be !comm.pool, got {}",
                ty_str(ctx, ctx.value_type(r))
            ),
        ));
    }
    let Some(info) = pool_decl(ctx, op) else {
        return Err(ctx.op_error(op, "requires non-negative integer 'size' and 'alignment'"));
    };
    if !info.alignment.is_power_of_two() {
        return Err(ctx.op_error(
            op,
            format!("alignment {} is not a power of two", info.alignment),
        ));
    }
    if ctx
        .lookup_symbol(op, info.group)
        .is_none_or(|g| ctx.op_name(g) != "coll.group")
    {
        return Err(ctx.op_error(
            op,
            format!("group @{} does not reference a 'coll.group'", info.group),
        ));
    }
    let released = ctx
        .uses(r)
        .iter()
        .filter(|u| ctx.op_name(u.op) == "comm.pool_release")
        .count();
    if released != 1 || ctx.uses(r).len() != 1 {
        return Err(ctx.op_error(
            op,
            "must be released by exactly one 'comm.pool_release' (and used by nothing else)",
        ));
    }
    let Some(block) = ctx.op_parent(op) else {
        return Ok(());
    };
    // Attribute names are interned: an op carries `comm.slot` exactly when one of its
    // attribute keys is this identifier (none does when it was never interned), which spares
    // a text comparison per attribute of every op of the function.
    let slot_key = ctx.find_ident(SLOT_ATTR);
    let mut after = false;
    for other in ctx.block_ops(block) {
        if other == op {
            after = true;
            continue;
        }
        // Each duplicate is reported once, by the first pool, at the later one.
        if let Some(o) = pool_decl(ctx, other).filter(|_| after) {
            if o.kind == info.kind && o.group == info.group {
                return Err(ctx
                    .op_error(
                        other,
                        format!(
                            "a second {} pool of group @{} in one function",
                            kind_str(info.kind),
                            info.group
                        ),
                    )
                    .with_note(ctx.op_loc(op), "the first pool"));
            }
        }
        let slot = slot_key.and_then(|k| {
            ctx.attrs(other)
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, a)| *a)
        });
        if let Some(slot) = slot {
            verify_slot(ctx, other, slot, op, &info)?;
        }
    }
    Ok(())
}

/// Checks `user`'s `comm.slot` (the attribute `slot`), if its comm-buffer result belongs to
/// the pool `pool`.
fn verify_slot(
    ctx: &Context,
    user: OpId,
    slot: commlir_ir::Attr,
    pool: OpId,
    info: &PoolDecl<'_>,
) -> Result<(), Diagnostic> {
    let mut mine = ctx
        .results(user)
        .iter()
        .filter_map(|r| buffer_encoding_ref(ctx, ctx.value_type(*r)).map(|e| (*r, e)));
    let Some((r, enc)) = mine.next() else {
        return Err(ctx.op_error(user, "carries 'comm.slot' but produces no comm buffer"));
    };
    if mine.next().is_some() {
        return Err(ctx.op_error(
            user,
            "carries 'comm.slot' but produces several comm buffers",
        ));
    }
    if enc.kind != info.kind || enc.group != info.group {
        return Ok(());
    }
    let note = |d: Diagnostic| d.with_note(ctx.op_loc(pool), "the pool");
    let Some(slot) = slot_from_attr(ctx, slot) else {
        return Err(note(ctx.op_error(
            user,
            "'comm.slot' must be array<i64: OFFSET, SIZE> with non-negative entries",
        )));
    };
    let need = tensor_bytes(ctx, ctx.value_type(r)).unwrap_or(0);
    if slot.size < need {
        return Err(note(ctx.op_error(
            user,
            format!(
                "slot of {} bytes is smaller than its buffer ({need} bytes)",
                slot.size
            ),
        )));
    }
    if !slot.offset.is_multiple_of(info.alignment) {
        return Err(note(ctx.op_error(
            user,
            format!(
                "slot offset {} is not a multiple of the pool alignment {}",
                slot.offset, info.alignment
            ),
        )));
    }
    if slot.end() > info.size {
        return Err(note(ctx.op_error(
            user,
            format!(
                "slot [{}, {}) exceeds the pool's {} bytes",
                slot.offset,
                slot.end(),
                info.size
            ),
        )));
    }
    Ok(())
}

fn verify_release(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let p = ctx.operand(op, 0);
    if ctx
        .defining_op(p)
        .is_none_or(|d| ctx.op_name(d) != "comm.pool")
    {
        return Err(ctx.op_error(op, "operand must be the result of a 'comm.pool'"));
    }
    Ok(())
}
