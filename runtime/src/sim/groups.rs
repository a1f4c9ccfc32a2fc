//! Process groups as the sim backend lays them out over N ranks.
//!
//! A `coll.group @g {size = G}` without `ranks` is a family of consecutive subgroups
//! `[0..G), [G..2G), …` (N must be a multiple of G); `ranks = [..]` is a single subgroup;
//! `ranks = [[..], [..]]` an explicit family of disjoint subgroups. Each subgroup is one
//! communicator; a rank's "rank within the group" is its index in its subgroup.

use crate::error::SimError;
use commlir_ir::{AttrKind, Context, OpId};

/// One communicator: a subgroup of a group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Communicator {
    /// The `coll.group` op.
    pub group_op: OpId,
    /// The group's symbol name.
    pub group: String,
    /// Index of the subgroup within the group's family.
    pub index: usize,
    /// Global ranks, in group-rank order.
    pub members: Vec<usize>,
}

impl Communicator {
    /// The rank's index within this communicator.
    pub fn position(&self, rank: usize) -> Option<usize> {
        self.members.iter().position(|m| *m == rank)
    }
}

/// A group laid out over the simulated ranks.
#[derive(Clone, Debug)]
pub struct GroupLayout {
    pub op: OpId,
    pub name: String,
    pub size: usize,
    pub subgroups: Vec<Vec<usize>>,
}

impl GroupLayout {
    /// Lays out `coll.group` op `group` over `n_ranks` ranks; errors are reported at `at`
    /// (the collective that needed the group).
    pub fn resolve(
        ctx: &Context,
        group: OpId,
        n_ranks: usize,
        at: OpId,
    ) -> Result<GroupLayout, SimError> {
        let name = ctx.symbol_name(group).unwrap_or("?").to_string();
        let fail = |problem: String| SimError::GroupLayout {
            op: at,
            name: ctx.op_name(at).to_string(),
            group: name.clone(),
            problem,
        };
        let size = ctx
            .inherent_attr(group, "size")
            .and_then(|a| ctx.attr_as_i64(a))
            .and_then(|s| usize::try_from(s).ok())
            .filter(|s| *s > 0)
            .ok_or_else(|| fail("has no valid 'size'".into()))?;
        let subgroups = match ctx.inherent_attr(group, "ranks") {
            None => {
                if !n_ranks.is_multiple_of(size) {
                    return Err(fail(format!(
                        "has size {size}, but {n_ranks} ranks run: the number of ranks must be a multiple of the group size"
                    )));
                }
                (0..n_ranks / size)
                    .map(|i| (i * size..(i + 1) * size).collect())
                    .collect()
            }
            Some(ranks) => {
                let rows: Vec<Vec<i64>> = match ctx.attr_as_i64_array(ranks) {
                    Some(flat) => vec![flat],
                    None => match ctx.attr_kind(ranks) {
                        AttrKind::Array(items) => items
                            .iter()
                            .map(|a| ctx.attr_as_i64_array(*a))
                            .collect::<Option<Vec<_>>>()
                            .ok_or_else(|| fail("has a malformed 'ranks'".into()))?,
                        _ => return Err(fail("has a malformed 'ranks'".into())),
                    },
                };
                let mut seen = vec![false; n_ranks];
                let mut out = Vec::with_capacity(rows.len());
                for row in rows {
                    if row.len() != size {
                        return Err(fail(format!(
                            "lists a subgroup of {} ranks, but its size is {size}",
                            row.len()
                        )));
                    }
                    let mut members = Vec::with_capacity(size);
                    for r in row {
                        let r = usize::try_from(r)
                            .ok()
                            .filter(|r| *r < n_ranks)
                            .ok_or_else(|| {
                                fail(format!("names rank {r}, but only {n_ranks} ranks run"))
                            })?;
                        if std::mem::replace(&mut seen[r], true) {
                            return Err(fail(format!("lists rank {r} more than once")));
                        }
                        members.push(r);
                    }
                    out.push(members);
                }
                out
            }
        };
        Ok(GroupLayout {
            op: group,
            name,
            size,
            subgroups,
        })
    }

    /// The communicator `rank` belongs to, if any.
    pub fn communicator_of(&self, rank: usize) -> Option<Communicator> {
        let (index, members) = self
            .subgroups
            .iter()
            .enumerate()
            .find(|(_, m)| m.contains(&rank))?;
        Some(Communicator {
            group_op: self.op,
            group: self.name.clone(),
            index,
            members: members.clone(),
        })
    }
}

/// The `coll.group` named by the `group` attribute of `op`.
pub fn group_op_of(ctx: &Context, op: OpId) -> Result<OpId, SimError> {
    let name = ctx
        .inherent_attr(op, "group")
        .and_then(|a| ctx.attr_as_symbol(a))
        .ok_or_else(|| SimError::op(ctx, op, "requires a 'group' symbol reference"))?;
    ctx.lookup_symbol(op, name)
        .filter(|g| ctx.op_name(*g) == "coll.group")
        .ok_or_else(|| {
            SimError::op(
                ctx,
                op,
                format!("group @{name} does not reference a 'coll.group'"),
            )
        })
}
