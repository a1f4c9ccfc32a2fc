//! The measured run as Chrome trace events (`commlir-run --backend cuda --bench-iters N
//! --trace=FILE.json`), in the layout of `commlir-opt --comm-timeline=FILE.json` (the
//! simulated schedule), so that the two open side by side in Perfetto: one process per rank,
//! named `@entry rank R (measured)`, with the threads `compute` (tid 1) and `comm` (tid 2),
//! timestamps in microseconds from the start of the call.
//!
//! The times are the per-op pass's means ([`super::rank::OpTime`]): each op's duration between
//! the events recorded around it on its stream, and its start's offset from an event recorded
//! before the call (which both streams wait for). An op without a start offset (the call's
//! start was not recorded) is laid out after the previous op of its stream, in program order:
//! its duration is right, its place is only a lower bound.
//!
//! A pure function over the op times, so that it is tested without a GPU.

use super::abi;
use super::rank::OpTime;
use commlir_ir::trace_events::{self, Args, Event};

/// Microseconds from seconds, rounded to the picosecond (no float noise in the file).
fn us(seconds: f64) -> f64 {
    (seconds * 1e12).round() / 1e6
}

/// The trace of `entry`'s measured ops, per rank (`(global rank, ops in program order)`):
/// `{"traceEvents": [...], "displayTimeUnit": "ns"}`, one event per line.
pub fn chrome_trace(entry: &str, ranks: &[(usize, Vec<OpTime>)]) -> String {
    let mut events: Vec<String> = Vec::new();
    for (rank, ops) in ranks {
        // pid 0 means "no process" to some viewers.
        let pid = *rank as u64 + 1;
        events.extend(trace_events::process_meta(
            pid,
            &format!("@{entry} rank {rank} (measured)"),
            &[(1, "compute"), (2, "comm")],
        ));
        // Where the next op of each stream may start, for ops without a measured start.
        let mut free = [0.0f64; 2];
        for (index, o) in ops.iter().enumerate() {
            let comm = o.stream == abi::STREAM_COMM;
            let lane = usize::from(comm);
            let start = o.start_seconds.unwrap_or(free[lane]);
            free[lane] = free[lane].max(start + o.seconds);
            let mut args = Args::new()
                .with("index", index)
                .with("measured_us", us(o.seconds));
            if o.bytes > 0 {
                args.set("bytes", o.bytes);
            }
            if o.bus_factor > 0.0 && o.seconds > 0.0 {
                let alg = o.bytes as f64 / o.seconds / 1e9;
                args.set("algbw_gbps", (alg * 100.0).round() / 100.0);
                args.set("busbw_gbps", (alg * o.bus_factor * 100.0).round() / 100.0);
            }
            if o.start_seconds.is_none() {
                args.set("start", "laid out in program order (not measured)");
            }
            events.push(
                Event {
                    name: &o.label,
                    cat: Some(if comm { "comm" } else { "compute" }),
                    ph: "X",
                    ts: us(start),
                    dur: Some(us(o.seconds)),
                    pid,
                    tid: if comm { 2 } else { 1 },
                    cname: None,
                    args: Some(args),
                }
                .to_json(),
            );
        }
    }
    trace_events::write_trace(&events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(label: &str, stream: u32, bytes: u64, seconds: f64, start: Option<f64>) -> OpTime {
        OpTime {
            label: label.into(),
            stream,
            bytes,
            bus_factor: if bytes > 0 { 0.5 } else { 0.0 },
            seconds,
            start_seconds: start,
        }
    }

    fn events(trace: &str) -> Vec<serde_json::Value> {
        let v: serde_json::Value = serde_json::from_str(trace).expect("valid JSON");
        assert_eq!(v["displayTimeUnit"], "ns");
        v["traceEvents"].as_array().expect("traceEvents").clone()
    }

    /// Every event has the format's required fields; complete events a duration.
    fn check_required(evs: &[serde_json::Value]) {
        for e in evs {
            for k in ["name", "ph", "ts", "pid", "tid"] {
                assert!(e.get(k).is_some(), "{k} missing in {e}");
            }
            if e["ph"] == "X" {
                assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "dur in {e}");
            }
        }
    }

    #[test]
    fn measured_starts_are_used() {
        let ops = vec![
            op("matmul", abi::STREAM_COMPUTE, 0, 10e-6, Some(1e-6)),
            op(
                "all_gather bf16 count=4 (group of 2)",
                abi::STREAM_COMM,
                1 << 20,
                20e-6,
                Some(2e-6),
            ),
        ];
        let t = chrome_trace("main", &[(0, ops.clone()), (1, ops)]);
        let evs = events(&t);
        check_required(&evs);
        let x: Vec<_> = evs.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 4);
        assert_eq!(x[0]["ts"], 1.0);
        assert_eq!(x[0]["dur"], 10.0);
        assert_eq!(x[0]["tid"], 1);
        assert_eq!(x[1]["ts"], 2.0);
        assert_eq!(x[1]["tid"], 2);
        assert_eq!(x[1]["args"]["bytes"], 1 << 20);
        assert!(x[1]["args"]["busbw_gbps"].as_f64().is_some());
        assert_eq!(x[2]["pid"], 2);
        assert!(t.contains("\"@main rank 1 (measured)\""));
        assert!(t.contains("\"thread_name\""));
    }

    #[test]
    fn durations_only_are_laid_out_per_stream_in_order() {
        let ops = vec![
            op("a", abi::STREAM_COMPUTE, 0, 3e-6, None),
            op("b", abi::STREAM_COMM, 8, 5e-6, None),
            op("c", abi::STREAM_COMPUTE, 0, 2e-6, None),
            op("d", abi::STREAM_COMM, 8, 1e-6, None),
        ];
        let evs = events(&chrome_trace("f", &[(0, ops)]));
        check_required(&evs);
        let ts: Vec<f64> = evs
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| e["ts"].as_f64().unwrap_or(-1.0))
            .collect();
        assert_eq!(ts, [0.0, 0.0, 3.0, 5.0]);
        assert!(evs.iter().any(|e| e["args"]["start"].is_string()));
    }

    #[test]
    fn deterministic_and_empty_safe() {
        let ops = vec![op("x <&\"> y", abi::STREAM_COMPUTE, 0, 1e-6, Some(0.0))];
        let a = chrome_trace("f", &[(0, ops.clone())]);
        assert_eq!(a, chrome_trace("f", &[(0, ops)]));
        // Labels are escaped by the JSON writer.
        assert!(!events(&a).is_empty());
        let empty = chrome_trace("f", &[]);
        assert!(events(&empty).is_empty());
    }

    /// The shared writer (`commlir_ir::trace_events`, no serde) writes numbers as
    /// `serde_json` does, which wrote these files before: random doubles, and ties between
    /// two shortest strings.
    #[test]
    fn numbers_as_serde_json_writes_them() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for i in 0..200000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = if i % 3 == 2 {
                ((x >> 14) as f64 + (i % 4) as f64 / 4.0)
                    * [1.0, 8.0, 0.125, 2048.0][(i % 16 / 4) as usize]
            } else if i % 2 == 0 {
                f64::from_bits(x)
            } else {
                (x % 100000) as f64 / [1e3, 1e6, 1e9, 1e12, 1.0, 1e-3][(i % 6) as usize]
            };
            let mut s = String::new();
            commlir_ir::trace_events::push_f64(&mut s, v);
            assert_eq!(s, serde_json::to_string(&v).unwrap(), "{v:e}");
        }
    }
}
