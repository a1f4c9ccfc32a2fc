//! Differential tests of `comm-apply-profile` on generated programs: a profile with times
//! other than the cost model's (the modelled ones scaled per op) is applied alone and before
//! the scheduling pipeline; the sim results stay bit for bit, and the profile's times do reach
//! the ops as `cost_ns`.

mod common;

use commlir_ir::Context;
use commlir_passes::analysis::machine::default_machine;
use commlir_passes::analysis::profile::modelled;
use commlir_testgen::GenConfig;

#[test]
fn applied_profiles_keep_results_and_set_costs() {
    let dir = std::env::temp_dir().join(format!("commlir-apply-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for seed in 0..12u64 {
        let cfg = GenConfig {
            ranks: if seed % 2 == 0 { 2 } else { 4 },
            ops: 40,
            model_ops: seed % 3 == 0,
            ..GenConfig::default()
        };
        // The profile: every function's modelled times, each scaled by a factor of its own.
        let mut ctx = Context::new();
        let (text, m, before) = common::generated_text(&mut ctx, seed, &cfg);
        let mut funcs = Vec::new();
        ctx.walk(m, |op| {
            if ctx.op_name(op) == "func.func" {
                funcs.push(op);
            }
        });
        let mut profile = modelled(&ctx, default_machine(), funcs[0]);
        for f in &funcs[1..] {
            profile
                .entries
                .extend(modelled(&ctx, default_machine(), *f).entries);
        }
        for (i, e) in profile.entries.iter_mut().enumerate() {
            e.ns = (e.ns * (1.0 + (i % 5) as f64 * 0.75)).round() + 1000.0;
        }
        let path = dir.join(format!("p{seed}.json"));
        std::fs::write(&path, profile.to_json()).unwrap();
        let apply = format!("comm-apply-profile{{file={}}}", path.display());
        for pipe in [
            format!("builtin.module({apply})"),
            format!(
                "builtin.module({apply},func.func(coll-to-comm,comm-overlap-schedule,comm-plan-pools))"
            ),
        ] {
            let mut ctx = Context::new();
            let m = common::parse(&mut ctx, &text);
            common::run_pipeline(&mut ctx, m, &pipe, &text);
            let out = common::print(&ctx, m);
            assert!(
                profile.entries.is_empty() || out.contains("cost_ns = "),
                "seed {seed}, {pipe}: no measured time reached an op\n{out}"
            );
            assert_eq!(
                common::sim(&ctx, m, cfg.ranks, seed),
                before,
                "seed {seed}, {pipe}: results differ\ninput:\n{text}\noutput:\n{out}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
