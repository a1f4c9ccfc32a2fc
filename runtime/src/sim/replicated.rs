//! Inputs of arguments marked `coll.replicated = @group`: such an argument is the same tensor
//! on every rank of its subgroup, so each rank generates it as the subgroup's first member
//! would. Unmarked arguments keep their per-rank streams.

use super::groups::GroupLayout;
use crate::error::SimError;
use crate::inputs::replicated_input_rank;
use commlir_dialects::coll::replicated_arg_group;
use commlir_ir::{Context, OpId};

/// For each of `entry`'s `n_args` arguments, the rank whose input stream each of the
/// `n_ranks` ranks uses: itself, or the first member of its subgroup of the group named by
/// the argument's `coll.replicated` attribute.
pub(super) fn input_ranks(
    ctx: &Context,
    entry: OpId,
    n_args: usize,
    n_ranks: usize,
) -> Result<Vec<Vec<usize>>, SimError> {
    (0..n_args)
        .map(|i| {
            let own: Vec<usize> = (0..n_ranks).collect();
            let Some(name) = replicated_arg_group(ctx, entry, i) else {
                return Ok(own);
            };
            let group = ctx
                .lookup_symbol(entry, name)
                .filter(|g| ctx.op_name(*g) == "coll.group")
                .ok_or_else(|| {
                    SimError::op(ctx, entry, format!("argument #{i} is replicated on @{name}, which does not reference a 'coll.group'"))
                })?;
            let layout = GroupLayout::resolve(ctx, group, n_ranks, entry)?;
            Ok(own
                .into_iter()
                .map(|r| replicated_input_rank(&layout.subgroups, r))
                .collect())
        })
        .collect()
}
