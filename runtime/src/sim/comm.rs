//! Semantics of the buffer-level `comm` dialect and of `symm`.
//!
//! Start ops snapshot their input buffers and return a work handle that remembers the
//! destination storages; `comm.wait` blocks until the collective completed, writes this
//! rank's outputs into those storages (in place: every alias sees them) and yields the
//! buffers again as aliases. Blocking ops (`comm.shard_dim_alltoall` and the `symm` ops)
//! issue and wait in one step. Each `symm` op computes exactly what its `coll` counterpart
//! does (the same engine collective), whatever algorithm the GPU uses for it.

use super::coll::{all_to_all_kind, index_attr, reduce_op};
use super::collective::CollKind;
use super::engine::Engine;
use super::interp::{garbage, Flow, RankInterp, Slot};
use super::memory::StorageId;
use crate::error::SimError;
use commlir_dialects::comm::buffer_encoding;
use commlir_ir::OpId;
use std::borrow::Cow;

impl RankInterp<'_> {
    pub(super) fn exec_comm(&mut self, op: OpId, engine: &mut Engine) -> Result<Flow, SimError> {
        let ctx = self.ctx;
        let n = ctx.operands(op).len();
        // (kind, input operand indices, destination operand indices) of each start op.
        let (kind, inputs, dests): (CollKind, Vec<usize>, Vec<usize>) = match ctx.op_name(op) {
            "comm.alloc" => {
                let t = garbage(self.result_type(op, 0)?);
                self.define(op, 0, t)?;
                return Ok(Flow::Next);
            }
            "comm.wait" => return self.exec_wait(op, engine),
            "comm.pool" => {
                self.exec_pool(op)?;
                return Ok(Flow::Next);
            }
            "comm.pool_release" => {
                self.exec_pool_release(op)?;
                return Ok(Flow::Next);
            }
            "comm.shard_dim_alltoall" => return self.exec_shard_dim_buffer(op, engine),
            "symm.one_shot_all_reduce" | "symm.all_gather" | "symm.reduce_scatter" => {
                return self.exec_symm_out_of_place(op, engine)
            }
            "symm.two_shot_all_reduce" => return self.exec_two_shot(op, engine),
            "comm.all_reduce" | "comm.all_reduce_coalesced" => (
                CollKind::AllReduce(reduce_op(ctx, op)?),
                (0..n).collect(),
                (0..n).collect(),
            ),
            "comm.broadcast" => (
                CollKind::Broadcast {
                    src: index_attr(ctx, op, "src")?,
                },
                vec![0],
                vec![0],
            ),
            "comm.all_gather" | "comm.reduce_scatter" => {
                if n == 0 || !n.is_multiple_of(2) {
                    return Err(SimError::op(
                        ctx,
                        op,
                        format!("expects inputs then as many outputs, got {n} operands"),
                    ));
                }
                let kind = if ctx.op_name(op) == "comm.all_gather" {
                    CollKind::AllGather
                } else {
                    CollKind::ReduceScatter(reduce_op(ctx, op)?)
                };
                (kind, (0..n / 2).collect(), (n / 2..n).collect())
            }
            "comm.all_to_all" => (all_to_all_kind(ctx, op)?, vec![0], vec![1]),
            name => {
                return Err(SimError::Unsupported {
                    op,
                    name: name.to_string(),
                })
            }
        };
        if ctx.results(op).len() != 1 {
            return Err(SimError::op(
                ctx,
                op,
                "expects one result (the work handle)",
            ));
        }
        let snapshot = inputs
            .iter()
            .map(|&i| self.tensor(op, i).map(Cow::into_owned))
            .collect::<Result<Vec<_>, _>>()?;
        let snapshot = super::coll::prescaled(ctx, op, snapshot)?;
        let dests = dests
            .iter()
            .map(|&i| self.storage(op, i))
            .collect::<Result<Vec<_>, _>>()?;
        let coll = self.issue(engine, op, kind, snapshot)?;
        self.bind(ctx.result(op, 0), Slot::Work { coll, dests });
        Ok(Flow::Next)
    }

    /// Writes a completed collective's outputs into its destination storages (once).
    fn apply(
        &mut self,
        op: OpId,
        engine: &Engine,
        coll: super::engine::CollId,
        dests: &[StorageId],
    ) -> Result<(), SimError> {
        if !self.applied.insert(coll) {
            return Ok(());
        }
        let outputs = engine.outputs(coll, self.rank);
        for (d, t) in dests.iter().zip(outputs) {
            self.mem
                .write(*d, t.clone())
                .map_err(|e| self.mem_error(op, e))?;
        }
        Ok(())
    }

    fn exec_wait(&mut self, op: OpId, engine: &mut Engine) -> Result<Flow, SimError> {
        let ctx = self.ctx;
        let operands = ctx.operands(op);
        let w = *operands
            .first()
            .ok_or_else(|| SimError::op(ctx, op, "expects a work handle"))?;
        let Slot::Work { coll, dests } = self.slot(op, w)?.clone() else {
            return Err(SimError::op(ctx, op, "operand #0 is not a work handle"));
        };
        if !engine.is_complete(coll) {
            return Ok(Flow::Block(coll));
        }
        self.apply(op, engine, coll, &dests)?;
        if ctx.results(op).len() != operands.len() - 1 {
            return Err(SimError::op(
                ctx,
                op,
                "expects one result per buffer operand",
            ));
        }
        // The results are the buffers themselves, now complete.
        for (i, r) in ctx.results(op).iter().enumerate() {
            let id = self.storage(op, i + 1)?;
            self.bind(*r, Slot::Tensor(id));
        }
        Ok(Flow::Next)
    }

    fn exec_shard_dim_buffer(&mut self, op: OpId, engine: &mut Engine) -> Result<Flow, SimError> {
        let ctx = self.ctx;
        let out = self.storage(op, 1)?;
        let (coll, done) = self.issue_blocking(engine, op, |me| {
            let kind = CollKind::ShardDimAllToAll {
                gather_dim: index_attr(ctx, op, "gather_dim")?,
                shard_dim: index_attr(ctx, op, "shard_dim")?,
            };
            Ok((kind, vec![me.tensor(op, 0)?.into_owned()]))
        })?;
        if !done {
            return Ok(Flow::Block(coll));
        }
        self.apply(op, engine, coll, &[out])?;
        self.bind(ctx.result(op, 0), Slot::Tensor(out));
        Ok(Flow::Next)
    }

    /// The engine collective a `symm` op computes.
    fn symm_kind(&self, op: OpId) -> Result<CollKind, SimError> {
        let ctx = self.ctx;
        Ok(match ctx.op_name(op) {
            "symm.all_gather" => CollKind::AllGather,
            "symm.reduce_scatter" => CollKind::ReduceScatter(reduce_op(ctx, op)?),
            _ => CollKind::AllReduce(reduce_op(ctx, op)?),
        })
    }

    /// `symm.one_shot_all_reduce`, `symm.all_gather`, `symm.reduce_scatter`: the result is a
    /// fresh tensor.
    fn exec_symm_out_of_place(&mut self, op: OpId, engine: &mut Engine) -> Result<Flow, SimError> {
        let (coll, done) = self.issue_blocking(engine, op, |me| {
            Ok((me.symm_kind(op)?, vec![me.tensor(op, 0)?.into_owned()]))
        })?;
        if !done {
            return Ok(Flow::Block(coll));
        }
        let t = engine.outputs(coll, self.rank)[0].clone();
        self.define(op, 0, t)?;
        Ok(Flow::Next)
    }

    /// `symm.two_shot_all_reduce`: on a comm buffer (the lowered level) in place, so the
    /// reduction lands in the input's storage (every alias of it sees the result) and the
    /// result names that storage. On a plain tensor (the input level, value semantics like
    /// every input-level op) the result is a fresh tensor: `coll-to-comm` realizes the input
    /// as a buffer that no other reader sees, so both levels compute the same.
    fn exec_two_shot(&mut self, op: OpId, engine: &mut Engine) -> Result<Flow, SimError> {
        let ctx = self.ctx;
        let in_place = ctx
            .operands(op)
            .first()
            .is_some_and(|v| buffer_encoding(ctx, ctx.value_type(*v)).is_some());
        if !in_place {
            return self.exec_symm_out_of_place(op, engine);
        }
        let buf = self.storage(op, 0)?;
        let (coll, done) = self.issue_blocking(engine, op, |me| {
            Ok((me.symm_kind(op)?, vec![me.tensor(op, 0)?.into_owned()]))
        })?;
        if !done {
            return Ok(Flow::Block(coll));
        }
        self.apply(op, engine, coll, &[buf])?;
        self.bind(ctx.result(op, 0), Slot::Tensor(buf));
        Ok(Flow::Next)
    }
}
