//! One rank on one GPU: its context, streams, events, kernels, cuBLAS handle, communicators
//! and memory, and the `commlir_rt_api` table ([`API`]) whose functions the compiled host
//! program calls with a pointer to this state as `rt`.
//!
//! Every table function catches panics (unwinding into the host program would be undefined
//! behaviour), records the error text in [`RankState::last_error`] and returns a nonzero
//! status, which the host program returns from `commlir_main` at once.
//!
//! The table functions run once per ABI call of every call of the program, so their steady
//! state allocates nothing and does nothing in proportion to what is live: the stream
//! bookkeeping appends its driver calls to one inline buffer the rank reuses ([`Ops`]), a
//! reused pool is found by one lookup of its (kind, group, size) and freed by one lookup of
//! its base (a cheap hash, `WordHasher`), and a result that is a pool slot is told apart
//! without a lookup when no stream-ordered allocation is live (docs/runtime.md, *Per-call
//! overhead*). Library calls go through [`RankState::prof`], one branch unless
//! `COMMLIR_HOST_PROFILE` asked for a breakdown ([`super::profile`]).

use super::abi::{self, CommlirRtApi, Status};
use super::ffi::{
    cu_check, cublas_check, dtype_bytes, nccl_check, nccl_dtype, nccl_op, raw_reduce_scatter,
    with_nccl_op,
};
use super::order::{Op, Ops, StreamOrder};
use super::profile::{Driver, Profiler};
use super::symm::SymmState;
use cudarc::cublas::sys as cublas;
use cudarc::driver::sys as cu;
use cudarc::nccl::sys as nccl;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_void, CString};
use std::hash::{BuildHasherDefault, Hasher};

/// Status codes the table functions return (nonzero = failure; the text is in `last_error`).
pub const ST_CUDA: Status = 1;

/// A persistent comm-buffer pool allocation.
#[derive(Clone, Copy, Debug)]
struct Pool {
    base: u64,
    kind: u32,
    group: u32,
    bytes: u64,
    /// From `ncclMemAlloc` (else `cuMemAlloc`).
    nccl_mem: bool,
    /// The `ncclCommRegister` handle, when registered.
    reg: *mut c_void,
    /// The `ncclCommWindowRegister` handle of a symm_mem pool, when it is a symmetric window.
    win: nccl::ncclWindow_t,
    /// Handed out by `pool_alloc` and not freed since.
    live: bool,
    /// A peer-mapped symm_mem pool (`symm.rs`): its memory belongs to [`RankState::symm`].
    peer_mapped: bool,
}

/// What a freed pool is reused for: a `pool_alloc` of the same kind, group and size.
type PoolKey = (u32, u32, u64);

/// A hasher for device addresses and small integer keys: one folded 64×64→128-bit multiply
/// per word. The default SipHash costs tens of nanoseconds per lookup on the per-call path,
/// and these keys come from this process (the driver, the compiled program), not from an
/// adversary.
#[derive(Clone, Copy, Debug, Default)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        let m = u128::from(self.0 ^ n) * 0x9e37_79b9_7f4a_7c15;
        self.0 = (m as u64) ^ ((m >> 64) as u64);
    }
}

type WordHash = BuildHasherDefault<WordHasher>;

/// One op's mean device time over the timed calls (`--bench-iters`, per-op pass).
#[derive(Clone, Debug, PartialEq)]
pub struct OpTime {
    /// What was called, e.g. `all_reduce bf16 count=524288 (group of 2)`.
    pub label: String,
    /// The ABI stream it ran on.
    pub stream: u32,
    /// nccl-tests' message size: the all-reduce buffer, the all-gather output, the
    /// reduce-scatter input, the all-to-all send buffer, the broadcast buffer (0: not a
    /// collective).
    pub bytes: u64,
    /// nccl-tests' bus-bandwidth factor (busbw = bytes / time × factor): 2(n−1)/n for
    /// all-reduce, (n−1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast;
    /// 0 when the op is no single collective.
    pub bus_factor: f64,
    /// Mean seconds per call (between events recorded around the op on its stream).
    pub seconds: f64,
    /// Mean seconds from the start of the call (an event recorded on the compute stream,
    /// which the comm stream waits for, before the call's first op) to the op's start event;
    /// `None` when the call's start was not recorded.
    pub start_seconds: Option<f64>,
}

/// Per-op sums over the timed calls, by op position.
#[derive(Clone, Debug)]
struct OpSum {
    op: OpTime,
    /// Sum of the op's durations.
    seconds: f64,
    /// Sum of its start offsets, and how many calls recorded one.
    start_seconds: f64,
    starts: u32,
    calls: u32,
}

/// Events recorded around one op during a timed call.
struct Mark {
    label: String,
    stream: u32,
    bytes: u64,
    bus_factor: f64,
    start: cu::CUevent,
    end: cu::CUevent,
}

/// The state of one rank; `rt` in the ABI points to it.
pub struct RankState {
    pub rank: usize,
    pub device: i32,
    /// Bytes of the arguments the runner allocated outside the pools (device memory report).
    pub arg_bytes: u64,
    pub ctx: cu::CUcontext,
    /// `[compute, comm]`, indexed by the ABI's stream numbers.
    pub streams: [cu::CUstream; 2],
    /// The program's events, then two of the runner's own (joining the streams).
    pub events: Vec<cu::CUevent>,
    /// Extra physical events the stream bookkeeping asked for (`order.rs`, *Physical
    /// events*): physical event `events.len() + i` is `extra_events[i]`.
    extra_events: Vec<cu::CUevent>,
    pub module: cu::CUmodule,
    pub kernels: Vec<cu::CUfunction>,
    pub cublas: cublas::cublasHandle_t,
    /// cuDNN's fused attention on the compute stream, loaded at the first `attention` call
    /// (a program without attention never needs the library).
    pub cudnn: Option<super::cudnn::Attention>,
    /// The world communicator (every rank).
    pub world: nccl::ncclComm_t,
    /// Per manifest group: this rank's communicator in it, if it is a member.
    pub comms: Vec<Option<nccl::ncclComm_t>>,
    /// Live stream-ordered allocations (`alloc`).
    allocs: HashSet<u64, WordHash>,
    /// Every pool this rank allocated, in creation order, live or freed (pools are
    /// persistent: a second call of the program reuses the registered buffer instead of
    /// registering again), with its index by base address and the freed ones' indices by
    /// what they can be reused for, highest first (the earliest created is reused first, so
    /// that a program's pools come back in its `pool_alloc` order, the order the runner
    /// allocated them in for the slots).
    pools: Vec<Pool>,
    pool_index: HashMap<u64, usize, WordHash>,
    free_pools: HashMap<PoolKey, Vec<usize>, WordHash>,
    /// Per-peer element counts of `all_to_all` (send, receive), reused across calls.
    a2a_counts: (Vec<u64>, Vec<u64>),
    /// Notes for the user (printed once, e.g. a registration fallback).
    pub notes: Vec<String>,
    pub last_error: Option<String>,
    /// Kernel names, by kernel index (for per-op labels).
    pub kernel_names: Vec<String>,
    /// Per-op timing: record events around every runtime call that enqueues work.
    pub time_ops: bool,
    marks: Vec<Mark>,
    spare_events: Vec<cu::CUevent>,
    /// Nesting of `group_start`; the whole group is one timed op (NCCL launches at the end).
    group_depth: u32,
    group_start: Option<cu::CUevent>,
    group_labels: Vec<String>,
    /// Sums per op position over the timed calls: (op, total seconds, calls).
    op_sums: Vec<OpSum>,
    /// The start of the timed call in flight (`begin_timed_call`): ops' start offsets are
    /// measured from it.
    call_start: Option<cu::CUevent>,
    /// Which event records and stream waits order something (`order.rs`): the others are
    /// not issued. Sized to `events` by the launcher.
    pub order: StreamOrder,
    /// The driver calls of the bookkeeping step being issued (reused: see `step`).
    ops: Ops,
    /// Work enqueued inside an NCCL group, per stream: NCCL launches it at the outermost
    /// `ncclGroupEnd`, so it counts as work there (a record inside the group lands before it).
    group_work: [bool; 2],
    /// A call is being captured into a CUDA graph (`graph.rs`): what cannot be captured
    /// (allocating a new pool) fails with a `--cuda-graph:` error instead.
    pub capturing: bool,
    /// Host time in library calls and table functions, while the runner profiles a timed
    /// loop (`COMMLIR_HOST_PROFILE`, [`super::profile`]).
    pub prof: Profiler,
    /// Peer-mapped symm_mem pools and their exchange (`symm.rs`).
    pub symm: SymmState,
    /// Work items enqueued so far per stream (kernel launches, library calls, copies,
    /// collectives: everything [`RankState::timed`] issues); the runner reports the count
    /// of one call (`commlir-run`'s `work per call`).
    pub work_items: [u64; 2],
}

// SAFETY: the raw CUDA/NCCL handles are used by one thread at a time (the rank's thread);
// the state moves into that thread once.
unsafe impl Send for RankState {}

impl RankState {
    /// A state with no resources yet (filled in by the launcher).
    pub fn new(rank: usize, device: i32) -> RankState {
        RankState {
            rank,
            device,
            arg_bytes: 0,
            ctx: std::ptr::null_mut(),
            streams: [std::ptr::null_mut(); 2],
            events: Vec::new(),
            extra_events: Vec::new(),
            module: std::ptr::null_mut(),
            kernels: Vec::new(),
            cublas: std::ptr::null_mut(),
            cudnn: None,
            world: std::ptr::null_mut(),
            comms: Vec::new(),
            allocs: HashSet::default(),
            pools: Vec::new(),
            pool_index: HashMap::default(),
            free_pools: HashMap::default(),
            a2a_counts: (Vec::new(), Vec::new()),
            notes: Vec::new(),
            last_error: None,
            kernel_names: Vec::new(),
            time_ops: false,
            marks: Vec::new(),
            spare_events: Vec::new(),
            group_depth: 0,
            group_start: None,
            group_labels: Vec::new(),
            op_sums: Vec::new(),
            call_start: None,
            order: StreamOrder::default(),
            ops: Ops::new(),
            group_work: [false; 2],
            capturing: false,
            prof: Profiler::default(),
            symm: SymmState::default(),
            work_items: [0; 2],
        }
    }

    /// One work item was enqueued on ABI stream `stream` (see [`StreamOrder`]).
    fn enqueued(&mut self, stream: u32) {
        let s = (stream as usize).min(1);
        if self.group_depth > 0 {
            self.group_work[s] = true;
        } else {
            self.order.work(s);
        }
    }

    /// The CUDA event behind physical event `p` of the bookkeeping (created on first use
    /// beyond the program's and the runner's own).
    fn physical_event(&mut self, p: usize) -> Result<cu::CUevent, String> {
        if let Some(e) = self.events.get(p) {
            return Ok(*e);
        }
        let i = p - self.events.len();
        while self.extra_events.len() <= i {
            let mut e = std::ptr::null_mut();
            // SAFETY: writes one event handle; the rank's context is current.
            cu_check("cuEventCreate", unsafe {
                cu::cuEventCreate(&mut e, cu::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
            })?;
            self.extra_events.push(e);
        }
        Ok(self.extra_events[i])
    }

    /// One step of the stream bookkeeping (`order.rs`), then the driver calls it asked for,
    /// in order. The calls go through `ops`, kept across steps: no allocation, no copy.
    fn step(
        &mut self,
        f: impl FnOnce(&mut StreamOrder, &mut Ops) -> Result<(), String>,
    ) -> Result<(), String> {
        self.ops.clear();
        f(&mut self.order, &mut self.ops)?;
        for i in 0..self.ops.len() {
            match self.ops[i] {
                Op::Record { event, stream } => {
                    let (e, s) = (self.physical_event(event)?, self.streams[stream]);
                    // SAFETY: a live event and stream of this context.
                    let r = self
                        .prof
                        .cuda(Driver::Record, || unsafe { cu::cuEventRecord(e, s) });
                    cu_check("cuEventRecord", r)?;
                }
                Op::Wait { stream, event } => {
                    let (e, s) = (self.physical_event(event)?, self.streams[stream]);
                    // SAFETY: a live event and stream of this context.
                    let r = self
                        .prof
                        .cuda(Driver::Wait, || unsafe { cu::cuStreamWaitEvent(s, e, 0) });
                    cu_check("cuStreamWaitEvent", r)?;
                }
            }
        }
        Ok(())
    }

    /// Issues the deferred waits of ABI stream `stream` (`order.rs`, *Lazy waits*). Must
    /// run before anything is enqueued on that stream (work, or an event recorded outside the
    /// bookkeeping: timing events, graph fork/join) and before the host observes it.
    pub fn flush_waits(&mut self, stream: u32) -> Result<(), String> {
        let s = (stream as usize).min(1);
        self.step(|o, ops| {
            o.flush(s, ops);
            Ok(())
        })
    }

    /// Before a work item is enqueued on ABI stream `stream`: its deferred waits first, so
    /// that no work runs before what the program ordered it after.
    fn before_work(&mut self, stream: u32) -> Result<(), String> {
        let s = (stream as usize).min(1);
        self.step(|o, ops| {
            o.before_work(s, ops);
            Ok(())
        })
    }

    /// The program's `event_record`: issued unless it cannot order anything (`order.rs`);
    /// the stream's deferred waits go first, so that the event captures them.
    fn event_record(&mut self, stream: u32, event: u32) -> Result<(), String> {
        self.stream(stream)?;
        self.event(event)?;
        self.step(|o, ops| o.record(event as usize, stream as usize, ops))
    }

    /// The program's `stream_wait`: issued unless the stream is already ordered after
    /// everything the event captured (`order.rs`); a wait of the compute stream is deferred
    /// until something needs it (`order.rs`, *Lazy waits*).
    fn stream_wait(&mut self, stream: u32, event: u32) -> Result<(), String> {
        self.stream(stream)?;
        self.event(event)?;
        self.step(|o, ops| o.wait(stream as usize, event as usize, ops))
    }

    fn stream(&self, s: u32) -> Result<cu::CUstream, String> {
        self.streams
            .get(s as usize)
            .copied()
            .ok_or_else(|| format!("unknown stream {s}"))
    }

    fn comm(&self, group: u32) -> Result<nccl::ncclComm_t, String> {
        match self.comms.get(group as usize) {
            Some(Some(c)) => Ok(*c),
            Some(None) => Err(format!(
                "rank {} is not a member of group {group} but the program communicates on it",
                self.rank
            )),
            None => Err(format!("unknown group index {group}")),
        }
    }

    fn event(&self, e: u32) -> Result<cu::CUevent, String> {
        self.events
            .get(e as usize)
            .copied()
            .ok_or_else(|| format!("event index {e} is out of range"))
    }

    /// Returns timing events to the spare list.
    pub fn recycle_events(&mut self, evs: &[cu::CUevent]) {
        self.spare_events.extend_from_slice(evs);
    }

    /// A timing-enabled event (reused across calls).
    pub fn timing_event(&mut self) -> Result<cu::CUevent, String> {
        if let Some(e) = self.spare_events.pop() {
            return Ok(e);
        }
        let mut e = std::ptr::null_mut();
        // SAFETY: writes one event handle; the rank's context is current.
        cu_check("cuEventCreate", unsafe {
            cu::cuEventCreate(&mut e, cu::CUevent_flags::CU_EVENT_DEFAULT as u32)
        })?;
        Ok(e)
    }

    /// Runs `f`, which enqueues one op on `stream`; with [`RankState::time_ops`], between
    /// two events recorded on that stream. `what` gives (label, bytes, bus factor). Inside an
    /// NCCL group only the label is kept: the group is timed as a whole (`group_end`).
    fn timed(
        &mut self,
        stream: u32,
        what: impl FnOnce(&Self) -> (String, u64, f64),
        f: impl FnOnce(&mut Self) -> Result<(), String>,
    ) -> Result<(), String> {
        // The stream's deferred waits go before the op (and before its start event, so that
        // the op's time does not include waiting for the other stream).
        self.before_work(stream)?;
        if let Some(n) = self.work_items.get_mut(stream as usize) {
            *n += 1;
        }
        if !self.time_ops {
            f(self)?;
            self.enqueued(stream);
            return Ok(());
        }
        if self.group_depth > 0 {
            let (l, _, _) = what(self);
            self.group_labels.push(l);
            f(self)?;
            self.enqueued(stream);
            return Ok(());
        }
        let s = self.stream(stream)?;
        let (start, end) = (self.timing_event()?, self.timing_event()?);
        // SAFETY: live events and stream of this context.
        cu_check("cuEventRecord", unsafe { cu::cuEventRecord(start, s) })?;
        f(self)?;
        self.enqueued(stream);
        cu_check("cuEventRecord", unsafe { cu::cuEventRecord(end, s) })?;
        let (label, bytes, bus_factor) = what(self);
        self.marks.push(Mark {
            label,
            stream,
            bytes,
            bus_factor,
            start,
            end,
        });
        Ok(())
    }

    /// Marks the start of a timed call (before it, with both streams idle): an event on the
    /// compute stream that the comm stream waits for, so that every op of the call starts
    /// after it and [`RankState::collect_op_times`] can place each op in the call (the
    /// measured timeline, `commlir-run --trace`).
    pub fn begin_timed_call(&mut self) -> Result<(), String> {
        let e = match self.call_start.take() {
            Some(e) => e,
            None => self.timing_event()?,
        };
        // Kept before anything can fail, so that teardown destroys it.
        self.call_start = Some(e);
        // SAFETY: a live event and the streams of this context.
        cu_check("cuEventRecord", unsafe {
            cu::cuEventRecord(e, self.streams[0])
        })?;
        // SAFETY: as above.
        cu_check("cuStreamWaitEvent", unsafe {
            cu::cuStreamWaitEvent(self.streams[1], e, 0)
        })
    }

    /// After a timed call has completed (streams synchronized): adds each op's time (and
    /// its start's offset in the call, when [`RankState::begin_timed_call`] marked it) to
    /// its position's sums and recycles the events.
    pub fn collect_op_times(&mut self) -> Result<(), String> {
        let call_start = self.call_start.take();
        for (i, m) in std::mem::take(&mut self.marks).into_iter().enumerate() {
            let mut ms = 0f32;
            // SAFETY: both events were recorded and have completed.
            cu_check("cuEventElapsedTime", unsafe {
                cu::cuEventElapsedTime_v2(&mut ms, m.start, m.end)
            })?;
            let s = f64::from(ms) * 1e-3;
            let start = match call_start {
                Some(c) => {
                    let mut ms = 0f32;
                    // SAFETY: both events were recorded (the call start first) and completed.
                    cu_check("cuEventElapsedTime", unsafe {
                        cu::cuEventElapsedTime_v2(&mut ms, c, m.start)
                    })?;
                    Some(f64::from(ms) * 1e-3)
                }
                None => None,
            };
            if i == self.op_sums.len() {
                self.op_sums.push(OpSum {
                    op: OpTime {
                        label: m.label.clone(),
                        stream: m.stream,
                        bytes: m.bytes,
                        bus_factor: m.bus_factor,
                        seconds: 0.0,
                        start_seconds: None,
                    },
                    seconds: 0.0,
                    start_seconds: 0.0,
                    starts: 0,
                    calls: 0,
                });
            }
            let e = &mut self.op_sums[i];
            if e.op.label != m.label {
                return Err(format!(
                    "per-op timing: op {i} was {:?} and is now {:?} (the program's calls differ)",
                    e.op.label, m.label
                ));
            }
            e.seconds += s;
            e.calls += 1;
            if let Some(t) = start {
                e.start_seconds += t;
                e.starts += 1;
            }
            self.spare_events.push(m.start);
            self.spare_events.push(m.end);
        }
        self.spare_events.extend(call_start);
        Ok(())
    }

    /// The mean time of every op over the collected calls, in program order.
    pub fn op_times(&self) -> Vec<OpTime> {
        self.op_sums
            .iter()
            .map(|e| OpTime {
                seconds: e.seconds / f64::from(e.calls.max(1)),
                // Only when every call recorded it: a partial mean would misplace the op.
                start_seconds: (e.starts > 0 && e.starts == e.calls)
                    .then(|| e.start_seconds / f64::from(e.starts)),
                ..e.op.clone()
            })
            .collect()
    }

    /// Size of the communicator of `group` (1 when unknown).
    fn group_size(&self, group: u32) -> u64 {
        let Ok(c) = self.comm(group) else { return 1 };
        let mut n = 0i32;
        // SAFETY: a live communicator.
        let r = unsafe { nccl::ncclCommCount(c, &mut n) };
        if r == nccl::ncclResult_t::ncclSuccess {
            n.max(1) as u64
        } else {
            1
        }
    }

    /// (label, nccl-tests bytes, bus factor) of a collective on `group`: `elems` elements of
    /// `dtype` are the message; `kind` picks the factor.
    fn coll_label(&self, kind: &str, group: u32, elems: u64, dtype: u32) -> (String, u64, f64) {
        let n = self.group_size(group);
        let esz = dtype_bytes(dtype).unwrap_or(1) as u64;
        let dname = abi::DTYPES
            .iter()
            .find(|(_, c)| *c == dtype)
            .map(|(d, _)| *d)
            .unwrap_or("?");
        let nf = n as f64;
        let (bytes, factor) = match kind {
            "all_reduce" | "one_shot_all_reduce" | "two_shot_all_reduce" => {
                (elems * esz, 2.0 * (nf - 1.0) / nf)
            }
            "all_gather" | "reduce_scatter" => (elems * esz * n, (nf - 1.0) / nf),
            "all_to_all" => (elems * esz, (nf - 1.0) / nf),
            _ => (elems * esz, 1.0),
        };
        (
            format!("{kind} {dname} {bytes} B (group of {n})"),
            bytes,
            factor,
        )
    }

    /// Orders the two streams both ways (comm after compute's work so far, and compute after
    /// comm's): used before each call of the program and after the timed loop, so that
    /// consecutive calls never overlap on reused pools.
    ///
    /// Only the directions that order something are issued ([`StreamOrder::join`], through
    /// the runner's two events): a stream already ordered after the other's work (by the
    /// previous call's own waits, or because the other stream enqueued nothing since) needs
    /// no wait, and then no record either. Compute's wait for comm is deferred like the
    /// program's (`order.rs`, *Lazy waits*): the next call's compute work flushes it first,
    /// and its comm work is after the previous comm work by stream order. A slotted
    /// single-collective program gives compute no work and leaves it ordered after the
    /// collective (a pending wait), so its calls join with no driver call at all.
    pub fn join_streams(&mut self) -> Result<(), String> {
        let n = self.events.len();
        self.step(|o, ops| o.join(n - 2, n - 1, ops))
    }

    /// Waits for both streams (after it all enqueued work has completed, which
    /// [`StreamOrder::synchronized`] records). Deferred waits are issued first: the host
    /// then observes every stream after everything the program ordered it after.
    pub fn synchronize(&mut self) -> Result<(), String> {
        self.step(|o, ops| {
            o.flush_all(ops);
            Ok(())
        })?;
        for s in self.streams {
            // SAFETY: a live stream of this context.
            cu_check("cuStreamSynchronize", unsafe { cu::cuStreamSynchronize(s) })?;
        }
        self.order.synchronized();
        self.symm.check_faults()
    }

    /// Frees a result buffer the program allocated with `alloc` (results are owned by the
    /// caller); pointers that are arguments or pool views are left alone. A slotted program
    /// has no live allocation: its results are told apart without a lookup.
    pub fn release_result(&mut self, ptr: u64) -> Result<(), String> {
        if !self.allocs.is_empty() && self.allocs.contains(&ptr) {
            self.before_work(abi::STREAM_COMPUTE)?;
            self.allocs.remove(&ptr);
            let s = self.streams[0];
            // SAFETY: allocated by cuMemAllocAsync on this context.
            let r = self
                .prof
                .cuda(Driver::Other, || unsafe { cu::cuMemFreeAsync(ptr, s) });
            cu_check("cuMemFreeAsync", r)?;
            self.enqueued(abi::STREAM_COMPUTE);
        }
        Ok(())
    }

    /// The live stream-ordered allocations (`alloc`), e.g. to tell which appeared in a call.
    pub fn live_allocs(&self) -> HashSet<u64> {
        self.allocs.iter().copied().collect()
    }

    fn alloc(&mut self, bytes: u64, out: *mut *mut c_void) -> Result<(), String> {
        let mut p: cu::CUdeviceptr = 0;
        // Zero-byte tensors still need a distinct address.
        let n = bytes.max(1) as usize;
        self.before_work(abi::STREAM_COMPUTE)?;
        let s = self.streams[0];
        // SAFETY: writes one device pointer.
        let r = self.prof.cuda(Driver::Other, || unsafe {
            cu::cuMemAllocAsync(&mut p, n, s)
        });
        cu_check("cuMemAllocAsync", r)?;
        // Stream-ordered: other streams may use the buffer only once ordered after this.
        self.enqueued(abi::STREAM_COMPUTE);
        self.allocs.insert(p);
        // SAFETY: `out` is the host program's slot.
        unsafe { *out = p as *mut c_void };
        Ok(())
    }

    fn free(&mut self, ptr: *mut c_void) -> Result<(), String> {
        let p = ptr as u64;
        if !self.allocs.remove(&p) {
            return Err(format!("free of {p:#x}, which alloc did not return"));
        }
        self.before_work(abi::STREAM_COMPUTE)?;
        let s = self.streams[0];
        // SAFETY: allocated by cuMemAllocAsync on this context.
        let r = self
            .prof
            .cuda(Driver::Other, || unsafe { cu::cuMemFreeAsync(p, s) });
        cu_check("cuMemFreeAsync", r)?;
        self.enqueued(abi::STREAM_COMPUTE);
        Ok(())
    }

    pub(crate) fn pool_alloc(
        &mut self,
        kind: u32,
        group: u32,
        bytes: u64,
        alignment: u64,
        out: *mut *mut c_void,
    ) -> Result<(), String> {
        let reuse = self
            .free_pools
            .get_mut(&(kind, group, bytes))
            .and_then(Vec::pop);
        let base = if let Some(i) = reuse {
            let pool = &mut self.pools[i];
            pool.live = true;
            pool.base
        } else {
            if self.capturing {
                return Err(format!(
                    "--cuda-graph: the captured call allocates a new comm pool ({bytes} bytes, group {group}); ncclMemAlloc/cuMemAlloc and NCCL registration cannot be captured (pools are normally allocated by the calls before the capture and reused)"
                ));
            }
            // A new pool (not a cached one, which is host bookkeeping only): allocation and
            // registration are not stream-ordered; be conservative and issue the deferred
            // waits first.
            self.flush_waits(abi::STREAM_COMPUTE)?;
            let comm = self.comms.get(group as usize).copied().flatten();
            let n = bytes.max(1) as usize;
            if let (abi::POOL_SYMM_MEM, true, Some(c)) = (kind, self.symm.enabled, comm) {
                // SAFETY: the rank's context is current; collective over the group in
                // program order, like every pool_alloc of a new pool.
                match unsafe {
                    self.symm.create(
                        group,
                        bytes,
                        alignment,
                        self.device,
                        self.rank,
                        c,
                        self.streams[1],
                    )
                }? {
                    Ok(va) => {
                        let mut reg = std::ptr::null_mut();
                        // NCCL collectives on the pool stay zero-copy.
                        // SAFETY: `va` maps at least `n` bytes on this device.
                        let r = unsafe { nccl::ncclCommRegister(c, va as *mut c_void, n, &mut reg) };
                        if let Err(why) = nccl_check("ncclCommRegister", r, c) {
                            reg = std::ptr::null_mut();
                            self.note(format!("{why}; NCCL collectives copy through their own buffers on symm_mem pools"));
                        }
                        self.note("symm_mem pools are peer-mapped (CUDA VMM allocations exported to every rank of the group, signal pad per pool): symm ops run commlir's generated kernels".into());
                        self.record_pool(Pool {
                            base: va,
                            kind,
                            group,
                            bytes,
                            nccl_mem: false,
                            reg,
                            win: std::ptr::null_mut(),
                            live: true,
                            peer_mapped: true,
                        });
                        // SAFETY: `out` is the host program's slot.
                        unsafe { *out = va as *mut c_void };
                        return Ok(());
                    }
                    Err(why) => self.note(format!(
                        "symm_mem pool of group {} not peer-mapped ({why}): symm ops run as NCCL collectives on the compute stream",
                        self.symm.group_names.get(group as usize).map_or("?", |s| s.as_str())
                    )),
                }
            }
            let mut ptr: *mut c_void = std::ptr::null_mut();
            // SAFETY: writes one pointer.
            let r = unsafe { nccl::ncclMemAlloc(&mut ptr, n) };
            let nccl_mem = r == nccl::ncclResult_t::ncclSuccess;
            if !nccl_mem {
                let why = nccl_check("ncclMemAlloc", r, std::ptr::null_mut()).unwrap_err();
                self.note(format!(
                    "{why}; pools fall back to cuMemAlloc (unregistered, NCCL copies through its own buffers)"
                ));
                let mut p: cu::CUdeviceptr = 0;
                // SAFETY: writes one device pointer.
                cu_check("cuMemAlloc", unsafe { cu::cuMemAlloc_v2(&mut p, n) })?;
                ptr = p as *mut c_void;
            }
            let mut reg = std::ptr::null_mut();
            let mut win: nccl::ncclWindow_t = std::ptr::null_mut();
            if let Some(c) = comm {
                let windows = SYMM_WINDOWS.load(std::sync::atomic::Ordering::Relaxed);
                if kind == abi::POOL_SYMM_MEM && !windows {
                    self.note("symm_mem pools are ncclCommRegister'ed buffers (--symm-windows off); the one-shot all-reduce runs as an NCCL all-reduce on the compute stream".into());
                }
                if kind == abi::POOL_SYMM_MEM && windows {
                    if !nccl_mem {
                        // Window registration is collective: a rank that skipped it alone would
                        // leave the others of the group waiting in ncclCommWindowRegister.
                        return Err(format!(
                            "symm_mem pool of {bytes} bytes (group {group}): ncclMemAlloc failed, and a symmetric window needs ncclMemAlloc memory on every rank of the group"
                        ));
                    }
                    match window_register(c, ptr, n) {
                        Ok(w) => {
                            win = w;
                            self.note("symm_mem pools are NCCL symmetric windows (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC): NCCL may run its symmetric-memory kernels on them; the one-shot all-reduce runs as an NCCL all-reduce on the compute stream".into());
                        }
                        Err(why) => self.note(format!(
                            "{why}; symm_mem pools fall back to ncclCommRegister (the one-shot all-reduce runs as an NCCL all-reduce on the compute stream)"
                        )),
                    }
                }
                if win.is_null() {
                    // SAFETY: `ptr` is a live allocation of `n` bytes on this device.
                    let r = unsafe { nccl::ncclCommRegister(c, ptr, n, &mut reg) };
                    if let Err(why) = nccl_check("ncclCommRegister", r, c) {
                        reg = std::ptr::null_mut();
                        self.note(format!("{why}; the pool runs unregistered"));
                    }
                }
            }
            let base = ptr as u64;
            self.record_pool(Pool {
                base,
                kind,
                group,
                bytes,
                nccl_mem,
                reg,
                win,
                live: true,
                peer_mapped: false,
            });
            base
        };
        if alignment > 1 && base % alignment != 0 {
            return Err(format!(
                "pool base {base:#x} is not aligned to {alignment} bytes"
            ));
        }
        // SAFETY: `out` is the host program's slot.
        unsafe { *out = base as *mut c_void };
        Ok(())
    }

    /// Records a new live pool (findable by its base).
    /// Bytes of every comm pool this rank allocated: a freed pool stays allocated for reuse
    /// (`free_pools`), so this is the pools' device footprint.
    pub(crate) fn pool_bytes(&self) -> u64 {
        self.pools.iter().map(|p| p.bytes).sum()
    }

    fn record_pool(&mut self, pool: Pool) {
        self.pool_index.insert(pool.base, self.pools.len());
        self.pools.push(pool);
    }

    pub(crate) fn pool_free(&mut self, base: *mut c_void) -> Result<(), String> {
        let b = base as u64;
        let i = match self.pool_index.get(&b) {
            Some(&i) if self.pools[i].live => i,
            _ => {
                return Err(format!(
                    "pool_free of {b:#x}, which pool_alloc did not return"
                ))
            }
        };
        let p = &mut self.pools[i];
        p.live = false;
        let free = self
            .free_pools
            .entry((p.kind, p.group, p.bytes))
            .or_default();
        // Kept highest index first, so that `pop` reuses the earliest created; the list holds
        // only the freed pools of this key (one, for a program with one pool per key).
        let at = free.partition_point(|&j| j > i);
        free.insert(at, i);
        Ok(())
    }

    fn note(&mut self, n: String) {
        if !self.notes.contains(&n) {
            self.notes.push(n);
        }
    }

    /// A kernel launch on either stream (ABI `launch` and `launch_on`).
    fn launch_on(
        &mut self,
        stream: u32,
        kernel: u32,
        grid: u32,
        block: u32,
        shared: u32,
        params: *mut *mut c_void,
    ) -> Result<(), String> {
        let f = *self
            .kernels
            .get(kernel as usize)
            .ok_or_else(|| format!("kernel index {kernel} is out of range"))?;
        if self.symm.skip_next
            && self
                .kernel_names
                .get(kernel as usize)
                .is_some_and(|k| super::symm::is_symm_kernel(k))
        {
            // The injected fault (`COMMLIR_FAULT_SKIP_SYMM`): this rank never arrives.
            self.symm.skip_next = false;
            return Ok(());
        }
        let s = self.stream(stream)?;
        // SAFETY: `params` is the host program's kernelParams array for this kernel.
        let r = self.prof.cuda(Driver::Launch, || unsafe {
            cu::cuLaunchKernel(
                f,
                grid.max(1),
                1,
                1,
                block.max(1),
                1,
                1,
                shared,
                s,
                params,
                std::ptr::null_mut(),
            )
        });
        cu_check("cuLaunchKernel", r)
    }

    #[allow(clippy::too_many_arguments)]
    fn gemm(
        &mut self,
        trans: (u32, u32),
        mnk: (i64, i64, i64),
        a: (*const c_void, i64, i64),
        b: (*const c_void, i64, i64),
        c: (*mut c_void, i64, i64),
        batch: i64,
        dtype: u32,
        (alpha, beta): (f64, f64),
    ) -> Result<(), String> {
        use cublas::cublasComputeType_t as C;
        use cublas::cudaDataType_t as D;
        let op = |t: u32| {
            if t == 0 {
                cublas::cublasOperation_t::CUBLAS_OP_N
            } else {
                cublas::cublasOperation_t::CUBLAS_OP_T
            }
        };
        let of = |code: u32| match code {
            9 => Some((D::CUDA_R_16BF, C::CUBLAS_COMPUTE_32F)),
            6 => Some((D::CUDA_R_16F, C::CUBLAS_COMPUTE_32F)),
            7 => Some((D::CUDA_R_32F, C::CUBLAS_COMPUTE_32F)),
            8 => Some((D::CUDA_R_64F, C::CUBLAS_COMPUTE_64F)),
            _ => None,
        };
        let unsupported = || format!("gemm: unsupported dtype code {dtype}");
        let (dt, ct) = of(dtype & 0xff).ok_or_else(unsupported)?;
        // The result's type, when it differs (abi::GEMM_OUT_SHIFT): f16/bf16 into f32.
        let ctype = match dtype >> abi::GEMM_OUT_SHIFT {
            0 => dt,
            o => match (of(o - 1), ct) {
                (Some((D::CUDA_R_32F, _)), C::CUBLAS_COMPUTE_32F) => D::CUDA_R_32F,
                _ => return Err(unsupported()),
            },
        };
        let dtype = dtype & 0xff;
        // alpha and beta in the compute type, on the host.
        let (alpha32, beta32) = (alpha as f32, beta as f32);
        let (alpha, beta): (*const c_void, *const c_void) = if dtype == 8 {
            (&alpha as *const f64 as _, &beta as *const f64 as _)
        } else {
            (&alpha32 as *const f32 as _, &beta32 as *const f32 as _)
        };
        let handle = self.cublas;
        // SAFETY: the host program passes device buffers of the shapes it computed.
        let r = self.prof.cuda(Driver::Launch, || unsafe {
            cublas::cublasGemmStridedBatchedEx_64(
                handle,
                op(trans.0),
                op(trans.1),
                mnk.0,
                mnk.1,
                mnk.2,
                alpha,
                a.0,
                dt,
                a.1,
                a.2,
                b.0,
                dt,
                b.1,
                b.2,
                beta,
                c.0,
                ctype,
                c.1,
                c.2,
                batch,
                ct,
                cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        });
        cublas_check("cublasGemmStridedBatchedEx_64", r)
    }

    fn nccl_stream(&self) -> nccl::cudaStream_t {
        self.streams[1] as nccl::cudaStream_t
    }

    #[allow(clippy::too_many_arguments)]
    fn all_to_all(
        &mut self,
        group: u32,
        send: *const c_void,
        recv: *mut c_void,
        count: u64,
        row_elems: u64,
        dtype: u32,
        rows: (*const i64, *const i64),
    ) -> Result<(), String> {
        let comm = self.comm(group)?;
        let mut g = 0i32;
        let mut me = 0i32;
        // SAFETY: live communicator.
        unsafe {
            let r = self.prof.nccl(|| nccl::ncclCommCount(comm, &mut g));
            nccl_check("ncclCommCount", r, comm)?;
            let r = self.prof.nccl(|| nccl::ncclCommUserRank(comm, &mut me));
            nccl_check("ncclCommUserRank", r, comm)?;
        }
        let (g, me) = (g as usize, me as usize);
        let esz = dtype_bytes(dtype)? as u64;
        let dt = nccl_dtype(dtype)?;
        // Element counts per peer, from the rank-major row tables or equal blocks, into the
        // reused buffers.
        let counts = |table: *const i64, out: &mut Vec<u64>| -> Result<(), String> {
            out.clear();
            if table.is_null() {
                out.resize(g, count / g as u64);
                return Ok(());
            }
            // SAFETY: the ABI promises G*G entries.
            let row = unsafe { std::slice::from_raw_parts(table.add(me * g), g) };
            for r in row {
                let r = u64::try_from(*r).map_err(|_| format!("negative split size {r}"))?;
                out.push(r * row_elems);
            }
            Ok(())
        };
        let (mut sc, mut rc) = std::mem::take(&mut self.a2a_counts);
        let r = counts(rows.0, &mut sc)
            .and_then(|_| counts(rows.1, &mut rc))
            .and_then(|_| {
                let stream = self.nccl_stream();
                let prof = &mut self.prof;
                // SAFETY: offsets stay within the buffers the splits describe.
                unsafe {
                    nccl_check("ncclGroupStart", prof.nccl(|| nccl::ncclGroupStart()), comm)?;
                    let (mut so, mut ro) = (0u64, 0u64);
                    for peer in 0..g {
                        let s = (send as *const u8).add((so * esz) as usize) as *const c_void;
                        let r = (recv as *mut u8).add((ro * esz) as usize) as *mut c_void;
                        let (ns, nr, p) = (sc[peer] as usize, rc[peer] as usize, peer as i32);
                        let res = prof.nccl(|| nccl::ncclSend(s, ns, dt, p, comm, stream));
                        nccl_check("ncclSend", res, comm)?;
                        let res = prof.nccl(|| nccl::ncclRecv(r, nr, dt, p, comm, stream));
                        nccl_check("ncclRecv", res, comm)?;
                        so += sc[peer];
                        ro += rc[peer];
                    }
                    nccl_check("ncclGroupEnd", prof.nccl(|| nccl::ncclGroupEnd()), comm)
                }
            });
        self.a2a_counts = (sc, rc);
        r
    }

    /// Releases everything this rank holds (best effort: the first error is returned).
    pub fn teardown(&mut self) -> Result<(), String> {
        let mut first: Result<(), String> = Ok(());
        let mut keep = |r: Result<(), String>| {
            if first.is_ok() {
                first = r;
            }
        };
        // SAFETY: every handle below was created by this rank and is released once.
        unsafe {
            if !self.ctx.is_null() {
                keep(cu_check("cuCtxSetCurrent", cu::cuCtxSetCurrent(self.ctx)));
                if !self.streams[0].is_null() {
                    keep(self.synchronize());
                }
            }
            self.pool_index.clear();
            self.free_pools.clear();
            for p in std::mem::take(&mut self.pools) {
                let base = p.base;
                if !p.reg.is_null() {
                    if let Some(Some(c)) = self.comms.get(p.group as usize) {
                        keep(nccl_check(
                            "ncclCommDeregister",
                            nccl::ncclCommDeregister(*c, p.reg),
                            *c,
                        ));
                    }
                }
                // Collective, like the registration: every rank tears its pools down in
                // creation order.
                if !p.win.is_null() {
                    if let Some(Some(c)) = self.comms.get(p.group as usize) {
                        keep(nccl_check(
                            "ncclCommWindowDeregister",
                            nccl::ncclCommWindowDeregister(*c, p.win),
                            *c,
                        ));
                    }
                }
                if p.peer_mapped {
                    // Released below, after the group's peers are done with it.
                } else if p.nccl_mem {
                    keep(nccl_check(
                        "ncclMemFree",
                        nccl::ncclMemFree(base as *mut c_void),
                        std::ptr::null_mut(),
                    ));
                } else {
                    keep(cu_check("cuMemFree", cu::cuMemFree_v2(base)));
                }
            }
            if !self.symm.pools.is_empty() {
                // Peers read and write these pools: unmap only after every member of each
                // group has synchronized (its kernels are done), which the vote orders.
                let mut groups: Vec<u32> = self.symm.pools.values().map(|p| p.group).collect();
                groups.sort_unstable();
                groups.dedup();
                for g in groups {
                    if let Some(Some(c)) = self.comms.get(g as usize) {
                        keep(super::symm::vote(*c, self.streams[1], true).map(drop));
                    }
                }
                self.symm.release();
            }
            for p in std::mem::take(&mut self.allocs) {
                keep(cu_check("cuMemFree", cu::cuMemFree_v2(p)));
            }
            // (A group that is the whole world holds the world communicator, destroyed below.)
            for c in self.comms.drain(..).flatten() {
                if c != self.world {
                    keep(nccl_check("ncclCommDestroy", nccl::ncclCommDestroy(c), c));
                }
            }
            if !self.world.is_null() {
                keep(nccl_check(
                    "ncclCommDestroy",
                    nccl::ncclCommDestroy(self.world),
                    self.world,
                ));
                self.world = std::ptr::null_mut();
            }
            // cuDNN's plans and workspace go before the context's other handles.
            self.cudnn = None;
            if !self.cublas.is_null() {
                keep(cublas_check(
                    "cublasDestroy",
                    cublas::cublasDestroy_v2(self.cublas),
                ));
                self.cublas = std::ptr::null_mut();
            }
            if !self.module.is_null() {
                keep(cu_check("cuModuleUnload", cu::cuModuleUnload(self.module)));
                self.module = std::ptr::null_mut();
            }
            let marks: Vec<cu::CUevent> = std::mem::take(&mut self.marks)
                .into_iter()
                .flat_map(|m| [m.start, m.end])
                .chain(self.group_start.take())
                .chain(self.call_start.take())
                .collect();
            for e in self
                .events
                .drain(..)
                .chain(self.spare_events.drain(..))
                .chain(self.extra_events.drain(..))
                .chain(marks)
            {
                keep(cu_check("cuEventDestroy", cu::cuEventDestroy_v2(e)));
            }
            for s in &mut self.streams {
                if !s.is_null() {
                    keep(cu_check("cuStreamDestroy", cu::cuStreamDestroy_v2(*s)));
                    *s = std::ptr::null_mut();
                }
            }
        }
        first
    }
}

/// Runs `f` on the state behind `rt`, turning errors and panics into a status.
///
/// # Safety
/// `rt` must be the `*mut RankState` the runner passed to `commlir_main`.
/// Whether symm_mem pools become NCCL symmetric windows (`--symm-windows`, process-wide).
static SYMM_WINDOWS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Turns the registration of symm_mem pools as NCCL symmetric windows on (the default) or off
/// (plain `ncclCommRegister`, like nccl pools), for pools created after the call. NCCL picks
/// its symmetric-memory kernels for collectives on windows, which is faster at some sizes and
/// slower at others (docs/benchmarks.md, *GPU: symm_mem pools as NCCL symmetric windows*).
pub fn set_symm_windows(on: bool) {
    SYMM_WINDOWS.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// NCCL's version code (`ncclGetVersion`, e.g. 22809 for 2.28.9), 0 if it cannot tell.
fn nccl_version() -> i32 {
    static V: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        let mut v = 0;
        // SAFETY: writes one int.
        let r = unsafe { nccl::ncclGetVersion(&mut v) };
        if r == nccl::ncclResult_t::ncclSuccess {
            v
        } else {
            0
        }
    })
}

/// `NCCL_WIN_COLL_SYMMETRIC` (nccl.h, NCCL 2.27+): a window whose buffer every rank registered
/// at the same size, which NCCL's symmetric-memory collectives may use.
const NCCL_WIN_COLL_SYMMETRIC: i32 = 0x01;

/// Registers `ptr` (an `ncclMemAlloc` buffer of `n` bytes) as a symmetric window of `comm`.
/// Collective over the communicator. The symbol exists from NCCL 2.27 on; older libraries are
/// told apart by version first (the dynamically loaded binding would abort on a missing
/// symbol).
fn window_register(
    comm: nccl::ncclComm_t,
    ptr: *mut c_void,
    n: usize,
) -> Result<nccl::ncclWindow_t, String> {
    let v = nccl_version();
    if v < 22700 {
        return Err(format!(
            "ncclCommWindowRegister needs NCCL 2.27 or newer (this NCCL reports version code {v})"
        ));
    }
    let mut win: nccl::ncclWindow_t = std::ptr::null_mut();
    // SAFETY: `ptr` is a live `ncclMemAlloc` allocation of `n` bytes on this device; `win`
    // receives one handle.
    let r =
        unsafe { nccl::ncclCommWindowRegister(comm, ptr, n, &mut win, NCCL_WIN_COLL_SYMMETRIC) };
    nccl_check("ncclCommWindowRegister", r, comm)?;
    Ok(win)
}

unsafe fn with_state(
    rt: *mut c_void,
    f: impl FnOnce(&mut RankState) -> Result<(), String>,
) -> Status {
    if rt.is_null() {
        return ST_CUDA;
    }
    let st = &mut *(rt as *mut RankState);
    let mark = st.prof.abi_enter();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(st)));
    if let Some(m) = mark {
        st.prof.abi_exit(m);
    }
    match r {
        Ok(Ok(())) => 0,
        Ok(Err(msg)) => {
            st.last_error = Some(msg);
            ST_CUDA
        }
        Err(_) => {
            st.last_error = Some("internal error (panic) in the runtime".into());
            ST_CUDA
        }
    }
}

unsafe extern "C" fn rt_alloc(rt: *mut c_void, bytes: u64, out: *mut *mut c_void) -> Status {
    with_state(rt, |s| s.alloc(bytes, out))
}

unsafe extern "C" fn rt_free(rt: *mut c_void, ptr: *mut c_void) -> Status {
    with_state(rt, |s| s.free(ptr))
}

unsafe extern "C" fn rt_pool_alloc(
    rt: *mut c_void,
    kind: u32,
    group: u32,
    bytes: u64,
    alignment: u64,
    out: *mut *mut c_void,
) -> Status {
    with_state(rt, |s| s.pool_alloc(kind, group, bytes, alignment, out))
}

unsafe extern "C" fn rt_pool_free(rt: *mut c_void, base: *mut c_void) -> Status {
    with_state(rt, |s| s.pool_free(base))
}

unsafe extern "C" fn rt_launch(
    rt: *mut c_void,
    kernel: u32,
    grid_x: u32,
    block_x: u32,
    shared_bytes: u32,
    params: *mut *mut c_void,
    num_params: u32,
) -> Status {
    rt_launch_on(
        rt,
        abi::STREAM_COMPUTE,
        kernel,
        grid_x,
        block_x,
        shared_bytes,
        params,
        num_params,
    )
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rt_gemm(
    rt: *mut c_void,
    transa: u32,
    transb: u32,
    m: i64,
    n: i64,
    k: i64,
    a: *const c_void,
    lda: i64,
    stride_a: i64,
    b: *const c_void,
    ldb: i64,
    stride_b: i64,
    c: *mut c_void,
    ldc: i64,
    stride_c: i64,
    batch: i64,
    dtype: u32,
    alpha: f64,
    beta: f64,
) -> Status {
    with_state(rt, |s| {
        s.timed(
            abi::STREAM_COMPUTE,
            |_| {
                let d = abi::DTYPES
                    .iter()
                    .find(|(_, c)| *c == dtype & 0xff)
                    .map(|(d, _)| *d)
                    .unwrap_or("?");
                (format!("gemm {d} {m}x{n}x{k} batch {batch}"), 0, 0.0)
            },
            |s| {
                s.gemm(
                    (transa, transb),
                    (m, n, k),
                    (a, lda, stride_a),
                    (b, ldb, stride_b),
                    (c, ldc, stride_c),
                    batch,
                    dtype,
                    (alpha, beta),
                )
            },
        )
    })
}

/// ABI `copy_on`: a device-to-device copy on a stream.
unsafe extern "C" fn rt_copy_on(
    rt: *mut c_void,
    stream: u32,
    dst: *mut c_void,
    src: *const c_void,
    bytes: u64,
) -> Status {
    with_state(rt, |s| {
        s.timed(
            stream,
            |_| (format!("copy {bytes} B"), bytes, 0.0),
            |s| {
                let st = s.stream(stream)?;
                // SAFETY: the host program passes device buffers of at least `bytes`.
                let r = s.prof.cuda(Driver::Other, || unsafe {
                    cu::cuMemcpyDtoDAsync_v2(dst as u64, src as u64, bytes as usize, st)
                });
                cu_check("copy_on", r)
            },
        )
    })
}

unsafe extern "C" fn rt_all_reduce(
    rt: *mut c_void,
    group: u32,
    send: *const c_void,
    recv: *mut c_void,
    count: u64,
    dtype: u32,
    op: u32,
) -> Status {
    with_state(rt, |s| {
        s.timed(
            abi::STREAM_COMM,
            |s| s.coll_label("all_reduce", group, count, dtype),
            |s| {
                let (c, dt, op) = (s.comm(group)?, nccl_dtype(dtype)?, nccl_op(op)?);
                let stream = s.nccl_stream();
                let r = s
                    .prof
                    .nccl(|| nccl::ncclAllReduce(send, recv, count as usize, dt, op, c, stream));
                nccl_check("ncclAllReduce", r, c)
            },
        )
    })
}

unsafe extern "C" fn rt_all_gather(
    rt: *mut c_void,
    group: u32,
    send: *const c_void,
    recv: *mut c_void,
    send_count: u64,
    dtype: u32,
) -> Status {
    with_state(rt, |s| {
        s.timed(
            abi::STREAM_COMM,
            |s| s.coll_label("all_gather", group, send_count, dtype),
            |s| {
                let (c, dt) = (s.comm(group)?, nccl_dtype(dtype)?);
                let stream = s.nccl_stream();
                let r = s
                    .prof
                    .nccl(|| nccl::ncclAllGather(send, recv, send_count as usize, dt, c, stream));
                nccl_check("ncclAllGather", r, c)
            },
        )
    })
}

unsafe extern "C" fn rt_reduce_scatter(
    rt: *mut c_void,
    group: u32,
    send: *const c_void,
    recv: *mut c_void,
    recv_count: u64,
    dtype: u32,
    op: u32,
) -> Status {
    with_state(rt, |s| {
        s.timed(
            abi::STREAM_COMM,
            |s| s.coll_label("reduce_scatter", group, recv_count, dtype),
            |s| {
                let (c, dt) = (s.comm(group)?, nccl_dtype(dtype)?);
                let (n, stream) = (recv_count as usize, s.nccl_stream());
                let rs = raw_reduce_scatter()?;
                // SAFETY: `c` is this group's live communicator; the buffers are the program's.
                unsafe {
                    with_nccl_op(op, dtype, c, |op| {
                        let r = s.prof.nccl(|| rs(send, recv, n, dt, op, c, stream));
                        nccl_check("ncclReduceScatter", r, c)
                    })
                }
            },
        )
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rt_all_to_all(
    rt: *mut c_void,
    group: u32,
    send: *const c_void,
    recv: *mut c_void,
    count: u64,
    row_elems: u64,
    dtype: u32,
    send_rows: *const i64,
    recv_rows: *const i64,
) -> Status {
    with_state(rt, |s| {
        s.timed(
            abi::STREAM_COMM,
            |s| s.coll_label("all_to_all", group, count, dtype),
            |s| {
                s.all_to_all(
                    group,
                    send,
                    recv,
                    count,
                    row_elems,
                    dtype,
                    (send_rows, recv_rows),
                )
            },
        )
    })
}

unsafe extern "C" fn rt_broadcast(
    rt: *mut c_void,
    group: u32,
    send: *const c_void,
    recv: *mut c_void,
    count: u64,
    dtype: u32,
    root: u32,
) -> Status {
    with_state(rt, |s| {
        s.timed(
            abi::STREAM_COMM,
            |s| s.coll_label("broadcast", group, count, dtype),
            |s| {
                let (c, dt) = (s.comm(group)?, nccl_dtype(dtype)?);
                let (n, stream) = (count as usize, s.nccl_stream());
                let r = s
                    .prof
                    .nccl(|| nccl::ncclBroadcast(send, recv, n, dt, root as i32, c, stream));
                nccl_check("ncclBroadcast", r, c)
            },
        )
    })
}

unsafe extern "C" fn rt_group_start(rt: *mut c_void) -> Status {
    with_state(rt, |s| {
        if s.time_ops && s.group_depth == 0 {
            s.flush_waits(abi::STREAM_COMM)?;
            let e = s.timing_event()?;
            cu_check("cuEventRecord", cu::cuEventRecord(e, s.streams[1]))?;
            s.group_start = Some(e);
            s.group_labels.clear();
        }
        s.group_depth += 1;
        let r = s.prof.nccl(|| nccl::ncclGroupStart());
        nccl_check("ncclGroupStart", r, std::ptr::null_mut())
    })
}

unsafe extern "C" fn rt_group_end(rt: *mut c_void) -> Status {
    with_state(rt, |s| {
        if s.group_depth == 1 {
            // NCCL launches the group's work now: a wait deferred since an op of the group
            // was called must still land before it (as it would have, issued at once).
            for st in 0..2u32 {
                if s.group_work[st as usize] {
                    s.flush_waits(st)?;
                }
            }
        }
        let r = s.prof.nccl(|| nccl::ncclGroupEnd());
        nccl_check("ncclGroupEnd", r, std::ptr::null_mut())?;
        s.group_depth = s.group_depth.saturating_sub(1);
        if s.group_depth == 0 {
            // The group's NCCL work was launched just now, after anything recorded inside.
            for st in 0..2u32 {
                if std::mem::take(&mut s.group_work[st as usize]) {
                    s.enqueued(st);
                }
            }
            if let Some(start) = s.group_start.take() {
                let end = s.timing_event()?;
                cu_check("cuEventRecord", cu::cuEventRecord(end, s.streams[1]))?;
                let label = format!("nccl group [{}]", s.group_labels.join(", "));
                s.marks.push(Mark {
                    label,
                    stream: abi::STREAM_COMM,
                    bytes: 0,
                    bus_factor: 0.0,
                    start,
                    end,
                });
            }
        }
        Ok(())
    })
}

/// The NCCL form of a symm op (ABI `symm_fallback`), on the compute stream so that it is
/// blocking and in compute order, like the generated kernel it replaces; used while the pool
/// is not peer-mapped.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rt_symm_fallback(
    rt: *mut c_void,
    coll: u32,
    group: u32,
    pool_base: *mut c_void,
    offset: u64,
    out: *mut c_void,
    count: u64,
    dtype: u32,
    op: u32,
) -> Status {
    let kind = abi::SYMM_COLLS
        .iter()
        .find(|(_, c)| *c == coll)
        .map_or("symm", |(n, _)| *n);
    with_state(rt, |s| {
        s.timed(
            abi::STREAM_COMPUTE,
            |s| s.coll_label(kind, group, count, dtype),
            |s| {
                let (c, dt) = (s.comm(group)?, nccl_dtype(dtype)?);
                let src = (pool_base as *const u8).add(offset as usize) as *const c_void;
                let (n, stream) = (count as usize, s.streams[0] as nccl::cudaStream_t);
                let (what, r) = match coll {
                    0 | 1 => {
                        let op = nccl_op(op)?;
                        let r = s
                            .prof
                            .nccl(|| nccl::ncclAllReduce(src, out, n, dt, op, c, stream));
                        ("ncclAllReduce (symm)", r)
                    }
                    2 => {
                        let r = s
                            .prof
                            .nccl(|| nccl::ncclAllGather(src, out, n, dt, c, stream));
                        ("ncclAllGather (symm)", r)
                    }
                    3 => {
                        let op = nccl_op(op)?;
                        let r = s
                            .prof
                            .nccl(|| nccl::ncclReduceScatter(src, out, n, dt, op, c, stream));
                        ("ncclReduceScatter (symm)", r)
                    }
                    _ => return Err(format!("symm_fallback: unknown collective {coll}")),
                };
                nccl_check(what, r, c)
            },
        )
    })
}

/// ABI `symm_pool_desc`: the device descriptor of a peer-mapped pool (`symm.rs`), or NULL
/// when the pool takes the NCCL path (then the program calls `symm_fallback`).
unsafe extern "C" fn rt_symm_pool_desc(
    rt: *mut c_void,
    pool_base: *mut c_void,
    desc: *mut *mut c_void,
) -> Status {
    with_state(rt, |s| {
        if desc.is_null() {
            return Err("symm_pool_desc: null result pointer".into());
        }
        *desc = s.symm.desc(pool_base as u64) as *mut c_void;
        Ok(())
    })
}

unsafe extern "C" fn rt_launch_on(
    rt: *mut c_void,
    stream: u32,
    kernel: u32,
    grid_x: u32,
    block_x: u32,
    shared_bytes: u32,
    params: *mut *mut c_void,
    _num_params: u32,
) -> Status {
    with_state(rt, |s| {
        s.timed(
            stream,
            |s| {
                let name = s.kernel_names.get(kernel as usize).map(String::as_str);
                (
                    format!("kernel {} <<<{grid_x}, {block_x}>>>", name.unwrap_or("?")),
                    0,
                    0.0,
                )
            },
            |s| s.launch_on(stream, kernel, grid_x, block_x, shared_bytes, params),
        )
    })
}

/// ABI `symm_peer_copy`: a copy engine's strided copy out of a peer's mapping of a
/// peer-mapped symm_mem pool (the fused pipelines' transfers, no SM used).
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rt_symm_peer_copy(
    rt: *mut c_void,
    stream: u32,
    pool_base: *mut c_void,
    peer: u32,
    src_offset: u64,
    dst: *mut c_void,
    rows: u64,
    row_bytes: u64,
    dst_pitch: u64,
) -> Status {
    with_state(rt, |s| {
        let (base, bytes) = s.symm.peer_base(pool_base as u64, peer)?;
        // The rows are read contiguously: they must lie inside the pool.
        let span = rows
            .checked_mul(row_bytes)
            .and_then(|n| n.checked_add(src_offset));
        if span.is_none_or(|end| end > bytes) || (rows > 1 && dst_pitch < row_bytes) {
            return Err(format!(
                "symm_peer_copy: {rows} rows of {row_bytes} B at offset {src_offset} (pitch {dst_pitch}) do not fit the pool of {bytes} B"
            ));
        }
        s.timed(
            stream,
            |_| {
                (
                    format!("copy engine {} B from group rank {peer}", rows * row_bytes),
                    rows * row_bytes,
                    1.0,
                )
            },
            |s| {
                let st = s.stream(stream)?;
                let src = base + src_offset;
                let r = s.prof.cuda(Driver::Other, || {
                    if rows <= 1 {
                        cu::cuMemcpyDtoDAsync_v2(dst as u64, src, row_bytes as usize, st)
                    } else {
                        let c = cu::CUDA_MEMCPY2D {
                            srcMemoryType: cu::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                            srcDevice: src,
                            srcPitch: row_bytes as usize,
                            dstMemoryType: cu::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                            dstDevice: dst as u64,
                            dstPitch: dst_pitch as usize,
                            WidthInBytes: row_bytes as usize,
                            Height: rows as usize,
                            ..std::mem::zeroed()
                        };
                        cu::cuMemcpy2DAsync_v2(&c, st)
                    }
                });
                cu_check("symm_peer_copy", r)
            },
        )
    })
}

/// ABI `symm_peer_put`: a copy engine's copy from local memory into a peer's mapping of a
/// peer-mapped symm_mem pool (the all-gather pipeline's pushes, no SM used).
unsafe extern "C" fn rt_symm_peer_put(
    rt: *mut c_void,
    stream: u32,
    pool_base: *mut c_void,
    peer: u32,
    dst_offset: u64,
    src: *const c_void,
    bytes: u64,
) -> Status {
    with_state(rt, |s| {
        let (base, size) = s.symm.peer_base(pool_base as u64, peer)?;
        if dst_offset.checked_add(bytes).is_none_or(|end| end > size) {
            return Err(format!(
                "symm_peer_put: {bytes} B at offset {dst_offset} do not fit the pool of {size} B"
            ));
        }
        s.timed(
            stream,
            |_| {
                (
                    format!("copy engine {bytes} B to group rank {peer}"),
                    bytes,
                    1.0,
                )
            },
            |s| {
                let st = s.stream(stream)?;
                let dst = base + dst_offset;
                let r = s.prof.cuda(Driver::Other, || {
                    cu::cuMemcpyDtoDAsync_v2(dst, src as u64, bytes as usize, st)
                });
                cu_check("symm_peer_put", r)
            },
        )
    })
}

/// ABI `group_rank`: this rank's index in a group's communicator (host only).
unsafe extern "C" fn rt_group_rank(rt: *mut c_void, group: u32, rank: *mut u32) -> Status {
    with_state(rt, |s| {
        if rank.is_null() {
            return Err("group_rank: null result pointer".into());
        }
        let comm = s.comm(group)?;
        let mut me = 0i32;
        // SAFETY: live communicator.
        let r = s
            .prof
            .nccl(|| unsafe { nccl::ncclCommUserRank(comm, &mut me) });
        nccl_check("ncclCommUserRank", r, comm)?;
        *rank = me as u32;
        Ok(())
    })
}

unsafe extern "C" fn rt_event_record(rt: *mut c_void, stream: u32, event: u32) -> Status {
    with_state(rt, |s| s.event_record(stream, event))
}

unsafe extern "C" fn rt_stream_wait(rt: *mut c_void, stream: u32, event: u32) -> Status {
    with_state(rt, |s| s.stream_wait(stream, event))
}

impl RankState {
    /// The rank's cuDNN attention, loaded and bound to the compute stream on first use.
    fn cudnn(&mut self) -> Result<&mut super::cudnn::Attention, String> {
        if self.cudnn.is_none() {
            self.cudnn = Some(super::cudnn::Attention::new(self.streams[0])?);
        }
        Ok(self.cudnn.as_mut().expect("just set"))
    }
}

/// The label of an attention call in per-op timings and traces.
fn attention_label(what: &str, s: &super::cudnn::Shape, dtype: u32, causal: u32) -> String {
    let d = abi::DTYPES
        .iter()
        .find(|(_, c)| *c == dtype)
        .map(|(d, _)| *d)
        .unwrap_or("?");
    format!(
        "{what} {d} {}x{}x{}x{}x{}x{}{}",
        s.b,
        s.hq,
        s.hkv,
        s.lq,
        s.lk,
        s.d,
        if causal != 0 { " causal" } else { "" }
    )
}

/// ABI `attention`: cuDNN's fused attention forward on the compute stream.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rt_attention(
    rt: *mut c_void,
    batch: i64,
    heads: i64,
    kv_heads: i64,
    q_len: i64,
    kv_len: i64,
    head_dim: i64,
    v_dim: i64,
    dtype: u32,
    causal: u32,
    scale: f64,
    q: *const c_void,
    k: *const c_void,
    v: *const c_void,
    out: *mut c_void,
    lse: *mut c_void,
) -> Status {
    let shape = super::cudnn::Shape::of([batch, heads, kv_heads, q_len, kv_len, head_dim, v_dim]);
    with_state(rt, |s| {
        s.timed(
            abi::STREAM_COMPUTE,
            |_| (attention_label("attention", &shape, dtype, causal), 0, 0.0),
            |s| {
                let bufs = super::cudnn::Forward { q, k, v, out, lse };
                s.cudnn()?.forward(shape, dtype, causal != 0, scale, &bufs)
            },
        )
    })
}

/// ABI `attention_backward`: cuDNN's fused attention backward on the compute stream.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rt_attention_backward(
    rt: *mut c_void,
    batch: i64,
    heads: i64,
    kv_heads: i64,
    q_len: i64,
    kv_len: i64,
    head_dim: i64,
    v_dim: i64,
    dtype: u32,
    causal: u32,
    scale: f64,
    q: *const c_void,
    k: *const c_void,
    v: *const c_void,
    out: *const c_void,
    dout: *const c_void,
    lse: *const c_void,
    dq: *mut c_void,
    dk: *mut c_void,
    dv: *mut c_void,
) -> Status {
    let shape = super::cudnn::Shape::of([batch, heads, kv_heads, q_len, kv_len, head_dim, v_dim]);
    with_state(rt, |s| {
        s.timed(
            abi::STREAM_COMPUTE,
            |_| {
                (
                    attention_label("attention_backward", &shape, dtype, causal),
                    0,
                    0.0,
                )
            },
            |s| {
                let bufs = super::cudnn::Backward {
                    q,
                    k,
                    v,
                    out,
                    dout,
                    lse,
                    dq,
                    dk,
                    dv,
                };
                s.cudnn()?.backward(shape, dtype, causal != 0, scale, &bufs)
            },
        )
    })
}

/// The table the runner passes to `commlir_main`.
pub static API: CommlirRtApi = CommlirRtApi {
    abi_version: abi::ABI_VERSION,
    num_fns: abi::API_FIELDS.len() as u32,
    alloc: rt_alloc,
    free: rt_free,
    pool_alloc: rt_pool_alloc,
    pool_free: rt_pool_free,
    launch: rt_launch,
    gemm: rt_gemm,
    all_reduce: rt_all_reduce,
    all_gather: rt_all_gather,
    reduce_scatter: rt_reduce_scatter,
    all_to_all: rt_all_to_all,
    broadcast: rt_broadcast,
    group_start: rt_group_start,
    group_end: rt_group_end,
    symm_fallback: rt_symm_fallback,
    event_record: rt_event_record,
    stream_wait: rt_stream_wait,
    symm_pool_desc: rt_symm_pool_desc,
    launch_on: rt_launch_on,
    group_rank: rt_group_rank,
    symm_peer_copy: rt_symm_peer_copy,
    copy_on: rt_copy_on,
    symm_peer_put: rt_symm_peer_put,
    attention: rt_attention,
    attention_backward: rt_attention_backward,
};

/// Loads the kernels of `ptx` (NUL-terminated) and looks up `names` in order.
///
/// # Safety
/// The rank's context must be current on the calling thread.
pub unsafe fn load_kernels(st: &mut RankState, ptx: &[u8], names: &[String]) -> Result<(), String> {
    if names.is_empty() {
        return Ok(());
    }
    cu_check(
        "cuModuleLoadData",
        cu::cuModuleLoadData(&mut st.module, ptx.as_ptr() as *const c_void),
    )?;
    for n in names {
        let cn = CString::new(n.as_str()).map_err(|_| format!("bad kernel name {n:?}"))?;
        let mut f = std::ptr::null_mut();
        cu_check(
            &format!("cuModuleGetFunction({n})"),
            cu::cuModuleGetFunction(&mut f, st.module, cn.as_ptr()),
        )?;
        st.kernels.push(f);
        st.kernel_names.push(n.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool as `pool_alloc` records a new one (no device memory: only the reuse paths,
    /// which make no library call, run here).
    fn add_pool(st: &mut RankState, base: u64, (kind, group, bytes): PoolKey) {
        st.record_pool(Pool {
            base,
            kind,
            group,
            bytes,
            nccl_mem: false,
            reg: std::ptr::null_mut(),
            win: std::ptr::null_mut(),
            live: true,
            peer_mapped: false,
        });
    }

    fn alloc(st: &mut RankState, (kind, group, bytes): PoolKey) -> u64 {
        let mut out = std::ptr::null_mut();
        st.pool_alloc(kind, group, bytes, 256, &mut out).unwrap();
        out as u64
    }

    fn free(st: &mut RankState, base: u64) -> Result<(), String> {
        st.pool_free(base as *mut c_void)
    }

    #[test]
    fn freed_pools_come_back_in_creation_order_whatever_the_free_order() {
        let a = (abi::POOL_NCCL, 0, 4096);
        let b = (abi::POOL_NCCL, 1, 4096);
        let mut st = RankState::new(0, 0);
        let bases = [0x1000, 0x2000, 0x3000, 0x4000];
        for (i, &base) in bases.iter().enumerate() {
            add_pool(&mut st, base << 8, if i == 2 { b } else { a });
        }
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]] {
            for i in order {
                free(&mut st, bases[i] << 8).unwrap();
            }
            // The program allocates in its pool order: the same bases every call.
            assert_eq!(alloc(&mut st, a), 0x1000 << 8);
            assert_eq!(alloc(&mut st, a), 0x2000 << 8);
            assert_eq!(alloc(&mut st, b), 0x3000 << 8);
            assert_eq!(alloc(&mut st, a), 0x4000 << 8);
        }
        assert!(st.free_pools.values().all(Vec::is_empty));
    }

    #[test]
    fn freeing_what_pool_alloc_did_not_return_is_an_error() {
        let key = (abi::POOL_NCCL, 0, 64);
        let mut st = RankState::new(0, 0);
        add_pool(&mut st, 0x10000, key);
        let e = free(&mut st, 0x20000).unwrap_err();
        assert_eq!(e, "pool_free of 0x20000, which pool_alloc did not return");
        free(&mut st, 0x10000).unwrap();
        // A second free of the same pool.
        let e = free(&mut st, 0x10000).unwrap_err();
        assert_eq!(e, "pool_free of 0x10000, which pool_alloc did not return");
        assert_eq!(alloc(&mut st, key), 0x10000);
        // A reused pool that is not aligned as asked.
        let mut out = std::ptr::null_mut();
        free(&mut st, 0x10000).unwrap();
        let e = st
            .pool_alloc(key.0, key.1, key.2, 1 << 20, &mut out)
            .unwrap_err();
        assert_eq!(e, "pool base 0x10000 is not aligned to 1048576 bytes");
    }

    #[test]
    fn a_result_that_is_not_an_allocation_is_left_alone() {
        let mut st = RankState::new(0, 0);
        st.release_result(0x1234).unwrap();
        assert!(st.live_allocs().is_empty());
    }

    #[test]
    fn the_word_hasher_spreads_aligned_addresses() {
        use std::hash::BuildHasher;
        let h = WordHash::default();
        // 2 MiB-aligned bases: the low bits (hashbrown's bucket index) must still differ.
        let low: HashSet<u64> = (1..=64u64).map(|i| h.hash_one(i << 21) & 63).collect();
        assert!(low.len() > 32, "{}", low.len());
        assert_ne!(
            h.hash_one((1u32, 2u32, 3u64)),
            h.hash_one((2u32, 1u32, 3u64))
        );
    }
}
