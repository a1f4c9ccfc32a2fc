//! `strip-debuginfo`: replaces every location (ops and block arguments) with `loc(unknown)`.

use commlir_ir::pass::{Anchor, Pass, PassEnv, PassInfo};
use commlir_ir::{Context, Diagnostic, OpId};

commlir_ir::register_pass!(
    /// The `strip-debuginfo` pass.
    pub STRIP_DEBUGINFO = PassInfo {
        argument: "strip-debuginfo",
        name: "StripDebugInfo",
        summary: "Strip debug info from all operations",
        description: "Sets the location of every op and block argument to `loc(unknown)`.",
        anchor: Anchor::Any,
        options: &[],
        statistics: &[],
        create: |_| Ok(Box::new(StripDebugInfo)),
    }
);

/// The `strip-debuginfo` pass instance (stateless).
pub struct StripDebugInfo;

/// Sets every location under `root` (included) to unknown.
pub fn strip_debuginfo(ctx: &mut Context, root: OpId) {
    let mut ops = Vec::new();
    ctx.walk(root, |op| ops.push(op));
    let unknown = ctx.unknown_loc();
    for op in ops {
        ctx.set_op_loc(op, unknown);
        let blocks: Vec<_> = ctx
            .op_regions(op)
            .iter()
            .flat_map(|&r| ctx.region_blocks(r).to_vec())
            .collect();
        for b in blocks {
            let args = ctx.block_args(b).to_vec();
            for a in args {
                if ctx.value_loc(a).is_some() {
                    ctx.set_value_loc(a, unknown);
                }
            }
        }
    }
}

impl Pass for StripDebugInfo {
    fn info(&self) -> &'static PassInfo {
        &STRIP_DEBUGINFO
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        _env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        strip_debuginfo(ctx, op);
        Ok(())
    }
}
