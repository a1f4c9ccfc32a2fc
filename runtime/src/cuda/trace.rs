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
use serde::Serialize;

/// One trace event, with the Trace Event Format's field names (fixed field order: the same
/// times give byte-identical files).
#[derive(Serialize)]
struct Event<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'a str>,
    ph: &'a str,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: usize,
    tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<serde_json::Value>,
}

/// Microseconds from seconds, rounded to the picosecond (no float noise in the file).
fn us(seconds: f64) -> f64 {
    (seconds * 1e12).round() / 1e6
}

/// The trace of `entry`'s measured ops, per rank (`(global rank, ops in program order)`):
/// `{"traceEvents": [...], "displayTimeUnit": "ns"}`, one event per line.
pub fn chrome_trace(entry: &str, ranks: &[(usize, Vec<OpTime>)]) -> String {
    use serde_json::json;
    let mut events: Vec<String> = Vec::new();
    let mut push = |e: &Event| events.push(serde_json::to_string(e).unwrap_or_default());
    for (rank, ops) in ranks {
        // pid 0 means "no process" to some viewers.
        let pid = rank + 1;
        let meta = |name: &'static str, tid: u32, args: serde_json::Value| Event {
            name,
            cat: None,
            ph: "M",
            ts: 0.0,
            dur: None,
            pid,
            tid,
            args: Some(args),
        };
        push(&meta(
            "process_name",
            0,
            json!({ "name": format!("@{entry} rank {rank} (measured)") }),
        ));
        push(&meta("process_sort_index", 0, json!({ "sort_index": pid })));
        for (tid, name) in [(1u32, "compute"), (2, "comm")] {
            push(&meta("thread_name", tid, json!({ "name": name })));
            push(&meta(
                "thread_sort_index",
                tid,
                json!({ "sort_index": tid }),
            ));
        }
        // Where the next op of each stream may start, for ops without a measured start.
        let mut free = [0.0f64; 2];
        for (index, o) in ops.iter().enumerate() {
            let comm = o.stream == abi::STREAM_COMM;
            let lane = usize::from(comm);
            let start = o.start_seconds.unwrap_or(free[lane]);
            free[lane] = free[lane].max(start + o.seconds);
            let mut args = json!({ "index": index, "measured_us": us(o.seconds) });
            if o.bytes > 0 {
                args["bytes"] = json!(o.bytes);
            }
            if o.bus_factor > 0.0 && o.seconds > 0.0 {
                let alg = o.bytes as f64 / o.seconds / 1e9;
                args["algbw_gbps"] = json!((alg * 100.0).round() / 100.0);
                args["busbw_gbps"] = json!((alg * o.bus_factor * 100.0).round() / 100.0);
            }
            if o.start_seconds.is_none() {
                args["start"] = json!("laid out in program order (not measured)");
            }
            push(&Event {
                name: &o.label,
                cat: Some(if comm { "comm" } else { "compute" }),
                ph: "X",
                ts: us(start),
                dur: Some(us(o.seconds)),
                pid,
                tid: if comm { 2 } else { 1 },
                args: Some(args),
            });
        }
    }
    let mut out = String::from("{\"traceEvents\": [\n");
    for (i, e) in events.iter().enumerate() {
        out.push_str(e);
        out.push_str(if i + 1 < events.len() { ",\n" } else { "\n" });
    }
    out.push_str("],\n\"displayTimeUnit\": \"ns\"}\n");
    out
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
}
