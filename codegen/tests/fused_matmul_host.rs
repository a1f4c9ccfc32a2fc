//! The fused collective-matmul pipelines run on the host, G ranks at once: a program is
//! lowered and compiled as for the GPU, its host program and kernels (retargeted to the CPU,
//! one thread of one block, as in `tests/common`) are JIT-compiled together, and
//! `commlir_main` runs on one OS thread per rank against a mock runtime whose symm_mem pools,
//! signal pads and descriptors live in host memory shared by the ranks. The compute stream's
//! work runs when it is issued; the comm stream's work is queued and runs only when the
//! compute stream waits for an event recorded after it (or when the call returns): the latest
//! schedule the events allow, so a GEMM ordered after the wrong event, or after none, reads a
//! chunk that has not moved yet. The kernels' barriers and pairwise signals are their own
//! (real atomics), so a step that waits for a signal nobody sends hangs the test instead of
//! passing it.
//!
//! Checked, bit for bit against the sim at G = 2 and 4: all-gather-matmul (several right-hand
//! sides, the gathered A returned, a gather along dim 1 of a 3-D shard, pushing, pulling and
//! with kernel transfers) and matmul-reduce-scatter (sum and avg, along dim 0 and dim 1), bf16
//! and f32, on peer-mapped pools and through the NCCL fallback (mock collectives with the
//! sim's rank-order reduction), and the two-rank reduce-scatter accumulating in 2 and 4 blocks
//! to within a rounding; every step's event is recorded before it is waited on, and nothing
//! leaks.

use commlir_codegen::{host, kernels};
use commlir_dialects::rt::abi::{self, CommlirMain, CommlirRtApi, Status, SymmDesc};
use commlir_ir::Context;
use commlir_runtime::cuda::tensor_bytes;
use commlir_runtime::numeric::bf16_bits;
use inkwell::context::Context as LlContext;
use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::c_void;
use std::sync::{Barrier, Condvar, Mutex};

mod common;
use common::{
    input_buffers_from, jit_program, lower, sim_reference, storage, symm_desc, symm_host_ir,
};

const PIPELINE: &str = "builtin.module(func.func(coll-to-comm,comm-plan-pools))";

type FusedKernel = unsafe extern "C" fn(*const SymmDesc, u64, *mut u8, u32, u32);
/// A reduce-scatter kernel with an epilogue of one or two other inputs.
type FusedKernel1 = unsafe extern "C" fn(*const SymmDesc, u64, *mut u8, u32, u32, usize);
type FusedKernel2 = unsafe extern "C" fn(*const SymmDesc, u64, *mut u8, u32, u32, usize, usize);

/// One symm pool allocation of every rank (the ranks allocate pools in the same order).
#[derive(Default)]
struct PoolRow {
    /// Per rank: (pool address, signal pad address).
    ranks: Vec<Option<(usize, usize)>>,
}

/// What the ranks share.
struct Group {
    world: usize,
    mapped: bool,
    rows: Mutex<Vec<PoolRow>>,
    arrived: Condvar,
    /// Storage of every pool and pad ever allocated (never freed during a run).
    storage: Mutex<Vec<Vec<u128>>>,
    /// Boxed: the kernels hold their addresses while the vector grows.
    #[allow(clippy::vec_box)]
    descs: Mutex<Vec<Box<SymmDesc>>>,
    /// The fallback collectives: every rank's (input, output) pointers, then a barrier.
    slots: Mutex<Vec<(usize, usize)>>,
    barrier: Barrier,
    status: Vec<std::sync::atomic::AtomicU32>,
}

/// What the runtime reuses freed pools by: (kind, group, bytes).
type PoolKey = (u32, u32, u64);

/// One rank's mock runtime (the `rt` pointer).
struct Mock<'g> {
    group: &'g Group,
    rank: usize,
    kernels: Vec<(usize, bool)>,
    allocs: HashMap<usize, Vec<u128>>,
    pools: HashMap<usize, (usize, PoolKey)>,
    next_pool: usize,
    /// Freed pools by (kind, group, bytes), reused as the runtime reuses them: (base, pool
    /// sequence number, comm-stream items issued when it was freed).
    free_pools: HashMap<PoolKey, Vec<(usize, usize, usize)>>,
    /// Comm-stream work items issued, and run, so far.
    comm_issued: usize,
    comm_run: usize,
    graveyard: Vec<Vec<u128>>,
    num_events: u32,
    /// Events recorded at least once, and those recorded since they were last waited on.
    recorded: HashSet<u32>,
    unwaited: HashSet<u32>,
    error: Option<String>,
    /// `copy_on` calls (shards copied into their pool by the pipeline).
    copies_on: usize,
    /// The comm stream's work not run yet, in issue order: it runs only when the compute
    /// stream waits for an event recorded after it (or at the end), so that a GEMM ordered
    /// after the wrong event reads data that is not there yet.
    comm: VecDeque<CommWork>,
}

/// One item of the comm stream's queue.
enum CommWork {
    Run(Box<dyn FnOnce() -> Result<(), String>>),
    Event(u32),
}

impl Mock<'_> {
    fn fail(&mut self, m: String) -> Status {
        self.error.get_or_insert(m);
        1
    }

    /// Runs `f` now on the compute stream, or queues it on the comm stream.
    fn on(&mut self, stream: u32, f: impl FnOnce() -> Result<(), String> + 'static) -> Status {
        if stream == abi::STREAM_COMM {
            self.comm.push_back(CommWork::Run(Box::new(f)));
            self.comm_issued += 1;
            return 0;
        }
        match f() {
            Ok(()) => 0,
            Err(e) => self.fail(e),
        }
    }

    /// Runs the comm stream's queue up to event `until` (all of it for `None`).
    fn drain(&mut self, until: Option<u32>) -> Status {
        while let Some(w) = self.comm.pop_front() {
            match w {
                CommWork::Run(f) => {
                    self.comm_run += 1;
                    if let Err(e) = f() {
                        return self.fail(e);
                    }
                }
                CommWork::Event(e) if Some(e) == until => return 0,
                CommWork::Event(_) => {}
            }
        }
        0
    }
}

/// The pool base of group rank `peer` for the pool of allocation sequence `seq`.
fn peer_pool(group: usize, seq: usize, peer: u32) -> Result<usize, String> {
    // SAFETY: the `Group` outlives every rank's run (the ranks are scoped threads).
    let g = unsafe { &*(group as *const Group) };
    let rows = g.rows.lock().unwrap();
    match rows[seq].ranks.get(peer as usize).copied() {
        Some(Some((base, _))) => Ok(base),
        _ => Err(format!("group rank {peer} has not mapped pool {seq}")),
    }
}

fn mock<'a>(rt: *mut c_void) -> &'a mut Mock<'a> {
    // SAFETY: every API call gets the `Mock` its rank passed to `commlir_main`.
    unsafe { &mut *(rt as *mut Mock) }
}

unsafe extern "C" fn m_alloc(rt: *mut c_void, bytes: u64, out: *mut *mut c_void) -> Status {
    let m = mock(rt);
    let mut v = storage(bytes as usize);
    let p = v.as_mut_ptr() as usize;
    m.allocs.insert(p, v);
    *out = p as *mut c_void;
    0
}
unsafe extern "C" fn m_free(rt: *mut c_void, p: *mut c_void) -> Status {
    let m = mock(rt);
    match m.allocs.remove(&(p as usize)) {
        Some(v) => {
            m.graveyard.push(v);
            0
        }
        None => m.fail(format!("free of {p:?}, not live")),
    }
}
unsafe extern "C" fn m_pool_alloc(
    rt: *mut c_void,
    kind: u32,
    group: u32,
    bytes: u64,
    _alignment: u64,
    out: *mut *mut c_void,
) -> Status {
    let m = mock(rt);
    let key = (kind, group, bytes);
    if let Some((p, seq, freed_at)) = m.free_pools.get_mut(&key).and_then(Vec::pop) {
        // A freed pool is handed out again at once (host bookkeeping, as the runtime does):
        // the compute stream must already be ordered after the comm-stream work issued
        // before the free (e.g. a reduce-scatter's end barrier: the peers may still be
        // pulling from it), or this pool's next writer races with it.
        if m.comm_run < freed_at {
            return m.fail(format!(
                "pool {seq} reused before the comm-stream work issued before its free was ordered before the compute stream"
            ));
        }
        m.pools.insert(p, (seq, key));
        *out = p as *mut c_void;
        return 0;
    }
    let g = m.group;
    let mut pool = storage(bytes as usize);
    let mut pad = vec![0u128; abi::SYMM_MAX_BLOCKS * abi::SYMM_MAX_PEERS / 4];
    let (p, s) = (pool.as_mut_ptr() as usize, pad.as_mut_ptr() as usize);
    g.storage.lock().unwrap().extend([pool, pad]);
    let seq = m.next_pool;
    m.next_pool += 1;
    let mut rows = g.rows.lock().unwrap();
    while rows.len() <= seq {
        rows.push(PoolRow {
            ranks: vec![None; g.world],
        });
    }
    rows[seq].ranks[m.rank] = Some((p, s));
    g.arrived.notify_all();
    m.pools.insert(p, (seq, key));
    *out = p as *mut c_void;
    0
}
unsafe extern "C" fn m_pool_free(rt: *mut c_void, p: *mut c_void) -> Status {
    let m = mock(rt);
    match m.pools.remove(&(p as usize)) {
        Some((seq, key)) => {
            let issued = m.comm_issued;
            m.free_pools
                .entry(key)
                .or_default()
                .push((p as usize, seq, issued));
            0
        }
        None => m.fail(format!("pool_free of {p:?}, not live")),
    }
}
unsafe extern "C" fn m_launch_on(
    rt: *mut c_void,
    stream: u32,
    kernel: u32,
    _grid: u32,
    _block: u32,
    _shared: u32,
    params: *mut *mut c_void,
    n: u32,
) -> Status {
    let m = mock(rt);
    let Some(&(addr, fused)) = m.kernels.get(kernel as usize) else {
        return m.fail(format!("launch of kernel {kernel}, which does not exist"));
    };
    // The parameter values now: the host program reuses its scratch arrays.
    if fused {
        if !(5..=7).contains(&n) {
            return m.fail(format!(
                "a fused kernel takes 5 parameters and up to 2 epilogue operands, got {n}"
            ));
        }
        let arg = |i: usize| *params.add(i);
        let vals = (
            *(arg(0) as *const usize) as *const SymmDesc,
            *(arg(1) as *const u64),
            *(arg(2) as *const usize) as *mut u8,
            *(arg(3) as *const u32),
            *(arg(4) as *const u32),
        );
        let extras: Vec<usize> = (5..n as usize).map(|i| *(arg(i) as *const usize)).collect();
        return m.on(stream, move || {
            let (d, o, out, site, step) = vals;
            match extras[..] {
                [] => std::mem::transmute::<usize, FusedKernel>(addr)(d, o, out, site, step),
                [x] => std::mem::transmute::<usize, FusedKernel1>(addr)(d, o, out, site, step, x),
                [x, y] => {
                    std::mem::transmute::<usize, FusedKernel2>(addr)(d, o, out, site, step, x, y)
                }
                _ => unreachable!("checked above"),
            }
            Ok(())
        });
    }
    let p: Vec<usize> = (0..n as usize)
        .map(|i| *(*params.add(i) as *const usize))
        .collect();
    m.on(stream, move || {
        let p: Vec<*mut u8> = p.iter().map(|&a| a as *mut u8).collect();
        common::call_kernel(addr, &p);
        Ok(())
    })
}
unsafe extern "C" fn m_launch(
    rt: *mut c_void,
    kernel: u32,
    grid: u32,
    block: u32,
    shared: u32,
    params: *mut *mut c_void,
    n: u32,
) -> Status {
    m_launch_on(rt, 0, kernel, grid, block, shared, params, n)
}

/// Element `i` of a bf16 (`bf16`) or f32 buffer, as f32.
unsafe fn ld(p: *const u8, i: i64, bf16: bool) -> f32 {
    if bf16 {
        f32::from_bits(u32::from(*(p as *const u16).offset(i as isize)) << 16)
    } else {
        *(p as *const f32).offset(i as isize)
    }
}
unsafe fn st(p: *mut u8, i: i64, v: f32, bf16: bool) {
    if bf16 {
        *(p as *mut u16).offset(i as isize) = bf16_bits(f64::from(v));
    } else {
        *(p as *mut f32).offset(i as isize) = v;
    }
}

/// cuBLAS's column-major strided-batched GEMM (no transposes) computed as the sim's matmul
/// computes each element: products in ascending k, in f32, then `α·AB + β·C` in f32, one
/// rounding (cuBLAS's 32F compute type).
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn m_gemm(
    rt: *mut c_void,
    ta: u32,
    tb: u32,
    m: i64,
    n: i64,
    k: i64,
    a: *const c_void,
    lda: i64,
    sa: i64,
    b: *const c_void,
    ldb: i64,
    sb: i64,
    c: *mut c_void,
    ldc: i64,
    sc: i64,
    batch: i64,
    d: u32,
    alpha: f64,
    beta: f64,
) -> Status {
    let bf16 = match d {
        9 => true,
        7 => false,
        _ => return mock(rt).fail(format!("gemm dtype {d}")),
    };
    if ta != 0 || tb != 0 {
        return mock(rt).fail("gemm with a transpose".into());
    }
    let es = if bf16 { 2 } else { 4 };
    let (a, b, c) = (a as *const u8, b as *const u8, c as *mut u8);
    for bi in 0..batch {
        let (ab, bb, cb) = (
            a.offset((bi * sa * es) as isize),
            b.offset((bi * sb * es) as isize),
            c.offset((bi * sc * es) as isize),
        );
        // Column-major C(i, j) = Σ A(i, l)·B(l, j): row-major out[j][i] = Σ x[j][l]·y[l][i].
        for j in 0..n {
            for i in 0..m {
                let mut r = 0f32;
                for l in 0..k {
                    r += ld(bb, j * ldb + l, bf16) * ld(ab, l * lda + i, bf16);
                }
                if beta != 0.0 {
                    r = alpha as f32 * r + beta as f32 * ld(cb, j * ldc + i, bf16);
                } else if alpha != 1.0 {
                    r *= alpha as f32;
                }
                st(cb, j * ldc + i, r, bf16);
            }
        }
    }
    0
}

/// `ncclGroupStart` / `ncclGroupEnd`: the mock runs each grouped call as it is queued, in
/// the same order on every rank.
unsafe extern "C" fn m_group(_rt: *mut c_void) -> Status {
    0
}

unsafe extern "C" fn m_unused(rt: *mut c_void) -> Status {
    mock(rt).fail("an NCCL call the fused ops do not make".into())
}

/// The NCCL fallback: all-gather (coll 2) or reduce-scatter (coll 3, rank-order f32 fold,
/// avg divided once, one rounding) through the shared slot table.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn m_symm_fallback(
    rt: *mut c_void,
    coll: u32,
    _g: u32,
    pool: *mut c_void,
    off: u64,
    out: *mut c_void,
    count: u64,
    d: u32,
    op: u32,
) -> Status {
    let m = mock(rt);
    let g = m.group;
    let bf16 = d == 9;
    let es = if bf16 { 2 } else { 4 };
    let input = (pool as *mut u8).add(off as usize);
    g.barrier.wait();
    g.slots.lock().unwrap()[m.rank] = (input as usize, out as usize);
    g.barrier.wait();
    let slots = g.slots.lock().unwrap().clone();
    let count = count as i64;
    match coll {
        2 => {
            // In place, as NCCL allows it: the input is the output's block `rank`.
            let (bytes, at) = ((count * es) as usize, input as usize);
            let (lo, hi) = (out as usize, out as usize + g.world * bytes);
            if at + bytes > lo && at < hi && at != lo + m.rank * bytes {
                // Reported at the end, so that the peers do not wait for this rank forever.
                m.error
                    .get_or_insert("in-place all-gather whose input is not block `rank`".into());
            }
            for (p, (src, _)) in slots.iter().enumerate() {
                std::ptr::copy(*src as *const u8, (out as *mut u8).add(p * bytes), bytes);
            }
        }
        3 => {
            for i in 0..count {
                let mut acc = 0f32;
                for (p, (src, _)) in slots.iter().enumerate() {
                    let v = ld(*src as *const u8, m.rank as i64 * count + i, bf16);
                    acc = if p == 0 { v } else { acc + v };
                }
                if op == 4 {
                    acc /= g.world as f32;
                }
                st(out as *mut u8, i, acc, bf16);
            }
        }
        c => return m.fail(format!("symm_fallback coll {c}")),
    }
    g.barrier.wait();
    0
}

unsafe extern "C" fn m_symm_pool_desc(
    rt: *mut c_void,
    pool: *mut c_void,
    desc: *mut *mut c_void,
) -> Status {
    let m = mock(rt);
    let g = m.group;
    if !g.mapped {
        *desc = std::ptr::null_mut();
        return 0;
    }
    let Some(&(seq, _)) = m.pools.get(&(pool as usize)) else {
        return m.fail(format!("symm_pool_desc of {pool:?}, not a live pool"));
    };
    let mut rows = g.rows.lock().unwrap();
    while rows[seq].ranks.iter().any(Option::is_none) {
        rows = g.arrived.wait(rows).unwrap();
    }
    let d = Box::new(symm_desc(
        &g.status[m.rank] as *const _ as u64,
        20_000_000_000,
        m.rank,
        g.world,
        |p| {
            let (base, pad) = rows[seq].ranks[p].expect("every rank arrived");
            (base as u64, pad as u64)
        },
    ));
    drop(rows);
    *desc = &*d as *const SymmDesc as *mut c_void;
    g.descs.lock().unwrap().push(d);
    0
}
unsafe extern "C" fn m_group_rank(rt: *mut c_void, _g: u32, rank: *mut u32) -> Status {
    *rank = mock(rt).rank as u32;
    0
}
unsafe extern "C" fn m_event_record(rt: *mut c_void, stream: u32, e: u32) -> Status {
    let m = mock(rt);
    if e >= m.num_events {
        return m.fail(format!("event_record of event {e} of {}", m.num_events));
    }
    m.recorded.insert(e);
    m.unwaited.insert(e);
    if stream == abi::STREAM_COMM {
        m.comm.push_back(CommWork::Event(e));
    }
    0
}
unsafe extern "C" fn m_stream_wait(rt: *mut c_void, stream: u32, e: u32) -> Status {
    let m = mock(rt);
    if !m.recorded.contains(&e) {
        return m.fail(format!("stream_wait on event {e}, not recorded"));
    }
    m.unwaited.remove(&e);
    // The compute stream waiting for the comm stream: the comm work before the event runs
    // now. (The comm stream waiting for the compute stream has nothing to wait for: compute
    // work runs when it is issued.)
    let pending = m
        .comm
        .iter()
        .any(|w| matches!(w, CommWork::Event(x) if *x == e));
    if stream == abi::STREAM_COMPUTE && pending {
        return m.drain(Some(e));
    }
    0
}
/// NCCL's all-reduce (`recv_elems` = the whole tensor) or reduce-scatter (`recv_elems` =
/// this rank's block) of bf16 or f32 on the comm stream: rank-order f32 fold, avg divided
/// once, one rounding, as the sim reduces.
fn nccl_reduce(
    m: &mut Mock,
    (send, recv): (*const c_void, *mut c_void),
    (recv_elems, scattered): (u64, bool),
    dtype: u32,
    op: u32,
) -> Status {
    let bf16 = match dtype {
        9 => true,
        7 => false,
        d => return m.fail(format!("mock NCCL reduction of dtype {d}")),
    };
    // Sum, avg, or NCCL's pre-multiplied sum (each input × the factor, in f32).
    let premul = abi::premul_factor(op).map(|f| f as f32);
    if op != 0 && op != 4 && premul.is_none() {
        return m.fail(format!("mock NCCL reduction op {op}"));
    }
    let (g, rank) = (m.group as *const Group as usize, m.rank);
    let (send, recv) = (send as usize, recv as usize);
    m.on(abi::STREAM_COMM, move || {
        // SAFETY: the `Group` outlives every rank's run (the ranks are scoped threads).
        let g = unsafe { &*(g as *const Group) };
        g.barrier.wait();
        g.slots.lock().unwrap()[rank] = (send, recv);
        g.barrier.wait();
        let slots = g.slots.lock().unwrap().clone();
        let n = recv_elems as i64;
        let first = if scattered { rank as i64 * n } else { 0 };
        let mut acc = vec![0f32; n as usize];
        for (p, (src, _)) in slots.iter().enumerate() {
            for (i, a) in acc.iter_mut().enumerate() {
                // SAFETY: every rank's send buffer holds the whole tensor.
                let v = unsafe { ld(*src as *const u8, first + i as i64, bf16) };
                let v = premul.map_or(v, |f| v * f);
                *a = if p == 0 { v } else { *a + v };
            }
        }
        // Everybody has read every input before anybody writes (in place is allowed).
        g.barrier.wait();
        for (i, a) in acc.into_iter().enumerate() {
            let v = if op == 4 { a / g.world as f32 } else { a };
            // SAFETY: this rank's recv buffer holds `recv_elems`.
            unsafe { st(recv as *mut u8, i as i64, v, bf16) };
        }
        g.barrier.wait();
        Ok(())
    })
}

unsafe extern "C" fn m_all_reduce(
    rt: *mut c_void,
    _group: u32,
    send: *const c_void,
    recv: *mut c_void,
    count: u64,
    dtype: u32,
    op: u32,
) -> Status {
    nccl_reduce(mock(rt), (send, recv), (count, false), dtype, op)
}

unsafe extern "C" fn m_reduce_scatter(
    rt: *mut c_void,
    _group: u32,
    send: *const c_void,
    recv: *mut c_void,
    recv_count: u64,
    dtype: u32,
    op: u32,
) -> Status {
    nccl_reduce(mock(rt), (send, recv), (recv_count, true), dtype, op)
}

unsafe extern "C" fn m_nccl7(
    rt: *mut c_void,
    _: u32,
    _: *const c_void,
    _: *mut c_void,
    _: u64,
    _: u32,
    _: u32,
) -> Status {
    m_unused(rt)
}
/// NCCL's all-gather on the comm stream (a sequence-parallel program's last gather), through
/// the shared slot table when the comm stream's queue reaches it.
unsafe extern "C" fn m_all_gather(
    rt: *mut c_void,
    _group: u32,
    send: *const c_void,
    recv: *mut c_void,
    count: u64,
    dtype: u32,
) -> Status {
    let m = mock(rt);
    let bytes = count as usize
        * match dtype {
            0 | 1 => 1,
            6 | 9 => 2,
            2 | 3 | 7 => 4,
            _ => 8,
        };
    let (g, rank) = (m.group as *const Group as usize, m.rank);
    let (send, recv) = (send as usize, recv as usize);
    m.on(abi::STREAM_COMM, move || {
        // SAFETY: the `Group` outlives every rank's run (the ranks are scoped threads).
        let g = unsafe { &*(g as *const Group) };
        g.barrier.wait();
        g.slots.lock().unwrap()[rank] = (send, recv);
        g.barrier.wait();
        let slots = g.slots.lock().unwrap().clone();
        for (p, (src, _)) in slots.iter().enumerate() {
            // SAFETY: every rank's send buffer holds `bytes`, this rank's recv G times that.
            unsafe { std::ptr::copy(*src as *const u8, (recv as *mut u8).add(p * bytes), bytes) };
        }
        g.barrier.wait();
        Ok(())
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn m_a2a(
    rt: *mut c_void,
    _: u32,
    _: *const c_void,
    _: *mut c_void,
    _: u64,
    _: u64,
    _: u32,
    _: *const i64,
    _: *const i64,
) -> Status {
    m_unused(rt)
}

/// A copy engine: rows out of group rank `peer`'s pool of the same allocation sequence.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn m_symm_peer_copy(
    rt: *mut c_void,
    stream: u32,
    pool: *mut c_void,
    peer: u32,
    src_offset: u64,
    dst: *mut c_void,
    rows: u64,
    row_bytes: u64,
    dst_pitch: u64,
) -> Status {
    let m = mock(rt);
    if stream != abi::STREAM_COMM {
        return m.fail(format!("symm_peer_copy on stream {stream}"));
    }
    let Some(&(seq, _)) = m.pools.get(&(pool as usize)) else {
        return m.fail(format!("symm_peer_copy from {pool:?}, not a live pool"));
    };
    let (group, dst) = (m.group as *const Group as usize, dst as usize);
    m.on(stream, move || {
        let base = peer_pool(group, seq, peer)?;
        for r in 0..rows {
            std::ptr::copy_nonoverlapping(
                (base as *const u8).add((src_offset + r * row_bytes) as usize),
                (dst as *mut u8).add((r * dst_pitch) as usize),
                row_bytes as usize,
            );
        }
        Ok(())
    })
}

/// `copy_on`: the comm stream's copy of a shard into its pool.
unsafe extern "C" fn m_copy_on(
    rt: *mut c_void,
    stream: u32,
    dst: *mut c_void,
    src: *const c_void,
    bytes: u64,
) -> Status {
    let m = mock(rt);
    if stream > abi::STREAM_COMM {
        return m.fail(format!("copy_on stream {stream}"));
    }
    m.copies_on += 1;
    let (dst, src) = (dst as usize, src as usize);
    m.on(stream, move || {
        std::ptr::copy(src as *const u8, dst as *mut u8, bytes as usize);
        Ok(())
    })
}

/// A copy engine's push into group rank `peer`'s pool of the same allocation sequence.
unsafe extern "C" fn m_symm_peer_put(
    rt: *mut c_void,
    stream: u32,
    pool: *mut c_void,
    peer: u32,
    dst_offset: u64,
    src: *const c_void,
    bytes: u64,
) -> Status {
    let m = mock(rt);
    if stream != abi::STREAM_COMM {
        return m.fail(format!("symm_peer_put on stream {stream}"));
    }
    let Some(&(seq, _)) = m.pools.get(&(pool as usize)) else {
        return m.fail(format!("symm_peer_put into {pool:?}, not a live pool"));
    };
    let (group, src) = (m.group as *const Group as usize, src as usize);
    m.on(stream, move || {
        let base = peer_pool(group, seq, peer)?;
        std::ptr::copy_nonoverlapping(
            src as *const u8,
            (base as *mut u8).add(dst_offset as usize),
            bytes as usize,
        );
        Ok(())
    })
}

static API: CommlirRtApi = CommlirRtApi {
    abi_version: abi::ABI_VERSION,
    num_fns: abi::API_FIELDS.len() as u32,
    alloc: m_alloc,
    free: m_free,
    pool_alloc: m_pool_alloc,
    pool_free: m_pool_free,
    launch: m_launch,
    gemm: m_gemm,
    all_reduce: m_all_reduce,
    all_gather: m_all_gather,
    reduce_scatter: m_reduce_scatter,
    all_to_all: m_a2a,
    broadcast: m_nccl7,
    group_start: m_group,
    group_end: m_group,
    symm_fallback: m_symm_fallback,
    event_record: m_event_record,
    stream_wait: m_stream_wait,
    symm_pool_desc: m_symm_pool_desc,
    launch_on: m_launch_on,
    group_rank: m_group_rank,
    symm_peer_copy: m_symm_peer_copy,
    copy_on: m_copy_on,
    symm_peer_put: m_symm_peer_put,
    attention: common::mock_attention::unexpected_attention,
    attention_backward: common::mock_attention::unexpected_attention_backward,
};

/// How a peer-mapped pipeline moves its chunks.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Transfer {
    /// What `comm-to-rt` emits: copy engines, all-gathers pushing their shard into the peers
    /// (`push`, unless the gathered A is a result), reduce-scatters pulling the partials.
    CopyEngine,
    /// Copy engines, every all-gather pulling (`COMMLIR_FUSED_AG=pull`).
    Pull,
    /// The kernel's blocks (`COMMLIR_FUSED_TRANSFER=kernel`).
    Kernel,
    /// Copy engines, and the async all-gathers of `symm_mem` groups pushing their shards
    /// into the peers (`COMMLIR_PUSH_ALL_GATHER=1`).
    PushAllGathers,
    /// Copy engines, and two ranks' reduce-scatters accumulating in `parts` row blocks (what
    /// `comm-to-rt` emits for large chunks): the own GEMMs add onto the peer's partial in
    /// f32, so those results agree with the sim's rank-order sum of rounded partials to a
    /// rounding, not bit for bit.
    Accumulate(i64),
}

/// What a checked program's lowering did.
#[derive(Debug, PartialEq)]
struct Lowered {
    /// All-gather pipelines that push.
    pushing: usize,
    /// Reduce-scatter pipelines that apply an elementwise epilogue.
    epilogues: usize,
}

/// Runs `text` on `world` ranks, peer-mapped or not, against the sim.
fn check(text: &str, world: usize, mapped: bool, transfer: Transfer) -> Lowered {
    check_through(PIPELINE, text, world, mapped, transfer, false)
}

/// [`check`] of `text` compiled through `pipeline` (the sim runs `text` itself). Arguments
/// marked `coll.replicated` (on a group of every rank) get rank 0's input on every rank, as
/// the runner and the sim generate them. `approx`: the program has approximated
/// transcendentals (gelu's fast tanh), so results match the sim to within a rounding.
fn check_through(
    pipeline: &str,
    text: &str,
    world: usize,
    mapped: bool,
    transfer: Transfer,
    approx: bool,
) -> Lowered {
    let (want, in_types) = sim_reference(text, world);
    let replicated: Vec<bool> = {
        let mut c = Context::new();
        let m = common::parse(&mut c, text);
        let entry = commlir_runtime::sim::find_entry(&c, m, None).unwrap();
        (0..in_types.len())
            .map(|i| commlir_dialects::coll::replicated_arg_group(&c, entry, i).is_some())
            .collect()
    };

    let mut ctx = Context::new();
    let knobs: &[(&str, &str)] = match transfer {
        Transfer::Pull => &[("COMMLIR_FUSED_AG", "pull")],
        Transfer::Kernel => &[("COMMLIR_FUSED_TRANSFER", "kernel")],
        Transfer::PushAllGathers => &[("COMMLIR_PUSH_ALL_GATHER", "1")],
        _ => &[],
    };
    let m = with_knobs(knobs, || lower(&mut ctx, text, pipeline));
    let (mut fused, mut pushing, mut epilogues, mut pipelines) = (Vec::new(), 0, 0, 0);
    let mut pushed_gathers = 0;
    ctx.walk(m, |op| {
        if ctx.op_name(op) == "rt.nccl_all_gather" && ctx.inherent_attr(op, "push_kernel").is_some()
        {
            pushed_gathers += 1;
        }
        if ctx.op_name(op).starts_with("rt.symm_fused_")
            && ctx.op_name(op) != "rt.symm_fused_kernel"
        {
            pipelines += 1;
        }
        if ctx.op_name(op) == "rt.symm_fused_matmul_reduce_scatter"
            && ctx.inherent_attr(op, "epilogue").is_some()
        {
            epilogues += 1;
        }
        if ctx.inherent_attr(op, "copy_engine").is_some() {
            fused.push(op);
        }
        if ctx.inherent_attr(op, "push").is_some() {
            pushing += 1;
        }
    });
    assert_eq!(
        if transfer == Transfer::Kernel {
            0
        } else {
            pipelines
        },
        fused.len(),
        "copy_engine attributes ({transfer:?})"
    );
    if let Transfer::Accumulate(parts) = transfer {
        let mut accumulating = 0;
        for op in fused {
            let rs = ctx.op_name(op) == "rt.symm_fused_matmul_reduce_scatter";
            let int = |n: &str| ctx.inherent_attr(op, n).and_then(|a| ctx.attr_as_i64(a));
            let splits = if int("batch") == Some(1) {
                int("m")
            } else {
                int("batch")
            };
            let epilogue = ctx.inherent_attr(op, "epilogue").is_some();
            if rs && !epilogue && splits.is_some_and(|s| s % parts == 0) {
                let a = ctx.int_attr(parts, 64);
                ctx.set_attr(op, "parts", a);
                accumulating += 1;
            }
        }
        assert!(accumulating > 0, "no reduce-scatter takes {parts} parts");
    }
    let dev = kernels::compile(&ctx, m).unwrap_or_else(|d| panic!("{}\n{text}", d.message));
    let hc = host::compile(&ctx, m, &dev, None, false)
        .unwrap_or_else(|d| panic!("{}\n{text}", d.message));

    let llcx = LlContext::create();
    let ee = jit_program(&llcx, &hc.llvm_ir, &symm_host_ir(&dev.llvm_ir));
    let kernels: Vec<(usize, bool)> = dev
        .kernels
        .iter()
        .map(|k| {
            let a = ee
                .get_function_address(k)
                .unwrap_or_else(|e| panic!("{k}: {e:?}"));
            (a, k.contains("_fused_"))
        })
        .collect();
    let main = ee.get_function_address(abi::MAIN_SYMBOL).unwrap();
    let group = Group {
        world,
        mapped,
        rows: Mutex::new(Vec::new()),
        arrived: Condvar::new(),
        storage: Mutex::new(Vec::new()),
        descs: Mutex::new(Vec::new()),
        slots: Mutex::new(vec![(0, 0); world]),
        barrier: Barrier::new(world),
        status: (0..world).map(|_| Default::default()).collect(),
    };
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for rank in 0..world {
            let (group, kernels, in_types, replicated) =
                (&group, kernels.clone(), &in_types, &replicated);
            let want = &want[rank].results;
            handles.push(s.spawn(move || {
                let mut rt = Mock {
                    group,
                    rank,
                    kernels,
                    allocs: HashMap::new(),
                    pools: HashMap::new(),
                    next_pool: 0,
                    free_pools: HashMap::new(),
                    comm_issued: 0,
                    comm_run: 0,
                    graveyard: Vec::new(),
                    num_events: hc.num_events,
                    recorded: HashSet::new(),
                    unwaited: HashSet::new(),
                    error: None,
                    copies_on: 0,
                    comm: VecDeque::new(),
                };
                let ranks: Vec<usize> = replicated
                    .iter()
                    .map(|&r| if r { 0 } else { rank })
                    .collect();
                let (_arg_store, args) = input_buffers_from(in_types, &ranks);
                let mut results: Vec<*mut c_void> = vec![std::ptr::null_mut(); want.len()];
                // SAFETY: `commlir_main` has the `CommlirMain` signature; buffers as typed.
                let status = unsafe {
                    std::mem::transmute::<usize, CommlirMain>(main)(
                        &API,
                        &mut rt as *mut Mock as *mut c_void,
                        args.as_ptr(),
                        results.as_mut_ptr(),
                    )
                };
                // The runner synchronizes both streams after the call.
                let drained = rt.drain(None);
                assert_eq!(status, 0, "rank {rank}: {:?}\n{text}", rt.error);
                assert_eq!(drained, 0, "rank {rank}: {:?}", rt.error);
                assert!(rt.error.is_none(), "rank {rank}: {:?}", rt.error);
                for (i, (p, w)) in results.iter().zip(want).enumerate() {
                    let exp = tensor_bytes(w);
                    // SAFETY: result `i` is a buffer of its type's size.
                    let got = unsafe { std::slice::from_raw_parts(*p as *const u8, exp.len()) };
                    let close = (approx || matches!(transfer, Transfer::Accumulate(_)))
                        && within_a_rounding(got, w);
                    assert!(
                        got == exp.as_slice() || close,
                        "rank {rank} result {i} differs from the sim (G = {world}, mapped = {mapped}, {transfer:?})\n{text}"
                    );
                    rt.allocs.remove(&(*p as usize));
                }
                assert!(rt.allocs.is_empty(), "rank {rank}: allocations leaked");
                assert!(rt.pools.is_empty(), "rank {rank}: pools never freed");
                assert!(rt.unwaited.is_empty(), "rank {rank}: events never waited on");
                // The fallback copies each pushing pipeline's shard into its workspace; a
                // pushing all-gather copies its own block (none of these gathers in place).
                let copies = if mapped { pushed_gathers } else { pushing };
                assert_eq!(rt.copies_on, copies, "rank {rank}: copy_on calls");
            }));
        }
        for h in handles {
            h.join().expect("rank thread");
        }
    });
    for (r, st) in group.status.iter().enumerate() {
        assert_eq!(
            st.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "rank {r} fault word"
        );
    }
    Lowered { pushing, epilogues }
}

/// Runs `f` with the compile-time knobs `knobs` set. The knobs are environment variables
/// read while lowering: one lowering at a time.
fn with_knobs<T>(knobs: &[(&str, &str)], f: impl FnOnce() -> T) -> T {
    static LOWER: Mutex<()> = Mutex::new(());
    let _one = LOWER.lock().unwrap_or_else(|e| e.into_inner());
    for (k, v) in knobs {
        std::env::set_var(k, v);
    }
    let r = f();
    for (k, _) in knobs {
        std::env::remove_var(k);
    }
    r
}

/// Whether `got` (bytes of `want`'s type) is `want` to within the rounding of one more
/// partial sum: 2⁻⁵ (bf16) or 2⁻¹⁷ (f32) of the larger magnitude (at least 1), since a
/// partial rounded before a cancelling sum errs by its own last place, plus a quarter of that
/// of the tensor's largest magnitude (a GEMM that accumulates rounds once where the sim
/// rounds twice, and a later cancelling sum keeps the difference at the top's scale).
fn within_a_rounding(got: &[u8], want: &commlir_runtime::Tensor) -> bool {
    let exp = tensor_bytes(want);
    let bf16 = exp.len() == 2 * want.numel();
    let (w, tol) = if bf16 {
        (2, 1.0 / 32.0)
    } else {
        (4, 1.0 / 131072.0)
    };
    let vals = |b: &[u8]| -> Vec<f32> {
        // SAFETY: each chunk is one element of the type.
        b.chunks(w)
            .map(|c| unsafe { ld(c.as_ptr(), 0, bf16) })
            .collect()
    };
    let (g, e) = (vals(got), vals(&exp));
    // A rounding of each element, or one ulp of the tensor's largest magnitude (at most
    // top / 128 in bf16) where a sum cancels.
    let top = e.iter().fold(0f32, |a, x| a.max(x.abs()));
    g.iter()
        .zip(&e)
        .all(|(g, e)| (g - e).abs() <= tol * g.abs().max(e.abs()).max(1.0) + tol / 4.0 * top)
}

/// Every form of both ops on a group of `g` ranks, in `ty`.
fn program(g: usize, ty: &str) -> String {
    let t = |s: &str| format!("tensor<{s}x{ty}>");
    let (ga, gx) = (8 * g, 3 * g);
    format!(
        r#"module {{
  coll.group @tp {{size = {g} : i64, symm_mem}}
  func.func @main(%a: {a}, %b1: {b1}, %b2: {b2}, %x: {x}, %w: {w}, %h: {h}, %v: {v}, %v2: {v2}) -> ({ag}, {y1}, {y2}, {z}, {r1}, {r2}, {r3}, {y2}) {{
    %q = symm.fused_all_gather_matmul %a, %b2 {{group = @tp}} : ({a}, {b2}) -> {y2}
    %a1 = compute.scale %a {{factor = 0.5 : f64}} : {a}
    %ag, %y1, %y2 = symm.fused_all_gather_matmul %a1, %b1, %b2 {{group = @tp, return_a}} : ({a}, {b1}, {b2}) -> ({ag}, {y1}, {y2})
    %x1 = compute.neg %x : {x}
    %z = symm.fused_all_gather_matmul %x1, %w {{group = @tp, gather_dim = 1 : i64}} : ({x}, {w}) -> {z}
    %r1 = symm.fused_matmul_reduce_scatter %h, %w {{reduce_op = "sum", group = @tp}} : ({h}, {w}) -> {r1}
    %r2 = symm.fused_matmul_reduce_scatter %y1, %v {{reduce_op = "avg", group = @tp}} : ({y1}, {v}) -> {r2}
    %r3 = symm.fused_matmul_reduce_scatter %z, %v2 {{reduce_op = "sum", scatter_dim = 1 : i64, group = @tp}} : ({z}, {v2}) -> {r3}
    return %ag, %y1, %y2, %z, %r1, %r2, %r3, %q : {ag}, {y1}, {y2}, {z}, {r1}, {r2}, {r3}, {y2}
  }}
}}
"#,
        a = t("8x16"),
        b1 = t("16x12"),
        b2 = t("16x5"),
        ag = t(&format!("{ga}x16")),
        y1 = t(&format!("{ga}x12")),
        y2 = t(&format!("{ga}x5")),
        x = t("2x3x16"),
        w = t("16x8"),
        z = t(&format!("2x{gx}x8")),
        h = t(&format!("{ga}x16")),
        v = t("12x8"),
        r1 = t("8x8"),
        r2 = t("8x8"),
        r3 = t("2x3x8"),
        v2 = t("8x8"),
    )
}

fn run_all(g: usize) {
    for ty in ["bf16", "f32"] {
        let text = program(g, ty);
        // %q (the argument %a, its clone skipped) and %z push; %ag (returned) pulls.
        assert_eq!(check(&text, g, true, Transfer::CopyEngine).pushing, 2);
        assert_eq!(check(&text, g, true, Transfer::Pull).pushing, 0);
        assert_eq!(check(&text, g, true, Transfer::Kernel).pushing, 0);
        check(&text, g, false, Transfer::CopyEngine);
        if g == 2 {
            check(&text, g, true, Transfer::Accumulate(2));
            check(&text, g, true, Transfer::Accumulate(4));
        }
    }
}

/// Reduce-scatters whose results only an elementwise chain reads, as the residual adds of a
/// sequence-parallel block: a chain with a plain result (%e1, returned), and one of two ops
/// whose result is a comm buffer (%e2, the shard of an all-gather-matmul, in a pool slot).
/// A scatter along dim 1 of a 3-D product (%r4) takes a unary chain. The results read by
/// something else (%r3, returned as well) keep their plain reduction.
fn epilogue_program(g: usize, ty: &str) -> String {
    let t = |s: &str| format!("tensor<{s}x{ty}>");
    let ga = 8 * g;
    format!(
        r#"module {{
  coll.group @tp {{size = {g} : i64, symm_mem}}
  func.func @main(%h: {h}, %w: {w}, %res: {r}, %b: {b}, %z: {z}, %v: {v}) -> ({r}, {q}, {r}, {r}, {s}) {{
    %r1 = symm.fused_matmul_reduce_scatter %h, %w {{reduce_op = "sum", group = @tp}} : ({h}, {w}) -> {r}
    %e1 = compute.add %res, %r1 : ({r}, {r}) -> {r}
    %r2 = symm.fused_matmul_reduce_scatter %h, %w {{reduce_op = "avg", group = @tp}} : ({h}, {w}) -> {r}
    %t = compute.mul %r2, %res : ({r}, {r}) -> {r}
    %e2 = compute.sub %t, %res : ({r}, {r}) -> {r}
    %q = symm.fused_all_gather_matmul %e2, %b {{group = @tp}} : ({r}, {b}) -> {q}
    %r3 = symm.fused_matmul_reduce_scatter %h, %w {{reduce_op = "sum", group = @tp}} : ({h}, {w}) -> {r}
    %e3 = compute.add %r3, %res : ({r}, {r}) -> {r}
    %r4 = symm.fused_matmul_reduce_scatter %z, %v {{reduce_op = "avg", scatter_dim = 1 : i64, group = @tp}} : ({z}, {v}) -> {s}
    %e4 = compute.relu %r4 : {s}
    return %e1, %q, %e3, %r3, %e4 : {r}, {q}, {r}, {r}, {s}
  }}
}}
"#,
        h = t(&format!("{ga}x16")),
        w = t("16x8"),
        r = t("8x8"),
        b = t("8x5"),
        q = t(&format!("{ga}x5")),
        z = t(&format!("2x{}x8", 3 * g)),
        v = t("8x4"),
        s = t("2x3x4"),
    )
}

/// An all-gather-matmul between a reduce-scatter and its residual add reads %c from the slot
/// the add's result is planned into after it: the add must stay a kernel of its own (written
/// early, it would clobber %c before the gather read it). A plain op between is no hazard.
fn slot_hazard_program() -> String {
    r#"module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @main(%h: tensor<64x32xbf16>, %w: tensor<32x16xbf16>, %x: tensor<32x16xbf16>, %b: tensor<16x8xbf16>, %u: tensor<32x16xbf16>) -> (tensor<64x8xbf16>, tensor<64x8xbf16>, tensor<64x8xbf16>, tensor<64x32xbf16>) {
    %c = compute.neg %u : tensor<32x16xbf16>
    %r = symm.fused_matmul_reduce_scatter %h, %w {reduce_op = "sum", group = @tp} : (tensor<64x32xbf16>, tensor<32x16xbf16>) -> tensor<32x16xbf16>
    %pa, %p = symm.fused_all_gather_matmul %c, %b {group = @tp, return_a} : (tensor<32x16xbf16>, tensor<16x8xbf16>) -> (tensor<64x16xbf16>, tensor<64x8xbf16>)
    %y = compute.add %x, %r : tensor<32x16xbf16>
    %q = symm.fused_all_gather_matmul %y, %b {group = @tp} : (tensor<32x16xbf16>, tensor<16x8xbf16>) -> tensor<64x8xbf16>
    %r2 = symm.fused_matmul_reduce_scatter %h, %w {reduce_op = "avg", group = @tp} : (tensor<64x32xbf16>, tensor<32x16xbf16>) -> tensor<32x16xbf16>
    %n = compute.neg %h : tensor<64x32xbf16>
    %y2 = compute.add %r2, %x : tensor<32x16xbf16>
    %q2 = symm.fused_all_gather_matmul %y2, %b {group = @tp} : (tensor<32x16xbf16>, tensor<16x8xbf16>) -> tensor<64x8xbf16>
    return %q, %p, %q2, %n : tensor<64x8xbf16>, tensor<64x8xbf16>, tensor<64x8xbf16>, tensor<64x32xbf16>
  }
}
"#
    .to_string()
}

#[test]
fn reduce_scatter_epilogues_keep_slots_apart() {
    let text = slot_hazard_program();
    for mapped in [true, false] {
        // Only the second add fuses.
        assert_eq!(check(&text, 2, mapped, Transfer::CopyEngine).epilogues, 1);
    }
}

#[test]
fn reduce_scatter_epilogues_match_the_sim() {
    for g in [2, 4] {
        for ty in ["bf16", "f32"] {
            let text = epilogue_program(g, ty);
            for transfer in [Transfer::CopyEngine, Transfer::Kernel] {
                assert_eq!(check(&text, g, true, transfer).epilogues, 3, "{transfer:?}");
            }
            assert_eq!(check(&text, g, false, Transfer::CopyEngine).epilogues, 3);
        }
    }
}

/// The small TP transformer, made sequence-parallel and fused by the compiler
/// (`coll-fuse-matmul` as the cost model decides, and everywhere), scheduled and lowered as
/// the benchmarks compile it, against the sim of the tensor-parallel program: the passes, the
/// fused pipelines with their epilogues and every kernel, end to end. Row reductions (the
/// attention stand-in's softmax, the RMSNorm's reduce_sum) reduce across a warp's lanes,
/// which this one-thread harness does not run, so the attention stand-in is a relu here and
/// the model has no norm (the GPU `--check` of bench/gpu/prepare_async_tp.sh runs both).
/// `text` with every `compute.softmax %v {dim = …}` replaced by `compute.relu %v`.
fn relu_for_softmax(text: &str) -> String {
    text.lines()
        .map(|l| {
            match (
                l.find("compute.softmax "),
                l.find(" {dim = "),
                l.rfind(" : "),
            ) {
                (Some(a), Some(b), Some(c)) if a < b && b < c => {
                    let operand = &l[a + "compute.softmax ".len()..b];
                    format!("{}compute.relu {operand}{}\n", &l[..a], &l[c..])
                }
                _ => format!("{l}\n"),
            }
        })
        .collect()
}

#[test]
fn sequence_parallel_transformer_matches_the_sim() {
    use commlir_testgen::{transformer_program, Parallelism, TransformerConfig};
    let sched = "comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools";
    let text = relu_for_softmax(&transformer_program(&TransformerConfig::small(
        Parallelism::Tp,
        2,
    )));
    assert!(!text.contains("softmax") && text.contains("compute.relu"));
    for fuse in ["coll-fuse-matmul", "coll-fuse-matmul{ignore-cost=true}"] {
        let pipeline = format!(
            "builtin.module(func.func(coll-sequence-parallel,{fuse},coll-to-comm,{sched}))"
        );
        for mapped in [true, false] {
            let l = check_through(&pipeline, &text, 2, mapped, Transfer::CopyEngine, true);
            // Fused everywhere, each of the four residual adds follows its reduce-scatter (the
            // first one's slice of the input is a view hoisted above it).
            if fuse.contains("ignore-cost") {
                assert_eq!(l.epilogues, 4, "{pipeline}");
            }
        }
    }
}

/// FSDP's all-gathers on a `symm_mem` group, sent straight from the weight-shard arguments
/// (no clone into the pool), through NCCL and pushed by copy engines (`push_kernel`,
/// `COMMLIR_PUSH_ALL_GATHER=1`), in Inductor's order and in the overlap scheduler's with
/// buckets, next to NCCL's reduce-scatters on the same pool; mapped (pushes) and not (NCCL
/// all-gathers).
#[test]
fn fsdp_all_gathers_push_through_copy_engines() {
    use commlir_testgen::{transformer_program, Parallelism, TransformerConfig};
    let text = relu_for_softmax(&transformer_program(&TransformerConfig::small(
        Parallelism::Fsdp,
        2,
    )))
    .replace(
        "coll.group @dp {size = 2 : i64}",
        "coll.group @dp {size = 2 : i64, symm_mem}",
    );
    assert!(text.contains("symm_mem}") && !text.contains("softmax"));
    let sched = "comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools";
    for pipeline in [
        format!("builtin.module(func.func(coll-to-comm,{sched}))"),
        "builtin.module(func.func(coll-bucket,coll-to-comm,comm-overlap-schedule,comm-plan-pools))"
            .to_string(),
    ] {
        let mut ctx = Context::new();
        let m = with_knobs(&[("COMMLIR_PUSH_ALL_GATHER", "1")], || {
            lower(&mut ctx, &text, &pipeline)
        });
        let mut pushes = 0;
        ctx.walk(m, |op| {
            if ctx.op_name(op) == "rt.nccl_all_gather" {
                assert!(ctx.inherent_attr(op, "push_kernel").is_some());
                // Sent from the weight-shard argument itself.
                assert!(ctx.defining_op(ctx.operand(op, 0)).is_none());
                pushes += 1;
            }
        });
        assert_eq!(pushes, 8, "{pipeline}");
        for mapped in [true, false] {
            check_through(&pipeline, &text, 2, mapped, Transfer::PushAllGathers, true);
            check_through(&pipeline, &text, 2, mapped, Transfer::CopyEngine, true);
        }
    }
}

/// FSDP's backward stand-in with its power-of-two scales folded into the reduce-scatters
/// (`coll-fold-prescale`): NCCL's pre-multiplied sum (the mock multiplies each input by the
/// code's factor) gives the sim's bits, in Inductor's order and bucketed.
#[test]
fn fsdp_prescaled_reduce_scatters_match_the_sim() {
    use commlir_testgen::{transformer_program, Parallelism, TransformerConfig};
    let text = relu_for_softmax(&transformer_program(&TransformerConfig::small(
        Parallelism::Fsdp,
        2,
    )));
    let sched = "comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools";
    for pipeline in [
        format!("builtin.module(func.func(coll-fold-prescale,coll-to-comm,{sched}))"),
        "builtin.module(func.func(coll-fold-prescale,coll-bucket,coll-to-comm,comm-overlap-schedule,comm-plan-pools))"
            .to_string(),
    ] {
        let mut ctx = Context::new();
        let m = lower(&mut ctx, &text, &pipeline);
        let mut prescaled = 0;
        ctx.walk(m, |op| {
            if ctx.op_name(op) == "rt.nccl_reduce_scatter" {
                assert!(ctx.inherent_attr(op, "prescale").is_some(), "{pipeline}");
                prescaled += 1;
            }
        });
        assert_eq!(prescaled, 8, "{pipeline}");
        check_through(&pipeline, &text, 2, false, Transfer::CopyEngine, true);
    }
}

#[test]
fn pipelines_match_the_sim_on_two_ranks() {
    run_all(2);
}

#[test]
fn pipelines_match_the_sim_on_four_ranks() {
    run_all(4);
}

/// `coll.all_slice` along dim 0 (a rank's contiguous block) and along inner dims (packed
/// chunk-major first): the block is chosen at run time from `group_rank`.
fn all_slice_program(g: usize) -> String {
    format!(
        r#"module {{
  coll.group @tp {{size = {g} : i64, symm_mem}}
  func.func @main(%x: tensor<{r}x6xf32>, %y: tensor<3x{r}x5xbf16>, %z: tensor<4x{c}xi32>) -> (tensor<2x6xf32>, tensor<3x2x5xbf16>, tensor<4x3xi32>) {{
    %a = coll.all_slice %x {{dim = 0 : i64, group = @tp}} : (tensor<{r}x6xf32>) -> tensor<2x6xf32>
    %b = coll.all_slice %y {{dim = 1 : i64, group = @tp}} : (tensor<3x{r}x5xbf16>) -> tensor<3x2x5xbf16>
    %c = coll.all_slice %z {{dim = 1 : i64, group = @tp}} : (tensor<4x{c}xi32>) -> tensor<4x3xi32>
    return %a, %b, %c : tensor<2x6xf32>, tensor<3x2x5xbf16>, tensor<4x3xi32>
  }}
}}
"#,
        r = 2 * g,
        c = 3 * g
    )
}

#[test]
fn all_slice_takes_this_ranks_block() {
    for g in [2, 4] {
        check(&all_slice_program(g), g, true, Transfer::CopyEngine);
    }
}

/// A residual add whose product operand only it reads, onto a buffer of the function's own
/// that nothing reads after the GEMM, is the GEMM with β = 1 writing into that buffer
/// (`gemm_accumulate`): one rounding of `h + g·v` instead of two, so within a rounding of the
/// sim. An add onto an argument, or onto a value read again later, keeps its kernel.
#[test]
fn residual_adds_accumulate_in_their_gemms() {
    let text = r#"module {
  coll.group @dp {size = 2 : i64}
  func.func @main(%x: tensor<64x256xbf16>, %w: tensor<256x256xbf16>, %v: tensor<256x256xbf16>) -> (tensor<64x256xbf16>, tensor<64x256xbf16>) {
    %h = compute.matmul %x, %w : (tensor<64x256xbf16>, tensor<256x256xbf16>) -> tensor<64x256xbf16>
    %g = compute.relu %h : tensor<64x256xbf16>
    %m = compute.matmul %g, %v : (tensor<64x256xbf16>, tensor<256x256xbf16>) -> tensor<64x256xbf16>
    %y = compute.add %h, %m : tensor<64x256xbf16>
    %m2 = compute.matmul %y, %v : (tensor<64x256xbf16>, tensor<256x256xbf16>) -> tensor<64x256xbf16>
    %y2 = compute.add %x, %m2 : tensor<64x256xbf16>
    %m3 = compute.matmul %y2, %w : (tensor<64x256xbf16>, tensor<256x256xbf16>) -> tensor<64x256xbf16>
    %y3 = compute.add %y, %m3 : tensor<64x256xbf16>
    %s = coll.all_reduce %y3 {group = @dp, reduce_op = "sum"} : (tensor<64x256xbf16>) -> tensor<64x256xbf16>
    %r = coll.wait_tensor %s : tensor<64x256xbf16>
    return %r, %y : tensor<64x256xbf16>, tensor<64x256xbf16>
  }
}"#;
    let mut ctx = Context::new();
    let m = lower(&mut ctx, text, PIPELINE);
    let (mut accumulating, mut adds) = (0, 0);
    ctx.walk(m, |op| {
        if ctx.op_name(op) == "rt.gemm" && ctx.get_attr(op, "accumulate").is_some() {
            accumulating += 1;
        }
        if ctx.op_name(op) == "rt.launch"
            && ctx
                .get_attr(op, "kernel")
                .and_then(|k| ctx.attr_as_symbol(k))
                .is_some_and(|k| k.ends_with("_add"))
        {
            adds += 1;
        }
    });
    // `%y` (read by `%m2` first and returned) folds; `%y2` adds onto an argument; `%y3` adds
    // onto `%y`, which is returned.
    assert_eq!((accumulating, adds), (1, 2));
    check_through(PIPELINE, text, 2, false, Transfer::CopyEngine, true);
}
