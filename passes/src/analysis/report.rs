//! The communication report (`commlir-opt --comm-report=FILE`): per function, peak memory,
//! compute/comm/exposed time and makespan from the timeline simulator, each collective, and
//! the comm-buffer pools. Valid at every IR level (functional collectives, comm buffers,
//! planned pools).

use super::buffers::BufferModel;
use super::cost::{collective_bytes, Machine};
use super::timeline::simulate;
use crate::pools::liveness;
use crate::pools::packing::{max_live, Interval};
use commlir_dialects::comm::{encoding_kind_str, pool_info};
use commlir_ir::{BlockId, Context, OpId};
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
    /// What each scheduling pass run with `annotate=true` did to this collective (or its
    /// wait): moves, grouped, limit, exposed_before_ns, exposed_after_ns, by pass.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub scheduling: BTreeMap<String, serde_json::Value>,
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
        let Some(&r) = ctx.op_regions(f).first() else {
            continue;
        };
        let Some(&body) = ctx.region_blocks(r).first() else {
            continue;
        };
        let model = BufferModel::new(ctx, body);
        let tl = simulate(ctx, machine, body);
        let collectives = tl
            .collectives
            .iter()
            .map(|c| CollectiveReport {
                op: ctx.op_name(c.op).to_string(),
                group: ctx
                    .inherent_attr(c.op, "group")
                    .and_then(|a| ctx.attr_as_symbol(a))
                    .unwrap_or("")
                    .to_string(),
                bytes: collective_bytes(ctx, c.op),
                comm_ns: c.end_ns - c.start_ns,
                exposed_ns: c.exposed_ns,
                start_ns: c.start_ns,
                end_ns: c.end_ns,
                scheduling: scheduling_records(ctx, c.op),
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
            pools: pools(ctx, f, body),
        });
    }
    Report { functions }
}

/// Pools of a function, one per (kind, group) of its comm buffers. Buffers and lower bounds
/// come from the pool planner's liveness (a buffer stays live through the collectives on it
/// until their waits); the size is the `comm.pool` op's once `comm-plan-pools` ran, else the
/// sum of the buffers (no reuse). Buffers that are function arguments belong to the caller's
/// pools and are not counted.
fn pools(ctx: &Context, func: OpId, body: BlockId) -> Vec<PoolReport> {
    let live = liveness::analyze(ctx, body);
    let mut by_pool: BTreeMap<(String, String), Vec<Interval>> = BTreeMap::new();
    for s in &live.slots {
        let key = (encoding_kind_str(s.kind).to_string(), s.group.clone());
        by_pool.entry(key).or_default().push(Interval {
            start: s.start,
            end: s.end,
            size: s.size,
        });
    }
    let planned = planned_pools(ctx, func);
    by_pool
        .into_iter()
        .map(|((kind, group), items)| {
            let plan = planned.get(&(kind.clone(), group.clone())).copied();
            PoolReport {
                bytes: plan.unwrap_or_else(|| items.iter().map(|i| i.size).sum()),
                lower_bound_bytes: max_live(&items),
                buffers: items.len() as u64,
                planned: plan.is_some(),
                kind,
                group,
            }
        })
        .collect()
}

/// The sizes of the `comm.pool` ops of `func`, by (kind, group).
fn planned_pools(ctx: &Context, func: OpId) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    ctx.walk(func, |op| {
        if let Some(p) = pool_info(ctx, op) {
            out.insert((encoding_kind_str(p.kind).to_string(), p.group), p.size);
        }
    });
    out
}

impl Report {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

/// The `comm.sched.<pass>` records on a collective and on the waits of its work handle.
fn scheduling_records(ctx: &Context, op: OpId) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    let mut ops = vec![op];
    for r in ctx.results(op) {
        ops.extend(ctx.uses(*r).iter().map(|u| u.op));
    }
    for o in ops {
        for (k, v) in ctx.attrs(o) {
            let Some(pass) = ctx.ident_str(*k).strip_prefix("comm.sched.") else {
                continue;
            };
            let commlir_ir::AttrKind::Dict(entries) = ctx.attr_kind(*v) else {
                continue;
            };
            let mut m = serde_json::Map::new();
            for (ek, ev) in entries {
                let val = match (ctx.attr_as_i64(*ev), ctx.attr_as_str(*ev)) {
                    (Some(i), _) => serde_json::Value::from(i),
                    (None, Some(s)) => serde_json::Value::from(s),
                    _ => continue,
                };
                m.insert(ctx.ident_str(*ek).to_string(), val);
            }
            let key = if o == op {
                pass.to_string()
            } else {
                format!("{pass} (wait)")
            };
            out.insert(key, serde_json::Value::Object(m));
        }
    }
    out
}
