//! The simulated schedule as a static SVG picture (`commlir-opt --comm-timeline=FILE.svg`),
//! for docs and terminals: per function, a time axis, then per rank a compute lane and a comm
//! lane (collectives labeled where the box has room, every box with a hover title), the
//! compute stream's stalls on communication in red, and the memory curve below.
//!
//! The picture is plain SVG 1.1 (rectangles, lines, one polyline per curve, text in a
//! monospace font), 960 pixels wide, and deterministic: coordinates are printed with one
//! decimal, and nothing depends on the clock or on hash order.

use super::timeline::Lane;
use super::trace::{human_bytes, FunctionView, TimelineView};
use std::fmt::Write;

const WIDTH: f64 = 960.0;
/// Left margin (lane names) and right margin.
const LEFT: f64 = 110.0;
const RIGHT: f64 = 20.0;
const LANE_H: f64 = 18.0;
const LANE_GAP: f64 = 4.0;
const RANK_GAP: f64 = 10.0;
const MEM_H: f64 = 70.0;
/// Pixels per character of the 10 px monospace font, for fitting labels in boxes.
const CHAR_W: f64 = 6.1;

const COMPUTE_FILL: &str = "#4e79a7";
const COMM_FILL: &str = "#f28e2b";
const SYMM_FILL: &str = "#b07aa1";
const EXPOSED_FILL: &str = "#e15759";
const MEMORY_STROKE: &str = "#59a14f";

/// Escapes text for SVG content and attributes.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A time for people: `850 ns`, `12.3 us`, `4.56 ms`.
fn human_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}

/// A round tick step giving about `n` ticks over `span`.
fn tick_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Height of one function's section.
fn section_height(f: &FunctionView) -> f64 {
    let lanes = f64::from(f.ranks) * (2.0 * (LANE_H + LANE_GAP) + RANK_GAP);
    // Title, axis, lanes, memory curve and its caption.
    34.0 + lanes + MEM_H + 30.0
}

/// The whole picture: the functions one below the other, each on its own time scale.
pub fn to_svg(view: &TimelineView) -> String {
    let height: f64 = 10.0 + view.functions.iter().map(section_height).sum::<f64>();
    let height = height.max(40.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH:.0}" height="{height:.0}" viewBox="0 0 {WIDTH:.0} {height:.0}" font-family="monospace" font-size="10">"#
    );
    let _ = writeln!(
        s,
        r##"<rect x="0" y="0" width="{WIDTH:.0}" height="{height:.0}" fill="#ffffff"/>"##
    );
    if view.functions.is_empty() {
        let _ = writeln!(s, r#"<text x="10" y="24">no functions</text>"#);
    }
    let mut y = 10.0;
    for f in &view.functions {
        draw_function(&mut s, f, y);
        y += section_height(f);
    }
    s.push_str("</svg>\n");
    s
}

fn draw_function(s: &mut String, f: &FunctionView, top: f64) {
    let plot_w = WIDTH - LEFT - RIGHT;
    let span = if f.makespan_ns > 0.0 {
        f.makespan_ns
    } else {
        1.0
    };
    let x = |ns: f64| LEFT + (ns / span).clamp(0.0, 1.0) * plot_w;
    let _ = writeln!(
        s,
        r#"<text x="10" y="{:.1}" font-size="12" font-weight="bold">@{} (simulated): makespan {}, exposed comm {}, peak memory {}</text>"#,
        top + 12.0,
        esc(&f.name),
        human_ns(f.makespan_ns),
        human_ns(f.exposed_comm_ns),
        human_bytes(f.peak_memory_bytes)
    );
    // Time axis with round ticks.
    let axis_y = top + 28.0;
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT:.1}" y1="{axis_y:.1}" x2="{:.1}" y2="{axis_y:.1}" stroke="#999999"/>"##,
        LEFT + plot_w
    );
    let step = tick_step(span, 8.0);
    let mut t = 0.0;
    while t <= span * (1.0 + 1e-9) {
        let tx = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.1}" y1="{:.1}" x2="{tx:.1}" y2="{axis_y:.1}" stroke="#999999"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle" fill="#555555">{}</text>"##,
            axis_y - 3.0,
            axis_y - 5.0,
            human_ns(t)
        );
        t += step;
    }
    let mut y = axis_y + 6.0;
    for rank in 0..f.ranks {
        for (lane, name) in [(Lane::Compute, "compute"), (Lane::Comm, "comm")] {
            let _ = writeln!(
                s,
                r##"<text x="10" y="{:.1}">rank {rank} {name}</text><rect x="{LEFT:.1}" y="{y:.1}" width="{plot_w:.1}" height="{LANE_H:.1}" fill="#f4f4f4"/>"##,
                y + LANE_H - 5.0
            );
            for sp in f.spans.iter().filter(|sp| sp.lane == lane) {
                let (x0, x1) = (x(sp.start_ns), x(sp.end_ns));
                // Keep very short ops visible as hairlines.
                let w = (x1 - x0).max(0.6);
                let fill = match (lane, sp.collective.is_some()) {
                    (Lane::Comm, _) => COMM_FILL,
                    (_, true) => SYMM_FILL,
                    _ => COMPUTE_FILL,
                };
                let _ = writeln!(
                    s,
                    r##"<rect x="{x0:.1}" y="{y:.1}" width="{w:.1}" height="{LANE_H:.1}" fill="{fill}" stroke="#ffffff" stroke-width="0.5"><title>{} [{} .. {}]</title></rect>"##,
                    esc(&sp.label),
                    human_ns(sp.start_ns),
                    human_ns(sp.end_ns)
                );
            }
            if lane == Lane::Compute {
                // Stalls and compute-stream collectives, over the compute lane.
                for e in &f.exposed {
                    let (x0, x1) = (x(e.start_ns), x(e.end_ns));
                    let _ = writeln!(
                        s,
                        r#"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{LANE_H:.1}" fill="{EXPOSED_FILL}" fill-opacity="0.75"><title>exposed: {} ({})</title></rect>"#,
                        (x1 - x0).max(0.6),
                        esc(&e.label),
                        human_ns(e.end_ns - e.start_ns)
                    );
                }
            }
            // Collectives are labeled where the label fits (without the dialect prefix),
            // over the stalls drawn above.
            for sp in f
                .spans
                .iter()
                .filter(|sp| sp.lane == lane && sp.collective.is_some())
            {
                let (x0, x1) = (x(sp.start_ns), x(sp.end_ns));
                let short = sp.label.split_once('.').map_or(&*sp.label, |(_, r)| r);
                if (short.len() as f64) * CHAR_W + 4.0 <= x1 - x0 {
                    let _ = writeln!(
                        s,
                        r##"<text x="{:.1}" y="{:.1}" fill="#ffffff">{}</text>"##,
                        x0 + 2.0,
                        y + LANE_H - 5.0,
                        esc(short)
                    );
                }
            }
            y += LANE_H + LANE_GAP;
        }
        y += RANK_GAP;
    }
    draw_memory(s, f, y, &x);
}

/// The memory curve: a step line from 0 to the peak, with the peak written at its left.
fn draw_memory(s: &mut String, f: &FunctionView, top: f64, x: &dyn Fn(f64) -> f64) {
    let plot_w = WIDTH - LEFT - RIGHT;
    let base = top + MEM_H;
    let peak = f.peak_memory_bytes.max(1) as f64;
    let yv = |b: u64| base - (b as f64 / peak).min(1.0) * (MEM_H - 4.0);
    let _ = writeln!(
        s,
        r##"<text x="10" y="{:.1}">memory</text><text x="10" y="{:.1}" fill="#555555">peak {}</text><rect x="{LEFT:.1}" y="{top:.1}" width="{plot_w:.1}" height="{MEM_H:.1}" fill="#fafafa" stroke="#dddddd"/>"##,
        top + 12.0,
        top + 24.0,
        human_bytes(f.peak_memory_bytes)
    );
    let mut points = String::new();
    let mut last: Option<u64> = None;
    for &(t, b) in &f.memory {
        if let Some(prev) = last {
            let _ = write!(points, "{:.1},{:.1} ", x(t), yv(prev));
        }
        let _ = write!(points, "{:.1},{:.1} ", x(t), yv(b));
        last = Some(b);
    }
    let _ = writeln!(
        s,
        r#"<polyline points="{}" fill="none" stroke="{MEMORY_STROKE}" stroke-width="1.5"/>"#,
        points.trim_end()
    );
    let _ = writeln!(
        s,
        r##"<text x="{LEFT:.1}" y="{:.1}" fill="#555555"><tspan fill="{COMPUTE_FILL}">&#9632;</tspan> compute  <tspan fill="{COMM_FILL}">&#9632;</tspan> comm  <tspan fill="{SYMM_FILL}">&#9632;</tspan> symm/fused on compute  <tspan fill="{EXPOSED_FILL}">&#9632;</tspan> exposed comm  <tspan fill="{MEMORY_STROKE}">&#9472;</tspan> memory</text>"##,
        base + 16.0
    );
}
