//! `test-count-ops`: a function pass that changes nothing and counts the ops of each function
//! in a statistic; it exercises implicit nesting on `func.func` and the statistics report.

use commlir_ir::pass::{Anchor, Pass, PassEnv, PassInfo, StatisticDef};
use commlir_ir::{Context, Diagnostic, OpId};

commlir_ir::register_pass!(
    /// The `test-count-ops` pass.
    pub TEST_COUNT_OPS = PassInfo {
        argument: "test-count-ops",
        name: "TestCountOps",
        summary: "Count the operations of each function (for tests)",
        description: "Adds the number of ops nested in each `func.func` (the function itself \
            excluded) to the `num-ops` statistic, and the function to `num-funcs`.",
        anchor: Anchor::FUNC,
        options: &[],
        statistics: &[
            StatisticDef::new("num-funcs", "Number of functions visited"),
            StatisticDef::new("num-ops", "Number of operations in the functions"),
        ],
        create: |_| Ok(Box::new(TestCountOps)),
    }
);

/// The `test-count-ops` pass instance (stateless).
pub struct TestCountOps;

impl Pass for TestCountOps {
    fn info(&self) -> &'static PassInfo {
        &TEST_COUNT_OPS
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let mut n = 0u64;
        ctx.walk(op, |_| n += 1);
        env.add_stat("num-funcs", 1);
        env.add_stat("num-ops", n - 1);
        Ok(())
    }
}
