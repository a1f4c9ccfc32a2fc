//! [`Module`]: a context, the `builtin.module` in it and the source text it came from, as one
//! value. Every diagnostic it returns is rendered against that text (the offending line and a
//! caret), the way `commlir-opt` prints it.
//!
//! ```rust
//! let mut module = commlir::Module::parse("tp.mlir", r#"
//! coll.group @tp {size = 2 : i64, symm_mem}
//! func.func @f(%x: tensor<8x1024xbf16>) -> tensor<8x1024xbf16> {
//!   %h = compute.gelu %x : tensor<8x1024xbf16>
//!   %r = coll.all_reduce %h {reduce_op = "sum", group = @tp} : tensor<8x1024xbf16>
//!   %y = coll.wait_tensor %r : tensor<8x1024xbf16>
//!   return %y : tensor<8x1024xbf16>
//! }
//! "#)?;
//! module.run_pipeline("builtin.module(func.func(coll-to-comm{one-shot-threshold=0}))")?;
//! let out = module.print();
//! // gelu now writes straight into a symmetric-memory comm buffer, and the all-reduce
//! // runs in place on it between a start and a wait.
//! assert!(out.contains("compute.gelu %arg0 : (tensor<8x1024xbf16>) -> tensor<8x1024xbf16, #comm.buffer<symm_mem, @tp>>"), "{out}");
//! assert!(out.contains("comm.all_reduce"), "{out}");
//! assert!(out.contains("comm.wait"), "{out}");
//! # Ok::<(), commlir::Diagnostics>(())
//! ```

use crate::diagnostics::Diagnostics;
use crate::pipeline::Pipeline;
use crate::report::{comm_report, Report};
use commlir_ir::printer::PrintOptions;
use commlir_ir::{Context, OpId, SourceFile, SourceMgr};
use std::path::Path;

/// A parsed or built module with its context and source text.
pub struct Module {
    ctx: Context,
    op: OpId,
    sources: SourceMgr,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Module({:?}, {:?})", self.op, self.ctx)
    }
}

impl Module {
    /// Parses and verifies `text`, named `name` in locations and diagnostics.
    pub fn parse(name: &str, text: &str) -> Result<Module, Diagnostics> {
        let mut sources = SourceMgr::default();
        sources.add(SourceFile::new(name, text));
        let mut ctx = Context::new();
        let op = crate::text::parse_with_sources(&mut ctx, name, text.as_bytes(), &sources)?;
        Ok(Module { ctx, op, sources })
    }

    /// Reads, parses and verifies the file at `path`.
    pub fn parse_file(path: impl AsRef<Path>) -> Result<Module, Diagnostics> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            let msg = format!("could not open input file '{}': {e}", path.display());
            Diagnostics::message(msg.clone(), format!("error: {msg}\n"))
        })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Wraps a module built in `ctx` (no source text: diagnostics show positions only).
    pub fn from_parts(ctx: Context, op: OpId) -> Module {
        Module {
            ctx,
            op,
            sources: SourceMgr::default(),
        }
    }

    /// The context and the module op back.
    pub fn into_parts(self) -> (Context, OpId) {
        (self.ctx, self.op)
    }

    /// The `builtin.module` op.
    pub fn op(&self) -> OpId {
        self.op
    }

    /// The context owning the IR.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The context, for building and rewriting (e.g. with a [`Builder`](crate::Builder)).
    pub fn context_mut(&mut self) -> &mut Context {
        &mut self.ctx
    }

    /// The source files diagnostics are rendered against.
    pub fn sources(&self) -> &SourceMgr {
        &self.sources
    }

    /// The module in the custom form.
    pub fn print(&self) -> String {
        crate::text::print(&self.ctx, self.op)
    }

    /// The module in MLIR's generic form.
    pub fn print_generic(&self) -> String {
        crate::text::print_generic(&self.ctx, self.op)
    }

    /// The module printed with explicit options.
    pub fn print_with(&self, options: &PrintOptions) -> String {
        crate::text::print_with(&self.ctx, self.op, options)
    }

    /// Verifies the module (after edits made through [`Module::context_mut`]).
    pub fn verify(&self) -> Result<(), Diagnostics> {
        commlir_ir::verify::verify(&self.ctx, self.op)
            .map_err(|ds| Diagnostics::new(&self.ctx, &self.sources, &ds))
    }

    /// Runs `pipeline` on the module (see [`Pipeline::run`]).
    pub fn run(&mut self, pipeline: &mut Pipeline) -> Result<Diagnostics, Diagnostics> {
        pipeline.run_with_sources(&mut self.ctx, self.op, &self.sources)
    }

    /// Parses a textual pipeline and runs it on the module.
    pub fn run_pipeline(&mut self, pipeline: &str) -> Result<Diagnostics, Diagnostics> {
        self.run(&mut Pipeline::parse(pipeline)?)
    }

    /// The communication report of the module as it is now (see [`crate::report`]).
    pub fn report(&self) -> Report {
        comm_report(&self.ctx, self.op)
    }
}
