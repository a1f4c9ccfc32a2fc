//! Placing live intervals in one address range: offline dynamic storage allocation.
//!
//! Each buffer is a rectangle (its live interval × its size); two buffers may share bytes
//! only when their intervals are disjoint. Finding the smallest range is NP-hard, but on
//! interval graphs greedy placement in a good order comes close to the lower bound (the most
//! bytes live at one time). [`plan`] runs greedy placement under several orders and two gap
//! policies and keeps the smallest result; [`first_fit_by_size`] is the classic baseline it
//! is measured against (it is one of the candidates, so `plan` is never worse).
//!
//! Everything is a deterministic function of the intervals: sorts break ties by index.

/// One buffer to place: live over positions `start..=end`, `size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub start: usize,
    pub end: usize,
    pub size: u64,
}

impl Interval {
    fn meets(&self, other: &Interval) -> bool {
        self.start <= other.end && other.start <= self.end
    }
}

/// Offsets for a list of intervals, and the bytes they span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Offset of each interval, in input order.
    pub offsets: Vec<u64>,
    /// The end of the highest placed buffer: the pool size.
    pub bytes: u64,
}

/// Which free gap a buffer goes into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// The lowest gap that holds it.
    First,
    /// The gap it fills most tightly (lowest on ties); the top of the range only when no
    /// gap below holds it. Keeps large holes for large buffers.
    Best,
}

/// The order buffers are placed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Largest first: big buffers fix the layout, small ones fill holes.
    SizeDesc,
    /// Largest size × lifetime first.
    AreaDesc,
    /// Longest-lived first: they constrain the most others.
    DurationDesc,
    /// Heaviest neighbourhood first (own size plus every buffer live at the same time).
    ConflictDesc,
    /// Program order, like an online allocator.
    StartAsc,
}

/// Every order [`plan`] tries.
pub const ORDERS: [Order; 5] = [
    Order::SizeDesc,
    Order::AreaDesc,
    Order::DurationDesc,
    Order::ConflictDesc,
    Order::StartAsc,
];

fn align_up(x: u64, align: u64) -> u64 {
    x.div_ceil(align) * align
}

/// The indices of `items` in `order`.
pub fn ordering(items: &[Interval], order: Order) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..items.len()).collect();
    let dur = |i: usize| (items[i].end - items[i].start + 1) as u64;
    match order {
        Order::SizeDesc => {
            idx.sort_by_key(|&i| (std::cmp::Reverse(items[i].size), items[i].start, i))
        }
        Order::AreaDesc => idx.sort_by_key(|&i| {
            (
                std::cmp::Reverse(u128::from(items[i].size) * u128::from(dur(i))),
                i,
            )
        }),
        Order::DurationDesc => idx.sort_by_key(|&i| {
            (
                std::cmp::Reverse(dur(i)),
                std::cmp::Reverse(items[i].size),
                i,
            )
        }),
        Order::ConflictDesc => {
            let weight: Vec<u64> = items
                .iter()
                .map(|a| items.iter().filter(|b| a.meets(b)).map(|b| b.size).sum())
                .collect();
            idx.sort_by_key(|&i| {
                (
                    std::cmp::Reverse(weight[i]),
                    std::cmp::Reverse(items[i].size),
                    i,
                )
            });
        }
        Order::StartAsc => {
            idx.sort_by_key(|&i| (items[i].start, std::cmp::Reverse(items[i].size), i))
        }
    }
    idx
}

/// Places `items` greedily in the order `order`, offsets aligned to `align` (a power of two).
pub fn place(items: &[Interval], order: &[usize], align: u64, fit: Fit) -> Placement {
    let align = align.max(1);
    let mut offsets = vec![0u64; items.len()];
    let mut placed: Vec<usize> = Vec::with_capacity(items.len());
    let mut busy: Vec<(u64, u64)> = Vec::new();
    let mut bytes = 0;
    for &i in order {
        let it = items[i];
        if it.size == 0 {
            continue;
        }
        busy.clear();
        busy.extend(
            placed
                .iter()
                .filter(|&&j| items[j].meets(&it))
                .map(|&j| (offsets[j], offsets[j] + items[j].size)),
        );
        busy.sort_unstable();
        let off = gap_for(&busy, it.size, align, fit);
        offsets[i] = off;
        bytes = bytes.max(off + it.size);
        placed.push(i);
    }
    Placement { offsets, bytes }
}

/// The offset for `size` bytes given the ranges already taken (sorted by offset).
fn gap_for(busy: &[(u64, u64)], size: u64, align: u64, fit: Fit) -> u64 {
    let mut cursor = 0u64;
    // (slack, offset) of the tightest gap so far.
    let mut best: Option<(u64, u64)> = None;
    for &(lo, hi) in busy {
        let at = align_up(cursor, align);
        if at + size <= lo {
            let slack = lo - at - size;
            match fit {
                Fit::First => return at,
                Fit::Best => {
                    if best.is_none_or(|(s, _)| slack < s) {
                        best = Some((slack, at));
                    }
                }
            }
        }
        cursor = cursor.max(hi);
    }
    best.map_or_else(|| align_up(cursor, align), |(_, at)| at)
}

/// The baseline: first fit, largest buffer first.
pub fn first_fit_by_size(items: &[Interval], align: u64) -> Placement {
    place(items, &ordering(items, Order::SizeDesc), align, Fit::First)
}

/// The smallest placement over every order of [`ORDERS`] with best fit and first fit
/// (earliest candidate on ties, so the choice is deterministic).
pub fn plan(items: &[Interval], align: u64) -> Placement {
    let mut best: Option<Placement> = None;
    for order in ORDERS {
        let idx = ordering(items, order);
        for fit in [Fit::Best, Fit::First] {
            let p = place(items, &idx, align, fit);
            if best.as_ref().is_none_or(|b| p.bytes < b.bytes) {
                best = Some(p);
            }
        }
    }
    best.unwrap_or(Placement {
        offsets: Vec::new(),
        bytes: 0,
    })
}

/// Two intervals live at the same time whose bytes overlap, if any (a broken placement).
pub fn first_conflict(items: &[Interval], p: &Placement) -> Option<(usize, usize)> {
    for i in 0..items.len() {
        for j in i + 1..items.len() {
            let (a, b) = (items[i], items[j]);
            let apart = a.size == 0
                || b.size == 0
                || p.offsets[i] + a.size <= p.offsets[j]
                || p.offsets[j] + b.size <= p.offsets[i];
            if a.meets(&b) && !apart {
                return Some((i, j));
            }
        }
    }
    None
}

/// The largest total size live at one position (the lower bound on any placement).
pub fn max_live(items: &[Interval]) -> u64 {
    let mut events: Vec<(usize, bool, u64)> = items
        .iter()
        .flat_map(|i| [(i.start, false, i.size), (i.end, true, i.size)])
        .collect();
    events.sort_unstable();
    let (mut cur, mut best) = (0u64, 0u64);
    for (_, dies, size) in events {
        if dies {
            cur -= size;
        } else {
            cur += size;
            best = best.max(cur);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(start: usize, end: usize, size: u64) -> Interval {
        Interval { start, end, size }
    }

    #[test]
    fn disjoint_lifetimes_share_bytes() {
        let items = [iv(0, 1, 64), iv(2, 3, 64)];
        let p = plan(&items, 64);
        assert_eq!(p.bytes, 64);
        assert_eq!(p.offsets, vec![0, 0]);
    }

    #[test]
    fn portfolio_beats_first_fit_by_size() {
        // First fit by size puts the two 64-byte buffers where they split the free space
        // that the late 128-byte pair needs; another order reaches the lower bound.
        let items = [
            iv(2, 4, 128),
            iv(3, 6, 64),
            iv(1, 3, 128),
            iv(4, 7, 128),
            iv(2, 2, 192),
            iv(4, 7, 128),
            iv(1, 4, 64),
        ];
        let lb = max_live(&items);
        let ff = first_fit_by_size(&items, 64);
        let best = plan(&items, 64);
        assert_eq!((lb, ff.bytes, best.bytes), (512, 576, 512));
        assert_eq!(first_conflict(&items, &best), None);
        assert_eq!(first_conflict(&items, &ff), None);
    }

    #[test]
    fn offsets_are_aligned() {
        let items = [iv(0, 3, 24), iv(1, 2, 24), iv(2, 5, 40)];
        let p = plan(&items, 16);
        assert!(p.offsets.iter().all(|o| o % 16 == 0));
        assert_eq!(first_conflict(&items, &p), None);
    }
}
