//! The communication report (`commlir-opt --comm-report=FILE`): per function, peak memory,
//! compute/comm/exposed time and makespan from the timeline simulator, each collective, and
//! the comm-buffer pools. Valid at every IR level (functional collectives, comm buffers,
//! planned pools).

use super::buffers::BufferModel;
use super::cost::{collective_bytes, Machine};
use super::timeline::simulate;
use commlir_ir::{Context, OpId};
use serde::Serialize;
use std::collections::BTreeMap;

/// The whole report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    pub functions: Vec<FunctionReport>,
}

/// One function.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FunctionReport {
    pub name: String,
    pub peak_memory_bytes: u64,
    pub compute_ns: f64,
    pub comm_ns: f64,
    pub exposed_comm_ns: f64,
    pub makespan_ns: f64,
    pub collectives: Vec<CollectiveReport>,
    pub pools: Vec<PoolReport>,
}

/// One collective.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CollectiveReport {
    pub op: String,
    pub group: String,
    pub bytes: u64,
    pub comm_ns: f64,
    pub exposed_ns: f64,
    pub start_ns: f64,
    pub end_ns: f64,
}

/// One comm-buffer pool (per kind and group).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PoolReport {
    pub kind: String,
    pub group: String,
    /// Planned pool size; before planning, the sum of the buffers (no reuse).
    pub bytes: u64,
    /// The largest total size of the pool's buffers live at one time.
    pub lower_bound_bytes: u64,
    pub buffers: u64,
    /// Whether `comm-plan-pools` planned this pool.
    pub planned: bool,
}

/// Builds the report for every function of `module`.
pub fn build(ctx: &Context, machine: &Machine, module: OpId) -> Report {
    let mut functions = Vec::new();
    let mut funcs = Vec::new();
    ctx.walk(module, |op| {
        if ctx.op_name(op) == "func.func" {
            funcs.push(op);
        }
    });
    for f in funcs {
        let Some(&r) = ctx.op_regions(f).first() else { continue };
        let Some(&body) = ctx.region_blocks(r).first() else { continue };
        let model = BufferModel::new(ctx, body);
        let tl = simulate(ctx, machine, body);
        let collectives = tl
            .collectives
            .iter()
            .map(|c| CollectiveReport {
                op: ctx.op_name(c.op).to_string(),
                group: ctx.inherent_attr(c.op, "group").and_then(|a| ctx.attr_as_symbol(a)).unwrap_or("").to_string(),
                bytes: collective_bytes(ctx, c.op),
                comm_ns: c.end_ns - c.start_ns,
                exposed_ns: c.exposed_ns,
                start_ns: c.start_ns,
                end_ns: c.end_ns,
            })
            .collect();
        functions.push(FunctionReport {
            name: ctx.symbol_name(f).unwrap_or("").to_string(),
            peak_memory_bytes: model.profile().peak,
            compute_ns: tl.compute_ns,
            comm_ns: tl.comm_ns,
            exposed_comm_ns: tl.exposed_comm_ns,
            makespan_ns: tl.makespan_ns,
            collectives,
            pools: pools(ctx, f, &model),
        });
    }
    Report { functions }
}

/// Pools of a function: planned sizes come from the `comm.pools` attribute the planner
/// writes (`[[kind, group, bytes], ...]` as strings/integers); lower bounds from liveness.
fn pools(ctx: &Context, func: OpId, model: &BufferModel) -> Vec<PoolReport> {
    let mut by_pool: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, s) in model.storages.iter().enumerate() {
        if let Some(enc) = &s.comm {
            by_pool.entry((enc.kind_str().to_string(), enc.group.clone())).or_default().push(i);
        }
    }
    let planned = planned_pools(ctx, func);
    by_pool
        .into_iter()
        .map(|((kind, group), ids)| {
            let lower_bound = max_live(model, &ids);
            let naive: u64 = ids.iter().map(|i| model.storages[*i].size).sum();
            let plan = planned.get(&(kind.clone(), group.clone())).copied();
            PoolReport {
                bytes: plan.unwrap_or(naive),
                lower_bound_bytes: lower_bound,
                buffers: ids.len() as u64,
                planned: plan.is_some(),
                kind,
                group,
            }
        })
        .collect()
}

/// The largest total size of the given storages live at one time (a storage is live from
/// its definition through its last use, inclusive; arguments from entry).
pub fn max_live(model: &BufferModel, ids: &[usize]) -> u64 {
    let mut events: Vec<(usize, i8, u64)> = Vec::new();
    for &i in ids {
        let s = &model.storages[i];
        let start = s.def.unwrap_or(0);
        let end = if s.escapes { usize::MAX } else { s.last_use.unwrap_or(start) };
        events.push((start, 0, s.size));
        if end != usize::MAX {
            events.push((end, 1, s.size));
        }
    }
    // Allocations at a position happen before the frees after it.
    events.sort();
    let (mut cur, mut best) = (0u64, 0u64);
    for (_, kind, size) in events {
        if kind == 0 {
            cur += size;
            best = best.max(cur);
        } else {
            cur -= size;
        }
    }
    best
}

fn planned_pools(ctx: &Context, func: OpId) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    let Some(a) = ctx.get_attr(func, "comm.pools") else { return out };
    let commlir_ir::AttrKind::Array(items) = ctx.attr_kind(a) else { return out };
    for it in items {
        let commlir_ir::AttrKind::Dict(entries) = ctx.attr_kind(*it) else { continue };
        let get = |k: &str| entries.iter().find(|(n, _)| ctx.ident_str(*n) == k).map(|(_, v)| *v);
        let kind = get("kind").and_then(|v| ctx.attr_as_str(v)).unwrap_or("");
        let group = get("group").and_then(|v| ctx.attr_as_symbol(v).or_else(|| ctx.attr_as_str(v))).unwrap_or("");
        let bytes = get("bytes").and_then(|v| ctx.attr_as_i64(v)).unwrap_or(0);
        out.insert((kind.to_string(), group.to_string()), bytes.max(0) as u64);
    }
    out
}

impl Report {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}
