//! `commlir-run --nccl-baseline`: raw NCCL through the same bindings, the same streams and
//! the same buffers as a compiled program, timed the same way, so that a program's
//! collectives can be compared like for like (nccl-tests' method: back-to-back calls on
//! preallocated buffers, CUDA events around the whole loop, time averaged over ranks).
//!
//! Per rank (a thread per GPU of this process): a non-blocking stream, the world
//! communicator, and per (collective, size) one buffer laid out as commlir's pools lay it out
//! — all-reduce in place; all-gather and reduce-scatter out of place within one buffer —
//! allocated with `ncclMemAlloc` and `ncclCommRegister`ed (`registered`, what the pools are)
//! or with `cuMemAlloc` (plain, nccl-tests' default). bf16 elements; the message size is
//! nccl-tests': the all-reduce buffer, the all-gather output, the reduce-scatter input.
//!
//! With `COMMLIR_HOST_PROFILE=1` each timed loop's host time is broken down as a program's
//! is (`profile.rs`): the NCCL calls, the per-call event records, the rest.

use super::ffi::{cu_check, nccl_check};
use super::new_unique_id;
use super::profile::{self, Driver, HostProfile, Profiler};
use cudarc::driver::sys as cu;
use cudarc::nccl::sys as nccl;
use std::ffi::c_void;
use std::sync::{Arc, Barrier};

/// One measurement: mean seconds per call over the ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselineRow {
    pub op: String,
    pub bytes: u64,
    pub registered: bool,
    /// A CUDA event was recorded on the stream after every call (`--baseline-events`).
    pub event_per_call: bool,
    pub seconds: f64,
    /// Host time per call of the enqueue loop (before the final synchronization), mean over
    /// ranks: above `seconds` the loop is bound by the host, not the GPU.
    pub host_seconds: f64,
    /// nccl-tests' bus factor for `op` with this many ranks.
    pub bus_factor: f64,
    /// With `COMMLIR_HOST_PROFILE=1`: the timed loop's host-time breakdown, added up over
    /// the ranks (its per-call figures are means).
    pub profile: Option<HostProfile>,
}

impl BaselineRow {
    /// `baseline OP BYTES B registered|plain[+event]: T us, algbw A GB/s, busbw B GB/s, host H us`.
    pub fn line(&self) -> String {
        let alg = self.bytes as f64 / self.seconds / 1e9;
        format!(
            "baseline {} {} B {}{}: {:.3} us, algbw {:.1} GB/s, busbw {:.1} GB/s, host {:.3} us",
            self.op,
            self.bytes,
            if self.registered {
                "registered"
            } else {
                "plain"
            },
            if self.event_per_call { "+event" } else { "" },
            self.seconds * 1e6,
            alg,
            alg * self.bus_factor,
            self.host_seconds * 1e6
        )
    }
}

/// The collectives the baseline knows.
pub const OPS: &[&str] = &["all_reduce", "all_gather", "reduce_scatter"];

/// Runs `iters` back-to-back calls (after `warmup`) of every `ops` × `sizes` (bytes) on
/// `ranks` GPUs of this process, with registered and/or plain buffers; with `event_per_call`,
/// a CUDA event is recorded on the stream after every call, as a compiled program records one
/// after each collective for its wait.
pub fn run(
    ranks: usize,
    ops: &[String],
    sizes: &[u64],
    iters: usize,
    warmup: usize,
    kinds: &[bool],
    event_per_call: bool,
) -> Result<Vec<BaselineRow>, String> {
    for o in ops {
        if !OPS.contains(&o.as_str()) {
            return Err(format!(
                "error: --nccl-baseline knows {} (got {o})",
                OPS.join(", ")
            ));
        }
    }
    let layout = super::single_process_layout(ranks, "--nccl-baseline")?;
    let id = new_unique_id().map_err(|e| format!("error: {e}"))?;
    let n = layout.world;
    let barrier = Arc::new(Barrier::new(n));
    let spec = Arc::new((ops.to_vec(), sizes.to_vec(), kinds.to_vec()));
    let mut handles = Vec::new();
    for &(rank, dev) in &layout.local {
        let (barrier, spec) = (barrier.clone(), spec.clone());
        handles.push(
            std::thread::Builder::new()
                .name(format!("baseline{rank}"))
                .spawn(move || {
                    // SAFETY: handles created and used on this thread only.
                    unsafe {
                        rank_run(
                            rank,
                            dev,
                            n,
                            id,
                            &barrier,
                            &spec,
                            (iters, warmup),
                            event_per_call,
                        )
                    }
                })
                .map_err(|e| format!("error: cannot start a thread: {e}"))?,
        );
    }
    let mut per_rank = Vec::new();
    let mut errors = Vec::new();
    for (i, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(v)) => per_rank.push(v),
            Ok(Err(e)) => errors.push(format!("error: rank {i}: {e}")),
            Err(_) => errors.push(format!("error: rank {i}: panicked")),
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    let mut rows = per_rank[0].clone();
    for (i, r) in rows.iter_mut().enumerate() {
        let n = per_rank.len() as f64;
        r.seconds = per_rank.iter().map(|v| v[i].seconds).sum::<f64>() / n;
        r.host_seconds = per_rank.iter().map(|v| v[i].host_seconds).sum::<f64>() / n;
        r.profile = per_rank.iter().skip(1).fold(r.profile, |acc, v| {
            acc.zip(v[i].profile).map(|(mut a, b)| {
                a.add(&b);
                a
            })
        });
    }
    Ok(rows)
}

type Spec = (Vec<String>, Vec<u64>, Vec<bool>);

#[allow(clippy::too_many_arguments)]
unsafe fn rank_run(
    rank: usize,
    dev: i32,
    world: usize,
    id: [u8; super::rdzv::ID_BYTES],
    barrier: &Barrier,
    spec: &Spec,
    (iters, warmup): (usize, usize),
    event_per_call: bool,
) -> Result<Vec<BaselineRow>, String> {
    let mut d = 0;
    cu_check("cuDeviceGet", cu::cuDeviceGet(&mut d, dev))?;
    // Pinned as a program's rank threads are (like for like); a failure only means unpinned.
    let _ = super::affinity::pin_to_device(d);
    super::ffi::primary_context(d)?;
    let mut stream = std::ptr::null_mut();
    cu_check(
        "cuStreamCreate",
        cu::cuStreamCreate(
            &mut stream,
            cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
        ),
    )?;
    let mut ev = [std::ptr::null_mut(); 3];
    for (i, e) in ev.iter_mut().enumerate() {
        // The third is the per-call event: no timing, as a program's.
        let flags = if i == 2 {
            cu::CUevent_flags::CU_EVENT_DISABLE_TIMING
        } else {
            cu::CUevent_flags::CU_EVENT_DEFAULT
        };
        cu_check("cuEventCreate", cu::cuEventCreate(e, flags as u32))?;
    }
    let uid = nccl::ncclUniqueId {
        internal: id.map(|b| b as std::ffi::c_char),
    };
    let mut comm = std::ptr::null_mut();
    nccl_check(
        "ncclCommInitRank",
        nccl::ncclCommInitRank(&mut comm, world as i32, uid, rank as i32),
        std::ptr::null_mut(),
    )?;
    let per_call = event_per_call.then_some(ev[2]);
    let r = measure(
        comm,
        stream,
        [ev[0], ev[1]],
        per_call,
        world,
        barrier,
        spec,
        (iters, warmup),
    );
    let _ = cu::cuStreamSynchronize(stream);
    nccl::ncclCommDestroy(comm);
    for e in ev {
        cu::cuEventDestroy_v2(e);
    }
    cu::cuStreamDestroy_v2(stream);
    r
}

#[allow(clippy::too_many_arguments)]
unsafe fn measure(
    comm: nccl::ncclComm_t,
    stream: cu::CUstream,
    ev: [cu::CUevent; 2],
    per_call: Option<cu::CUevent>,
    world: usize,
    barrier: &Barrier,
    spec: &Spec,
    (iters, warmup): (usize, usize),
) -> Result<Vec<BaselineRow>, String> {
    let (ops, sizes, kinds) = spec;
    let g = world as u64;
    let nf = world as f64;
    let s = stream as nccl::cudaStream_t;
    let bf16 = nccl::ncclDataType_t::ncclBfloat16;
    let sum = nccl::ncclRedOp_t::ncclSum;
    let profiled = profile::requested();
    let mut prof = Profiler::default();
    let mut rows = Vec::new();
    for &registered in kinds {
        for op in ops {
            for &bytes in sizes {
                let elems = (bytes / 2 / g) * g; // divisible by the ranks
                let shard = elems / g;
                // One buffer, laid out as a pool: message at 0, the shard after it.
                let total = (elems * 2 + if op == "all_reduce" { 0 } else { shard * 2 }) as usize;
                let mut buf: *mut c_void = std::ptr::null_mut();
                let mut reg = std::ptr::null_mut();
                if registered {
                    nccl_check(
                        "ncclMemAlloc",
                        nccl::ncclMemAlloc(&mut buf, total),
                        std::ptr::null_mut(),
                    )?;
                    nccl_check(
                        "ncclCommRegister",
                        nccl::ncclCommRegister(comm, buf, total, &mut reg),
                        comm,
                    )?;
                } else {
                    let mut p: cu::CUdeviceptr = 0;
                    cu_check("cuMemAlloc", cu::cuMemAlloc_v2(&mut p, total))?;
                    buf = p as *mut c_void;
                }
                cu_check(
                    "cuMemsetD8Async",
                    cu::cuMemsetD8Async(buf as cu::CUdeviceptr, 0, total, stream),
                )?;
                let msg = buf;
                let tail = (buf as *mut u8).add((elems * 2) as usize) as *mut c_void;
                // (The profiler is a branch when off, as on a program's path.)
                let one = |prof: &mut Profiler| -> Result<(), String> {
                    let r = prof.nccl(|| match op.as_str() {
                        "all_reduce" => {
                            nccl::ncclAllReduce(msg, msg, elems as usize, bf16, sum, comm, s)
                        }
                        "all_gather" => {
                            nccl::ncclAllGather(tail, msg, shard as usize, bf16, comm, s)
                        }
                        _ => nccl::ncclReduceScatter(msg, tail, shard as usize, bf16, sum, comm, s),
                    });
                    nccl_check(op, r, comm)?;
                    if let Some(e) = per_call {
                        let r = prof.cuda(Driver::Record, || cu::cuEventRecord(e, stream));
                        cu_check("cuEventRecord", r)?;
                    }
                    Ok(())
                };
                for _ in 0..warmup {
                    one(&mut prof)?;
                }
                cu_check("cuStreamSynchronize", cu::cuStreamSynchronize(stream))?;
                barrier.wait();
                cu_check("cuEventRecord", cu::cuEventRecord(ev[0], stream))?;
                prof.start(profiled);
                let t0 = std::time::Instant::now();
                for _ in 0..iters {
                    one(&mut prof)?;
                }
                let elapsed = t0.elapsed();
                let host = elapsed.as_secs_f64();
                let profile = prof.stop(iters, elapsed);
                cu_check("cuEventRecord", cu::cuEventRecord(ev[1], stream))?;
                cu_check("cuStreamSynchronize", cu::cuStreamSynchronize(stream))?;
                let mut ms = 0f32;
                cu_check(
                    "cuEventElapsedTime",
                    cu::cuEventElapsedTime_v2(&mut ms, ev[0], ev[1]),
                )?;
                if registered {
                    nccl::ncclCommDeregister(comm, reg);
                    nccl::ncclMemFree(buf);
                } else {
                    cu::cuMemFree_v2(buf as cu::CUdeviceptr);
                }
                rows.push(BaselineRow {
                    op: op.clone(),
                    bytes: elems * 2,
                    registered,
                    event_per_call: per_call.is_some(),
                    seconds: f64::from(ms) * 1e-3 / iters.max(1) as f64,
                    host_seconds: host / iters.max(1) as f64,
                    bus_factor: if op == "all_reduce" {
                        2.0 * (nf - 1.0) / nf
                    } else {
                        (nf - 1.0) / nf
                    },
                    profile,
                });
            }
        }
    }
    Ok(rows)
}
