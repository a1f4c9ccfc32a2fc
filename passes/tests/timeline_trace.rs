//! `--comm-timeline`'s writers: the Chrome trace events carry the Trace Event Format's
//! required fields and agree with the report (collectives, exposed time, peak memory,
//! makespan), `symm` and fused ops show on the compute stream with their exposed part, both
//! outputs are deterministic, and the SVG renders with a real renderer (`rsvg-convert`).

mod common;

use commlir_ir::Context;
use commlir_passes::analysis::cost::H200_NVLINK;
use commlir_passes::analysis::{report, svg, trace};
use serde_json::Value;

const FSDP: &str = include_str!("../../examples/fsdp_layer.mlir");

/// A blocking `symm` all-reduce, a fused all-gather-matmul and an NCCL all-reduce whose wait
/// comes after independent compute.
const SYMM: &str = r#"
coll.group @tp {size = 4 : i64, symm_mem}
func.func @symm(%x: tensor<1024x1024xbf16>, %a: tensor<1024x4096xbf16>, %b: tensor<4096x4096xbf16>) -> (tensor<1024x1024xbf16>, tensor<4096x4096xbf16>, tensor<1024x1024xbf16>) {
  %r = symm.two_shot_all_reduce %x {reduce_op = "sum", group = @tp} : tensor<1024x1024xbf16>
  %f = symm.fused_all_gather_matmul %a, %b {group = @tp, gather_dim = 0 : i64} : (tensor<1024x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<4096x4096xbf16>
  %c = coll.all_reduce %r {reduce_op = "sum", group = @tp} : tensor<1024x1024xbf16>
  %m = compute.matmul %r, %r : (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16>
  %w = coll.wait_tensor %c : tensor<1024x1024xbf16>
  return %w, %f, %m : tensor<1024x1024xbf16>, tensor<4096x4096xbf16>, tensor<1024x1024xbf16>
}
"#;

fn view_of(text: &str, pipeline: &str) -> (trace::TimelineView, report::Report) {
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, text);
    if !pipeline.is_empty() {
        common::run_pipeline(&mut ctx, m, pipeline, text);
    }
    (
        trace::build(&ctx, &H200_NVLINK, m),
        report::build(&ctx, &H200_NVLINK, m),
    )
}

/// Parses the trace and checks every event against the format's required fields.
fn events(json: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(json).expect("the trace is JSON");
    assert_eq!(v["displayTimeUnit"], "ns");
    let evs = v["traceEvents"].as_array().expect("traceEvents").clone();
    assert!(!evs.is_empty());
    for e in &evs {
        assert!(e["name"].is_string(), "name: {e}");
        let ph = e["ph"].as_str().expect("ph");
        assert!(e["ts"].as_f64().is_some_and(|t| t >= 0.0), "ts: {e}");
        assert!(e["pid"].is_u64(), "pid: {e}");
        assert!(e["tid"].is_u64(), "tid: {e}");
        match ph {
            "X" => assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "dur: {e}"),
            "C" => {
                let args = e["args"].as_object().expect("counter args");
                assert!(
                    !args.is_empty() && args.values().all(Value::is_number),
                    "{e}"
                );
            }
            "M" => assert!(e["args"].is_object(), "metadata args: {e}"),
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    evs
}

fn on(evs: &[Value], pid: u64, tid: u64) -> Vec<&Value> {
    evs.iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["tid"] == tid)
        .collect()
}

const SCHEDULE: &str = "builtin.module(func.func(coll-to-comm,comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools))";

#[test]
fn fsdp_trace_matches_the_report() {
    for pipeline in ["", "builtin.module(func.func(coll-to-comm))", SCHEDULE] {
        let (view, rep) = view_of(FSDP, pipeline);
        let evs = events(&trace::to_chrome_json(&view));
        let f = &rep.functions[0];
        // One process per rank of @dp (size 2), named, with named threads.
        for (pid, rank) in [(1u64, 0), (2, 1)] {
            let name = format!("@fsdp_layer rank {rank} (simulated)");
            assert!(evs.iter().any(|e| e["pid"] == pid
                && e["name"] == "process_name"
                && e["args"]["name"] == name));
        }
        assert!(!evs.iter().any(|e| e["pid"] == 3));
        for t in ["compute", "comm", "exposed comm"] {
            assert!(evs
                .iter()
                .any(|e| e["name"] == "thread_name" && e["args"]["name"] == t));
        }
        // Collectives: op, group and bytes, as in the report, on the comm stream (after
        // lowering) or in the report's order.
        let colls: Vec<&Value> = evs
            .iter()
            .filter(|e| e["pid"] == 1 && e["ph"] == "X" && e["cat"] == "comm")
            .collect();
        assert_eq!(colls.len(), f.collectives.len(), "{pipeline}");
        for (e, c) in colls.iter().zip(&f.collectives) {
            assert_eq!(e["args"]["op"], c.op.as_str());
            assert_eq!(e["args"]["group"], c.group.as_str());
            assert_eq!(e["args"]["bytes"], c.bytes);
            let name = e["name"].as_str().unwrap_or("");
            assert!(name.starts_with(&c.op) && name.contains("@dp") && name.ends_with("MiB"));
        }
        // Exposed time: the exposed track adds up to the report's.
        let exposed: f64 = on(&evs, 1, 3)
            .iter()
            .map(|e| e["dur"].as_f64().unwrap_or(0.0))
            .sum();
        assert!(
            (exposed * 1e3 - f.exposed_comm_ns).abs() < 1.0,
            "{pipeline}"
        );
        assert!(exposed > 0.0);
        // The memory counter peaks at the report's peak; the makespan is the last end.
        let peak = evs
            .iter()
            .filter(|e| e["ph"] == "C" && e["pid"] == 1)
            .filter_map(|e| e["args"]["bytes"].as_u64())
            .max();
        assert_eq!(peak, Some(f.peak_memory_bytes));
        let end = evs
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| e["ts"].as_f64().unwrap_or(0.0) + e["dur"].as_f64().unwrap_or(0.0))
            .fold(0.0, f64::max);
        assert!((end * 1e3 - f.makespan_ns).abs() < 1.0);
    }
}

#[test]
fn symm_and_fused_ops_block_the_compute_stream() {
    let (view, rep) = view_of(SYMM, "");
    let evs = events(&trace::to_chrome_json(&view));
    let f = &rep.functions[0];
    // Four ranks of @tp.
    assert!(evs.iter().any(|e| e["pid"] == 4) && !evs.iter().any(|e| e["pid"] == 5));
    let compute = on(&evs, 1, 1);
    let exposed = on(&evs, 1, 3);
    for op in ["symm.two_shot_all_reduce", "symm.fused_all_gather_matmul"] {
        let e = compute
            .iter()
            .find(|e| e["args"]["op"] == op)
            .unwrap_or_else(|| panic!("{op} on the compute stream"));
        assert_eq!(e["cat"], "comm");
        assert_eq!(e["args"]["group"], "tp");
        let c = f.collectives.iter().find(|c| c.op == op).expect("reported");
        assert_eq!(e["args"]["bytes"], c.bytes);
        // Its exposed part is on the exposed track, inside the op.
        let x = exposed
            .iter()
            .find(|x| x["name"] == e["name"])
            .unwrap_or_else(|| panic!("{op} exposed"));
        let (ts, dur) = (
            e["ts"].as_f64().unwrap_or(0.0),
            e["dur"].as_f64().unwrap_or(0.0),
        );
        let (xts, xdur) = (
            x["ts"].as_f64().unwrap_or(0.0),
            x["dur"].as_f64().unwrap_or(0.0),
        );
        assert!(xts >= ts - 1e-6 && xts + xdur <= ts + dur + 1e-6);
        assert!((xdur * 1e3 - c.exposed_ns).abs() < 1.0, "{op}");
    }
    // The fused op hides part of its communication; the blocking all-reduce none.
    let fused = f
        .collectives
        .iter()
        .find(|c| c.op == "symm.fused_all_gather_matmul")
        .expect("fused");
    assert!(fused.exposed_ns > 0.0 && fused.exposed_ns < fused.comm_ns);
    // The NCCL all-reduce is on the comm stream.
    assert!(on(&evs, 1, 2)
        .iter()
        .any(|e| e["args"]["op"] == "coll.all_reduce"));
}

#[test]
fn outputs_are_deterministic() {
    let (a, _) = view_of(FSDP, SCHEDULE);
    let (b, _) = view_of(FSDP, SCHEDULE);
    assert_eq!(trace::to_chrome_json(&a), trace::to_chrome_json(&b));
    assert_eq!(svg::to_svg(&a), svg::to_svg(&b));
    // An empty module gives valid, empty outputs.
    let (e, _) = view_of("module {}", "");
    let v: Value = serde_json::from_str(&trace::to_chrome_json(&e)).expect("JSON");
    assert_eq!(v["traceEvents"].as_array().map(Vec::len), Some(0));
    assert!(svg::to_svg(&e).contains("no functions"));
}

/// Renders `svg` with rsvg-convert; `None` when the tool is not installed.
fn render(svg: &str, name: &str) -> Option<Vec<u8>> {
    let dir = std::env::temp_dir().join(format!("commlir-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (input, output) = (
        dir.join(format!("{name}.svg")),
        dir.join(format!("{name}.png")),
    );
    std::fs::write(&input, svg).expect("write svg");
    let status = match std::process::Command::new("rsvg-convert")
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .status()
    {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("rsvg-convert: {e}"),
    };
    assert!(
        status.success(),
        "rsvg-convert failed on {}",
        input.display()
    );
    let png = std::fs::read(&output).expect("rsvg-convert wrote a PNG");
    let _ = std::fs::remove_dir_all(&dir);
    Some(png)
}

#[test]
fn svg_renders_with_rsvg_convert() {
    for (name, text, pipeline) in [
        (
            "fsdp_before",
            FSDP,
            "builtin.module(func.func(coll-to-comm))",
        ),
        ("fsdp_after", FSDP, SCHEDULE),
        ("symm", SYMM, ""),
    ] {
        let (view, _) = view_of(text, pipeline);
        let s = svg::to_svg(&view);
        assert!(s.starts_with("<svg ") && s.ends_with("</svg>\n"));
        // Collectives are labeled, exposed time and memory drawn.
        assert!(s.contains("exposed"));
        assert!(s.contains("<polyline"));
        match render(&s, name) {
            Some(png) => assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: not a PNG"),
            None => {
                eprintln!("skipped: rsvg-convert not found (`make setup` installs librsvg2-bin)");
                return;
            }
        }
    }
}
