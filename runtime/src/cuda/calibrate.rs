//! `commlir-run --backend cuda --calibrate=FILE`: measures the numbers of the cost model on
//! the GPUs at hand and writes them as a machine file (the format of
//! `commlir_passes::analysis::machine`, documented in docs/cost-model.md).
//!
//! One process, a thread per GPU (as `--nccl-baseline`), each with a compute stream (cuBLAS
//! bound to it) and a comm stream, timed with CUDA events:
//!
//! - NCCL all-reduce, all-gather and reduce-scatter on the world group, 4 KiB to 256 MiB
//!   (registered buffers, as commlir's pools), back-to-back calls, mean over the ranks;
//!   each protocol line of the model is fitted to its size range ([`fit_family`]);
//! - cuBLAS GEMM throughput: bf16 at 4096³ and 8192³, f32 (no TF32) at 4096³; the peak is
//!   the best achieved rate, as the model's roofline takes it;
//! - device memory bandwidth: a 1 GiB device-to-device copy (read plus write);
//! - launch overhead: back-to-back 64³ bf16 GEMMs, time per call;
//! - overlap slowdown: a loop of 8192³ bf16 GEMMs and a loop of 256 MiB all-reduces alone,
//!   then together on the two streams ([`overlap_factors`]).
//!
//! With one rank there is no communicator: the collective and overlap keys are left out of
//! the file, so they come from its base machine (the file says so). Every loop has a fixed
//! iteration count (the same on every rank, so that the collectives match), which bounds the
//! whole run to seconds on an H100 or H200; NVLink multicast is never used
//! (`NCCL_NVLS_ENABLE=0` unless set).
//!
//! The fitting and the file writing are pure functions, tested without a GPU.

use super::ffi::{cu_check, cublas_check, nccl_check};
use super::new_unique_id;
use cudarc::cublas::sys as cublas;
use cudarc::driver::sys as cu;
use cudarc::nccl::sys as nccl;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

/// The message sizes of the collective sweep, bytes.
pub const COLL_SIZES: &[u64] = &[
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
    256 << 20,
];

/// The collectives measured (nccl-tests' message size: all-reduce buffer, all-gather output,
/// reduce-scatter input).
pub const COLLS: &[&str] = &["all_reduce", "all_gather", "reduce_scatter"];

/// NCCL's per-step latency of a ring over NVLink, µs, for LL, LL128 and Simple (NCCL's
/// `hwLat[NCCL_HW_NVLINK][ring]`, src/graph/tuning.cc): the fit keeps these and fits the
/// base latency, so that groups of other sizes scale their latency with their steps.
pub const NVLINK_STEP_US: [f64; 3] = [0.6, 1.9, 3.4];

/// The size ranges each protocol line is fitted on (inclusive, bytes): small messages for LL,
/// medium for LL128, large for Simple, where NCCL's tuner picks each on NVLink.
pub const PROTO_RANGES: [(u64, u64); 3] =
    [(0, 64 << 10), (64 << 10, 16 << 20), (16 << 20, u64::MAX)];

/// One collective measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct CollPoint {
    pub op: String,
    pub bytes: u64,
    /// Mean seconds per call over the ranks.
    pub seconds: f64,
}

/// One GEMM measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmPoint {
    /// `bf16` or `f32`.
    pub dtype: String,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub seconds: f64,
}

/// The overlap measurement, per rank means: per-op times alone, and each loop's length when
/// both run together.
#[derive(Clone, Debug, PartialEq)]
pub struct OverlapPoint {
    pub gemm_alone: f64,
    pub ar_alone: f64,
    pub n_gemm: u64,
    pub n_ar: u64,
    /// Seconds from the common start to the end of the GEMM loop, and of the all-reduce loop.
    pub gemm_loop: f64,
    pub ar_loop: f64,
}

/// Everything a calibration measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// The GPU's name (`NVIDIA H100 80GB HBM3`).
    pub device: String,
    pub world: usize,
    /// `YYYY-MM-DD`, UTC.
    pub date: String,
    pub colls: Vec<CollPoint>,
    pub gemms: Vec<GemmPoint>,
    /// (bytes copied, seconds per copy).
    pub copy: Option<(u64, f64)>,
    /// Seconds per back-to-back tiny GEMM.
    pub launch_seconds: Option<f64>,
    pub overlap: Option<OverlapPoint>,
}

/// A fitted protocol line: base latency (µs), step latency (µs), bus bandwidth (GB/s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line {
    pub base_us: f64,
    pub step_us: f64,
    pub bus_gbps: f64,
}

/// The bus factor and ring step count of a collective family on `n` ranks, as the model's.
fn factor_steps(op: &str, n: u64) -> (f64, u64) {
    let nf = n as f64;
    if op == "all_reduce" {
        (2.0 * (nf - 1.0) / nf, 2 * (n - 1))
    } else {
        ((nf - 1.0) / nf, n - 1)
    }
}

/// Weighted least squares of `t = a + b·x` minimizing relative error (weights 1/t²).
fn line_fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    if points.len() < 2 {
        return None;
    }
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x, t) in points {
        let w = 1.0 / (t * t);
        sw += w;
        sx += w * x;
        sy += w * t;
        sxx += w * x * x;
        sxy += w * x * t;
    }
    let det = sw * sxx - sx * sx;
    if det.abs() < f64::MIN_POSITIVE {
        return None;
    }
    let b = (sw * sxy - sx * sy) / det;
    let a = (sy - b * sx) / sw;
    Some((a, b))
}

/// Fits the three protocol lines of one family (`(bytes, µs)` points, the family's ops
/// pooled) on `n` ranks: `time = base + step·(steps−1) + factor·bytes / bus_bw`, the step
/// latency fixed at [`NVLINK_STEP_US`] and the base latency and bandwidth fitted by weighted
/// least squares (relative error). The model takes the best line at each size, so the sizes
/// are cut into three consecutive ranges, one per line (LL the smallest, Simple the largest,
/// as NCCL's tuner switches protocols as messages grow): every cut with at least two sizes per
/// range is tried and the one whose lines (bandwidths made non-decreasing from LL to Simple)
/// give the smallest largest relative error over all points is kept, the first such cut on a
/// tie. With fewer than six sizes the fixed ranges of [`PROTO_RANGES`] are used, a range
/// without two points borrowing its neighbour's line. `None` without points or ranks.
pub fn fit_family(op: &str, points: &[(u64, f64)], n: u64) -> Option<[Line; 3]> {
    if points.is_empty() || n < 2 {
        return None;
    }
    let (factor, steps) = factor_steps(op, n);
    let mut pts: Vec<(u64, f64)> = points.to_vec();
    pts.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let sizes: Vec<u64> = {
        let mut v: Vec<u64> = pts.iter().map(|p| p.0).collect();
        v.dedup();
        v
    };
    let line_of = |p: usize, seg: &[(u64, f64)]| -> Option<Line> {
        let xs: Vec<(f64, f64)> = seg.iter().map(|&(b, us)| (factor * b as f64, us)).collect();
        let step = NVLINK_STEP_US[p];
        line_fit(&xs).map(|(a, b)| {
            // The achieved bus bandwidth bounds a flat or noisy slope from below.
            let achieved = xs.iter().map(|(x, t)| x / (t * 1e3)).fold(0.0f64, f64::max);
            let bw = if b > 0.0 {
                1.0 / (b * 1e3)
            } else {
                10.0 * achieved
            };
            Line {
                base_us: (a - step * (steps - 1) as f64).max(0.0),
                step_us: step,
                bus_gbps: bw.max(achieved).max(1e-3),
            }
        })
    };
    let finish = |mut lines: [Option<Line>; 3]| -> Option<[Line; 3]> {
        // Missing lines borrow a neighbour (the larger sizes' first).
        for p in (0..3).rev() {
            if lines[p].is_none() {
                lines[p] = lines[(p + 1).min(2)].or(lines[p.saturating_sub(1)]);
            }
        }
        for p in 0..3 {
            if lines[p].is_none() {
                lines[p] = lines.iter().flatten().next().copied();
            }
        }
        let mut out = [lines[0]?, lines[1]?, lines[2]?];
        for (p, o) in out.iter_mut().enumerate() {
            o.step_us = NVLINK_STEP_US[p];
        }
        out[1].bus_gbps = out[1].bus_gbps.min(out[2].bus_gbps);
        out[0].bus_gbps = out[0].bus_gbps.min(out[1].bus_gbps);
        Some(out)
    };
    let worst = |lines: &[Line; 3]| {
        pts.iter()
            .map(|&(b, us)| (model_us(op, lines, b, n) - us).abs() / us)
            .fold(0.0f64, f64::max)
    };
    let in_sizes = |lo: usize, hi: usize| -> Vec<(u64, f64)> {
        pts.iter()
            .copied()
            .filter(|(b, _)| *b >= sizes[lo] && *b <= sizes[hi])
            .collect()
    };
    let k = sizes.len();
    let mut best: Option<(f64, [Line; 3])> = None;
    if k >= 6 {
        // Ranges [0, i), [i, j), [j, k) of the sorted sizes, at least two sizes each.
        for i in 2..=k - 4 {
            for j in i + 2..=k - 2 {
                let lines = [
                    line_of(0, &in_sizes(0, i - 1)),
                    line_of(1, &in_sizes(i, j - 1)),
                    line_of(2, &in_sizes(j, k - 1)),
                ];
                if let Some(l) = finish(lines) {
                    let e = worst(&l);
                    if best.as_ref().is_none_or(|(b, _)| e < *b) {
                        best = Some((e, l));
                    }
                }
            }
        }
    }
    if let Some((_, l)) = best {
        return Some(l);
    }
    let mut lines: [Option<Line>; 3] = [None; 3];
    for (p, &(lo, hi)) in PROTO_RANGES.iter().enumerate() {
        let seg: Vec<(u64, f64)> = pts
            .iter()
            .copied()
            .filter(|(b, _)| *b >= lo && *b <= hi)
            .collect();
        lines[p] = line_of(p, &seg);
    }
    finish(lines)
}

/// The model's time (µs) of a ring collective of `bytes` with these lines: the best line.
pub fn model_us(op: &str, lines: &[Line; 3], bytes: u64, n: u64) -> f64 {
    let (factor, steps) = factor_steps(op, n);
    lines
        .iter()
        .map(|l| {
            l.base_us
                + l.step_us * (steps.saturating_sub(1)) as f64
                + factor * bytes as f64 / (l.bus_gbps * 1e3)
        })
        .fold(f64::INFINITY, f64::min)
}

/// The overlap factors the measurement implies under the simulator's model (both run at
/// reduced rates while both run; the loop that ends first ran overlapped throughout, the
/// other ran overlapped until then and alone after): (compute, comm), each at least 1.
pub fn overlap_factors(o: &OverlapPoint) -> (f64, f64) {
    let gemm_work = o.n_gemm as f64 * o.gemm_alone;
    let ar_work = o.n_ar as f64 * o.ar_alone;
    let (sc, sm) = if o.ar_loop <= o.gemm_loop {
        let sm = o.ar_loop / ar_work;
        // GEMM work done while overlapped: all of it less what ran alone after.
        let overlapped = gemm_work - (o.gemm_loop - o.ar_loop);
        (o.ar_loop / overlapped.max(f64::MIN_POSITIVE), sm)
    } else {
        let sc = o.gemm_loop / gemm_work;
        let overlapped = ar_work - (o.ar_loop - o.gemm_loop);
        (sc, o.gemm_loop / overlapped.max(f64::MIN_POSITIVE))
    };
    let clean = |x: f64| if x.is_finite() { x.max(1.0) } else { 1.0 };
    (clean(sc), clean(sm))
}

/// Rounds to 4 significant digits (the file should not pretend to more).
fn sig4(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let mag = 10f64.powi(3 - x.abs().log10().floor() as i32);
    (x * mag).round() / mag
}

/// The machine file of a calibration over the machine `base` (which gives every key the
/// calibration did not measure): JSON in the format of docs/cost-model.md.
pub fn machine_json(cal: &Calibration, base: &str) -> String {
    use serde_json::{json, Map, Value};
    let n = cal.world as u64;
    let mut m = Map::new();
    let slug: String = cal
        .device
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    m.insert(
        "name".into(),
        json!(format!("calibrated-{slug}-x{}", cal.world)),
    );
    m.insert("base".into(), json!(base));
    let one_rank = if cal.world < 2 {
        "; one rank: no collective or overlap measured, those keys come from the base machine"
    } else {
        ""
    };
    m.insert(
        "source".into(),
        json!(format!(
            "measured by commlir-run --calibrate on {} x {}, {}{one_rank}",
            cal.device, cal.world, cal.date
        )),
    );
    let mut sources = Map::new();
    m.insert("nodes".into(), json!(1));
    m.insert("gpus_per_node".into(), json!(n.max(1)));
    let table = |lines: &[Line; 3]| -> Value {
        let l = |x: &Line| json!({"base_us": sig4(x.base_us), "step_us": x.step_us, "bus_gbps": sig4(x.bus_gbps)});
        json!({"LL": l(&lines[0]), "LL128": l(&lines[1]), "Simple": l(&lines[2])})
    };
    let family = |ops: &[&str]| -> Vec<(u64, f64)> {
        cal.colls
            .iter()
            .filter(|c| ops.contains(&c.op.as_str()))
            .map(|c| (c.bytes, c.seconds * 1e6))
            .collect()
    };
    for (key, ops) in [
        ("all_reduce", &["all_reduce"][..]),
        ("all_gather", &["all_gather"][..]),
        // Its own table: the reduction makes NCCL's reduce-scatter slower than its
        // all-gather at large sizes (590 against 442 µs at 256 MiB on 2×H100).
        ("reduce_scatter", &["reduce_scatter"][..]),
    ] {
        let pts = family(ops);
        if let Some(lines) = fit_family(ops[0], &pts, n) {
            // Rounded as written, so the error is the file's.
            let written: Vec<Line> = lines
                .iter()
                .map(|l| Line {
                    base_us: sig4(l.base_us),
                    step_us: l.step_us,
                    bus_gbps: sig4(l.bus_gbps),
                })
                .collect();
            let written = [written[0], written[1], written[2]];
            let worst = pts
                .iter()
                .map(|&(b, us)| (model_us(ops[0], &written, b, n) - us).abs() / us)
                .fold(0.0f64, f64::max);
            m.insert(key.into(), table(&lines));
            sources.insert(
                key.into(),
                json!(format!(
                    "{} on {n} ranks, {} sizes 4 KiB..256 MiB: one line per protocol on consecutive size ranges, the cut with the smallest largest error (weighted least squares, step_us from NCCL's NVLink ring latencies); largest error {:.1}%",
                    ops.join(" and "),
                    COLL_SIZES.len(),
                    worst * 100.0
                )),
            );
        }
    }
    let best = |dtype: &str| {
        cal.gemms
            .iter()
            .filter(|g| g.dtype == dtype && g.seconds > 0.0)
            .map(|g| (2.0 * (g.m * g.n * g.k) as f64 / g.seconds, g))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    };
    for (key, dtype) in [("matmul_flops_bf16", "bf16"), ("matmul_flops_f32", "f32")] {
        if let Some((rate, g)) = best(dtype) {
            m.insert(key.into(), json!(sig4(rate)));
            sources.insert(
                key.into(),
                json!(format!(
                    "cuBLAS {dtype} GEMM {}x{}x{}: {:.3} ms ({:.0} TFLOP/s), the best of the shapes measured",
                    g.m,
                    g.n,
                    g.k,
                    g.seconds * 1e3,
                    rate / 1e12
                )),
            );
        }
    }
    if let Some((bytes, s)) = cal.copy {
        let bw = 2.0 * bytes as f64 / s;
        m.insert("mem_bw".into(), json!(sig4(bw)));
        sources.insert(
            "mem_bw".into(),
            json!(format!(
                "device-to-device copy of {} MiB in {:.1} us: {:.2} TB/s read + write",
                bytes >> 20,
                s * 1e6,
                bw / 1e12
            )),
        );
    }
    if let Some(s) = cal.launch_seconds {
        m.insert("launch_ns".into(), json!(sig4(s * 1e9)));
        sources.insert(
            "launch_ns".into(),
            json!(format!(
                "back-to-back 64x64x64 bf16 cuBLAS GEMMs: {:.2} us per call",
                s * 1e6
            )),
        );
    }
    if let Some(o) = &cal.overlap {
        let (c, k) = overlap_factors(o);
        m.insert("overlap_compute_slowdown".into(), json!(sig4(c)));
        m.insert("overlap_comm_slowdown".into(), json!(sig4(k)));
        let what = format!(
            "{} bf16 8192^3 GEMMs ({:.3} ms each alone) on the compute stream and {} all-reduces of 256 MiB ({:.3} ms each alone) on the comm stream, together: loops of {:.3} and {:.3} ms",
            o.n_gemm,
            o.gemm_alone * 1e3,
            o.n_ar,
            o.ar_alone * 1e3,
            o.gemm_loop * 1e3,
            o.ar_loop * 1e3
        );
        sources.insert("overlap_compute_slowdown".into(), json!(what.clone()));
        sources.insert("overlap_comm_slowdown".into(), json!(what));
    }
    m.insert("sources".into(), Value::Object(sources));
    // Keys in a fixed order: name, base, source, sources, then the rest as inserted.
    let order = [
        "name",
        "base",
        "source",
        "sources",
        "nodes",
        "gpus_per_node",
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "matmul_flops_bf16",
        "matmul_flops_f32",
        "mem_bw",
        "launch_ns",
        "overlap_compute_slowdown",
        "overlap_comm_slowdown",
    ];
    let mut text = String::from("{\n");
    let present: Vec<&str> = order
        .iter()
        .copied()
        .filter(|k| m.contains_key(*k))
        .collect();
    for (i, k) in present.iter().enumerate() {
        let v = serde_json::to_string_pretty(&m[*k]).expect("json");
        let v = v.replace('\n', "\n  ");
        let comma = if i + 1 < present.len() { "," } else { "" };
        text.push_str(&format!("  \"{k}\": {v}{comma}\n"));
    }
    text.push_str("}\n");
    text
}

/// Today's date (UTC) as `YYYY-MM-DD`, from the system clock (days to civil date, Howard
/// Hinnant's algorithm).
pub fn utc_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Runs the calibration on `ranks` GPUs of this process; `progress` gets one line per step
/// (from rank 0). A rank that fails or hangs (a collective its peers never join) fails the
/// whole calibration, after at most `timeout`: the caller then exits, taking the stuck
/// threads with it.
pub fn run(
    ranks: usize,
    progress: fn(&str),
    timeout: std::time::Duration,
) -> Result<Calibration, String> {
    let layout = super::single_process_layout(ranks, "--calibrate")?;
    let n = layout.world;
    let id = if n > 1 {
        Some(new_unique_id().map_err(|e| format!("error: {e}"))?)
    } else {
        None
    };
    let shared = Arc::new(Shared {
        barrier: Barrier::new(n),
        n_ar: AtomicU64::new(0),
    });
    let started = std::time::Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    for &(rank, dev) in &layout.local {
        let (shared, tx) = (shared.clone(), tx.clone());
        std::thread::Builder::new()
            .name(format!("calibrate{rank}"))
            .spawn(move || {
                let say = move |s: &str| {
                    if rank == 0 {
                        progress(&format!(
                            "calibrate [{:5.1} s] {s}",
                            started.elapsed().as_secs_f64()
                        ));
                    }
                };
                // SAFETY: every handle is created and used on this thread only.
                let r = unsafe { rank_run(rank, dev, n, id, &shared, &say) };
                let _ = tx.send((rank, r));
            })
            .map_err(|e| format!("error: cannot start a thread: {e}"))?;
    }
    drop(tx);
    let mut results: Vec<Option<RankResult>> = (0..n).map(|_| None).collect();
    for _ in 0..n {
        let left = timeout.saturating_sub(started.elapsed());
        match rx.recv_timeout(left) {
            Ok((rank, Ok(r))) => results[rank] = Some(r),
            Ok((rank, Err(e))) => return Err(format!("error: calibrate: rank {rank}: {e}")),
            Err(_) => {
                return Err(format!(
                    "error: calibrate: no result after {} s (a rank failed or hangs)",
                    timeout.as_secs()
                ))
            }
        }
    }
    let results: Vec<Result<RankResult, String>> = results
        .into_iter()
        .map(|r| r.ok_or_else(|| "no result".to_string()))
        .collect();
    let mut per_rank = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        per_rank.push(r.map_err(|e| format!("error: calibrate: rank {i}: {e}"))?);
    }
    let mean = |f: &dyn Fn(&RankResult) -> f64| {
        per_rank.iter().map(f).sum::<f64>() / per_rank.len() as f64
    };
    let first = &per_rank[0];
    let colls = (0..first.colls.len())
        .map(|i| CollPoint {
            op: first.colls[i].op.clone(),
            bytes: first.colls[i].bytes,
            seconds: mean(&|r| r.colls[i].seconds),
        })
        .collect();
    let gemms = (0..first.gemms.len())
        .map(|i| GemmPoint {
            seconds: mean(&|r| r.gemms[i].seconds),
            ..first.gemms[i].clone()
        })
        .collect();
    let overlap = first.overlap.as_ref().map(|o| OverlapPoint {
        gemm_alone: mean(&|r| r.overlap.as_ref().map_or(0.0, |x| x.gemm_alone)),
        ar_alone: mean(&|r| r.overlap.as_ref().map_or(0.0, |x| x.ar_alone)),
        gemm_loop: mean(&|r| r.overlap.as_ref().map_or(0.0, |x| x.gemm_loop)),
        ar_loop: mean(&|r| r.overlap.as_ref().map_or(0.0, |x| x.ar_loop)),
        ..o.clone()
    });
    Ok(Calibration {
        device: first.device.clone(),
        world: n,
        date: utc_date(),
        colls,
        gemms,
        copy: first
            .copy
            .map(|(b, _)| (b, mean(&|r| r.copy.map_or(0.0, |c| c.1)))),
        launch_seconds: first
            .launch_seconds
            .map(|_| mean(&|r| r.launch_seconds.unwrap_or(0.0))),
        overlap,
    })
}

/// What the rank threads share: a barrier, and the all-reduce count of the overlap loop
/// (chosen by rank 0, so that every rank issues the same collectives).
struct Shared {
    barrier: Barrier,
    n_ar: AtomicU64,
}

/// One rank's measurements.
struct RankResult {
    device: String,
    colls: Vec<CollPoint>,
    gemms: Vec<GemmPoint>,
    copy: Option<(u64, f64)>,
    launch_seconds: Option<f64>,
    overlap: Option<OverlapPoint>,
}

/// The device resources of one rank, freed on drop.
struct Res {
    streams: [cu::CUstream; 2],
    ev: [cu::CUevent; 3],
    cublas: cublas::cublasHandle_t,
    comm: nccl::ncclComm_t,
    /// Device allocations (cuMemAlloc).
    mem: Vec<cu::CUdeviceptr>,
    /// NCCL allocations and their registrations.
    nccl_mem: Vec<(*mut c_void, *mut c_void)>,
}

impl Drop for Res {
    fn drop(&mut self) {
        // SAFETY: every handle was created on this thread and is released once.
        unsafe {
            for &s in &self.streams {
                if !s.is_null() {
                    cu::cuStreamSynchronize(s);
                }
            }
            for &(p, r) in &self.nccl_mem {
                if !self.comm.is_null() && !r.is_null() {
                    nccl::ncclCommDeregister(self.comm, r);
                }
                nccl::ncclMemFree(p);
            }
            for &p in &self.mem {
                cu::cuMemFree_v2(p);
            }
            if !self.comm.is_null() {
                nccl::ncclCommDestroy(self.comm);
            }
            if !self.cublas.is_null() {
                cublas::cublasDestroy_v2(self.cublas);
            }
            for &e in &self.ev {
                if !e.is_null() {
                    cu::cuEventDestroy_v2(e);
                }
            }
            for &s in &self.streams {
                if !s.is_null() {
                    cu::cuStreamDestroy_v2(s);
                }
            }
        }
    }
}

impl Res {
    /// `bytes` of device memory, every 16-bit word 1.0 in bf16 (GEMMs on all-zero
    /// operands draw less power and can run faster than on real data).
    unsafe fn alloc(&mut self, bytes: usize) -> Result<cu::CUdeviceptr, String> {
        let mut p: cu::CUdeviceptr = 0;
        cu_check("cuMemAlloc", cu::cuMemAlloc_v2(&mut p, bytes))?;
        self.mem.push(p);
        cu_check("cuMemsetD32", cu::cuMemsetD32_v2(p, 0x3F80_3F80, bytes / 4))?;
        Ok(p)
    }

    /// `bytes` of NCCL memory registered with the communicator, zeroed (as a pool is).
    unsafe fn alloc_registered(&mut self, bytes: usize) -> Result<*mut c_void, String> {
        let mut p: *mut c_void = std::ptr::null_mut();
        nccl_check("ncclMemAlloc", nccl::ncclMemAlloc(&mut p, bytes), self.comm)?;
        let mut reg = std::ptr::null_mut();
        let r = nccl::ncclCommRegister(self.comm, p, bytes, &mut reg);
        self.nccl_mem.push((p, reg));
        nccl_check("ncclCommRegister", r, self.comm)?;
        cu_check(
            "cuMemsetD8",
            cu::cuMemsetD8_v2(p as cu::CUdeviceptr, 0, bytes),
        )?;
        Ok(p)
    }

    /// Seconds between events 0 and 1 around `iters` calls of `f` on `stream` (after
    /// `warmup` calls), per call.
    unsafe fn time(
        &self,
        stream: cu::CUstream,
        warmup: usize,
        iters: usize,
        mut f: impl FnMut() -> Result<(), String>,
    ) -> Result<f64, String> {
        for _ in 0..warmup {
            f()?;
        }
        cu_check("cuEventRecord", cu::cuEventRecord(self.ev[0], stream))?;
        for _ in 0..iters {
            f()?;
        }
        cu_check("cuEventRecord", cu::cuEventRecord(self.ev[1], stream))?;
        cu_check("cuEventSynchronize", cu::cuEventSynchronize(self.ev[1]))?;
        let mut ms = 0f32;
        cu_check(
            "cuEventElapsedTime",
            cu::cuEventElapsedTime_v2(&mut ms, self.ev[0], self.ev[1]),
        )?;
        Ok(f64::from(ms) * 1e-3 / iters.max(1) as f64)
    }

    /// A bf16 or f32 GEMM `m×k · k×n` on the compute stream (column-major, no transposes).
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        &self,
        f32: bool,
        (m, n, k): (u64, u64, u64),
        a: cu::CUdeviceptr,
        b: cu::CUdeviceptr,
        c: cu::CUdeviceptr,
    ) -> Result<(), String> {
        use cublas::cublasComputeType_t as C;
        use cublas::cudaDataType_t as D;
        let dt = if f32 { D::CUDA_R_32F } else { D::CUDA_R_16BF };
        let (one, zero) = (1f32, 0f32);
        let n_op = cublas::cublasOperation_t::CUBLAS_OP_N;
        cublas_check(
            "cublasGemmEx",
            cublas::cublasGemmEx(
                self.cublas,
                n_op,
                n_op,
                m as i32,
                n as i32,
                k as i32,
                &one as *const f32 as *const c_void,
                a as *const c_void,
                dt,
                m as i32,
                b as *const c_void,
                dt,
                k as i32,
                &zero as *const f32 as *const c_void,
                c as *mut c_void,
                dt,
                m as i32,
                C::CUBLAS_COMPUTE_32F,
                cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            ),
        )
    }
}

/// Back-to-back calls per collective size: enough for a stable mean, few for the large.
fn coll_iters(bytes: u64) -> usize {
    match bytes {
        b if b <= 1 << 20 => 50,
        b if b <= 16 << 20 => 20,
        b if b <= 64 << 20 => 10,
        _ => 5,
    }
}

/// One rank's calibration.
unsafe fn rank_run(
    rank: usize,
    dev: i32,
    world: usize,
    id: Option<[u8; super::rdzv::ID_BYTES]>,
    shared: &Shared,
    say: &dyn Fn(&str),
) -> Result<RankResult, String> {
    let mut d = 0;
    cu_check("cuDeviceGet", cu::cuDeviceGet(&mut d, dev))?;
    let _ = super::affinity::pin_to_device(d);
    let mut name = [0 as std::ffi::c_char; 256];
    cu_check(
        "cuDeviceGetName",
        cu::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, d),
    )?;
    let device = std::ffi::CStr::from_ptr(name.as_ptr())
        .to_string_lossy()
        .trim()
        .to_string();
    super::ffi::primary_context(d)?;
    let mut res = Res {
        streams: [std::ptr::null_mut(); 2],
        ev: [std::ptr::null_mut(); 3],
        cublas: std::ptr::null_mut(),
        comm: std::ptr::null_mut(),
        mem: Vec::new(),
        nccl_mem: Vec::new(),
    };
    for s in res.streams.iter_mut() {
        cu_check(
            "cuStreamCreate",
            cu::cuStreamCreate(s, cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32),
        )?;
    }
    for e in res.ev.iter_mut() {
        cu_check(
            "cuEventCreate",
            cu::cuEventCreate(e, cu::CUevent_flags::CU_EVENT_DEFAULT as u32),
        )?;
    }
    cublas_check("cublasCreate", cublas::cublasCreate_v2(&mut res.cublas))?;
    cublas_check(
        "cublasSetStream",
        cublas::cublasSetStream_v2(res.cublas, res.streams[0] as _),
    )?;
    let (cs, ms) = (res.streams[0], res.streams[1]);
    say(&format!("{world} x {device}"));

    // GEMMs, launch overhead and memory bandwidth: local, no communicator needed.
    let big = 8192u64;
    let a = res.alloc((big * big * 4) as usize)?;
    let b = res.alloc((big * big * 4) as usize)?;
    let c = res.alloc((big * big * 4) as usize)?;
    let mut gemms = Vec::new();
    for (f32, s, iters) in [(false, 4096u64, 20), (false, 8192, 8), (true, 4096, 5)] {
        let t = res.time(cs, 2, iters, || res.gemm(f32, (s, s, s), a, b, c))?;
        let dtype = if f32 { "f32" } else { "bf16" };
        say(&format!(
            "gemm {dtype} {s}^3: {:.3} ms, {:.0} TFLOP/s",
            t * 1e3,
            2.0 * (s * s * s) as f64 / t / 1e12
        ));
        gemms.push(GemmPoint {
            dtype: dtype.into(),
            m: s,
            n: s,
            k: s,
            seconds: t,
        });
    }
    let launch = res.time(cs, 10, 200, || res.gemm(false, (64, 64, 64), a, b, c))?;
    say(&format!("launch (64^3 bf16 gemm): {:.2} us", launch * 1e6));
    let copy_bytes = 1usize << 30;
    let src = res.alloc(copy_bytes)?;
    let dst = res.alloc(copy_bytes)?;
    let copy = res.time(cs, 2, 10, || {
        cu_check(
            "cuMemcpyDtoDAsync",
            cu::cuMemcpyDtoDAsync_v2(dst, src, copy_bytes, cs),
        )
    })?;
    say(&format!(
        "copy 1 GiB: {:.1} us, {:.2} TB/s read + write",
        copy * 1e6,
        2.0 * copy_bytes as f64 / copy / 1e12
    ));
    // The copy buffers are not needed any more: free them before the NCCL buffers.
    cu::cuMemFree_v2(src);
    cu::cuMemFree_v2(dst);
    res.mem.retain(|&p| p != src && p != dst);

    let mut out = RankResult {
        device,
        colls: Vec::new(),
        gemms,
        copy: Some((copy_bytes as u64, copy)),
        launch_seconds: Some(launch),
        overlap: None,
    };
    let Some(id) = id else {
        say("one rank: no collectives, no overlap (their keys come from the base machine)");
        return Ok(out);
    };

    let uid = nccl::ncclUniqueId {
        internal: id.map(|b| b as std::ffi::c_char),
    };
    nccl_check(
        "ncclCommInitRank",
        nccl::ncclCommInitRank(&mut res.comm, world as i32, uid, rank as i32),
        std::ptr::null_mut(),
    )?;
    let comm = res.comm;
    let g = world as u64;
    let max = *COLL_SIZES.last().expect("sizes");
    // One registered buffer for every size: message at 0, the shard after it.
    let buf = res.alloc_registered((max + max / g + 64) as usize)?;
    let s = ms as nccl::cudaStream_t;
    let bf16 = nccl::ncclDataType_t::ncclBfloat16;
    let sum = nccl::ncclRedOp_t::ncclSum;
    for op in COLLS {
        for &bytes in COLL_SIZES {
            let elems = (bytes / 2 / g) * g;
            let shard = elems / g;
            let msg = buf;
            let tail = (buf as *mut u8).add((elems * 2) as usize) as *mut c_void;
            shared.barrier.wait();
            let t = res.time(ms, 3, coll_iters(bytes), || {
                let r = match *op {
                    "all_reduce" => {
                        nccl::ncclAllReduce(msg, msg, elems as usize, bf16, sum, comm, s)
                    }
                    "all_gather" => nccl::ncclAllGather(tail, msg, shard as usize, bf16, comm, s),
                    _ => nccl::ncclReduceScatter(msg, tail, shard as usize, bf16, sum, comm, s),
                };
                nccl_check(op, r, comm)
            })?;
            say(&format!("{op} {bytes} B: {:.2} us", t * 1e6));
            out.colls.push(CollPoint {
                op: op.to_string(),
                bytes: elems * 2,
                seconds: t,
            });
        }
    }

    // Overlap: GEMMs alone, all-reduces alone, then both at once on the two streams.
    let ar_elems = ((max / 2) / g * g) as usize;
    let gemm = || res.gemm(false, (big, big, big), a, b, c);
    let gemm_alone = res.time(cs, 2, 5, gemm)?;
    shared.barrier.wait();
    let ar = || {
        nccl_check(
            "ncclAllReduce",
            nccl::ncclAllReduce(buf, buf, ar_elems, bf16, sum, comm, s),
            comm,
        )
    };
    let ar_alone = res.time(ms, 2, 5, ar)?;
    let n_gemm = 10u64;
    if rank == 0 {
        // As many all-reduces as cover the GEMM loop, decided once for every rank.
        let n = ((n_gemm as f64 * gemm_alone / ar_alone).round() as u64).clamp(1, 100);
        shared.n_ar.store(n, Ordering::SeqCst);
    }
    shared.barrier.wait();
    let n_ar = shared.n_ar.load(Ordering::SeqCst);
    // Both streams start from one event on the compute stream.
    cu_check("cuEventRecord", cu::cuEventRecord(res.ev[0], cs))?;
    cu_check("cuStreamWaitEvent", cu::cuStreamWaitEvent(ms, res.ev[0], 0))?;
    for _ in 0..n_gemm {
        gemm()?;
    }
    cu_check("cuEventRecord", cu::cuEventRecord(res.ev[1], cs))?;
    for _ in 0..n_ar {
        ar()?;
    }
    cu_check("cuEventRecord", cu::cuEventRecord(res.ev[2], ms))?;
    cu_check("cuEventSynchronize", cu::cuEventSynchronize(res.ev[1]))?;
    cu_check("cuEventSynchronize", cu::cuEventSynchronize(res.ev[2]))?;
    let elapsed = |e: cu::CUevent| -> Result<f64, String> {
        let mut ms = 0f32;
        cu_check(
            "cuEventElapsedTime",
            cu::cuEventElapsedTime_v2(&mut ms, res.ev[0], e),
        )?;
        Ok(f64::from(ms) * 1e-3)
    };
    let o = OverlapPoint {
        gemm_alone,
        ar_alone,
        n_gemm,
        n_ar,
        gemm_loop: elapsed(res.ev[1])?,
        ar_loop: elapsed(res.ev[2])?,
    };
    let (fc, fm) = overlap_factors(&o);
    say(&format!(
        "overlap: gemm {:.3} ms alone, all_reduce 256 MiB {:.3} ms alone; {n_gemm} gemms and {n_ar} all-reduces together: {:.3} / {:.3} ms; slowdown compute {fc:.3}, comm {fm:.3}",
        gemm_alone * 1e3,
        ar_alone * 1e3,
        o.gemm_loop * 1e3,
        o.ar_loop * 1e3
    ));
    out.overlap = Some(o);
    shared.barrier.wait();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points from known lines fit back to those lines.
    #[test]
    fn fit_recovers_known_lines() {
        let truth = [
            Line {
                base_us: 6.0,
                step_us: 0.6,
                bus_gbps: 40.0,
            },
            Line {
                base_us: 9.0,
                step_us: 1.9,
                bus_gbps: 250.0,
            },
            Line {
                base_us: 20.0,
                step_us: 3.4,
                bus_gbps: 350.0,
            },
        ];
        for n in [2u64, 8] {
            let pts: Vec<(u64, f64)> = COLL_SIZES
                .iter()
                .map(|&b| (b, model_us("all_reduce", &truth, b, n)))
                .collect();
            let fit = fit_family("all_reduce", &pts, n).unwrap();
            for &(b, us) in &pts {
                let got = model_us("all_reduce", &fit, b, n);
                assert!((got - us).abs() / us < 0.02, "n {n} {b} B: {got} vs {us}");
            }
            assert!((fit[2].bus_gbps - 350.0).abs() / 350.0 < 0.02, "{fit:?}");
        }
        assert!(fit_family("all_reduce", &[], 2).is_none());
        assert!(fit_family("all_reduce", &[(4096, 10.0)], 1).is_none());
    }

    /// The overlap factors invert the simulator's rate model.
    #[test]
    fn overlap_factors_invert_the_rate_model() {
        // GEMMs of 1 ms × 10 and all-reduces of 1 ms × 8, factors 1.25 (compute), 1.5 (comm):
        // together, the all-reduces end at 12 ms (8 × 1.5) having done 9.6 ms of GEMM work
        // (12 / 1.25); the last 0.4 ms of GEMM runs alone: the GEMM loop ends at 12.4 ms.
        let o = OverlapPoint {
            gemm_alone: 1e-3,
            ar_alone: 1e-3,
            n_gemm: 10,
            n_ar: 8,
            gemm_loop: 12.4e-3,
            ar_loop: 12e-3,
        };
        let (c, m) = overlap_factors(&o);
        assert!((c - 1.25).abs() < 1e-9, "{c}");
        assert!((m - 1.5).abs() < 1e-9, "{m}");
        // No interference: factors 1.
        let o = OverlapPoint {
            gemm_loop: 10e-3,
            ar_loop: 8e-3,
            ..o
        };
        assert_eq!(overlap_factors(&o), (1.0, 1.0));
    }

    #[test]
    fn date_is_iso() {
        let d = utc_date();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"), "{d}");
    }
}
