//! Profiles: measured (or modelled) time per op, written by `commlir-run --profile=FILE` and
//! read back by the `comm-apply-profile` pass, which sets `cost_ns` on the ops they match
//! (profile-guided latency estimation, as XLA feeds measured instruction times back into its
//! latency-hiding scheduler).
//!
//! An entry is keyed so that it finds its op again in the program the passes see, which is
//! not the program that ran: the run is of the lowered program (after `coll-to-comm`, the
//! schedulers, the runtime lowering), the passes read the input. The key is
//!
//! - `func`: the function's symbol name;
//! - `kind`: what the op does, independent of the level it is written at ([`kind_of`]):
//!   `coll.all_reduce`, `comm.all_reduce` and `symm.one_shot_all_reduce` are all `all_reduce`,
//!   `compute.matmul` is `matmul`, other ops keep their name;
//! - `index`: the op's position among the ops of its kind in the function body, in program
//!   order (ops of other kinds, such as the allocations and copies a lowering adds, do not
//!   shift it; the schedulers keep the order of the collectives of one group, so collectives
//!   keep their index through scheduling);
//! - `loc`: the op's `file:line:col` location (file name without its directory), when it has
//!   one; locations carry over every rewrite, so where both sides have one it decides.
//!
//! When the program changed since the profile was taken, an entry whose location is gone
//! falls back to its kind and index; an entry that finds no op of its kind at that index is
//! reported, never applied to another op.

use super::cost::{coll_kind, op_cost, symm_algo, CollKind, Machine, OpCost};
use crate::schedule::body_block;
use commlir_ir::{Context, LocKind, OpId};
use serde::{Deserialize, Serialize};

/// The format version [`Profile::version`] carries.
pub const VERSION: u32 = 1;

/// One op's time.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The function's name.
    pub func: String,
    /// The op's kind ([`kind_of`]).
    pub kind: String,
    /// Its position among the ops of its kind in the function body.
    pub index: u64,
    /// Its `file:line:col` location, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loc: Option<String>,
    /// What ran (the op name, or the runtime call), for people reading the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    /// Its time, ns.
    pub ns: f64,
}

/// A profile file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub version: u32,
    /// Where the times come from (the backend and device, or the machine modelled).
    pub source: String,
    pub entries: Vec<Entry>,
}

impl Profile {
    /// The file text: pretty JSON ending in a newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a profile serializes");
        s.push('\n');
        s
    }

    /// Parses a profile (`file` names it in diagnostics: `file:line:col: error: ...`).
    pub fn parse(file: &str, text: &str) -> Result<Profile, String> {
        let p: Profile = serde_json::from_str(text).map_err(|e| {
            let msg = e.to_string();
            let msg = msg
                .rsplit_once(" at line ")
                .map_or(msg.as_str(), |(m, _)| m)
                .to_string();
            format!(
                "{file}:{}:{}: error: {msg}",
                e.line().max(1),
                e.column().max(1)
            )
        })?;
        if p.version != VERSION {
            return Err(format!(
                "{file}:1:1: error: profile version {} (this commlir reads version {VERSION})",
                p.version
            ));
        }
        if let Some(e) = p.entries.iter().find(|e| !e.ns.is_finite() || e.ns < 0.0) {
            return Err(format!(
                "{file}:1:1: error: entry {}#{} of @{} has time {} (must be a finite number ≥ 0)",
                e.kind, e.index, e.func, e.ns
            ));
        }
        Ok(p)
    }
}

/// The kind of an op name, or `None` for ops that take no time of their own (waits, views,
/// allocations, structure).
pub fn kind_of(name: &str) -> Option<String> {
    if let Some(k) = coll_kind(name) {
        return Some(coll_kind_name(k).to_string());
    }
    if symm_algo(name).is_some() {
        // The symm kernels realize the same collectives.
        return Some(
            match name {
                "symm.one_shot_all_reduce" | "symm.two_shot_all_reduce" => "all_reduce",
                "symm.all_gather" => "all_gather",
                _ => "reduce_scatter",
            }
            .to_string(),
        );
    }
    match name {
        "compute.matmul" => Some("matmul".to_string()),
        "symm.fused_all_gather_matmul" | "symm.fused_matmul_reduce_scatter" => {
            Some(name.to_string())
        }
        n if n.starts_with("compute.") => Some(n.to_string()),
        _ => None,
    }
}

/// The name of a collective kind in profiles.
pub fn coll_kind_name(k: CollKind) -> &'static str {
    match k {
        CollKind::AllReduce => "all_reduce",
        CollKind::AllGather => "all_gather",
        CollKind::ReduceScatter => "reduce_scatter",
        CollKind::AllToAll => "all_to_all",
        CollKind::Broadcast => "broadcast",
    }
}

/// An op's `file:line:col` location with the file's directory dropped (the same program run
/// from another directory keeps its keys), or `None` for other locations.
pub fn loc_key(ctx: &Context, op: OpId) -> Option<String> {
    match ctx.loc_kind(ctx.op_loc(op)) {
        LocKind::FileLineCol { file, line, col } => {
            let f = ctx.ident_str(*file);
            let base = f.rsplit(['/', '\\']).next().unwrap_or(f);
            Some(format!("{base}:{line}:{col}"))
        }
        _ => None,
    }
}

/// The key of every op of `func`'s body that has a kind: (op, kind, index, location).
pub fn op_keys(ctx: &Context, func: OpId) -> Vec<(OpId, String, u64, Option<String>)> {
    let Some(body) = body_block(ctx, func) else {
        return Vec::new();
    };
    let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
    let mut out = Vec::new();
    for op in ctx.block_ops(body) {
        let Some(kind) = kind_of(ctx.op_name(op)) else {
            continue;
        };
        let n = counts.entry(kind.clone()).or_insert(0);
        out.push((op, kind, *n, loc_key(ctx, op)));
        *n += 1;
    }
    out
}

/// The profile the cost model predicts for `func` on `machine` (what `commlir-run --backend
/// sim --profile` writes): every op with a kind and a cost.
pub fn modelled(ctx: &Context, machine: &Machine, func: OpId) -> Profile {
    let name = ctx.symbol_name(func).unwrap_or_default().to_string();
    let entries = op_keys(ctx, func)
        .into_iter()
        .filter_map(|(op, kind, index, loc)| {
            let ns = match op_cost(ctx, machine, op) {
                OpCost::Free => return None,
                c => c.ns(),
            };
            Some(Entry {
                func: name.clone(),
                kind,
                index,
                loc,
                what: Some(ctx.op_name(op).to_string()),
                ns,
            })
        })
        .collect();
    Profile {
        version: VERSION,
        source: format!("modelled: the cost model of {}", machine.name),
        entries,
    }
}

/// What matching a profile against a function found.
#[derive(Debug, Default)]
pub struct Matched {
    /// (op, ns) for every entry that found its op.
    pub ops: Vec<(OpId, f64)>,
    /// Entries of this function that found no op.
    pub unmatched: Vec<Entry>,
}

/// Matches the entries of `profile` for `func` against its body: by location where the
/// entry and an op of its kind share one, else by kind and index when the profile has as
/// many entries of that kind as the body has ops. Each op takes at most one entry; entries
/// naming other functions are ignored.
pub fn match_function(ctx: &Context, profile: &Profile, func: OpId) -> Matched {
    let name = ctx.symbol_name(func).unwrap_or_default();
    let keys = op_keys(ctx, func);
    let mut taken = vec![false; keys.len()];
    let mut out = Matched::default();
    // Matching by index is trusted only for kinds with as many entries as ops: otherwise the
    // run had calls the program does not (a fused op's chunked GEMMs) or the program changed,
    // and the i-th entry need not be the i-th op.
    let count = |k: &str, in_profile: bool| -> usize {
        if in_profile {
            profile
                .entries
                .iter()
                .filter(|e| e.func == name && e.kind == k)
                .count()
        } else {
            keys.iter().filter(|(_, kk, _, _)| kk == k).count()
        }
    };
    let mut index_ok: std::collections::BTreeMap<&str, bool> = Default::default();
    for e in profile.entries.iter().filter(|e| e.func == name) {
        let ok = *index_ok
            .entry(e.kind.as_str())
            .or_insert_with(|| count(&e.kind, true) == count(&e.kind, false));
        let by_loc = e.loc.as_ref().and_then(|l| {
            keys.iter().enumerate().position(|(i, (_, k, _, loc))| {
                !taken[i] && *k == e.kind && loc.as_deref() == Some(l.as_str())
            })
        });
        let by_index = || {
            if !ok {
                return None;
            }
            keys.iter()
                .enumerate()
                .position(|(i, (_, k, idx, _))| !taken[i] && *k == e.kind && *idx == e.index)
        };
        match by_loc.or_else(by_index) {
            Some(i) => {
                taken[i] = true;
                out.ops.push((keys[i].0, e.ns));
            }
            None => out.unmatched.push(e.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_level_independent() {
        for n in [
            "coll.all_reduce",
            "comm.all_reduce",
            "symm.one_shot_all_reduce",
            "symm.two_shot_all_reduce",
            "coll.all_reduce_coalesced",
        ] {
            assert_eq!(kind_of(n).as_deref(), Some("all_reduce"), "{n}");
        }
        assert_eq!(kind_of("compute.matmul").as_deref(), Some("matmul"));
        assert_eq!(kind_of("compute.add").as_deref(), Some("compute.add"));
        assert_eq!(kind_of("coll.wait_tensor"), None);
        assert_eq!(kind_of("comm.wait"), None);
    }

    #[test]
    fn parse_checks_the_file() {
        let e = Profile::parse(
            "p.json",
            "{\"version\": 1, \"source\": \"x\", \"entries\": [], \"x\": 1}",
        )
        .unwrap_err();
        assert!(e.starts_with("p.json:1:"), "{e}");
        let e = Profile::parse(
            "p.json",
            "{\"version\": 2, \"source\": \"x\", \"entries\": []}",
        )
        .unwrap_err();
        assert!(e.contains("version 2"), "{e}");
        let p = Profile {
            version: VERSION,
            source: "t".into(),
            entries: vec![Entry {
                func: "f".into(),
                kind: "matmul".into(),
                index: 0,
                loc: Some("a.mlir:3:5".into()),
                what: None,
                ns: 12.5,
            }],
        };
        assert_eq!(Profile::parse("p.json", &p.to_json()).unwrap(), p);
    }
}
