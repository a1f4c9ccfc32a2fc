//! `test-options`: a pass that does nothing but record its options, as the module attribute
//! `test.options = "count=3 flag=true list=1,2 name=x"` (the canonical option string), so that
//! lit tests can check how pipelines and flags parse options.

use commlir_ir::pass::{Anchor, OptionDef, OptionKind, Pass, PassEnv, PassInfo, PassOptions};
use commlir_ir::{Context, Diagnostic, OpId};

commlir_ir::register_pass!(
    /// The `test-options` pass.
    pub TEST_OPTIONS = PassInfo {
        argument: "test-options",
        name: "TestOptions",
        summary: "Record the pass options in a module attribute (for tests)",
        description: "Sets `test.options` on the module to the canonical text of the options \
            the pass was given.",
        anchor: Anchor::MODULE,
        options: &[
            OptionDef::bool("flag", false, "A boolean option"),
            OptionDef::new("count", OptionKind::Int, "0", "An integer option"),
            OptionDef::new("name", OptionKind::String, "", "A string option"),
            OptionDef::new("list", OptionKind::IntList, "", "A list of integers"),
        ],
        statistics: &[],
        create: |o| Ok(Box::new(TestOptions { recorded: o.to_option_string() })),
    }
);

/// The `test-options` pass instance: the option text to record.
pub struct TestOptions {
    recorded: String,
}

impl TestOptions {
    /// An instance recording `options`.
    pub fn new(options: &PassOptions) -> Self {
        TestOptions {
            recorded: options.to_option_string(),
        }
    }
}

impl Pass for TestOptions {
    fn info(&self) -> &'static PassInfo {
        &TEST_OPTIONS
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        _env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let a = ctx.str_attr(&self.recorded);
        ctx.set_attr(op, "test.options", a);
        Ok(())
    }
}
