//! The collective engine: NCCL's matching and ordering rules over simulated ranks.
//!
//! - Each communicator (a subgroup of a group) numbers the collectives each member issues on
//!   it; the k-th collective of every member is the same collective, and members must agree
//!   on its kind, attributes and input types (otherwise: a mismatch error).
//! - Each rank has one comm stream: its collectives (over all communicators) execute in the
//!   order it issued them. A collective completes once every member has issued it *and* it is
//!   at the head of every member's stream. Rank-divergent orders across communicators
//!   therefore never complete — the scheduler reports that as a deadlock, like the hang it
//!   would be under real NCCL.
//! - Inputs are snapshotted when a rank issues (its contribution is the data at issue time)
//!   and outputs are delivered when the rank waits, so results never depend on the order in
//!   which the scheduler happens to run ranks.

use super::collective::{self, CollSpec};
use super::groups::Communicator;
use crate::error::{BlockedRank, CollRef, Mismatch, SimError};
use crate::tensor::Tensor;
use commlir_ir::{Context, OpId};
use std::collections::HashMap;

/// One issued collective (one instance on one communicator).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CollId(usize);

struct Instance {
    comm: usize,
    seq: usize,
    /// The spec of the first member to issue; later members must match it.
    spec: CollSpec,
    first_rank: usize,
    /// Per member position: the op that issued it there.
    ops: Vec<Option<OpId>>,
    /// Per member position: the snapshot of its inputs (dropped once complete).
    inputs: Vec<Option<Vec<Tensor>>>,
    /// Per member position: its outputs, once complete.
    outputs: Option<Vec<Vec<Tensor>>>,
}

struct CommState {
    comm: Communicator,
    /// Instances in sequence order.
    instances: Vec<CollId>,
    /// Per member position: how many collectives it has issued here.
    issued: Vec<usize>,
}

/// Matching, ordering and completion of collectives across ranks.
pub struct Engine {
    comms: Vec<CommState>,
    comm_index: HashMap<(OpId, usize), usize>,
    instances: Vec<Instance>,
    /// Per rank: the collectives it issued, in order (its comm stream).
    streams: Vec<Vec<CollId>>,
    /// Per rank: index in `streams` of the first collective not yet complete.
    heads: Vec<usize>,
}

impl Engine {
    /// An engine for `n_ranks` ranks.
    pub fn new(n_ranks: usize) -> Self {
        Engine {
            comms: Vec::new(),
            comm_index: HashMap::new(),
            instances: Vec::new(),
            streams: vec![Vec::new(); n_ranks],
            heads: vec![0; n_ranks],
        }
    }

    /// Rank `rank` issues a collective on `comm` from `op`, contributing `inputs` (whose
    /// types must be `spec.inputs`). Completes whatever became completable.
    pub fn issue(
        &mut self,
        ctx: &Context,
        rank: usize,
        comm: &Communicator,
        spec: CollSpec,
        op: OpId,
        inputs: Vec<Tensor>,
    ) -> Result<CollId, SimError> {
        // Checked here, once, so that executing the collective later cannot fail.
        spec.output_types(comm.members.len())
            .map_err(|m| SimError::op(ctx, op, m))?;
        debug_assert!(spec.inputs.iter().eq(inputs.iter().map(|t| &t.ty)));
        let c = match self.comm_index.get(&(comm.group_op, comm.index)) {
            Some(c) => *c,
            None => {
                let c = self.comms.len();
                self.comms.push(CommState {
                    comm: comm.clone(),
                    instances: Vec::new(),
                    issued: vec![0; comm.members.len()],
                });
                self.comm_index.insert((comm.group_op, comm.index), c);
                c
            }
        };
        let pos = comm
            .position(rank)
            .expect("issuing rank is a member of the communicator");
        let seq = self.comms[c].issued[pos];
        let id = match self.comms[c].instances.get(seq) {
            Some(&id) => {
                let inst = &self.instances[id.0];
                if inst.spec != spec {
                    return Err(SimError::Mismatch(Box::new(Mismatch {
                        op,
                        name: ctx.op_name(op).to_string(),
                        first_op: inst.ops.iter().flatten().next().copied().unwrap_or(op),
                        group: comm.group.clone(),
                        seq,
                        first_rank: inst.first_rank,
                        rank,
                        expected: inst.spec.to_string(),
                        got: spec.to_string(),
                    })));
                }
                id
            }
            None => {
                let id = CollId(self.instances.len());
                let g = comm.members.len();
                self.instances.push(Instance {
                    comm: c,
                    seq,
                    spec,
                    first_rank: rank,
                    ops: vec![None; g],
                    inputs: vec![None; g],
                    outputs: None,
                });
                self.comms[c].instances.push(id);
                id
            }
        };
        let inst = &mut self.instances[id.0];
        inst.ops[pos] = Some(op);
        inst.inputs[pos] = Some(inputs);
        self.comms[c].issued[pos] += 1;
        self.streams[rank].push(id);
        self.progress();
        Ok(id)
    }

    /// Whether a collective has completed.
    pub fn is_complete(&self, id: CollId) -> bool {
        self.instances[id.0].outputs.is_some()
    }

    /// The outputs `rank` receives from a completed collective.
    pub fn outputs(&self, id: CollId, rank: usize) -> &[Tensor] {
        let inst = &self.instances[id.0];
        let pos = self.comms[inst.comm]
            .comm
            .position(rank)
            .expect("rank is a member");
        &inst.outputs.as_ref().expect("collective is complete")[pos]
    }

    /// Completes collectives until none can: one that every member issued and that sits at
    /// the head of every member's stream.
    fn progress(&mut self) {
        loop {
            let mut changed = false;
            for r in 0..self.streams.len() {
                let Some(&id) = self.streams[r].get(self.heads[r]) else {
                    continue;
                };
                if self.can_complete(id) {
                    self.complete(id);
                    changed = true;
                }
            }
            if !changed {
                return;
            }
        }
    }

    fn can_complete(&self, id: CollId) -> bool {
        let inst = &self.instances[id.0];
        inst.outputs.is_none()
            && inst.inputs.iter().all(Option::is_some)
            && self.comms[inst.comm]
                .comm
                .members
                .iter()
                .all(|&m| self.streams[m].get(self.heads[m]) == Some(&id))
    }

    fn complete(&mut self, id: CollId) {
        let inst = &mut self.instances[id.0];
        let inputs: Vec<Vec<Tensor>> = inst
            .inputs
            .iter_mut()
            .map(|i| i.take().unwrap_or_default())
            .collect();
        inst.outputs = Some(collective::execute(&inst.spec.kind, &inputs));
        for &m in &self.comms[inst.comm].comm.members {
            self.heads[m] += 1;
        }
    }

    fn coll_ref(&self, id: CollId, rank: usize) -> CollRef {
        let inst = &self.instances[id.0];
        let comm = &self.comms[inst.comm].comm;
        let op = comm
            .position(rank)
            .and_then(|p| inst.ops[p])
            .or_else(|| inst.ops.iter().flatten().next().copied())
            .expect("an issued collective has an op");
        CollRef {
            op,
            group: comm.group.clone(),
            members: comm.members.clone(),
            seq: inst.seq,
        }
    }

    /// Why `rank`, blocked at `at` on `waiting_for`, cannot proceed.
    pub fn blocked_report(&self, rank: usize, at: OpId, waiting_for: CollId) -> BlockedRank {
        let behind = self.streams[rank]
            .get(self.heads[rank])
            .copied()
            .unwrap_or(waiting_for);
        let inst = &self.instances[behind.0];
        let comm = &self.comms[inst.comm].comm;
        let missing = comm
            .members
            .iter()
            .zip(&inst.inputs)
            .filter(|(_, i)| i.is_none())
            .map(|(m, _)| *m)
            .collect();
        BlockedRank {
            rank,
            at,
            waiting_for: self.coll_ref(waiting_for, rank),
            behind: self.coll_ref(behind, rank),
            missing,
        }
    }
}
