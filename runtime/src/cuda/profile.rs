//! Opt-in host-time breakdown of the timed loops (`COMMLIR_HOST_PROFILE=1`).
//!
//! When the GPU work per call is short (a 1 MiB collective is 10–14 µs), the host's enqueue
//! time per call decides whether the GPU waits on the host. This splits that time, per rank,
//! over the timed loop of `run_calls` (and of `--nccl-baseline`) into:
//!
//! - **nccl**: inside NCCL enqueue calls (`ncclAllReduce`, ..., `ncclGroupStart`/`End`,
//!   `ncclSend`/`Recv`);
//! - **cuda**: inside CUDA driver (and cuBLAS) calls, counted by kind: event records, stream
//!   waits, launches (`cuLaunchKernel`, a cuBLAS GEMM, `cuGraphLaunch`) and other
//!   (`cuMemAllocAsync`/`cuMemFreeAsync`);
//! - **other**: the rest of the loop, of which **runtime** is the time inside the ABI table
//!   functions (`rank.rs`) beyond the library calls they make — stream-order bookkeeping,
//!   pool and allocation lookups, `with_state` — and the remainder the host program and the
//!   runner's own loop (join, result handling).
//!
//! Off (the default) a wrapped call costs one branch on [`Profiler::on`]; on, two
//! `Instant::now()` per wrapped call and per ABI call (tens of ns each), which inflates the
//! loop a little: take clean timings from a run without it.

use std::time::{Duration, Instant};

/// The environment variable that turns profiling on (`1`).
pub const ENV: &str = "COMMLIR_HOST_PROFILE";

/// Whether [`ENV`] asks for a profile: set, not empty and not `0`.
pub fn requested() -> bool {
    std::env::var_os(ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// What kind of driver call was timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// `cuEventRecord`.
    Record,
    /// `cuStreamWaitEvent`.
    Wait,
    /// `cuLaunchKernel`, a cuBLAS GEMM, `cuGraphLaunch`.
    Launch,
    /// Anything else (stream-ordered allocation and free).
    Other,
}

/// Host time and call counts accumulated over a timed loop (one rank, or several added up).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostProfile {
    /// Timed calls of the program (or NCCL calls of the baseline).
    pub calls: u64,
    /// The loop's host time (its enqueue time, before the final synchronization).
    pub total: Duration,
    pub nccl: Duration,
    pub nccl_calls: u64,
    pub cuda: Duration,
    pub records: u64,
    pub waits: u64,
    pub launches: u64,
    pub other_cuda: u64,
    /// Inside the ABI table functions, less the NCCL and driver calls made there.
    pub runtime: Duration,
    pub abi_calls: u64,
}

impl HostProfile {
    /// Adds `o` (another rank's loop): the per-call figures of the sum are means over both.
    pub fn add(&mut self, o: &HostProfile) {
        self.calls += o.calls;
        self.total += o.total;
        self.nccl += o.nccl;
        self.nccl_calls += o.nccl_calls;
        self.cuda += o.cuda;
        self.records += o.records;
        self.waits += o.waits;
        self.launches += o.launches;
        self.other_cuda += o.other_cuda;
        self.runtime += o.runtime;
        self.abi_calls += o.abi_calls;
    }

    /// `host profile: T us/call total, nccl A (N calls/call), cuda B (records R/call, waits
    /// W/call, launches L/call, other O/call), other C` — times in µs per call — and, when
    /// ABI functions ran, `(runtime D in K ABI calls/call, host program + runner E)`.
    pub fn line(&self) -> String {
        let n = self.calls.max(1) as f64;
        let us = |d: Duration| d.as_secs_f64() * 1e6 / n;
        let per = |c: u64| c as f64 / n;
        let other = us(self.total) - us(self.nccl) - us(self.cuda);
        let mut s = format!(
            "host profile: {:.3} us/call total, nccl {:.3} ({:.2} calls/call), cuda {:.3} (records {:.2}/call, waits {:.2}/call, launches {:.2}/call, other {:.2}/call), other {:.3}",
            us(self.total),
            us(self.nccl),
            per(self.nccl_calls),
            us(self.cuda),
            per(self.records),
            per(self.waits),
            per(self.launches),
            per(self.other_cuda),
            other
        );
        if self.abi_calls > 0 {
            s.push_str(&format!(
                " (runtime {:.3} in {:.2} ABI calls/call, host program + runner {:.3})",
                us(self.runtime),
                per(self.abi_calls),
                other - us(self.runtime)
            ));
        }
        s
    }
}

/// Where an ABI call started (see [`Profiler::abi_enter`]).
#[derive(Clone, Copy, Debug)]
pub struct AbiMark {
    at: Instant,
    libs: Duration,
}

/// Accumulates a [`HostProfile`] while [`Profiler::on`] (the timed loop with profiling
/// requested); otherwise every method is a branch and the wrapped call.
#[derive(Clone, Debug, Default)]
pub struct Profiler {
    pub on: bool,
    pub acc: HostProfile,
}

impl Profiler {
    /// Runs `f`, an NCCL call, timing it when on.
    #[inline(always)]
    pub fn nccl<T>(&mut self, f: impl FnOnce() -> T) -> T {
        if !self.on {
            return f();
        }
        let t = Instant::now();
        let r = f();
        self.acc.nccl += t.elapsed();
        self.acc.nccl_calls += 1;
        r
    }

    /// Runs `f`, a driver call of kind `d`, timing it when on.
    #[inline(always)]
    pub fn cuda<T>(&mut self, d: Driver, f: impl FnOnce() -> T) -> T {
        if !self.on {
            return f();
        }
        let t = Instant::now();
        let r = f();
        self.acc.cuda += t.elapsed();
        self.count(d);
        r
    }

    fn count(&mut self, d: Driver) {
        let c = match d {
            Driver::Record => &mut self.acc.records,
            Driver::Wait => &mut self.acc.waits,
            Driver::Launch => &mut self.acc.launches,
            Driver::Other => &mut self.acc.other_cuda,
        };
        *c += 1;
    }

    /// An ABI table function starts (`None` when off).
    #[inline(always)]
    pub fn abi_enter(&self) -> Option<AbiMark> {
        self.on.then(|| AbiMark {
            at: Instant::now(),
            libs: self.acc.nccl + self.acc.cuda,
        })
    }

    /// The ABI table function that started at `m` returns: its time beyond the library
    /// calls it made is runtime time.
    pub fn abi_exit(&mut self, m: AbiMark) {
        let inside = m.at.elapsed();
        let libs = (self.acc.nccl + self.acc.cuda).saturating_sub(m.libs);
        self.acc.runtime += inside.saturating_sub(libs);
        self.acc.abi_calls += 1;
    }

    /// Starts a timed loop: on when profiling was requested, nothing accumulated yet.
    pub fn start(&mut self, requested: bool) {
        self.acc = HostProfile::default();
        self.on = requested;
    }

    /// Ends the timed loop of `calls` calls that took `total` on the host: the profile, when on.
    pub fn stop(&mut self, calls: usize, total: Duration) -> Option<HostProfile> {
        if !std::mem::take(&mut self.on) {
            return None;
        }
        self.acc.calls = calls as u64;
        self.acc.total = total;
        Some(std::mem::take(&mut self.acc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_runs_the_call_and_records_nothing() {
        let mut p = Profiler::default();
        assert_eq!(p.nccl(|| 3), 3);
        assert_eq!(p.cuda(Driver::Record, || 4), 4);
        assert!(p.abi_enter().is_none());
        assert_eq!(p.acc, HostProfile::default());
        assert_eq!(p.stop(10, Duration::from_micros(5)), None);
    }

    #[test]
    fn on_counts_each_kind_and_nests_abi_time() {
        let mut p = Profiler::default();
        p.start(true);
        let m = p.abi_enter().unwrap();
        p.nccl(|| ());
        p.cuda(Driver::Record, || ());
        p.cuda(Driver::Wait, || ());
        p.cuda(Driver::Launch, || ());
        p.cuda(Driver::Other, || ());
        p.abi_exit(m);
        p.cuda(Driver::Record, || ());
        let r = p.stop(2, Duration::from_micros(20)).unwrap();
        assert!(!p.on);
        assert_eq!(
            (r.nccl_calls, r.records, r.waits, r.launches, r.other_cuda),
            (1, 2, 1, 1, 1)
        );
        assert_eq!((r.calls, r.abi_calls), (2, 1));
        assert!(r.runtime <= m.at.elapsed());
    }

    #[test]
    fn the_line_gives_per_call_means_over_ranks() {
        let one = HostProfile {
            calls: 10,
            total: Duration::from_micros(100),
            nccl: Duration::from_micros(60),
            nccl_calls: 10,
            cuda: Duration::from_micros(10),
            records: 10,
            waits: 0,
            launches: 0,
            other_cuda: 0,
            runtime: Duration::from_micros(5),
            abi_calls: 90,
        };
        let mut sum = one;
        sum.add(&one);
        assert_eq!(sum.line(), one.line());
        assert_eq!(
            one.line(),
            "host profile: 10.000 us/call total, nccl 6.000 (1.00 calls/call), cuda 1.000 (records 1.00/call, waits 0.00/call, launches 0.00/call, other 0.00/call), other 3.000 (runtime 0.500 in 9.00 ABI calls/call, host program + runner 2.500)"
        );
        let base = HostProfile {
            abi_calls: 0,
            runtime: Duration::ZERO,
            ..one
        };
        assert!(base.line().ends_with("other 3.000"), "{}", base.line());
    }
}
