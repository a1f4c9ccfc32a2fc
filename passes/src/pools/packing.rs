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

/// The baseline: first fit, largest buffer first. `None` for pools above
/// [`PORTFOLIO_LIMIT`], where the quadratic baseline is not worth its time.
pub fn first_fit_by_size(items: &[Interval], align: u64) -> Option<Placement> {
    (items.len() <= PORTFOLIO_LIMIT)
        .then(|| place(items, &ordering(items, Order::SizeDesc), align, Fit::First))
}

/// Above this many buffers in one pool, [`plan`] only runs the program-order sweep: the other
/// orders need, for each buffer, the placed buffers overlapping it in time, found by a scan that
/// is quadratic over the pool. The sweep gives the same result as the `StartAsc` order in
/// O(n log n) plus the live buffers scanned per allocation.
pub const PORTFOLIO_LIMIT: usize = 2048;

/// The smallest placement over every order of [`ORDERS`] with best fit and first fit
/// (earliest candidate on ties, so the choice is deterministic); for pools larger than
/// [`PORTFOLIO_LIMIT`], the program-order sweep with both fits.
pub fn plan(items: &[Interval], align: u64) -> Placement {
    let mut best: Option<Placement> = None;
    let mut consider = |p: Placement| {
        if best.as_ref().is_none_or(|b| p.bytes < b.bytes) {
            best = Some(p);
        }
    };
    if items.len() > PORTFOLIO_LIMIT {
        for fit in [Fit::Best, Fit::First] {
            consider(place_sweep(items, align, fit));
        }
    } else {
        for order in ORDERS {
            let idx = ordering(items, order);
            for fit in [Fit::Best, Fit::First] {
                consider(place(items, &idx, align, fit));
            }
        }
    }
    best.unwrap_or(Placement {
        offsets: Vec::new(),
        bytes: 0,
    })
}

/// Greedy placement in program order, as an allocator would see the program: at each
/// buffer's start, the buffers whose intervals ended are freed, then the buffer takes a gap
/// among the live ones. Same result as [`place`] with [`Order::StartAsc`] (every placed buffer
/// overlapping a new one in time is one still live at its start), without the scan over
/// every placed buffer: the free gaps below the highest live byte are kept by offset and by
/// length, so an allocation looks at gaps rather than at live buffers (an FSDP program keeps
/// thousands of gradient buffers live, packed in a few contiguous runs).
pub fn place_sweep(items: &[Interval], align: u64, fit: Fit) -> Placement {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let align = align.max(1);
    let order = ordering(items, Order::StartAsc);
    let mut offsets = vec![0u64; items.len()];
    let mut live: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    let mut free = FreeGaps::default();
    let mut bytes = 0;
    for i in order {
        let it = items[i];
        if it.size == 0 {
            continue;
        }
        while let Some(&Reverse((end, j))) = live.peek() {
            if end >= it.start {
                break;
            }
            live.pop();
            free.release(offsets[j], items[j].size);
        }
        let off = free.take(it.size, align, fit);
        offsets[i] = off;
        bytes = bytes.max(off + it.size);
        live.push(Reverse((it.end, i)));
    }
    Placement { offsets, bytes }
}

/// The free space below the highest live byte (`top`), as gaps indexed by offset and by
/// length; everything from `top` up is free.
#[derive(Default)]
struct FreeGaps {
    by_offset: std::collections::BTreeMap<u64, u64>,
    by_len: std::collections::BTreeSet<(u64, u64)>,
    top: u64,
}

impl FreeGaps {
    fn insert(&mut self, at: u64, len: u64) {
        if len > 0 {
            self.by_offset.insert(at, len);
            self.by_len.insert((len, at));
        }
    }

    fn remove(&mut self, at: u64) -> u64 {
        let len = self.by_offset.remove(&at).unwrap_or(0);
        self.by_len.remove(&(len, at));
        len
    }

    /// Where `size` bytes go, exactly as [`gap_for`] would choose over the live ranges.
    fn take(&mut self, size: u64, align: u64, fit: Fit) -> u64 {
        let fits = |g: u64, len: u64| {
            let at = align_up(g, align);
            (at + size <= g + len).then(|| (g + len - at - size, at))
        };
        // No gap is long enough (a gap's usable length is at most its length): skip the
        // scan. In an FSDP program most allocations end up here, above thousands of gaps.
        let longest = self.by_len.last().map_or(0, |&(len, _)| len);
        let chosen: Option<(u64, u64)> = match fit {
            _ if longest < size => None,
            Fit::First => self
                .by_offset
                .iter()
                .find_map(|(&g, &len)| fits(g, len).map(|(_, at)| (g, at))),
            Fit::Best => {
                // (slack, offset) minimal; a gap's slack is at least len - size - (align - 1),
                // so the scan by length stops once that bound exceeds the best slack found.
                let mut best: Option<(u64, u64, u64)> = None;
                for &(len, g) in self.by_len.range((size, 0)..) {
                    if let Some((slack, _)) = best.map(|(s, o, _)| (s, o)) {
                        if len.saturating_sub(size + align - 1) > slack {
                            break;
                        }
                    }
                    if let Some((slack, at)) = fits(g, len) {
                        if best.is_none_or(|(s, o, _)| (slack, at) < (s, o)) {
                            best = Some((slack, at, g));
                        }
                    }
                }
                best.map(|(_, at, g)| (g, at))
            }
        };
        match chosen {
            Some((g, at)) => {
                let len = self.remove(g);
                self.insert(g, at - g);
                self.insert(at + size, g + len - at - size);
                at
            }
            None => {
                let at = align_up(self.top, align);
                self.insert(self.top, at - self.top);
                self.top = at + size;
                at
            }
        }
    }

    /// Frees `[at, at + size)`, merging with the neighbouring gaps and the top.
    fn release(&mut self, at: u64, size: u64) {
        let (mut lo, mut hi) = (at, at + size);
        if let Some((&g, &len)) = self.by_offset.range(..at).next_back() {
            if g + len == at {
                self.remove(g);
                lo = g;
            }
        }
        if let Some(len) = self.by_offset.get(&hi).copied() {
            self.remove(hi);
            hi += len;
        }
        if hi >= self.top {
            self.top = lo;
        } else {
            self.insert(lo, hi - lo);
        }
    }
}

/// Two intervals live at the same time whose bytes overlap, if any (a broken placement).
/// A sweep over time keeping the live buffers ordered by offset: in a set of disjoint ranges
/// a new range overlaps one exactly when it overlaps its neighbour below or above, so each
/// buffer is checked in O(log n).
pub fn first_conflict(items: &[Interval], p: &Placement) -> Option<(usize, usize)> {
    use std::cmp::Reverse;
    use std::collections::{BTreeMap, BinaryHeap};
    let order = ordering(items, Order::StartAsc);
    let mut live: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    let mut busy: BTreeMap<(u64, usize), u64> = BTreeMap::new();
    for i in order {
        let it = items[i];
        if it.size == 0 {
            continue;
        }
        while let Some(&Reverse((end, j))) = live.peek() {
            if end >= it.start {
                break;
            }
            live.pop();
            busy.remove(&(p.offsets[j], j));
        }
        let (lo, hi) = (p.offsets[i], p.offsets[i] + it.size);
        if let Some((&(_, j), &end)) = busy.range(..(lo, usize::MAX)).next_back() {
            if end > lo {
                return Some((j.min(i), j.max(i)));
            }
        }
        if let Some((&(start, j), _)) = busy.range((lo, usize::MAX)..).next() {
            if start < hi {
                return Some((j.min(i), j.max(i)));
            }
        }
        busy.insert((lo, i), hi);
        live.push(Reverse((it.end, i)));
    }
    None
}

/// The largest total size live at one position (the lower bound on any placement).
///
/// Positions are op indices, so they are usually dense: then the sizes starting and ending
/// at each position are summed in two tables and swept once, with no sort. Sparse positions
/// (more than a few per interval) take the sort of the start and end events instead.
pub fn max_live(items: &[Interval]) -> u64 {
    let last = items.iter().map(|i| i.end.max(i.start)).max().unwrap_or(0);
    if last > 4 * items.len() + 1024 {
        return max_live_sorted(items);
    }
    let span = last + 1;
    let (mut starts, mut ends) = (vec![0u64; span], vec![0u64; span]);
    for i in items {
        starts[i.start] += i.size;
        ends[i.end] += i.size;
    }
    // At each position every interval starting there is counted before those ending there
    // are dropped (intervals are inclusive), exactly as the event sort orders them.
    let (mut cur, mut best) = (0u64, 0u64);
    for (s, e) in starts.iter().zip(&ends) {
        cur += s;
        best = best.max(cur);
        cur -= e;
    }
    best
}

/// [`max_live`] by sorting the start and end events.
fn max_live_sorted(items: &[Interval]) -> u64 {
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
        let ff = first_fit_by_size(&items, 64).unwrap();
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

#[cfg(test)]
mod sweep_tests {
    use super::*;
    use commlir_testgen::Rng;

    fn random_items(seed: u64, n: usize) -> Vec<Interval> {
        let mut r = Rng::new(seed);
        let span = 200.max(2 * n);
        (0..n)
            .map(|_| {
                let start = r.below(span);
                let len = if r.chance(0.1) {
                    r.below(150)
                } else {
                    r.below(8)
                };
                Interval {
                    start,
                    end: start + len,
                    size: 16 * (1 + r.below(8) as u64),
                }
            })
            .collect()
    }

    /// The sweep is the `StartAsc` greedy placement, fast.
    #[test]
    fn sweep_equals_program_order_placement() {
        for seed in 0..50 {
            let items = random_items(seed, 120);
            for fit in [Fit::First, Fit::Best] {
                let slow = place(&items, &ordering(&items, Order::StartAsc), 64, fit);
                let fast = place_sweep(&items, 64, fit);
                assert_eq!(slow, fast, "seed {seed} {fit:?}");
                assert_eq!(first_conflict(&items, &fast), None);
            }
        }
    }

    /// The sweep conflict check agrees with a brute-force check on broken placements.
    #[test]
    fn conflict_check_matches_brute_force() {
        for seed in 0..50 {
            let items = random_items(seed, 60);
            let mut p = place_sweep(&items, 16, Fit::First);
            let mut r = Rng::new(seed);
            for _ in 0..3 {
                let k = r.below(items.len());
                p.offsets[k] = 16 * r.below(20) as u64;
            }
            let brute = (0..items.len()).any(|i| {
                (i + 1..items.len()).any(|j| {
                    let (a, b) = (items[i], items[j]);
                    a.meets(&b)
                        && p.offsets[i] < p.offsets[j] + b.size
                        && p.offsets[j] < p.offsets[i] + a.size
                })
            });
            assert_eq!(first_conflict(&items, &p).is_some(), brute, "seed {seed}");
        }
    }

    /// The dense sweep of `max_live` agrees with the event sort, on dense and sparse positions.
    #[test]
    fn max_live_matches_event_sort() {
        for seed in 0..50 {
            let mut items = random_items(seed, 1 + seed as usize * 3);
            assert_eq!(max_live(&items), max_live_sorted(&items), "seed {seed}");
            for it in items.iter_mut().step_by(3) {
                it.start *= 1000;
                it.end *= 1000;
            }
            assert_eq!(
                max_live(&items),
                max_live_sorted(&items),
                "sparse seed {seed}"
            );
        }
        assert_eq!(max_live(&[]), 0);
    }

    /// Pools beyond the portfolio limit plan quickly (a few seconds even in a debug build).
    #[test]
    fn large_pools_scale() {
        let items = random_items(7, 60_000);
        let t = std::time::Instant::now();
        let p = plan(&items, 64);
        assert_eq!(first_conflict(&items, &p), None);
        assert!(p.bytes >= max_live(&items));
        assert!(t.elapsed().as_secs_f64() < 20.0, "{:?}", t.elapsed());
    }
}
