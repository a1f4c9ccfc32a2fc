//! Which event records and stream waits a rank actually has to issue, and when (pure
//! bookkeeping, no CUDA: unit-tested without a GPU).
//!
//! The compiled host program orders its two streams with explicit `event_record` /
//! `stream_wait` pairs, and the runner joins the streams both ways before every call. Many of
//! those pairs order nothing: in a single-collective program whose argument and result live
//! in their pool slots the compute stream does no work at all, yet every call made the comm
//! stream wait for the compute stream and back, which puts a cross-stream round trip between
//! two consecutive collectives on the GPU and ten driver calls on the host (docs/runtime.md,
//! *Per-call overhead*).
//!
//! [`StreamOrder`] keeps a vector clock per stream: `clock[s][o]` is how many work items of
//! stream `o` stream `s` is already ordered after (`clock[s][s]`: the work enqueued on `s`
//! itself). A work item is anything that runs on the stream and touches memory (kernel,
//! GEMM, NCCL call, stream-ordered alloc/free); event records and waits are not work.
//!
//! - A **wait** of stream `t` on event `e` (recorded on `s` when `s`'s clock was `c`) orders
//!   `t` after exactly the work `c` names. If `clock[t] >= c` componentwise, `t` is already
//!   ordered after all of it (by stream order or an earlier wait), so the wait adds no
//!   ordering and is skipped. Otherwise it is issued and `clock[t]` takes the maximum.
//! - A **record** whose snapshot every stream's clock already covers can never make a later
//!   wait necessary (clocks only grow, so every wait on it is skipped by the rule above); it is
//!   not issued. Neither is a record that would leave the CUDA event as it is (the same event
//!   last recorded on the same stream at the same clock: the stream has enqueued no work and
//!   issued no wait since, so the event would capture the same work).
//! - Waiting on an event never recorded is a no-op, as in CUDA.
//! - After both streams are synchronized from the host, all enqueued work has completed:
//!   every stream knows every other stream's work ([`StreamOrder::synchronized`]).
//!
//! Skipping only ever drops an ordering edge that is already implied, so the set of GPU
//! orderings is exactly the program's (never weaker, never stronger).
//!
//! ## Lazy (deferred) waits
//!
//! A wait of a **lazy** stream (the compute stream, [`StreamOrder::new`]) that has to order
//! something is not issued at once: it is remembered as *pending* (its clock is merged at
//! once, as if issued) and issued by [`StreamOrder::flush`] only when something could
//! observe the stream's state on the GPU. In a slotted single-collective program the compute
//! stream does nothing, so its per-call wait for the collective would only put a
//! cross-stream dependency between consecutive collectives; deferred, the N waits of a timed
//! loop collapse into one, issued at the loop's end.
//!
//! Why deferring is safe (the caller's half of the contract is in `rank.rs` / `mod.rs`):
//! - A wait only constrains *later* work of the waiting stream. Every enqueue on a lazy
//!   stream (kernel, GEMM, copy, memset, NCCL call, stream-ordered alloc/free) is preceded by
//!   [`StreamOrder::before_work`], which returns the pending waits to issue first; so no work
//!   on it ever runs before the collectives it waits for.
//! - A record on a lazy stream captures the stream's waits before it: [`StreamOrder::record`]
//!   returns the pending waits ahead of the record itself, so another stream (or the host)
//!   waiting on that event is ordered after them too.
//! - The host: every host synchronization or read of results first flushes (the runner's
//!   `synchronize` flushes every stream, then synchronizes every stream), and so does every
//!   event the runner records on the compute stream for timing or a graph capture boundary.
//! - Pending waits only ever name work already enqueued when the wait was deferred (see
//!   *physical events* below), so issuing them later adds no edge the program did not have:
//!   the orderings stay exactly the program's.
//! - Per waiting stream, at most one pending wait per source stream is kept: a later
//!   uncovered wait on the same source has a later (larger) clock, since one stream's records
//!   are totally ordered in time, and so implies the earlier one, which it replaces.
//!
//! **Physical events.** A pending wait names a CUDA event. If the program re-records that
//! event before the wait is issued, a wait issued afterwards would see the new record
//! (waiting for more work than the program asked for). So program events are mapped to
//! *physical* events: a record of an event whose physical event a pending wait still needs
//! moves the program event to a fresh physical event (from a free list; the runner creates
//! one beyond its own when none is free), and the old one returns to the free list once no
//! pending wait names it. Physical indices below `events` are the program's own events.

/// Streams per rank (`[compute, comm]`, the ABI's stream numbers).
pub const STREAMS: usize = 2;

/// Work items of each stream that a stream (or an event's record) is ordered after.
pub type Clock = [u64; STREAMS];

/// A driver call the caller must issue, in the order returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `cuEventRecord(physical event, stream)`.
    Record { event: usize, stream: usize },
    /// `cuStreamWaitEvent(stream, physical event)`.
    Wait { stream: usize, event: usize },
}

/// The driver calls one bookkeeping step asks for, in order: at most [`Ops::CAP`], held
/// inline. Each step appends to an `Ops` the caller owns (the rank keeps one and clears it),
/// so that the per-call path neither allocates (each ABI call of a compiled program goes
/// through one or two steps) nor copies a buffer around.
#[derive(Clone, Copy)]
pub struct Ops {
    len: usize,
    buf: [Op; Ops::CAP],
}

impl Ops {
    /// The most any step returns: the runner's join ([`StreamOrder::join`]) is two records,
    /// each after at most [`STREAMS`] flushed waits, and two waits.
    pub const CAP: usize = 2 * (STREAMS + 2);

    /// No driver calls.
    pub const fn new() -> Ops {
        Ops {
            len: 0,
            buf: [Op::Record {
                event: 0,
                stream: 0,
            }; Ops::CAP],
        }
    }

    /// Appends `op` (more than [`Ops::CAP`] in one step is a bug of this module: it panics,
    /// which the runtime's table functions turn into an error status).
    pub fn push(&mut self, op: Op) {
        self.buf[self.len] = op;
        self.len += 1;
    }

    /// Forgets the calls held (they were issued).
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl Default for Ops {
    fn default() -> Ops {
        Ops::new()
    }
}

impl std::ops::Deref for Ops {
    type Target = [Op];
    fn deref(&self) -> &[Op] {
        &self.buf[..self.len]
    }
}

impl std::fmt::Debug for Ops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Ops {
    fn eq(&self, other: &Ops) -> bool {
        **self == **other
    }
}

impl Eq for Ops {}

impl PartialEq<Vec<Op>> for Ops {
    fn eq(&self, other: &Vec<Op>) -> bool {
        **self == other[..]
    }
}

/// What one record captured: the recording stream and its clock then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rec {
    stream: usize,
    clock: Clock,
}

fn covers(a: &Clock, b: &Clock) -> bool {
    a.iter().zip(b).all(|(x, y)| x >= y)
}

fn merge(a: &mut Clock, b: &Clock) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}

/// Per-rank stream-order bookkeeping; see the module docs.
#[derive(Clone, Debug, Default)]
pub struct StreamOrder {
    clocks: [Clock; STREAMS],
    /// Per event: the last record the program asked for (what a wait on it means).
    logical: Vec<Option<Rec>>,
    /// Per event: what its physical event holds (the last record actually issued into it).
    issued: Vec<Option<Rec>>,
    /// Per event: the physical event it lives in now.
    phys: Vec<usize>,
    /// Physical events beyond the program's that no event and no pending wait uses.
    free: Vec<usize>,
    /// Per physical event: an event lives in it (`phys` names it), and it is on `free`
    /// (both kept so that releasing one is O(1), not a scan of every event).
    home: Vec<bool>,
    on_free: Vec<bool>,
    /// Physical events in use so far (the program's, then the extra ones).
    nphys: usize,
    /// Which streams defer their waits.
    lazy: [bool; STREAMS],
    /// `pending[t][s]`: a deferred wait of stream `t` for work of stream `s` (physical event,
    /// the record it waits for).
    pending: [[Option<(usize, Rec)>; STREAMS]; STREAMS],
}

impl StreamOrder {
    /// Bookkeeping for `events` events, nothing enqueued yet; the compute stream (0) defers
    /// its waits.
    pub fn new(events: usize) -> StreamOrder {
        let mut lazy = [false; STREAMS];
        lazy[0] = true;
        StreamOrder::with_lazy(events, lazy)
    }

    /// As [`StreamOrder::new`], with the streams that defer their waits given.
    pub fn with_lazy(events: usize, lazy: [bool; STREAMS]) -> StreamOrder {
        StreamOrder {
            clocks: [[0; STREAMS]; STREAMS],
            logical: vec![None; events],
            issued: vec![None; events],
            phys: (0..events).collect(),
            free: Vec::new(),
            home: vec![true; events],
            on_free: vec![false; events],
            nphys: events,
            lazy,
            pending: [[None; STREAMS]; STREAMS],
        }
    }

    /// The clock of stream `s` (pending waits included).
    pub fn clock(&self, s: usize) -> Clock {
        self.clocks[s]
    }

    /// Whether stream `t` has deferred waits not issued yet.
    pub fn has_pending(&self, t: usize) -> bool {
        self.pending[t].iter().any(Option::is_some)
    }

    /// The pending waits of stream `t`, to issue now (before anything observes `t`): appended
    /// to `ops`.
    pub fn flush(&mut self, t: usize, ops: &mut Ops) {
        for s in 0..STREAMS {
            if let Some((p, _)) = self.pending[t][s].take() {
                ops.push(Op::Wait {
                    stream: t,
                    event: p,
                });
                self.release(p);
            }
        }
    }

    /// The pending waits of every stream, appended to `ops`.
    pub fn flush_all(&mut self, ops: &mut Ops) {
        for t in 0..STREAMS {
            self.flush(t, ops);
        }
    }

    /// A pending wait no longer names physical event `p`: free it unless an event lives in
    /// it or another pending wait names it.
    fn release(&mut self, p: usize) {
        if !self.home[p] && !self.pending_names(p) && !self.on_free[p] {
            self.on_free[p] = true;
            self.free.push(p);
        }
    }

    fn pending_names(&self, p: usize) -> bool {
        self.pending
            .iter()
            .flatten()
            .any(|w| matches!(w, Some((q, _)) if *q == p))
    }

    /// Before a work item is enqueued on stream `s`: the waits to issue first, appended to
    /// `ops`.
    pub fn before_work(&mut self, s: usize, ops: &mut Ops) {
        self.flush(s, ops)
    }

    /// One work item was enqueued on stream `s` (after [`StreamOrder::before_work`]).
    pub fn work(&mut self, s: usize) {
        debug_assert!(!self.has_pending(s), "work on a stream with pending waits");
        self.clocks[s][s] += 1;
    }

    fn known_to_all(&self, c: &Clock) -> bool {
        self.clocks.iter().all(|k| covers(k, c))
    }

    /// The program records event `e` on stream `s`: the driver calls to issue (the pending
    /// waits of `s`, then the record into the event's physical event), possibly none, appended
    /// to `ops`.
    pub fn record(&mut self, e: usize, s: usize, ops: &mut Ops) -> Result<(), String> {
        let rec = Rec {
            stream: s,
            clock: self.clocks[s],
        };
        *self
            .logical
            .get_mut(e)
            .ok_or_else(|| format!("event index {e} is out of range"))? = Some(rec);
        if self.known_to_all(&rec.clock) || self.issued[e] == Some(rec) {
            return Ok(());
        }
        // The record must capture `s`'s deferred waits (the clock it stands for has them).
        self.flush(s, ops);
        if self.pending_names(self.phys[e]) {
            // A deferred wait still needs what this physical event holds: move the event.
            let old = self.phys[e];
            let new = match self.free.pop() {
                Some(p) => {
                    self.on_free[p] = false;
                    p
                }
                None => {
                    self.home.push(false);
                    self.on_free.push(false);
                    self.nphys += 1;
                    self.nphys - 1
                }
            };
            self.phys[e] = new;
            self.home[new] = true;
            self.home[old] = false;
            self.release(old);
        }
        self.issued[e] = Some(rec);
        ops.push(Op::Record {
            event: self.phys[e],
            stream: s,
        });
        Ok(())
    }

    /// Stream `t` waits for event `e`: the wait to issue now (none when already ordered, or
    /// when `t` is lazy and the wait is deferred), appended to `ops`.
    pub fn wait(&mut self, t: usize, e: usize, ops: &mut Ops) -> Result<(), String> {
        let rec = *self
            .logical
            .get(e)
            .ok_or_else(|| format!("event index {e} is out of range"))?;
        let Some(rec) = rec else {
            return Ok(()); // never recorded: CUDA's wait is a no-op as well
        };
        if covers(&self.clocks[t], &rec.clock) {
            return Ok(());
        }
        // A record is only left unissued when every stream already covered it, and clocks
        // never shrink, so an uncovered wait always finds its record issued.
        if self.issued[e] != Some(rec) {
            return Err(format!(
                "internal error: event {e} is waited on but its record was not issued"
            ));
        }
        merge(&mut self.clocks[t], &rec.clock);
        let p = self.phys[e];
        if !self.lazy[t] {
            ops.push(Op::Wait {
                stream: t,
                event: p,
            });
            return Ok(());
        }
        match self.pending[t][rec.stream] {
            // One stream's records are totally ordered in time and this one is not covered
            // by `t` (which covers the pending one): it is later and implies the pending one.
            Some((q, old)) if covers(&rec.clock, &old.clock) => {
                self.pending[t][rec.stream] = Some((p, rec));
                self.release(q);
            }
            // Not expected; stay exact: issue the older one now.
            Some((q, _)) => {
                ops.push(Op::Wait {
                    stream: t,
                    event: q,
                });
                self.pending[t][rec.stream] = Some((p, rec));
                self.release(q);
            }
            None => self.pending[t][rec.stream] = Some((p, rec)),
        }
        Ok(())
    }

    /// Physical events in use so far (the program's, then extra ones the caller creates).
    pub fn physical_events(&self) -> usize {
        self.nphys
    }

    /// The runner's join of the two streams both ways, through its own two events
    /// `e_compute` (recorded on compute) and `e_comm` (recorded on comm): comm after
    /// compute's work so far, compute after comm's. Only the directions that order something
    /// cost driver calls (appended to `ops`); compute's wait is deferred like any other (the
    /// next call's compute work flushes it; its comm work is after comm's own by stream
    /// order).
    pub fn join(&mut self, e_compute: usize, e_comm: usize, ops: &mut Ops) -> Result<(), String> {
        self.record(e_compute, 0, ops)?;
        self.wait(1, e_compute, ops)?;
        self.record(e_comm, 1, ops)?;
        self.wait(0, e_comm, ops)
    }

    /// Every stream was synchronized from the host (after [`StreamOrder::flush_all`]): all
    /// enqueued work has completed.
    pub fn synchronized(&mut self) {
        debug_assert!((0..STREAMS).all(|t| !self.has_pending(t)));
        let mut all = [0; STREAMS];
        for c in &self.clocks {
            merge(&mut all, c);
        }
        self.clocks = [all; STREAMS];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPUTE: usize = 0;
    const COMM: usize = 1;

    /// Each step's driver calls as a value (the API appends them to the caller's [`Ops`]).
    trait Steps {
        fn record_ops(&mut self, e: usize, s: usize) -> Result<Ops, String>;
        fn wait_ops(&mut self, t: usize, e: usize) -> Result<Ops, String>;
        fn join_ops(&mut self, e_compute: usize, e_comm: usize) -> Result<Ops, String>;
        fn flush_ops(&mut self, t: usize) -> Ops;
        fn flush_all_ops(&mut self) -> Ops;
        fn before_work_ops(&mut self, s: usize) -> Ops;
    }

    impl Steps for StreamOrder {
        fn record_ops(&mut self, e: usize, s: usize) -> Result<Ops, String> {
            let mut ops = Ops::new();
            self.record(e, s, &mut ops).map(|()| ops)
        }
        fn wait_ops(&mut self, t: usize, e: usize) -> Result<Ops, String> {
            let mut ops = Ops::new();
            self.wait(t, e, &mut ops).map(|()| ops)
        }
        fn join_ops(&mut self, e_compute: usize, e_comm: usize) -> Result<Ops, String> {
            let mut ops = Ops::new();
            self.join(e_compute, e_comm, &mut ops).map(|()| ops)
        }
        fn flush_ops(&mut self, t: usize) -> Ops {
            let mut ops = Ops::new();
            self.flush(t, &mut ops);
            ops
        }
        fn flush_all_ops(&mut self) -> Ops {
            let mut ops = Ops::new();
            self.flush_all(&mut ops);
            ops
        }
        fn before_work_ops(&mut self, s: usize) -> Ops {
            let mut ops = Ops::new();
            self.before_work(s, &mut ops);
            ops
        }
    }

    fn count(ops: &[Op]) -> (usize, usize) {
        let r = ops
            .iter()
            .filter(|o| matches!(o, Op::Record { .. }))
            .count();
        (r, ops.len() - r)
    }

    /// Counts what `ops` issue into `acc` (records, waits).
    fn add(acc: &mut (usize, usize), ops: Ops) {
        let (r, w) = count(&ops);
        acc.0 += r;
        acc.1 += w;
    }

    fn work(o: &mut StreamOrder, acc: &mut (usize, usize), s: usize) {
        add(acc, o.before_work_ops(s));
        o.work(s);
    }

    /// The API calls of one call of a single-collective program, as the compiler emits it
    /// (bench/gpu/gen_collectives.sh, full pipeline), after the runner's join (events 3, 4):
    /// optional copy in, record(compute, 0) / wait(comm, 0), the collective, record(comm, 1)
    /// / wait(compute, 1), optional copy out, record(comm, 2) / wait(compute, 2). Returns
    /// (records issued, waits issued).
    fn single_collective_call(o: &mut StreamOrder, slots: bool) -> (usize, usize) {
        let mut acc = (0, 0);
        add(&mut acc, o.join_ops(3, 4).unwrap());
        if !slots {
            work(o, &mut acc, COMPUTE); // copy-in kernel
        }
        add(&mut acc, o.record_ops(0, COMPUTE).unwrap());
        add(&mut acc, o.wait_ops(COMM, 0).unwrap());
        work(o, &mut acc, COMM); // the collective
        add(&mut acc, o.record_ops(1, COMM).unwrap());
        add(&mut acc, o.wait_ops(COMPUTE, 1).unwrap());
        if !slots {
            work(o, &mut acc, COMPUTE); // alloc of the result
            work(o, &mut acc, COMPUTE); // copy-out kernel
        }
        add(&mut acc, o.record_ops(2, COMM).unwrap());
        add(&mut acc, o.wait_ops(COMPUTE, 2).unwrap());
        if !slots {
            work(o, &mut acc, COMPUTE); // the runner frees the result
        }
        acc
    }

    fn eager(events: usize) -> StreamOrder {
        StreamOrder::with_lazy(events, [false; STREAMS])
    }

    #[test]
    fn slotted_single_collective_needs_one_record_per_call_and_one_wait_at_the_end() {
        let mut o = StreamOrder::new(5);
        for _ in 0..6 {
            assert_eq!(single_collective_call(&mut o, true), (1, 0));
            assert!(o.has_pending(COMPUTE));
        }
        // The comm stream never waits for the (idle) compute stream.
        assert_eq!(o.clock(COMM)[COMPUTE], 0);
        // Compute is ordered after every collective (what the final join and timing need),
        // through the one wait still pending, issued at the end.
        assert_eq!(o.clock(COMPUTE)[COMM], 6);
        assert_eq!(o.join_ops(3, 4).unwrap(), vec![]);
        let f = o.flush_all_ops();
        assert_eq!(count(&f), (0, 1));
        // Only a handful of physical events ever (ping-pong between two for event 1).
        assert!(o.physical_events() <= 7, "{}", o.physical_events());
        o.synchronized();
    }

    #[test]
    fn eager_slotted_single_collective_needs_one_record_and_one_wait_per_call() {
        let mut o = eager(5);
        for _ in 0..6 {
            assert_eq!(single_collective_call(&mut o, true), (1, 1));
        }
        assert_eq!(o.clock(COMPUTE)[COMM], 6);
        assert_eq!(o.join_ops(3, 4).unwrap(), vec![]);
    }

    #[test]
    fn copies_keep_every_needed_edge() {
        for lazy in [true, false] {
            let mut o = StreamOrder::with_lazy(5, [lazy, false]);
            assert_eq!(single_collective_call(&mut o, false), (2, 2));
            // Later calls: the join's comm-after-compute (the next collective overwrites what
            // the copy-out read), copy-in before the collective, compute after the collective.
            for _ in 0..3 {
                assert_eq!(single_collective_call(&mut o, false), (3, 3));
            }
            assert!(!o.has_pending(COMPUTE));
        }
    }

    #[test]
    fn a_compute_wait_is_deferred_until_compute_work() {
        let mut o = StreamOrder::new(2);
        o.work(COMM);
        let r = o.record_ops(0, COMM).unwrap();
        assert_eq!(
            r,
            vec![Op::Record {
                event: 0,
                stream: COMM
            }]
        );
        assert_eq!(o.wait_ops(COMPUTE, 0).unwrap(), vec![]);
        assert!(o.has_pending(COMPUTE));
        // Comm work does not flush compute's waits.
        assert_eq!(o.before_work_ops(COMM), vec![]);
        o.work(COMM);
        assert!(o.has_pending(COMPUTE));
        // Compute work does, before it is enqueued.
        assert_eq!(
            o.before_work_ops(COMPUTE),
            vec![Op::Wait {
                stream: COMPUTE,
                event: 0
            }]
        );
        o.work(COMPUTE);
        assert!(!o.has_pending(COMPUTE));
        assert_eq!(o.before_work_ops(COMPUTE), vec![]);
    }

    #[test]
    fn a_host_synchronization_flushes_first() {
        let mut o = StreamOrder::new(1);
        o.work(COMM);
        o.record_ops(0, COMM).unwrap();
        o.wait_ops(COMPUTE, 0).unwrap();
        assert_eq!(
            o.flush_all_ops(),
            vec![Op::Wait {
                stream: COMPUTE,
                event: 0
            }]
        );
        o.synchronized();
        assert!(!o.has_pending(COMPUTE));
        assert_eq!(o.flush_all_ops(), vec![]);
    }

    #[test]
    fn a_later_wait_on_the_same_stream_replaces_the_pending_one() {
        let mut o = StreamOrder::new(2);
        o.work(COMM);
        o.record_ops(0, COMM).unwrap();
        o.wait_ops(COMPUTE, 0).unwrap();
        o.work(COMM);
        o.record_ops(1, COMM).unwrap();
        assert_eq!(o.wait_ops(COMPUTE, 1).unwrap(), vec![]);
        // The older event is implied: waiting on it again is skipped.
        assert_eq!(o.wait_ops(COMPUTE, 0).unwrap(), vec![]);
        assert_eq!(
            o.flush_ops(COMPUTE),
            vec![Op::Wait {
                stream: COMPUTE,
                event: 1
            }]
        );
        assert_eq!(o.clock(COMPUTE), [0, 2]);
    }

    #[test]
    fn a_record_others_wait_on_carries_the_deferred_wait() {
        // compute defers a wait for comm's work 1; comm does more work; compute then records
        // an event comm waits for: the deferred wait goes first (the record captures it).
        let mut o = StreamOrder::new(2);
        add(&mut (0, 0), o.before_work_ops(COMPUTE));
        o.work(COMPUTE);
        o.work(COMM);
        o.record_ops(0, COMM).unwrap();
        assert_eq!(o.wait_ops(COMPUTE, 0).unwrap(), vec![]);
        let ops = o.record_ops(1, COMPUTE).unwrap();
        assert_eq!(
            ops,
            vec![
                Op::Wait {
                    stream: COMPUTE,
                    event: 0
                },
                Op::Record {
                    event: 1,
                    stream: COMPUTE
                },
            ]
        );
        assert_eq!(
            o.wait_ops(COMM, 1).unwrap(),
            vec![Op::Wait {
                stream: COMM,
                event: 1
            }]
        );
        assert!(!o.has_pending(COMPUTE));
    }

    #[test]
    fn rerecording_a_pending_event_moves_it_to_another_physical_event() {
        let mut o = StreamOrder::new(1);
        o.work(COMM);
        assert_eq!(
            o.record_ops(0, COMM).unwrap(),
            vec![Op::Record {
                event: 0,
                stream: COMM
            }]
        );
        o.wait_ops(COMPUTE, 0).unwrap();
        o.work(COMM);
        // Physical 0 must keep what the pending wait waits for: the new record goes to 1.
        assert_eq!(
            o.record_ops(0, COMM).unwrap(),
            vec![Op::Record {
                event: 1,
                stream: COMM
            }]
        );
        assert_eq!(o.physical_events(), 2);
        // Flushing now waits for the first record only (exact, not the later work).
        assert_eq!(
            o.flush_ops(COMPUTE),
            vec![Op::Wait {
                stream: COMPUTE,
                event: 0
            }]
        );
        assert_eq!(o.clock(COMPUTE), [0, 1]);
        // Physical 0 is free again and reused by the next move.
        o.wait_ops(COMPUTE, 0).unwrap();
        o.work(COMM);
        assert_eq!(
            o.record_ops(0, COMM).unwrap(),
            vec![Op::Record {
                event: 0,
                stream: COMM
            }]
        );
        assert_eq!(o.physical_events(), 2);
        assert_eq!(
            o.flush_ops(COMPUTE),
            vec![Op::Wait {
                stream: COMPUTE,
                event: 1
            }]
        );
    }

    #[test]
    fn waits_already_implied_are_skipped() {
        let mut o = eager(2);
        o.work(COMPUTE);
        assert_eq!(count(&o.record_ops(0, COMPUTE).unwrap()), (1, 0));
        assert_eq!(count(&o.wait_ops(COMM, 0).unwrap()), (0, 1));
        // The same event again: already ordered.
        assert!(o.wait_ops(COMM, 0).unwrap().is_empty());
        // Waiting on one's own stream's event: stream order.
        o.work(COMM);
        assert_eq!(count(&o.record_ops(1, COMM).unwrap()), (1, 0));
        assert!(o.wait_ops(COMM, 1).unwrap().is_empty());
        // Never recorded: no-op.
        let mut p = StreamOrder::new(1);
        assert!(p.wait_ops(COMM, 0).unwrap().is_empty());
        assert!(p.record_ops(5, COMM).is_err());
        assert!(p.wait_ops(COMM, 5).is_err());
    }

    #[test]
    fn new_work_makes_the_wait_necessary_again() {
        let mut o = eager(1);
        o.work(COMPUTE);
        assert_eq!(count(&o.record_ops(0, COMPUTE).unwrap()), (1, 0));
        assert_eq!(count(&o.wait_ops(COMM, 0).unwrap()), (0, 1));
        o.work(COMPUTE);
        assert_eq!(count(&o.record_ops(0, COMPUTE).unwrap()), (1, 0));
        assert_eq!(count(&o.wait_ops(COMM, 0).unwrap()), (0, 1));
    }

    #[test]
    fn transitive_order_is_used() {
        // compute -> comm (wait), then a wait of compute on a comm event that captured
        // compute's work is only about comm's own work.
        let mut o = eager(2);
        o.work(COMPUTE);
        assert_eq!(count(&o.record_ops(0, COMPUTE).unwrap()), (1, 0));
        assert_eq!(count(&o.wait_ops(COMM, 0).unwrap()), (0, 1));
        assert!(o.record_ops(1, COMM).unwrap().is_empty()); // comm did nothing new
        assert!(o.wait_ops(COMPUTE, 1).unwrap().is_empty());
        o.work(COMM);
        assert_eq!(count(&o.record_ops(1, COMM).unwrap()), (1, 0));
        assert_eq!(count(&o.wait_ops(COMPUTE, 1).unwrap()), (0, 1));
        assert_eq!(o.clock(COMPUTE), [1, 1]);
    }

    #[test]
    fn rerecording_the_same_state_is_not_issued_but_older_state_is_not_reused() {
        let mut o = eager(2);
        o.work(COMM);
        assert_eq!(count(&o.record_ops(0, COMM).unwrap()), (1, 0));
        assert!(o.record_ops(0, COMM).unwrap().is_empty()); // same stream, same clock
        assert_eq!(count(&o.wait_ops(COMPUTE, 0).unwrap()), (0, 1));
        // Event 1 recorded at a state every stream knows: not issued, and its wait skipped.
        assert!(o.record_ops(1, COMM).unwrap().is_empty());
        assert!(o.wait_ops(COMPUTE, 1).unwrap().is_empty());
        // Event 0 re-recorded after new work must be issued again.
        o.work(COMM);
        assert_eq!(count(&o.record_ops(0, COMM).unwrap()), (1, 0));
        assert_eq!(count(&o.wait_ops(COMPUTE, 0).unwrap()), (0, 1));
    }

    #[test]
    fn an_event_captures_the_waits_before_its_record() {
        // comm waits for compute's work, then records: a wait on that event must order the
        // waiter after compute's work too (it is not skipped just because comm did nothing).
        for lazy in [true, false] {
            let mut o = StreamOrder::with_lazy(2, [lazy, false]);
            o.before_work_ops(COMPUTE);
            o.work(COMPUTE);
            o.work(COMM);
            assert_eq!(count(&o.record_ops(0, COMM).unwrap()), (1, 0));
            let w = o.wait_ops(COMPUTE, 0).unwrap();
            assert_eq!(count(&w), (0, usize::from(!lazy)));
            assert_eq!(o.clock(COMPUTE), [1, 1]);
            // A third-party view: a record on compute now carries comm's work as well.
            add(&mut (0, 0), o.before_work_ops(COMPUTE));
            o.work(COMPUTE);
            assert_eq!(count(&o.record_ops(1, COMPUTE).unwrap()), (1, 0));
            assert_eq!(count(&o.wait_ops(COMM, 1).unwrap()), (0, 1));
            assert_eq!(o.clock(COMM), [2, 1]);
        }
    }

    #[test]
    fn ops_are_inline_and_compare_as_slices() {
        let mut a = Ops::new();
        assert!(a.is_empty());
        assert_eq!(a, vec![]);
        a.push(Op::Record {
            event: 1,
            stream: COMM,
        });
        a.push(Op::Wait {
            stream: COMPUTE,
            event: 2,
        });
        assert_eq!(
            a,
            vec![
                Op::Record {
                    event: 1,
                    stream: COMM
                },
                Op::Wait {
                    stream: COMPUTE,
                    event: 2
                }
            ]
        );
        assert_eq!(count(&a), (1, 1));
        assert_eq!(
            format!("{a:?}"),
            "[Record { event: 1, stream: 1 }, Wait { stream: 0, event: 2 }]"
        );
        let b = a;
        a.clear();
        assert_eq!(a, Ops::default());
        assert_ne!(a, b);
        // Steps append: the caller sees every step's calls since it last cleared.
        let mut o = StreamOrder::new(2);
        o.work(COMM);
        let mut ops = Ops::new();
        o.record(0, COMM, &mut ops).unwrap();
        o.record(1, COMM, &mut ops).unwrap();
        assert_eq!(count(&ops), (2, 0));
        let mut full = Ops::new();
        for _ in 0..Ops::CAP {
            full.push(Op::Record {
                event: 0,
                stream: 0,
            });
        }
        assert_eq!(full.len(), Ops::CAP);
    }

    /// A join with both streams lazy and both directions needed: comm's deferred wait for
    /// compute is flushed by comm's own record within the same join (the record captures
    /// it). (The random walk below checks the bound [`Ops::CAP`] over every step.)
    #[test]
    fn a_join_flushes_the_wait_it_just_deferred_before_its_own_record() {
        let mut o = StreamOrder::with_lazy(4, [true, true]);
        // Both streams wait lazily on work of the other.
        o.work(COMPUTE);
        o.work(COMM);
        o.record_ops(0, COMPUTE).unwrap();
        o.record_ops(1, COMM).unwrap();
        assert!(o.wait_ops(COMM, 0).unwrap().is_empty());
        assert!(o.wait_ops(COMPUTE, 1).unwrap().is_empty());
        add(&mut (0, 0), o.before_work_ops(COMPUTE));
        o.work(COMPUTE);
        add(&mut (0, 0), o.before_work_ops(COMM));
        o.work(COMM);
        let j = o.join_ops(2, 3).unwrap();
        assert_eq!(
            j,
            vec![
                Op::Record {
                    event: 2,
                    stream: COMPUTE
                },
                Op::Wait {
                    stream: COMM,
                    event: 2
                },
                Op::Record {
                    event: 3,
                    stream: COMM
                },
            ]
        );
        assert_eq!(count(&o.flush_all_ops()), (0, 1));
    }

    /// The invariants that make `release` O(1): `home` and `on_free` mirror `phys` and
    /// `free`, and every physical event is exactly one of: some event's home, named by a
    /// pending wait (or both), or free.
    fn check_physical(o: &StreamOrder) {
        assert_eq!(o.home.len(), o.nphys);
        assert_eq!(o.on_free.len(), o.nphys);
        for p in 0..o.nphys {
            assert_eq!(o.home[p], o.phys.contains(&p), "home of {p}");
            assert_eq!(o.on_free[p], o.free.contains(&p), "free mark of {p}");
            let used = o.home[p] || o.pending_names(p);
            assert_ne!(used, o.on_free[p], "physical {p}: used {used}");
        }
        let mut f = o.free.clone();
        f.sort_unstable();
        f.dedup();
        assert_eq!(f.len(), o.free.len(), "duplicates on the free list");
    }

    #[test]
    fn physical_events_are_never_leaked_or_shared() {
        // A fixed pseudo-random walk (xorshift) over every step the runtime takes.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n) as usize
        };
        for lazy in [[true, false], [true, true], [false, false]] {
            let mut o = StreamOrder::with_lazy(4, lazy);
            for _ in 0..5000 {
                let (s, e) = (next(2), next(4));
                match next(6) {
                    0 => {
                        o.before_work_ops(s);
                        o.work(s);
                    }
                    1 => {
                        o.record_ops(e, s).unwrap();
                    }
                    2 => {
                        o.wait_ops(s, e).unwrap();
                    }
                    3 => {
                        o.flush_ops(s);
                    }
                    4 => {
                        o.join_ops(2, 3).unwrap();
                    }
                    _ => {
                        o.flush_all_ops();
                        o.synchronized();
                    }
                }
                check_physical(&o);
            }
            // At most one physical event per event and per pending wait; with lazy waits
            // the walk did move events.
            assert!(o.physical_events() <= 4 + STREAMS * STREAMS);
            assert_eq!(o.physical_events() > 4, lazy[0], "{lazy:?}");
        }
    }

    #[test]
    fn join_and_synchronize() {
        let mut o = StreamOrder::new(2);
        let j = |o: &mut StreamOrder| count(&o.join_ops(0, 1).unwrap());
        assert_eq!(j(&mut o), (0, 0));
        o.work(COMPUTE);
        // comm waits for compute.
        assert_eq!(j(&mut o), (1, 1));
        assert_eq!(j(&mut o), (0, 0));
        o.work(COMM);
        o.work(COMPUTE);
        // Both ways; compute's wait is deferred.
        assert_eq!(j(&mut o), (2, 1));
        assert!(o.has_pending(COMPUTE));
        assert_eq!(j(&mut o), (0, 0));
        assert_eq!(count(&o.flush_all_ops()), (0, 1));
        o.work(COMM);
        o.synchronized();
        assert_eq!(j(&mut o), (0, 0));
        assert_eq!(o.clock(COMPUTE), o.clock(COMM));
    }
}
