//! `--profile=FILE`: the run's per-op times in the profile format of
//! `commlir_passes::analysis::profile`, modelled (sim backend) or measured (cuda backend).

use commlir_ir::{Context, Diagnostic, OpId};
use commlir_passes::analysis::{machine, profile};
use commlir_runtime::{cuda::op_profile::MeasuredOp, sim};

/// The cost model's profile of the entry function of `module` on the program's machine;
/// `render` shows a diagnostic.
pub fn modelled(
    ctx: &Context,
    module: OpId,
    entry: Option<&str>,
    render: impl Fn(&Diagnostic) -> String,
) -> Result<String, String> {
    let func = sim::find_entry(ctx, module, entry).map_err(|e| format!("error: {e}\n"))?;
    let m = machine::for_op(ctx, module, None).map_err(|d| render(&d))?;
    Ok(profile::modelled(ctx, &m, func).to_json())
}

/// The measured profile of `entry`: one entry per timed call, indexed within its kind.
pub fn measured(entry: &str, device: &str, ops: &[MeasuredOp]) -> profile::Profile {
    let mut counts: std::collections::BTreeMap<&str, u64> = Default::default();
    let entries = ops
        .iter()
        .map(|o| {
            let n = counts.entry(o.kind.as_str()).or_insert(0);
            let e = profile::Entry {
                func: entry.to_string(),
                kind: o.kind.clone(),
                index: *n,
                loc: None,
                what: Some(o.label.clone()),
                // ns, rounded to the picosecond (no float noise in the file).
                ns: (o.seconds * 1e12).round() / 1e3,
            };
            *n += 1;
            e
        })
        .collect();
    profile::Profile {
        version: profile::VERSION,
        source: format!("measured by commlir-run --backend cuda: {}", device.trim()),
        entries,
    }
}
