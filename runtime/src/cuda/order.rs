//! Which event records and stream waits a rank actually has to issue (pure bookkeeping, no
//! CUDA: unit-tested without a GPU).
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

/// Streams per rank (`[compute, comm]`, the ABI's stream numbers).
pub const STREAMS: usize = 2;

/// Work items of each stream that a stream (or an event's record) is ordered after.
pub type Clock = [u64; STREAMS];

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
    /// Per event: what the CUDA event itself holds (the last record actually issued).
    issued: Vec<Option<Rec>>,
}

impl StreamOrder {
    /// Bookkeeping for `events` events, nothing enqueued yet.
    pub fn new(events: usize) -> StreamOrder {
        StreamOrder {
            clocks: [[0; STREAMS]; STREAMS],
            logical: vec![None; events],
            issued: vec![None; events],
        }
    }

    /// The clock of stream `s`.
    pub fn clock(&self, s: usize) -> Clock {
        self.clocks[s]
    }

    /// One work item was enqueued on stream `s`.
    pub fn work(&mut self, s: usize) {
        self.clocks[s][s] += 1;
    }

    fn known_to_all(&self, c: &Clock) -> bool {
        self.clocks.iter().all(|k| covers(k, c))
    }

    /// The program records event `e` on stream `s`: true when `cuEventRecord` must be issued.
    pub fn record(&mut self, e: usize, s: usize) -> Result<bool, String> {
        let rec = Rec {
            stream: s,
            clock: self.clocks[s],
        };
        *self
            .logical
            .get_mut(e)
            .ok_or_else(|| format!("event index {e} is out of range"))? = Some(rec);
        if self.known_to_all(&rec.clock) || self.issued[e] == Some(rec) {
            return Ok(false);
        }
        self.issued[e] = Some(rec);
        Ok(true)
    }

    /// Stream `t` waits for event `e`: true when `cuStreamWaitEvent` must be issued.
    pub fn wait(&mut self, t: usize, e: usize) -> Result<bool, String> {
        let rec = *self
            .logical
            .get(e)
            .ok_or_else(|| format!("event index {e} is out of range"))?;
        let Some(rec) = rec else {
            return Ok(false); // never recorded: CUDA's wait is a no-op as well
        };
        if covers(&self.clocks[t], &rec.clock) {
            return Ok(false);
        }
        // A record is only left unissued when every stream already covered it, and clocks
        // never shrink, so an uncovered wait always finds its record issued.
        if self.issued[e] != Some(rec) {
            return Err(format!(
                "internal error: event {e} is waited on but its record was not issued"
            ));
        }
        merge(&mut self.clocks[t], &rec.clock);
        Ok(true)
    }

    /// The runner's join of all streams both ways (each stream after every other stream's
    /// work so far): `need[t]` says whether stream `t` must wait (for a join of two streams:
    /// `need[0]` compute waits for comm, `need[1]` comm waits for compute). The clocks are
    /// joined.
    pub fn join(&mut self) -> [bool; STREAMS] {
        let mut all = [0; STREAMS];
        for c in &self.clocks {
            merge(&mut all, c);
        }
        let mut need = [false; STREAMS];
        for (t, c) in self.clocks.iter_mut().enumerate() {
            need[t] = !covers(c, &all);
            *c = all;
        }
        need
    }

    /// Every stream was synchronized from the host: all enqueued work has completed.
    pub fn synchronized(&mut self) {
        self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPUTE: usize = 0;
    const COMM: usize = 1;

    /// The API calls of one call of a single-collective program, as the compiler emits it
    /// (bench/gpu/gen_collectives.sh, full pipeline): optional copy in, record(compute, 0) /
    /// wait(comm, 0), the collective, record(comm, 1) / wait(compute, 1), optional copy out,
    /// record(comm, 2) / wait(compute, 2). Returns (records issued, waits issued).
    fn single_collective_call(o: &mut StreamOrder, slots: bool) -> (usize, usize) {
        let (mut r, mut w) = (0, 0);
        let rec = |o: &mut StreamOrder, e, s| o.record(e, s).unwrap() as usize;
        let [jc, jm] = o.join();
        w += jc as usize + jm as usize;
        r += jc as usize + jm as usize;
        if !slots {
            o.work(COMPUTE); // copy-in kernel
        }
        r += rec(o, 0, COMPUTE);
        w += o.wait(COMM, 0).unwrap() as usize;
        o.work(COMM); // the collective
        r += rec(o, 1, COMM);
        w += o.wait(COMPUTE, 1).unwrap() as usize;
        if !slots {
            o.work(COMPUTE); // alloc of the result
            o.work(COMPUTE); // copy-out kernel
        }
        r += rec(o, 2, COMM);
        w += o.wait(COMPUTE, 2).unwrap() as usize;
        if !slots {
            o.work(COMPUTE); // the runner frees the result
        }
        (r, w)
    }

    #[test]
    fn slotted_single_collective_needs_one_record_and_one_wait_per_call() {
        let mut o = StreamOrder::new(3);
        // First call: the collective's result is waited for by compute (1 record, 1 wait).
        assert_eq!(single_collective_call(&mut o, true), (1, 1));
        for _ in 0..5 {
            assert_eq!(single_collective_call(&mut o, true), (1, 1));
        }
        // The comm stream never waits for the (idle) compute stream.
        assert_eq!(o.clock(COMM)[COMPUTE], 0);
        // Compute is ordered after every collective (what the final join and timing need).
        assert_eq!(o.clock(COMPUTE)[COMM], 6);
        assert_eq!(o.join(), [false, false]);
    }

    #[test]
    fn copies_keep_every_needed_edge() {
        let mut o = StreamOrder::new(3);
        assert_eq!(single_collective_call(&mut o, false), (2, 2));
        // Later calls: the join's comm-after-compute (the next collective overwrites what
        // the copy-out read), copy-in before the collective, compute after the collective.
        for _ in 0..3 {
            assert_eq!(single_collective_call(&mut o, false), (3, 3));
        }
    }

    #[test]
    fn waits_already_implied_are_skipped() {
        let mut o = StreamOrder::new(2);
        o.work(COMPUTE);
        assert!(o.record(0, COMPUTE).unwrap());
        assert!(o.wait(COMM, 0).unwrap());
        // The same event again: already ordered.
        assert!(!o.wait(COMM, 0).unwrap());
        // Waiting on one's own stream's event: stream order.
        o.work(COMM);
        assert!(o.record(1, COMM).unwrap());
        assert!(!o.wait(COMM, 1).unwrap());
        // Never recorded: no-op.
        let mut p = StreamOrder::new(1);
        assert!(!p.wait(COMM, 0).unwrap());
        assert!(p.record(5, COMM).is_err());
        assert!(p.wait(COMM, 5).is_err());
    }

    #[test]
    fn new_work_makes_the_wait_necessary_again() {
        let mut o = StreamOrder::new(1);
        o.work(COMPUTE);
        assert!(o.record(0, COMPUTE).unwrap());
        assert!(o.wait(COMM, 0).unwrap());
        o.work(COMPUTE);
        assert!(o.record(0, COMPUTE).unwrap());
        assert!(o.wait(COMM, 0).unwrap());
    }

    #[test]
    fn transitive_order_is_used() {
        // compute -> comm (wait), then a wait of compute on a comm event that captured
        // compute's work is only about comm's own work.
        let mut o = StreamOrder::new(2);
        o.work(COMPUTE);
        assert!(o.record(0, COMPUTE).unwrap());
        assert!(o.wait(COMM, 0).unwrap());
        assert!(!o.record(1, COMM).unwrap()); // comm did nothing new: everyone knows it
        assert!(!o.wait(COMPUTE, 1).unwrap());
        o.work(COMM);
        assert!(o.record(1, COMM).unwrap());
        assert!(o.wait(COMPUTE, 1).unwrap());
        assert_eq!(o.clock(COMPUTE), [1, 1]);
    }

    #[test]
    fn rerecording_the_same_state_is_not_issued_but_older_state_is_not_reused() {
        let mut o = StreamOrder::new(2);
        o.work(COMM);
        assert!(o.record(0, COMM).unwrap());
        assert!(!o.record(0, COMM).unwrap()); // same stream, same clock
        assert!(o.wait(COMPUTE, 0).unwrap());
        // Event 1 recorded at a state every stream knows: not issued, and its wait skipped.
        assert!(!o.record(1, COMM).unwrap());
        assert!(!o.wait(COMPUTE, 1).unwrap());
        // Event 0 re-recorded after new work must be issued again.
        o.work(COMM);
        assert!(o.record(0, COMM).unwrap());
        assert!(o.wait(COMPUTE, 0).unwrap());
    }

    #[test]
    fn an_event_captures_the_waits_before_its_record() {
        // comm waits for compute's work, then records: a wait on that event must order the
        // waiter after compute's work too (it is not skipped just because comm did nothing).
        let mut o = StreamOrder::new(2);
        o.work(COMPUTE);
        o.work(COMM);
        assert!(o.record(0, COMM).unwrap());
        assert!(o.wait(COMPUTE, 0).unwrap());
        assert_eq!(o.clock(COMPUTE), [1, 1]);
        // A third-party view: a record on compute now carries comm's work as well.
        o.work(COMPUTE);
        assert!(o.record(1, COMPUTE).unwrap());
        assert!(o.wait(COMM, 1).unwrap());
        assert_eq!(o.clock(COMM), [2, 1]);
    }

    #[test]
    fn join_and_synchronize() {
        let mut o = StreamOrder::new(0);
        assert_eq!(o.join(), [false, false]);
        o.work(COMPUTE);
        assert_eq!(o.join(), [false, true]);
        assert_eq!(o.join(), [false, false]);
        o.work(COMM);
        o.work(COMPUTE);
        assert_eq!(o.join(), [true, true]);
        o.work(COMM);
        o.synchronized();
        assert_eq!(o.join(), [false, false]);
        assert_eq!(o.clock(COMPUTE), o.clock(COMM));
    }
}
