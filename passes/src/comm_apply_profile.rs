//! `comm-apply-profile`: sets `cost_ns` on the ops a profile measured (`commlir-run
//! --profile=FILE`), so that every later pass and `--comm-report` use the measured times
//! instead of the model's: profile-guided latency estimation. Entries find their ops by the
//! keys of [`crate::analysis::profile`] (function, kind, index among the ops of that kind,
//! location); an entry that finds no op is reported as a warning and applied nowhere.

use crate::analysis::profile::{match_function, Entry, Profile};
use commlir_ir::pass::{
    Anchor, OptionDef, OptionKind, Pass, PassEnv, PassInfo, PassOptions, StatisticDef,
};
use commlir_ir::{Context, Diagnostic, OpId};

commlir_ir::register_pass!(
    /// `comm-apply-profile`.
    pub COMM_APPLY_PROFILE = PassInfo {
        argument: "comm-apply-profile",
        name: "CommApplyProfile",
        summary: "Set cost_ns from a measured profile (commlir-run --profile)",
        description: "Reads a profile written by `commlir-run --profile=FILE` and sets \
            `cost_ns` on every op an entry matches (by function, kind, index among the ops of \
            its kind and location), so that the schedulers and the report use measured times; \
            entries that match no op are reported as warnings.",
        anchor: Anchor::MODULE,
        options: &[OptionDef::new(
            "file",
            OptionKind::String,
            "",
            "The profile (JSON) to apply",
        )],
        statistics: &[
            StatisticDef::new("applied", "Ops given a measured cost_ns"),
            StatisticDef::new("unmatched", "Profile entries that matched no op"),
        ],
        create: |o: &PassOptions| {
            let file = o.get_str("file");
            if file.is_empty() {
                return Err("comm-apply-profile needs file=PATH (a profile from commlir-run --profile)".into());
            }
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read the profile '{file}': {e}"))?;
            Ok(Box::new(ApplyProfile(Profile::parse(file, &text)?)))
        },
    }
);

/// The pass, with its profile read at construction (a bad file fails the pipeline before
/// any input is read).
struct ApplyProfile(Profile);

/// How an entry is named in warnings.
fn describe(e: &Entry) -> String {
    let loc = e
        .loc
        .as_deref()
        .map(|l| format!(" at {l}"))
        .unwrap_or_default();
    format!("{} #{} of @{}{loc}", e.kind, e.index, e.func)
}

/// Applies `profile` to every function under `root`; returns (ops applied, unmatched entries).
pub fn apply_profile(ctx: &mut Context, root: OpId, profile: &Profile) -> (u64, Vec<Entry>) {
    let mut funcs = Vec::new();
    ctx.walk(root, |op| {
        if ctx.op_name(op) == "func.func" {
            funcs.push(op);
        }
    });
    let mut applied = 0;
    let mut unmatched = Vec::new();
    let mut names = Vec::new();
    for f in funcs {
        names.push(ctx.symbol_name(f).unwrap_or_default().to_string());
        let m = match_function(ctx, profile, f);
        for (op, ns) in m.ops {
            // cost_ns is an integer count of ns (DESIGN §3.1).
            let a = ctx.int_attr(ns.round().min(i64::MAX as f64) as i64, 64);
            ctx.set_attr(op, "cost_ns", a);
            // Measured where it ran, beside whatever overlapped it: the timeline's overlap
            // slowdown is already in this time.
            let unit = ctx.unit_attr();
            ctx.set_attr(op, crate::analysis::timeline::COST_MEASURED, unit);
            applied += 1;
        }
        unmatched.extend(m.unmatched);
    }
    // Entries of functions the module does not have.
    unmatched.extend(
        profile
            .entries
            .iter()
            .filter(|e| !names.contains(&e.func))
            .cloned(),
    );
    (applied, unmatched)
}

impl Pass for ApplyProfile {
    fn info(&self) -> &'static PassInfo {
        &COMM_APPLY_PROFILE
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let (applied, unmatched) = apply_profile(ctx, op, &self.0);
        for e in &unmatched {
            env.emit(Diagnostic::warning(
                ctx.op_loc(op),
                format!("profile entry {} matches no op", describe(e)),
            ));
        }
        env.add_stat("applied", applied);
        env.add_stat("unmatched", unmatched.len() as u64);
        if applied == 0 {
            env.mark_unchanged();
        }
        Ok(())
    }
}
