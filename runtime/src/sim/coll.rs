//! Semantics of the `coll` dialect (functional collectives, value semantics): a collective
//! snapshots its inputs and binds its results as in-flight; `coll.wait_tensor` blocks until
//! the collective completed and gives the rank its output as a fresh tensor.

use super::collective::{CollKind, ReduceOp};
use super::engine::Engine;
use super::interp::{Flow, RankInterp, Slot};
use crate::error::SimError;
use commlir_ir::{AttrKind, Context, OpId};

/// The `reduce_op` attribute of `op`.
pub(super) fn reduce_op(ctx: &Context, op: OpId) -> Result<ReduceOp, SimError> {
    ctx.inherent_attr(op, "reduce_op")
        .and_then(|a| ctx.attr_as_str(a))
        .and_then(ReduceOp::parse)
        .ok_or_else(|| {
            SimError::op(
                ctx,
                op,
                "requires 'reduce_op' to be one of \"sum\", \"avg\", \"max\", \"min\", \"product\"",
            )
        })
}

/// A non-negative integer attribute of `op`.
pub(super) fn index_attr(ctx: &Context, op: OpId, name: &str) -> Result<usize, SimError> {
    ctx.inherent_attr(op, name)
        .and_then(|a| ctx.attr_as_i64(a))
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| {
            SimError::op(
                ctx,
                op,
                format!("requires a non-negative integer attribute '{name}'"),
            )
        })
}

fn split_matrix(ctx: &Context, op: OpId, name: &str) -> Result<Option<Vec<Vec<usize>>>, SimError> {
    let Some(a) = ctx.inherent_attr(op, name) else {
        return Ok(None);
    };
    let bad = || {
        SimError::op(
            ctx,
            op,
            format!("'{name}' must be an array of arrays of non-negative sizes"),
        )
    };
    let AttrKind::Array(rows) = ctx.attr_kind(a) else {
        return Err(bad());
    };
    rows.iter()
        .map(|r| {
            ctx.attr_as_i64_array(*r)
                .and_then(|row| {
                    row.into_iter()
                        .map(|x| usize::try_from(x).ok())
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(bad)
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The all-to-all kind of `op` from its optional split attributes: the engine works with the
/// input matrix (`splits[r][j]` rows r sends to j); the output matrix must be its transpose.
pub(super) fn all_to_all_kind(ctx: &Context, op: OpId) -> Result<CollKind, SimError> {
    let input = split_matrix(ctx, op, "input_split_sizes")?;
    let output = split_matrix(ctx, op, "output_split_sizes")?;
    match (&input, &output) {
        (None, None) => {}
        (Some(i), Some(o)) => {
            let transposed = o.len() == i.len()
                && o.iter().enumerate().all(|(r, row)| {
                    row.len() == i.len()
                        && row.iter().enumerate().all(|(j, x)| i[j].get(r) == Some(x))
                });
            if !transposed {
                return Err(SimError::op(
                    ctx,
                    op,
                    "output_split_sizes[r][j] must equal input_split_sizes[j][r] for all r, j",
                ));
            }
        }
        _ => {
            return Err(SimError::op(
                ctx,
                op,
                "input_split_sizes and output_split_sizes must be given together",
            ))
        }
    }
    Ok(CollKind::AllToAll { splits: input })
}

impl RankInterp<'_> {
    pub(super) fn exec_coll(&mut self, op: OpId, engine: &mut Engine) -> Result<Flow, SimError> {
        let ctx = self.ctx;
        let kind = match ctx.op_name(op) {
            "coll.wait_tensor" => return self.exec_wait_tensor(op, engine),
            "coll.all_slice" => return self.exec_all_slice(op),
            "coll.shard_dim_alltoall" => return self.exec_shard_dim(op, engine),
            "coll.all_reduce" | "coll.all_reduce_coalesced" => {
                CollKind::AllReduce(reduce_op(ctx, op)?)
            }
            "coll.all_gather_into_tensor" | "coll.all_gather_into_tensor_coalesced" => {
                CollKind::AllGather
            }
            "coll.reduce_scatter_tensor" | "coll.reduce_scatter_tensor_coalesced" => {
                CollKind::ReduceScatter(reduce_op(ctx, op)?)
            }
            "coll.all_to_all_single" => all_to_all_kind(ctx, op)?,
            "coll.broadcast" => CollKind::Broadcast {
                src: index_attr(ctx, op, "src")?,
            },
            name => {
                return Err(SimError::Unsupported {
                    op,
                    name: name.to_string(),
                })
            }
        };
        let n = ctx.operands(op).len();
        if n == 0 || ctx.results(op).len() != n {
            return Err(SimError::op(
                ctx,
                op,
                "expects as many results as operands (at least one)",
            ));
        }
        let inputs = (0..n)
            .map(|i| self.tensor(op, i).map(std::borrow::Cow::into_owned))
            .collect::<Result<Vec<_>, _>>()?;
        let inputs = prescaled(ctx, op, inputs)?;
        let coll = self.issue(engine, op, kind, inputs)?;
        for (index, r) in ctx.results(op).iter().enumerate() {
            self.bind(*r, Slot::InFlight { coll, index });
        }
        Ok(Flow::Next)
    }

    fn exec_wait_tensor(&mut self, op: OpId, engine: &mut Engine) -> Result<Flow, SimError> {
        let ctx = self.ctx;
        let v = *ctx
            .operands(op)
            .first()
            .ok_or_else(|| SimError::op(ctx, op, "expects one operand"))?;
        let Slot::InFlight { coll, index } = *self.slot(op, v)? else {
            return Err(SimError::op(
                ctx,
                op,
                "operand is not the in-flight result of a collective",
            ));
        };
        if !engine.is_complete(coll) {
            return Ok(Flow::Block(coll));
        }
        let t = engine.outputs(coll, self.rank)[index].clone();
        self.define(op, 0, t)?;
        Ok(Flow::Next)
    }

    fn exec_shard_dim(&mut self, op: OpId, engine: &mut Engine) -> Result<Flow, SimError> {
        let ctx = self.ctx;
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
        let t = engine.outputs(coll, self.rank)[0].clone();
        self.define(op, 0, t)?;
        Ok(Flow::Next)
    }
}

/// A reduce-scatter's inputs after its `prescale` (each multiplied and rounded as
/// `compute.scale` does), or as they are.
pub(super) fn prescaled(
    ctx: &commlir_ir::Context,
    op: OpId,
    inputs: Vec<crate::tensor::Tensor>,
) -> Result<Vec<crate::tensor::Tensor>, SimError> {
    match commlir_dialects::coll::prescale_of(ctx, op) {
        Some(f) => inputs
            .iter()
            .map(|t| super::compute::scale(t, f).map_err(|m| SimError::op(ctx, op, m)))
            .collect(),
        None => Ok(inputs),
    }
}
