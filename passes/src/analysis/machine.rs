//! Machine descriptions as data: the file format of a [`Machine`], the built-in entries, and
//! how a pass or an analysis picks one (`machine=NAME|PATH`, else the module's
//! `commlir.machine` attribute, else [`DEFAULT`]).
//!
//! A machine file is JSON (serde_json is already a dependency of this crate and of the
//! runtime that writes calibrated files, and reports errors with line and column): one object
//! whose keys are the fields of [`Machine`] plus `base` (a built-in name or a path, relative to
//! the file, whose values fill the keys this file leaves out), `source` (where the numbers come
//! from) and `sources` (a citation per key). Unknown keys are errors; a key missing with no
//! base to inherit it from is an error. `docs/cost-model.md` documents every key.

use super::cost::{Machine, ProtoParams, Protocol};
use commlir_ir::pass::{OptionDef, OptionKind};
use commlir_ir::{Context, Diagnostic, OpId};
use serde::{Deserialize, Deserializer, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The machine every pass and analysis uses unless told otherwise.
pub const DEFAULT: &str = "h200x2-nvlink";

/// The module attribute naming the machine of a program.
pub const MODULE_ATTR: &str = "commlir.machine";

/// The built-in machines: name and file text, embedded from `passes/machines/`.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "h200x2-nvlink",
        include_str!("../../machines/h200x2-nvlink.json"),
    ),
    (
        "h100x2-nvlink",
        include_str!("../../machines/h100x2-nvlink.json"),
    ),
    (
        "h100x8-nvlink",
        include_str!("../../machines/h100x8-nvlink.json"),
    ),
    (
        "h200x8-nvlink",
        include_str!("../../machines/h200x8-nvlink.json"),
    ),
    (
        "h200x4-nvlink",
        include_str!("../../machines/h200x4-nvlink.json"),
    ),
    (
        "h100x8x4-ib400",
        include_str!("../../machines/h100x8x4-ib400.json"),
    ),
];

/// One protocol's line, as written in a file.
#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ProtoEntry {
    base_us: f64,
    step_us: f64,
    bus_gbps: f64,
}

/// A protocol table: the three NCCL protocols by name.
#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ProtoTable {
    #[serde(rename = "LL")]
    ll: ProtoEntry,
    #[serde(rename = "LL128")]
    ll128: ProtoEntry,
    #[serde(rename = "Simple")]
    simple: ProtoEntry,
}

impl ProtoTable {
    fn to_params(self) -> [ProtoParams; 3] {
        let p = |protocol, e: ProtoEntry| ProtoParams {
            protocol,
            base_us: e.base_us,
            step_us: e.step_us,
            bus_gbps: e.bus_gbps,
        };
        [
            p(Protocol::LL, self.ll),
            p(Protocol::LL128, self.ll128),
            p(Protocol::Simple, self.simple),
        ]
    }

    fn from_params(p: &[ProtoParams; 3]) -> ProtoTable {
        let e = |p: &ProtoParams| ProtoEntry {
            base_us: p.base_us,
            step_us: p.step_us,
            bus_gbps: p.bus_gbps,
        };
        ProtoTable {
            ll: e(&p[0]),
            ll128: e(&p[1]),
            simple: e(&p[2]),
        }
    }
}

/// `Option<Option<T>>` that tells an absent key (outer `None`: inherit) from `null` (inner
/// `None`: explicitly none).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Declares the file struct from the list of scalar keys, so that a key is named once for
/// parsing, inheriting, writing and the missing-key check.
macro_rules! machine_file {
    (f64: [$($f:ident),* $(,)?], u64: [$($u:ident),* $(,)?]) => {
        /// A machine file as written: every key optional (a base may fill it).
        #[derive(Debug, Default, Deserialize, Serialize)]
        #[serde(deny_unknown_fields)]
        pub struct MachineFile {
            #[serde(skip_serializing_if = "Option::is_none")]
            name: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            base: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            source: Option<String>,
            #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
            sources: BTreeMap<String, String>,
            $(
                #[serde(skip_serializing_if = "Option::is_none")]
                $u: Option<u64>,
            )*
            #[serde(skip_serializing_if = "Option::is_none")]
            all_reduce: Option<ProtoTable>,
            #[serde(skip_serializing_if = "Option::is_none")]
            all_gather: Option<ProtoTable>,
            #[serde(skip_serializing_if = "Option::is_none")]
            reduce_scatter: Option<ProtoTable>,
            #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
            inter_node: Option<Option<ProtoTable>>,
            $(
                #[serde(skip_serializing_if = "Option::is_none")]
                $f: Option<f64>,
            )*
        }

        /// Every key a file may hold, in the order [`to_json`] writes them.
        pub const KEYS: &[&str] = &[
            "name", "base", "source", "sources", $(stringify!($u),)*
            "all_reduce", "all_gather", "reduce_scatter", "inter_node", $(stringify!($f),)*
        ];

        impl MachineFile {
            /// The machine these keys describe over `base`; `Err(key)` names the first key
            /// neither gives.
            fn resolve(&self, base: Option<&Machine>) -> Result<Machine, &'static str> {
                let name = match (&self.name, base) {
                    (Some(n), _) => n.clone(),
                    (None, Some(b)) => b.name.to_string(),
                    (None, None) => return Err("name"),
                };
                let source = match (&self.source, base) {
                    (Some(s), _) => s.clone(),
                    (None, Some(b)) => b.source.to_string(),
                    (None, None) => return Err("source"),
                };
                let table = |t: &Option<ProtoTable>, from: Option<[ProtoParams; 3]>, key| {
                    t.map(ProtoTable::to_params).or(from).ok_or(key)
                };
                Ok(Machine {
                    name: Cow::Owned(name),
                    source: Cow::Owned(source),
                    $(
                        $u: match (self.$u, base) {
                            (Some(v), _) => v,
                            (None, Some(b)) => b.$u,
                            (None, None) => return Err(stringify!($u)),
                        },
                    )*
                    all_reduce: table(&self.all_reduce, base.map(|b| b.all_reduce), "all_reduce")?,
                    all_gather: table(&self.all_gather, base.map(|b| b.all_gather), "all_gather")?,
                    // Without its own table, a file's reduce-scatter is its all-gather (the
                    // one table files had before), else the base's reduce-scatter.
                    reduce_scatter: table(
                        &self.reduce_scatter.or(self.all_gather),
                        base.map(|b| b.reduce_scatter),
                        "all_gather",
                    )?,
                    inter_node: match (&self.inter_node, base) {
                        (Some(t), _) => t.map(ProtoTable::to_params),
                        (None, Some(b)) => b.inter_node,
                        (None, None) => None,
                    },
                    $(
                        $f: match (self.$f, base) {
                            (Some(v), _) => v,
                            (None, Some(b)) => b.$f,
                            (None, None) => return Err(stringify!($f)),
                        },
                    )*
                })
            }

            /// Every key of `m`, no base.
            fn of(m: &Machine) -> MachineFile {
                MachineFile {
                    name: Some(m.name.to_string()),
                    base: None,
                    source: Some(m.source.to_string()),
                    sources: BTreeMap::new(),
                    $($u: Some(m.$u),)*
                    all_reduce: Some(ProtoTable::from_params(&m.all_reduce)),
                    all_gather: Some(ProtoTable::from_params(&m.all_gather)),
                    reduce_scatter: Some(ProtoTable::from_params(&m.reduce_scatter)),
                    inter_node: Some(m.inter_node.as_ref().map(ProtoTable::from_params)),
                    $($f: Some(m.$f),)*
                }
            }
        }

        /// The scalar fields of `m` as (key, value), for validation.
        fn scalars(m: &Machine) -> Vec<(&'static str, f64)> {
            vec![$((stringify!($u), m.$u as f64),)* $((stringify!($f), m.$f),)*]
        }
    };
}

machine_file!(
    f64: [
        tree_bw_factor,
        matmul_flops_bf16,
        matmul_flops_f32,
        matmul_flops_f64,
        vector_flops,
        mem_bw,
        launch_ns,
        symm_launch_us,
        symm_barrier_us,
        symm_push_us,
        symm_read_gbps,
        symm_rw_gbps,
        symm_ll_us,
        symm_ll_gbps,
        chunk_half_rows,
        chunk_min_efficiency,
        chunk_step_ns,
        chunk_gather_slowdown,
        chunk_scatter_slowdown,
        chunk_accumulate_slowdown,
        overlap_compute_slowdown,
        overlap_comm_slowdown,
    ],
    u64: [nodes, gpus_per_node]
);

/// Line and column (1-based) of the first `"key"` in `text`, else 1:1.
fn locate(text: &str, key: &str) -> (usize, usize) {
    let needle = format!("\"{key}\"");
    let Some(at) = text.find(&needle) else {
        return (1, 1);
    };
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Parses the machine file `text` (named `file` in diagnostics); `base` resolves a `base`
/// key (a built-in name or a path; see [`load_from`]). Errors are
/// `file:line:col: error: message` lines.
pub fn parse(
    file: &str,
    text: &str,
    base: &mut dyn FnMut(&str) -> Result<Machine, String>,
) -> Result<Machine, String> {
    let at = |key: &str, msg: String| {
        let (l, c) = locate(text, key);
        format!("{file}:{l}:{c}: error: {msg}\n")
    };
    let f: MachineFile = serde_json::from_str(text).map_err(|e| {
        // serde_json's message ends with " at line L column C": the position goes first.
        let msg = e.to_string();
        let msg = msg
            .rsplit_once(" at line ")
            .map_or(msg.as_str(), |(m, _)| m)
            .to_string();
        let (mut line, mut col) = (e.line().max(1), e.column().max(1));
        // serde_json points past an unknown key; point at the key itself, on that line.
        if let Some(key) = msg
            .strip_prefix("unknown field `")
            .and_then(|r| r.split('`').next())
        {
            if let Some(c) = text
                .lines()
                .nth(line - 1)
                .and_then(|l| l.find(&format!("\"{key}\"")))
            {
                col = text
                    .lines()
                    .nth(line - 1)
                    .map_or(0, |l| l[..c].chars().count())
                    + 1;
            } else {
                (line, col) = locate(text, key);
            }
        }
        format!("{file}:{line}:{col}: error: {msg}\n")
    })?;
    for k in f.sources.keys() {
        if !KEYS.contains(&k.as_str()) || k == "sources" {
            return Err(at(
                k,
                format!("'sources' cites '{k}', which is not a key of a machine file"),
            ));
        }
    }
    let base_machine = match &f.base {
        Some(b) => Some(base(b).map_err(|e| at("base", format!("base '{b}': {}", e.trim_end())))?),
        None => None,
    };
    let m = f.resolve(base_machine.as_ref()).map_err(|key| {
        format!(
            "{file}:1:1: error: missing key '{key}' (give it, or a 'base' machine to inherit it from)\n"
        )
    })?;
    validate(&m).map_err(|(key, msg)| at(key, msg))?;
    Ok(m)
}

/// Checks the values make a usable model: rates positive, factors in range, counts ≥ 1, a
/// machine of several nodes with its inter-node table.
fn validate(m: &Machine) -> Result<(), (&'static str, String)> {
    for (key, v) in scalars(m) {
        if !v.is_finite() || v < 0.0 {
            return Err((key, format!("'{key}' must be a finite number ≥ 0, got {v}")));
        }
    }
    for (key, v) in [
        ("matmul_flops_bf16", m.matmul_flops_bf16),
        ("matmul_flops_f32", m.matmul_flops_f32),
        ("matmul_flops_f64", m.matmul_flops_f64),
        ("vector_flops", m.vector_flops),
        ("mem_bw", m.mem_bw),
        ("symm_read_gbps", m.symm_read_gbps),
        ("symm_rw_gbps", m.symm_rw_gbps),
        ("symm_ll_gbps", m.symm_ll_gbps),
        ("tree_bw_factor", m.tree_bw_factor),
        ("nodes", m.nodes as f64),
        ("gpus_per_node", m.gpus_per_node as f64),
    ] {
        if v <= 0.0 {
            return Err((key, format!("'{key}' must be > 0, got {v}")));
        }
    }
    for (key, v) in [
        ("overlap_compute_slowdown", m.overlap_compute_slowdown),
        ("overlap_comm_slowdown", m.overlap_comm_slowdown),
    ] {
        if v < 1.0 {
            return Err((
                key,
                format!("'{key}' must be ≥ 1 (a slowdown factor), got {v}"),
            ));
        }
    }
    if m.chunk_min_efficiency > 1.0 {
        return Err((
            "chunk_min_efficiency",
            format!(
                "'chunk_min_efficiency' must be ≤ 1, got {}",
                m.chunk_min_efficiency
            ),
        ));
    }
    let tables = [
        ("all_reduce", Some(&m.all_reduce)),
        ("all_gather", Some(&m.all_gather)),
        ("reduce_scatter", Some(&m.reduce_scatter)),
        ("inter_node", m.inter_node.as_ref()),
    ];
    for (key, t) in tables {
        for p in t.into_iter().flatten() {
            let ok = p.base_us.is_finite()
                && p.base_us >= 0.0
                && p.step_us.is_finite()
                && p.step_us >= 0.0
                && p.bus_gbps.is_finite()
                && p.bus_gbps > 0.0;
            if !ok {
                return Err((
                    key,
                    format!(
                        "'{key}' {:?}: base_us and step_us must be ≥ 0 and bus_gbps > 0",
                        p.protocol
                    ),
                ));
            }
        }
    }
    if m.nodes > 1 && m.inter_node.is_none() {
        return Err((
            "nodes",
            format!(
                "a machine of {} nodes needs an 'inter_node' protocol table",
                m.nodes
            ),
        ));
    }
    Ok(())
}

/// The machine file of `m`: every key, pretty-printed, keys in [`KEYS`] order, ending in a
/// newline. [`parse`] reads it back to an equal machine.
pub fn to_json(m: &Machine) -> String {
    let mut s = serde_json::to_string_pretty(&MachineFile::of(m)).expect("a machine serializes");
    s.push('\n');
    s
}

/// Parses the built-in `name`, its bases first (built-ins inherit only from built-ins).
fn parse_builtin(name: &str, depth: usize) -> Result<Machine, String> {
    let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name) else {
        return Err(format!("no built-in machine '{name}'"));
    };
    if depth > MAX_BASE_DEPTH {
        return Err(format!("built-in machine '{name}': too many 'base' links"));
    }
    parse(&format!("<built-in {name}>"), text, &mut |b| {
        parse_builtin(b, depth + 1)
    })
}

/// The built-in machines, parsed once.
fn builtins() -> &'static [Machine] {
    static CELL: OnceLock<Vec<Machine>> = OnceLock::new();
    CELL.get_or_init(|| {
        BUILTIN
            .iter()
            .map(|(name, _)| {
                let m = parse_builtin(name, 0)
                    .unwrap_or_else(|e| panic!("built-in machine {name} is invalid: {e}"));
                assert_eq!(m.name, *name, "a built-in machine file names itself");
                m
            })
            .collect()
    })
}

/// A built-in machine by name.
pub fn builtin(name: &str) -> Option<&'static Machine> {
    builtins().iter().find(|m| m.name == name)
}

/// The default machine ([`DEFAULT`]).
pub fn default_machine() -> &'static Machine {
    builtin(DEFAULT).expect("the default machine is built in")
}

/// The names of the built-in machines, in [`BUILTIN`] order.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|(n, _)| *n)
}

/// The `--list-machines` text: each built-in with its size and source.
pub fn list() -> String {
    let mut out = String::from("Built-in machines (machine=NAME, or a path to a machine file):\n");
    for m in builtins() {
        let default = if m.name == DEFAULT { " (default)" } else { "" };
        out.push_str(&format!(
            "  {}{default}: {} node(s) x {} GPU(s); {}\n",
            m.name, m.nodes, m.gpus_per_node, m.source
        ));
    }
    out
}

/// The most `base` links followed from one file (a cycle stops here).
const MAX_BASE_DEPTH: usize = 8;

/// A machine by `spec`: a built-in name, else a path to a machine file. The error is a
/// diagnostic line naming it.
pub fn load(spec: &str) -> Result<Machine, String> {
    load_from(spec, None, 0)
}

/// [`load`] with a path relative to `dir` (the directory of the file naming it as `base`).
fn load_from(spec: &str, dir: Option<&Path>, depth: usize) -> Result<Machine, String> {
    if let Some(m) = builtin(spec) {
        return Ok(m.clone());
    }
    if depth > MAX_BASE_DEPTH {
        return Err(format!(
            "error: machine '{spec}': more than {MAX_BASE_DEPTH} 'base' links (a cycle?)\n"
        ));
    }
    let path: PathBuf = match dir {
        Some(d) if Path::new(spec).is_relative() => d.join(spec),
        _ => PathBuf::from(spec),
    };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        let names: Vec<&str> = builtin_names().collect();
        format!(
            "error: unknown machine '{spec}': not a built-in ({}) and not a readable file ({e})\n",
            names.join(", ")
        )
    })?;
    let here = path.parent().map(Path::to_path_buf);
    parse(&path.display().to_string(), &text, &mut |b| {
        load_from(b, here.as_deref(), depth + 1)
    })
}

/// The machine a pass or analysis running on `op` uses: `explicit` (its `machine` option)
/// when given, else the `commlir.machine` attribute of the module enclosing `op` (or of `op`
/// itself), else [`DEFAULT`]. An attribute naming no machine is an error at the module.
pub fn for_op<'m>(
    ctx: &Context,
    op: OpId,
    explicit: Option<&'m Machine>,
) -> Result<Cow<'m, Machine>, Diagnostic> {
    if let Some(m) = explicit {
        return Ok(Cow::Borrowed(m));
    }
    let mut cur = Some(op);
    while let Some(o) = cur {
        if let Some(a) = ctx.get_attr(o, MODULE_ATTR) {
            let Some(spec) = ctx.attr_as_str(a) else {
                return Err(Diagnostic::error(
                    ctx.op_loc(o),
                    format!("'{MODULE_ATTR}' must be a string naming a machine"),
                ));
            };
            return match builtin(spec) {
                Some(m) => Ok(Cow::Borrowed(m)),
                None => load(spec).map(Cow::Owned).map_err(|e| {
                    Diagnostic::error(
                        ctx.op_loc(o),
                        format!(
                            "{MODULE_ATTR}: {}",
                            e.trim_end().trim_start_matches("error: ")
                        ),
                    )
                }),
            };
        }
        cur = ctx.parent_op(o);
    }
    Ok(Cow::Borrowed(default_machine()))
}

/// The `machine` option every pass that uses the cost model declares.
pub const MACHINE_OPTION: OptionDef = OptionDef::new(
    "machine",
    OptionKind::String,
    "",
    "Machine description for the cost model: a built-in name or a machine file (default: the module's commlir.machine, else h200x2-nvlink)",
);

/// Reads a pass's `machine` option: `None` when empty (the module attribute or the default
/// decides at run time), else the machine, or the error for the pipeline.
pub fn from_option(value: &str) -> Result<Option<Machine>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    load(value)
        .map(Some)
        .map_err(|e| e.trim_end().trim_start_matches("error: ").to_string())
}

#[cfg(test)]
mod tests {
    use super::super::cost::H200_NVLINK;
    use super::*;

    /// The default built-in is the constant the model always had, field by field.
    #[test]
    fn default_entry_is_the_old_constant() {
        let m = default_machine();
        assert_eq!(m.all_reduce, H200_NVLINK.all_reduce);
        assert_eq!(m.all_gather, H200_NVLINK.all_gather);
        assert_eq!(m.inter_node, H200_NVLINK.inter_node);
        for ((k, a), (_, b)) in scalars(m).into_iter().zip(scalars(&H200_NVLINK)) {
            assert_eq!(a.to_bits(), b.to_bits(), "{k}: {a} vs {b}");
        }
        assert_eq!(m.name, H200_NVLINK.name);
        // The whole struct (the source text too).
        assert_eq!(*m, H200_NVLINK);
    }

    /// A file's reduce-scatter is its own table where it has one, else its all-gather (files
    /// written before the key existed keep their meaning), else the base's.
    #[test]
    fn reduce_scatter_table_falls_back() {
        use super::super::cost::CollKind;
        let mut none =
            |b: &str| -> Result<Machine, String> { builtin(b).cloned().ok_or(format!("no {b}")) };
        let rs = |m: &Machine| m.collective(CollKind::ReduceScatter, 256 << 20, 2).ns;
        let ag = |m: &Machine| m.collective(CollKind::AllGather, 256 << 20, 2).ns;
        let base = default_machine();
        assert_eq!(rs(base), ag(base));
        let slow = r#"{"base": "h200x2-nvlink", "reduce_scatter": {
            "LL": {"base_us": 6.0, "step_us": 0.6, "bus_gbps": 30.0},
            "LL128": {"base_us": 9.0, "step_us": 1.0, "bus_gbps": 150.0},
            "Simple": {"base_us": 21.0, "step_us": 2.0, "bus_gbps": 200.0}}}"#;
        let m = parse("rs.json", slow, &mut none).unwrap();
        assert_eq!(ag(&m), ag(base));
        assert!(rs(&m) > 1.2 * ag(&m), "{} vs {}", rs(&m), ag(&m));
        // A file that sets only all_gather moves both, as before.
        let ag_only = slow.replace("reduce_scatter", "all_gather");
        let m2 = parse("ag.json", &ag_only, &mut none).unwrap();
        assert_eq!(rs(&m2), ag(&m2));
        assert!(ag(&m2) > ag(base));
        // Inheriting from m keeps m's separate table.
        let m3 = parse("m3.json", r#"{"base": "x", "name": "m3"}"#, &mut |_| {
            Ok(m.clone())
        })
        .unwrap();
        assert_eq!(rs(&m3), rs(&m));
    }

    #[test]
    fn every_builtin_round_trips() {
        for m in builtins() {
            let text = to_json(m);
            let back = parse("rt.json", &text, &mut |b| Err(format!("no base {b}"))).unwrap();
            assert_eq!(&back, m);
            assert_eq!(to_json(&back), text, "writing is deterministic");
        }
    }

    #[test]
    fn builtins_are_distinct_and_sized() {
        let names: Vec<&str> = builtin_names().collect();
        assert_eq!(names[0], DEFAULT);
        let h100 = builtin("h100x8-nvlink").unwrap();
        assert_eq!((h100.nodes, h100.gpus_per_node), (1, 8));
        assert!(h100.mem_bw < default_machine().mem_bw);
        let h200x4 = builtin("h200x4-nvlink").unwrap();
        let h200x8 = builtin("h200x8-nvlink").unwrap();
        assert_eq!((h200x4.nodes, h200x4.gpus_per_node), (1, 4));
        assert_eq!(h200x4.mem_bw, h200x8.mem_bw);
        let ib = builtin("h100x8x4-ib400").unwrap();
        assert_eq!((ib.nodes, ib.gpus_per_node), (4, 8));
        assert!(ib.inter_node.is_some());
    }

    fn err(text: &str) -> String {
        parse("m.json", text, &mut |b| match builtin(b) {
            Some(m) => Ok(m.clone()),
            None => Err(format!("no machine '{b}'")),
        })
        .unwrap_err()
    }

    #[test]
    fn unknown_keys_are_errors_with_positions() {
        let e = err("{\n  \"base\": \"h200x2-nvlink\",\n  \"mem_bandwidth\": 1\n}");
        assert!(e.starts_with("m.json:3:"), "{e}");
        assert!(e.contains("unknown field `mem_bandwidth`"), "{e}");
        let e = err("{\n  \"base\": \"h200x2-nvlink\",\n  \"all_reduce\": {\"LL\": {}}\n}");
        assert!(e.starts_with("m.json:3:"), "{e}");
        let e = err("{ \"base\": \"h200x2-nvlink\", \"mem_bw\": \"fast\" }");
        assert!(e.starts_with("m.json:1:"), "{e}");
        assert!(e.contains("invalid type"), "{e}");
    }

    #[test]
    fn missing_keys_and_bad_values() {
        let e = err("{\"name\": \"x\"}");
        assert!(e.contains("missing key 'source'"), "{e}");
        let e = err("{\"base\": \"nope\"}");
        assert!(e.contains("base 'nope'"), "{e}");
        let e = err("{\"base\": \"h200x2-nvlink\",\n \"overlap_comm_slowdown\": 0.5}");
        assert!(e.starts_with("m.json:2:2: error:"), "{e}");
        let e = err("{\"base\": \"h200x2-nvlink\", \"nodes\": 2}");
        assert!(e.contains("inter_node"), "{e}");
        let e = err("{\"base\": \"h200x2-nvlink\", \"sources\": {\"speed\": \"x\"}}");
        assert!(e.contains("'speed'"), "{e}");
    }

    #[test]
    fn inheritance_overrides_only_what_is_given() {
        let m = parse(
            "m.json",
            r#"{"base": "h200x2-nvlink", "name": "mine", "mem_bw": 1e12, "inter_node": null}"#,
            &mut |b| Ok(builtin(b).unwrap().clone()),
        )
        .unwrap();
        assert_eq!(m.name, "mine");
        assert_eq!(m.mem_bw, 1e12);
        assert_eq!(m.all_reduce, H200_NVLINK.all_reduce);
        assert_eq!(m.source, H200_NVLINK.source);
    }

    #[test]
    fn load_reports_unknown_names() {
        let e = load("no-such-machine").unwrap_err();
        assert!(e.contains("unknown machine 'no-such-machine'"), "{e}");
        assert!(e.contains("h100x8-nvlink"), "{e}");
    }
}
