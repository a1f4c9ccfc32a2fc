//! The simulated schedule as a picture (`commlir-opt --comm-timeline=FILE.json|FILE.svg`).
//!
//! [`build`] runs the two-stream simulator ([`super::timeline::schedule`]) on every function
//! and keeps what a timeline shows, as owned data (no IR borrowed, so that the chunks of a
//! `--split-input-file` run can be gathered): each op's interval on its stream, the compute
//! stream's stalls on collectives (exposed communication) and the memory curve. Two writers
//! read it: [`to_chrome_json`] (Chrome's Trace Event Format, for Perfetto and
//! chrome://tracing) and [`super::svg::to_svg`] (a static picture).
//!
//! Conventions, shared with `commlir-run --trace` (the measured run) so that both read alike:
//! one process per (function, rank), named `@func rank R`, with the threads `compute` (tid 1),
//! `comm` (tid 2) and, here only, `exposed comm` (tid 3); timestamps in microseconds from the
//! function's start; collectives named `OP @group SIZE`, with `op`, `group` and `bytes` in
//! `args`.
//!
//! The simulated program is SPMD: every rank runs the same schedule. The trace nevertheless
//! has one process per rank of the largest group (at most [`MAX_RANKS`]), so that it lines up
//! rank by rank with a measured trace.

use super::buffers::BufferModel;
use super::cost::{coll_kind, collective_bytes, symm_algo, Machine};
use super::timeline::{schedule, Lane, SimEvent};
use commlir_ir::trace_events::{self, Args, Event};
use commlir_ir::{Context, OpId};

/// The most ranks drawn per function: beyond it the identical processes only make the file
/// larger (the SPMD simulation has no rank-specific behavior to show).
pub const MAX_RANKS: u32 = 8;

/// The timelines of a module (or of the chunks of a split input).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimelineView {
    pub functions: Vec<FunctionView>,
}

/// One function's simulated schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionView {
    pub name: String,
    /// Ranks shown: the largest group's size, at least 1, at most [`MAX_RANKS`].
    pub ranks: u32,
    pub makespan_ns: f64,
    pub exposed_comm_ns: f64,
    pub peak_memory_bytes: u64,
    /// Ops that take time, in program order.
    pub spans: Vec<Span>,
    /// Intervals where the compute stream waited for communication.
    pub exposed: Vec<Exposed>,
    /// (time in ns, bytes live) samples, in time order; the last one at the makespan.
    pub memory: Vec<(f64, u64)>,
}

/// One op on one stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// The op's label: its name, and for a collective `@group` and the size.
    pub label: String,
    /// The op's name.
    pub op: String,
    /// Position of the op in the function body.
    pub index: usize,
    pub lane: Lane,
    pub start_ns: f64,
    pub end_ns: f64,
    /// For a collective: its group and bytes (nccl-tests' message size).
    pub collective: Option<(String, u64)>,
    /// The part of the op the compute stream waited for.
    pub exposed_ns: f64,
}

/// The compute stream stalled on a collective.
#[derive(Clone, Debug, PartialEq)]
pub struct Exposed {
    /// The label of the collective waited for.
    pub label: String,
    pub start_ns: f64,
    pub end_ns: f64,
}

/// `bytes` for people: `512 B`, `4 KiB`, `1.5 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The largest `coll.group` size of `module` (1 without groups), capped at [`MAX_RANKS`].
fn ranks_of(ctx: &Context, module: OpId) -> u32 {
    let mut n = 1i64;
    ctx.walk(module, |op| {
        if ctx.op_name(op) == "coll.group" {
            if let Some(s) = ctx
                .inherent_attr(op, "size")
                .and_then(|a| ctx.attr_as_i64(a))
            {
                n = n.max(s);
            }
        }
    });
    n.clamp(1, i64::from(MAX_RANKS)) as u32
}

/// Whether `op` is a collective, by the cost model's names (functional, comm-buffer and
/// `symm` forms; the fused `symm` ops are `symm.*` too).
fn is_collective(ctx: &Context, op: OpId) -> bool {
    let name = ctx.op_name(op);
    coll_kind(name).is_some() || symm_algo(name).is_some() || name.starts_with("symm.")
}

/// Builds the timeline of every function of `module` on `machine`.
pub fn build(ctx: &Context, machine: &Machine, module: OpId) -> TimelineView {
    let ranks = ranks_of(ctx, module);
    let mut funcs = Vec::new();
    ctx.walk(module, |op| {
        if ctx.op_name(op) == "func.func" {
            funcs.push(op);
        }
    });
    let mut functions = Vec::new();
    for f in funcs {
        let Some(&r) = ctx.op_regions(f).first() else {
            continue;
        };
        let Some(&body) = ctx.region_blocks(r).first() else {
            continue;
        };
        let sched = schedule(ctx, machine, body);
        let label = |op: OpId| -> (String, Option<(String, u64)>) {
            let name = ctx.op_name(op).to_string();
            if !is_collective(ctx, op) {
                return (name, None);
            }
            let group = ctx
                .inherent_attr(op, "group")
                .and_then(|a| ctx.attr_as_symbol(a))
                .unwrap_or("")
                .to_string();
            let bytes = collective_bytes(ctx, op);
            let label = if group.is_empty() {
                format!("{name} {}", human_bytes(bytes))
            } else {
                format!("{name} @{group} {}", human_bytes(bytes))
            };
            (label, Some((group, bytes)))
        };
        let mut spans = Vec::new();
        let mut exposed = Vec::new();
        // When each op was issued (program order; the host issues in order, so the time is
        // the latest start so far): the memory model is in program order, and its curve is
        // drawn at these times so that its peak is the report's.
        let mut issued = Vec::new();
        let mut clock = 0.0f64;
        for e in &sched.events {
            match *e {
                SimEvent::Op {
                    op,
                    lane,
                    start_ns,
                    end_ns,
                    exposed_ns,
                } => {
                    clock = clock.max(start_ns);
                    issued.push(clock);
                    if lane == Lane::None || (end_ns <= start_ns && !is_collective(ctx, op)) {
                        continue;
                    }
                    let (l, coll) = label(op);
                    if lane == Lane::Compute && exposed_ns > 0.0 {
                        // A collective run by the compute stream (`symm.*`): all of it is
                        // exposed, or for a fused op its unhidden part, which the pipeline
                        // pays before its first matmul (gather) or after its last one
                        // (reduce-scatter).
                        let e = exposed_ns.min(end_ns - start_ns);
                        let (s, t) = if ctx.op_name(op).contains("reduce_scatter") {
                            (end_ns - e, end_ns)
                        } else {
                            (start_ns, start_ns + e)
                        };
                        exposed.push(Exposed {
                            label: l.clone(),
                            start_ns: s,
                            end_ns: t,
                        });
                    }
                    spans.push(Span {
                        label: l,
                        op: ctx.op_name(op).to_string(),
                        index: issued.len() - 1,
                        lane,
                        start_ns,
                        end_ns,
                        collective: coll,
                        exposed_ns,
                    });
                }
                SimEvent::Stall {
                    collective,
                    start_ns,
                    end_ns,
                } => exposed.push(Exposed {
                    label: label(collective).0,
                    start_ns,
                    end_ns,
                }),
            }
        }
        exposed.sort_by(|a, b| a.start_ns.total_cmp(&b.start_ns));
        let profile = BufferModel::new(ctx, body).profile();
        let makespan_ns = sched.timeline.makespan_ns;
        let mut memory: Vec<(f64, u64)> = vec![(0.0, profile.base)];
        for (p, &bytes) in profile.post_alloc.iter().enumerate() {
            let t = issued.get(p).copied().unwrap_or(makespan_ns);
            match memory.last_mut() {
                // Ops issued at one instant: keep the highest level (the peak must show).
                Some(last) if last.0 == t => last.1 = last.1.max(bytes),
                _ => memory.push((t, bytes)),
            }
        }
        let end = profile.post_free.last().copied().unwrap_or(profile.base);
        match memory.last_mut() {
            Some(last) if last.0 >= makespan_ns => last.1 = last.1.max(end),
            _ => memory.push((makespan_ns, end)),
        }
        functions.push(FunctionView {
            name: ctx.symbol_name(f).unwrap_or("").to_string(),
            ranks,
            makespan_ns,
            exposed_comm_ns: sched.timeline.exposed_comm_ns,
            peak_memory_bytes: profile.peak,
            spans,
            exposed,
            memory,
        });
    }
    TimelineView { functions }
}

/// Thread ids of the tracks of a process.
const TID_COMPUTE: u32 = 1;
const TID_COMM: u32 = 2;
const TID_EXPOSED: u32 = 3;

/// Microseconds (the format's unit) from nanoseconds, rounded to the picosecond so that
/// float noise does not show in the file.
fn us(ns: f64) -> f64 {
    (ns * 1000.0).round() / 1e6
}

/// Nanoseconds rounded to the picosecond, for `args`.
fn round_ns(ns: f64) -> f64 {
    (ns * 1000.0).round() / 1000.0
}

/// The view as Chrome trace events (`{"traceEvents": [...], "displayTimeUnit": "ns"}`).
pub fn to_chrome_json(view: &TimelineView) -> String {
    let mut events = Vec::new();
    let mut pid = 0u64;
    for f in &view.functions {
        for rank in 0..f.ranks {
            pid += 1;
            events.extend(trace_events::process_meta(
                pid,
                &format!("@{} rank {rank} (simulated)", f.name),
                &[
                    (TID_COMPUTE, "compute"),
                    (TID_COMM, "comm"),
                    (TID_EXPOSED, "exposed comm"),
                ],
            ));
            for s in &f.spans {
                let mut args = Args::new().with("op", s.op.as_str()).with("index", s.index);
                if let Some((group, bytes)) = &s.collective {
                    args.set("group", group.as_str());
                    args.set("bytes", *bytes);
                    args.set("exposed_ns", round_ns(s.exposed_ns));
                }
                let (cat, tid) = match (s.lane, s.collective.is_some()) {
                    (Lane::Comm, _) => ("comm", TID_COMM),
                    (_, true) => ("comm", TID_COMPUTE),
                    _ => ("compute", TID_COMPUTE),
                };
                events.push(
                    Event {
                        name: &s.label,
                        cat: Some(cat),
                        ph: "X",
                        ts: us(s.start_ns),
                        dur: Some(us(s.end_ns - s.start_ns)),
                        pid,
                        tid,
                        cname: None,
                        args: Some(args),
                    }
                    .to_json(),
                );
            }
            for x in &f.exposed {
                events.push(
                    Event {
                        name: &x.label,
                        cat: Some("exposed"),
                        ph: "X",
                        ts: us(x.start_ns),
                        dur: Some(us(x.end_ns - x.start_ns)),
                        pid,
                        tid: TID_EXPOSED,
                        // A reserved color name of the trace viewers: red.
                        cname: Some("terrible"),
                        args: Some(Args::new().with("exposed_ns", round_ns(x.end_ns - x.start_ns))),
                    }
                    .to_json(),
                );
            }
            for &(t, bytes) in &f.memory {
                events.push(
                    Event {
                        name: "memory",
                        cat: None,
                        ph: "C",
                        ts: us(t),
                        dur: None,
                        pid,
                        tid: 0,
                        cname: None,
                        args: Some(Args::new().with("bytes", bytes)),
                    }
                    .to_json(),
                );
            }
        }
    }
    trace_events::write_trace(&events)
}
