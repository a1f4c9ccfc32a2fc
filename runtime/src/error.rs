//! Runtime errors of the sim backend, and their rendering as MLIR-shaped diagnostics.
//!
//! Every failure names the op it happened at (its location becomes the diagnostic's), so
//! the CLI prints `file:line:col: error: 'x.y' op ...` exactly like the verifier does.

use commlir_ir::{Context, Diagnostic, OpId};
use std::fmt::Write as _;

/// A collective as seen in error reports: the op that issued it and where it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollRef {
    /// The op (on the reporting rank) that issued the collective.
    pub op: OpId,
    /// The group's symbol name.
    pub group: String,
    /// Global ranks of the communicator (the subgroup), in group-rank order.
    pub members: Vec<usize>,
    /// Position of the collective in the communicator's sequence (0-based).
    pub seq: usize,
}

/// Why one rank could not make progress when a deadlock was detected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedRank {
    pub rank: usize,
    /// The op the rank is blocked at (a wait, or a blocking collective).
    pub at: OpId,
    /// The collective that op waits for.
    pub waiting_for: CollRef,
    /// The first collective of the rank's comm stream that has not completed (the one the
    /// awaited collective is queued behind; equal to `waiting_for` when nothing precedes it).
    pub behind: CollRef,
    /// Members of `behind`'s communicator that have not issued it yet.
    pub missing: Vec<usize>,
}

/// Two members of a communicator disagree on the collective at one position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The op of the rank that found the disagreement.
    pub op: OpId,
    pub name: String,
    /// The op the first issuing rank executed.
    pub first_op: OpId,
    pub group: String,
    pub seq: usize,
    pub first_rank: usize,
    pub rank: usize,
    /// What the first rank issued, and what `rank` issued.
    pub expected: String,
    pub got: String,
}

/// Everything that can go wrong while executing a program.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// An op the sim backend has no semantics for.
    #[error("'{name}' op cannot be executed by the sim backend")]
    Unsupported { op: OpId, name: String },

    /// An op that cannot execute on its operands (shapes, element types, attributes, data).
    #[error("'{name}' op {message}")]
    Op {
        op: OpId,
        name: String,
        message: String,
    },

    /// Members of a communicator issued different collectives at the same position.
    #[error("'{}' op does not match collective #{} on group @{}: rank {} issued {}, rank {} issued {}",
        .0.name, .0.seq, .0.group, .0.first_rank, .0.expected, .0.rank, .0.got)]
    Mismatch(Box<Mismatch>),

    /// A rank executed a collective on a group it is not a member of.
    #[error("'{name}' op is executed by rank {rank}, which is not a member of group @{group}")]
    RankNotInGroup {
        op: OpId,
        name: String,
        rank: usize,
        group: String,
    },

    /// The group layout does not fit the number of simulated ranks.
    #[error("'{name}' op: group @{group} {problem}")]
    GroupLayout {
        op: OpId,
        name: String,
        group: String,
        problem: String,
    },

    /// No rank can make progress, and some have not finished.
    #[error("deadlock: ranks {} are blocked and none can make progress", join(blocked.iter().map(|b| b.rank)))]
    Deadlock { blocked: Vec<BlockedRank> },

    /// A problem with the run itself (no entry function, bad options).
    #[error("{0}")]
    Setup(String),
}

fn join<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl SimError {
    /// An [`SimError::Op`] for `op`.
    pub fn op(ctx: &Context, op: OpId, message: impl Into<String>) -> SimError {
        SimError::Op {
            op,
            name: ctx.op_name(op).to_string(),
            message: message.into(),
        }
    }

    /// The op the error is reported at, if any.
    pub fn op_id(&self) -> Option<OpId> {
        match self {
            SimError::Unsupported { op, .. }
            | SimError::Op { op, .. }
            | SimError::RankNotInGroup { op, .. }
            | SimError::GroupLayout { op, .. } => Some(*op),
            SimError::Mismatch(m) => Some(m.op),
            SimError::Deadlock { blocked } => blocked.first().map(|b| b.at),
            SimError::Setup(_) => None,
        }
    }

    /// The error as a diagnostic at its op's location, with notes pointing at the other ops
    /// involved (the first issuer of a mismatched collective; every blocked rank's op).
    pub fn to_diagnostic(&self, ctx: &Context) -> Diagnostic {
        let loc = self
            .op_id()
            .map_or_else(|| ctx.unknown_loc(), |op| ctx.op_loc(op));
        let mut d = Diagnostic::error(loc, self.to_string());
        match self {
            SimError::Mismatch(m) => {
                d = d.with_note(
                    ctx.op_loc(m.first_op),
                    format!("rank {} issued it here", m.first_rank),
                );
            }
            SimError::Deadlock { blocked } => {
                for b in blocked {
                    d = d.with_note(ctx.op_loc(b.at), describe_blocked(ctx, b));
                }
            }
            _ => {}
        }
        d
    }
}

fn describe_coll(ctx: &Context, c: &CollRef) -> String {
    format!(
        "'{}' (collective #{} on group @{} [ranks {}])",
        ctx.op_name(c.op),
        c.seq,
        c.group,
        join(&c.members)
    )
}

/// One line per blocked rank: where it waits, for what, and what that is stuck behind.
pub fn describe_blocked(ctx: &Context, b: &BlockedRank) -> String {
    let mut s = format!(
        "rank {} is blocked at '{}' waiting for {}",
        b.rank,
        ctx.op_name(b.at),
        describe_coll(ctx, &b.waiting_for)
    );
    if b.behind != b.waiting_for {
        let _ = write!(
            s,
            ", stuck behind {} on its comm stream",
            describe_coll(ctx, &b.behind)
        );
    }
    if b.missing.is_empty() {
        s.push_str(", which its members have issued but cannot start: their comm streams are busy with earlier collectives");
    } else {
        let (who, verb) = if b.missing.len() > 1 {
            ("ranks", "have")
        } else {
            ("rank", "has")
        };
        let _ = write!(s, ", which {who} {} {verb} not issued", join(&b.missing));
    }
    s
}
