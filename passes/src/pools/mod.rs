//! Comm-buffer pool planning (PR #138519), shared by the `comm-plan-pools` pass, the
//! `--comm-report` pools section and the pool benchmark.
//!
//! Comm buffers are planned in isolation from regular buffers, one pool per (kind, group)
//! per function: [`liveness`] finds every comm buffer and its live range, [`packing`] places
//! each pool's buffers so that buffers live at the same time never share a byte.

pub mod liveness;
pub mod packing;

use commlir_dialects::comm::{encoding_kind_str, PoolSlot};
use commlir_ir::{BlockId, CommBufferKind, Context};
use liveness::{analyze, SlotLiveness};
use packing::Interval;
use std::collections::BTreeMap;

/// The plan of one pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolPlan {
    pub kind: CommBufferKind,
    pub group: String,
    pub alignment: u64,
    /// The pool size.
    pub bytes: u64,
    /// The most bytes of the pool's buffers live at one time.
    pub lower_bound: u64,
    /// What first fit by decreasing size would need (for comparison).
    /// The first-fit-by-size baseline (`None` for pools too large to bother).
    pub first_fit_bytes: Option<u64>,
    /// Bytes without any reuse (every buffer its own range).
    pub unshared_bytes: u64,
    /// (index into [`FunctionPlan::liveness`]'s slots, its range in the pool).
    pub slots: Vec<(usize, PoolSlot)>,
}

impl PoolPlan {
    /// The kind's spelling.
    pub fn kind_str(&self) -> &'static str {
        encoding_kind_str(self.kind)
    }
}

/// The plan of one function body: its comm buffers and one plan per pool, ordered by
/// (kind, group) name.
#[derive(Clone, Debug)]
pub struct FunctionPlan {
    pub liveness: SlotLiveness,
    pub pools: Vec<PoolPlan>,
}

/// Plans the pools of `block` (a function body) with slot offsets aligned to `alignment`.
pub fn plan_block(ctx: &Context, block: BlockId, alignment: u64) -> FunctionPlan {
    let liveness = analyze(ctx, block);
    let mut by_pool: BTreeMap<(&'static str, &str), Vec<usize>> = BTreeMap::new();
    for (i, s) in liveness.slots.iter().enumerate() {
        by_pool
            .entry((encoding_kind_str(s.kind), s.group.as_str()))
            .or_default()
            .push(i);
    }
    let pools = by_pool
        .into_values()
        .map(|ids| {
            let items: Vec<Interval> = ids
                .iter()
                .map(|&i| {
                    let s = &liveness.slots[i];
                    Interval {
                        start: s.start,
                        end: s.end,
                        size: s.size,
                    }
                })
                .collect();
            let placement = packing::plan(&items, alignment);
            debug_assert_eq!(packing::first_conflict(&items, &placement), None);
            let first = &liveness.slots[ids[0]];
            PoolPlan {
                kind: first.kind,
                group: first.group.clone(),
                alignment,
                bytes: placement.bytes,
                lower_bound: packing::max_live(&items),
                first_fit_bytes: packing::first_fit_by_size(&items, alignment).map(|p| p.bytes),
                unshared_bytes: items.iter().map(|i| i.size).sum(),
                slots: ids
                    .iter()
                    .zip(&placement.offsets)
                    .map(|(&i, &offset)| {
                        (
                            i,
                            PoolSlot {
                                offset,
                                size: liveness.slots[i].size,
                            },
                        )
                    })
                    .collect(),
            }
        })
        .collect();
    FunctionPlan { liveness, pools }
}
