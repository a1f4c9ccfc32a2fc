//! Executing planned programs: `comm.pool`, `comm.pool_release` and comm buffers placed at
//! their `comm.slot` in a pool.
//!
//! The checks need the plan's liveness — until when each comm buffer has readers to come —
//! and the interpreter derives it from the IR itself ([`FramePlan`]), independently of the
//! planner's own analysis, so a planner bug cannot hide behind a shared one. The rules are
//! the contract of `comm.pool` (docs/dialects/comm.md): a buffer is live from its producer to
//! its last reader through every alias (`comm.wait` results, `comm.shard_dim_alltoall`), and a
//! collective started on a buffer keeps it live until the `comm.wait` of its work handle.

use super::interp::{RankInterp, Slot};
use super::memory::{Holder, MemError, PoolId};
use crate::error::SimError;
use crate::tensor::Tensor;
use commlir_dialects::comm::{
    buffer_encoding, encoding_kind_str, is_work_type, pool_info, slot_of,
};
use commlir_ir::{BlockId, Context, OpId, Value};
use std::collections::HashMap;

/// Positions and comm-buffer liveness of one planned function body.
#[derive(Debug, Default)]
pub(super) struct FramePlan {
    pos: HashMap<OpId, usize>,
    /// Buffer (its producing value) → its last reader and that reader's position.
    last_read: HashMap<Value, (OpId, usize)>,
}

impl FramePlan {
    /// The plan of `block`, or `None` when it holds no `comm.pool` (an unplanned function
    /// runs exactly as before, with owned storage everywhere).
    pub(super) fn of(ctx: &Context, block: BlockId) -> Option<FramePlan> {
        if !ctx.block_ops(block).any(|o| ctx.op_name(o) == "comm.pool") {
            return None;
        }
        let mut plan = FramePlan::default();
        // Alias → the buffer it names.
        let mut root: HashMap<Value, Value> = HashMap::new();
        // Work handle → the buffers its collective touches until the wait.
        let mut busy: HashMap<Value, Vec<Value>> = HashMap::new();
        let mut last = (OpId::from_index(0), 0);
        for (p, op) in ctx.block_ops(block).enumerate() {
            plan.pos.insert(op, p);
            last = (op, p);
            let mut reads = Vec::new();
            ctx.walk(op, |o| {
                reads.extend(ctx.operands(o).iter().map(|v| *root.get(v).unwrap_or(v)))
            });
            if ctx.op_name(op) == "comm.wait" {
                if let Some(b) = ctx.operands(op).first().and_then(|w| busy.remove(w)) {
                    reads.extend(b);
                }
            }
            for r in reads {
                plan.last_read.insert(r, (op, p));
            }
            let aliased = |i: usize| match ctx.op_name(op) {
                "comm.wait" => ctx.operands(op).get(i + 1).copied(),
                "comm.shard_dim_alltoall" => ctx.operands(op).get(1).copied(),
                _ => None,
            };
            for (i, &r) in ctx.results(op).iter().enumerate() {
                if let Some(src) = aliased(i) {
                    root.insert(r, *root.get(&src).unwrap_or(&src));
                } else if is_work_type(ctx, ctx.value_type(r)) {
                    busy.insert(
                        r,
                        ctx.operands(op)
                            .iter()
                            .map(|v| *root.get(v).unwrap_or(v))
                            .collect(),
                    );
                }
            }
        }
        // Collectives never waited for may use their buffers until the end.
        for b in busy.into_values().flatten() {
            plan.last_read.insert(b, last);
        }
        Some(plan)
    }

    /// Position of an op of the body.
    pub(super) fn pos(&self, op: OpId) -> Option<usize> {
        self.pos.get(&op).copied()
    }
}

fn describe(ctx: &Context, op: OpId) -> String {
    format!(
        "'{}' at {}",
        ctx.op_name(op),
        ctx.loc_to_string(ctx.op_loc(op))
    )
}

impl RankInterp<'_> {
    /// `comm.pool`: allocates the pool and makes it this frame's pool of its (kind, group).
    pub(super) fn exec_pool(&mut self, op: OpId) -> Result<(), SimError> {
        let ctx = self.ctx;
        let info = pool_info(ctx, op).ok_or_else(|| {
            SimError::op(ctx, op, "requires 'kind', 'group', 'size' and 'alignment'")
        })?;
        let name = format!("{} pool of @{}", encoding_kind_str(info.kind), info.group);
        let size = usize::try_from(info.size)
            .map_err(|_| SimError::op(ctx, op, "pool size does not fit in memory"))?;
        let id = self.mem.new_pool(name, size);
        let depth = self.depth();
        self.pool_frames.insert(id, depth);
        if self
            .frame_pools_mut()
            .insert((info.kind, info.group.clone()), id)
            .is_some()
        {
            return Err(SimError::op(
                ctx,
                op,
                format!(
                    "a second {} pool of @{} in one function",
                    encoding_kind_str(info.kind),
                    info.group
                ),
            ));
        }
        self.bind(ctx.result(op, 0), Slot::Pool(id));
        Ok(())
    }

    /// `comm.pool_release`: frees the pool; its slots are dead from here on.
    pub(super) fn exec_pool_release(&mut self, op: OpId) -> Result<(), SimError> {
        let ctx = self.ctx;
        let v = *ctx
            .operands(op)
            .first()
            .ok_or_else(|| SimError::op(ctx, op, "expects a pool"))?;
        let Slot::Pool(id) = *self.slot(op, v)? else {
            return Err(SimError::op(ctx, op, "operand #0 is not a pool"));
        };
        self.mem.release_pool(id);
        self.frame_pools_mut().retain(|_, p| *p != id);
        Ok(())
    }

    /// Places result `i` of `op` in its planned slot, if `op` carries one in a planned
    /// function; otherwise hands `t` back (`Ok(Err(t))`) for ordinary storage.
    pub(super) fn place_in_slot(
        &mut self,
        op: OpId,
        i: usize,
        t: Tensor,
    ) -> Result<Result<Slot, Tensor>, SimError> {
        let ctx = self.ctx;
        let r = ctx.result(op, i);
        let (Some(slot), Some(enc), Some(plan)) = (
            slot_of(ctx, op),
            buffer_encoding(ctx, ctx.value_type(r)),
            self.frame_plan(),
        ) else {
            return Ok(Err(t));
        };
        let Some(&pool) = self.frame_pools().get(&(enc.kind, enc.group.clone())) else {
            return Err(SimError::op(
                ctx,
                op,
                format!(
                    "has a 'comm.slot' but no {} pool of @{} is allocated here",
                    enc.kind_str(),
                    enc.group
                ),
            ));
        };
        let bytes = (t.numel() * t.ty.elem.byte_width()) as u64;
        if slot.size < bytes {
            return Err(SimError::op(
                ctx,
                op,
                format!(
                    "has a slot of {} bytes for a buffer of {bytes} bytes",
                    slot.size
                ),
            ));
        }
        let born = plan.pos(op).unwrap_or(0);
        let (last_reader, last_pos) = plan.last_read.get(&r).copied().unwrap_or((op, born));
        let holder = Holder {
            producer: op,
            last_reader,
            last_pos,
        };
        let now = self.pool_now(pool, op);
        let offset = usize::try_from(slot.offset)
            .map_err(|_| SimError::op(ctx, op, "slot offset does not fit in memory"))?;
        let id = self
            .mem
            .place(pool, offset, t, holder, now)
            .map_err(|e| self.mem_error(op, e))?;
        Ok(Ok(Slot::Tensor(id)))
    }

    /// The position, in the body of the function owning `pool`, of what executes now: `op`
    /// itself, or the call that (transitively) led to it.
    pub(super) fn pool_now(&self, pool: PoolId, op: OpId) -> usize {
        let depth = self
            .pool_frames
            .get(&pool)
            .copied()
            .unwrap_or_else(|| self.depth());
        let at = self.call_site_at(depth + 1).unwrap_or(op);
        self.plan_at(depth).and_then(|p| p.pos(at)).unwrap_or(0)
    }

    /// A memory error as a diagnostic at `op`, naming the other buffer's ops.
    pub(super) fn mem_error(&self, op: OpId, e: MemError) -> SimError {
        let ctx = self.ctx;
        let msg = match e {
            MemError::Clobber { pool, range, writer: _, victim, victim_range } => format!(
                "writes bytes [{}, {}) of the {pool}, overlapping bytes [{}, {}) of the buffer produced by {}, which is still live (read by {}): the pool plan overlaps two live slots",
                range.start,
                range.end,
                victim_range.start,
                victim_range.end,
                describe(ctx, victim.producer),
                describe(ctx, victim.last_reader)
            ),
            MemError::Evicted { pool, holder, by } => format!(
                "accesses the buffer produced by {}, whose bytes in the {pool} were already reused by the buffer produced by {} (its last reader by the plan is {})",
                describe(ctx, holder.producer),
                describe(ctx, by.producer),
                describe(ctx, holder.last_reader)
            ),
            MemError::Released { pool } => format!("accesses a slot of the {pool} after its 'comm.pool_release'"),
            MemError::Other(m) => m,
        };
        SimError::op(ctx, op, msg)
    }
}
