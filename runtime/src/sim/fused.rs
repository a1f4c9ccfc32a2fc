//! Semantics of the fused collective-matmul ops (`symm.fused_all_gather_matmul`,
//! `symm.fused_matmul_reduce_scatter`) and of `coll.all_slice`.
//!
//! The fused ops are defined as their unfused sequences, computed with the very same
//! functions (the engine's all-gather and rank-ordered reduce-scatter, the compute dialect's
//! matmul), so a program and its `coll-fuse-matmul` rewrite give bit-identical results: a
//! matmul's rows never depend on other rows, and the reduction folds ranks in order and rounds
//! once per element, whatever chunking the real pipeline uses.

use super::coll::{index_attr, reduce_op};
use super::collective::CollKind;
use super::compute::matmul;
use super::engine::Engine;
use super::interp::{Flow, RankInterp};
use crate::error::SimError;
use crate::tensor::Tensor;
use commlir_ir::{Context, OpId};

/// An optional dimension attribute (default 0).
fn dim_or_zero(ctx: &Context, op: OpId, name: &str) -> Result<usize, SimError> {
    if ctx.inherent_attr(op, name).is_none() {
        return Ok(0);
    }
    index_attr(ctx, op, name)
}

/// `a` (…×K, any rank ≥ 2) times `b` (K×N): the leading dimensions flattened into rows, so
/// every row is the compute dialect's row for the same data.
fn matmul_rows(a: &Tensor, b: &Tensor) -> Result<Tensor, String> {
    let shape = &a.ty.shape;
    let (Some(&k), Some(&n)) = (shape.last(), b.ty.shape.last()) else {
        return Err("expects operands of rank at least 2".into());
    };
    let rows = shape[..shape.len() - 1].iter().product();
    let out = matmul(&a.reshaped(vec![rows, k]), b)?;
    let mut out_shape = shape.clone();
    *out_shape.last_mut().expect("rank >= 2") = n;
    Ok(out.reshaped(out_shape))
}

/// Moves the `g` equal dim-0 blocks of `t` to `dim`: the layout change between what a
/// dim-0 collective moves and what a collective along `dim` means.
fn blocks_from_dim0(t: &Tensor, g: usize, dim: usize) -> Tensor {
    if dim == 0 {
        return t.clone();
    }
    let d0 = t.ty.shape[0] / g;
    let parts = t.split(0, &vec![d0; g]);
    let refs: Vec<&Tensor> = parts.iter().collect();
    Tensor::concat(&refs, dim)
}

/// The inverse of [`blocks_from_dim0`]: the `g` equal blocks of `t` along `dim`, stacked on
/// dim 0.
fn blocks_to_dim0(t: &Tensor, g: usize, dim: usize) -> Tensor {
    if dim == 0 {
        return t.clone();
    }
    let d = t.ty.shape[dim] / g;
    let parts = t.split(dim, &vec![d; g]);
    let refs: Vec<&Tensor> = parts.iter().collect();
    Tensor::concat(&refs, 0)
}

impl RankInterp<'_> {
    /// `symm.fused_all_gather_matmul` and `symm.fused_matmul_reduce_scatter`.
    pub(super) fn exec_fused(&mut self, op: OpId, engine: &mut Engine) -> Result<Flow, SimError> {
        let ctx = self.ctx;
        let gather = ctx.op_name(op) == "symm.fused_all_gather_matmul";
        let dim = dim_or_zero(ctx, op, if gather { "gather_dim" } else { "scatter_dim" })?;
        let g = self.group_size(op)?;
        let (coll, done) = self.issue_blocking(engine, op, |me| {
            let a = me.tensor(op, 0)?;
            if gather {
                // The shard moves on dim 0; the gathered layout is restored locally.
                Ok((CollKind::AllGather, vec![a.into_owned()]))
            } else {
                let b = me.tensor(op, 1)?;
                let p = matmul_rows(&a, &b).map_err(|m| SimError::op(ctx, op, m))?;
                if dim >= p.ty.shape.len() || !p.ty.shape[dim].is_multiple_of(g) {
                    return Err(SimError::op(
                        ctx,
                        op,
                        format!("cannot scatter dim {dim} of {} over {g} ranks", p.ty),
                    ));
                }
                Ok((
                    CollKind::ReduceScatter(reduce_op(ctx, op)?),
                    vec![blocks_to_dim0(&p, g, dim)],
                ))
            }
        })?;
        if !done {
            return Ok(Flow::Block(coll));
        }
        let out = engine.outputs(coll, self.rank)[0].clone();
        if !gather {
            // Block r of the dim-0 stack is chunk r along `scatter_dim`: already the result.
            self.define(op, 0, out)?;
            return Ok(Flow::Next);
        }
        // Rank r's shard sits in dim-0 block r; along `gather_dim` the blocks follow in rank order.
        let gathered = blocks_from_dim0(&out, g, dim);
        let return_a = ctx.inherent_attr(op, "return_a").is_some();
        let mut products = Vec::with_capacity(ctx.operands(op).len() - 1);
        for i in 1..ctx.operands(op).len() {
            let b = self.tensor(op, i)?;
            products.push(matmul_rows(&gathered, &b).map_err(|m| SimError::op(ctx, op, m))?);
        }
        let mut index = 0;
        if return_a {
            self.define(op, 0, gathered)?;
            index = 1;
        }
        for (i, p) in products.into_iter().enumerate() {
            self.define(op, index + i, p)?;
        }
        Ok(Flow::Next)
    }

    /// `coll.all_slice`: this rank's block along `dim`, without communication.
    pub(super) fn exec_all_slice(&mut self, op: OpId) -> Result<Flow, SimError> {
        let ctx = self.ctx;
        let dim = index_attr(ctx, op, "dim")?;
        let comm = self.communicator(op)?;
        let (g, me) = (comm.members.len(), comm.position(self.rank).unwrap_or(0));
        let x = self.tensor(op, 0)?;
        if dim >= x.ty.shape.len() || !x.ty.shape[dim].is_multiple_of(g) {
            return Err(SimError::op(
                ctx,
                op,
                format!("cannot slice dim {dim} of {} over {g} ranks", x.ty),
            ));
        }
        let size = x.ty.shape[dim] / g;
        let t = x.slice(dim, me * size, size);
        self.define(op, 0, t)?;
        Ok(Flow::Next)
    }

    /// The number of ranks in the communicator of `op`'s group.
    fn group_size(&mut self, op: OpId) -> Result<usize, SimError> {
        Ok(self.communicator(op)?.members.len())
    }
}
