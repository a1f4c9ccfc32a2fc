//! commlir: a compiler for collective communication, as a library.
//!
//! This crate is what an embedder depends on: another compiler, a framework's graph
//! lowering, or a tool of your own that wants commlir's IR, its collective lowering
//! (`coll-to-comm`), its communication scheduling passes and its report, and perhaps a
//! dialect of its own next to commlir's. Everything needed is reachable from here under
//! stable paths; the underlying crates are re-exported too ([`ir`], [`dialects`],
//! [`passes`]) for what the facade does not wrap. The `commlir-opt` binary is a few lines
//! around [`opt_main`]. `docs/embedding.md` walks through the same flow, and
//! `examples/embed/` is a complete embedder crate built on this API alone.
//!
//! # 1. Parse and print
//!
//! [`Module`] bundles a [`Context`] (the arenas that own the IR), the `builtin.module` op
//! and its source text, so that every diagnostic shows the offending line.
//! [`parse_str`] / [`parse_file`] / [`print()`] / [`print_generic`] do the same on a context
//! you own.
//!
//! ```rust
//! let module = commlir::Module::parse("mlp.mlir", r#"
//! coll.group @tp {size = 2 : i64}
//! func.func @mlp(%x: tensor<8x64xf32>, %w: tensor<64x64xf32>) -> tensor<8x64xf32> {
//!   %o = compute.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
//!   %r = coll.all_reduce %o {reduce_op = "sum", group = @tp} : tensor<8x64xf32>
//!   %y = coll.wait_tensor %r : tensor<8x64xf32>
//!   return %y : tensor<8x64xf32>
//! }
//! "#)?;
//! assert!(module.print().contains("%0 = compute.matmul %arg0, %arg1"));
//! assert!(module.print_generic().contains("\"compute.matmul\"(%arg0, %arg1)"));
//!
//! // Parse and verifier errors come back in MLIR's shape, caret included.
//! let err = commlir::Module::parse("bad.mlir", "coll.group @tp {size = 0 : i64}\n").unwrap_err();
//! assert_eq!(err.to_string(), "bad.mlir:1:1: error: 'coll.group' op size must be at least 1, got 0\n\
//!                              coll.group @tp {size = 0 : i64}\n^\n");
//! # Ok::<(), commlir::Diagnostics>(())
//! ```
//!
//! # 2. Build IR
//!
//! A [`Builder`] creates ops by name at an insertion point (MLIR's `OpBuilder`); the
//! [`build`] helpers create the structural ops (module, `coll.group`, `func.func` with its
//! entry block, `func.return`). Types and attributes are interned by the [`Context`]
//! (`ctx.tensor_type`, `ctx.str_attr`, ... or [`parse_type`] / [`parse_attr`] from text).
//!
//! ```rust
//! use commlir::{build, Builder, Context};
//!
//! let mut ctx = Context::new();
//! let module = build::module(&mut ctx);
//! build::group(&mut ctx, module, "dp", 4, false);
//! let f32 = ctx.float_type(commlir::FloatKind::F32);
//! let shard = ctx.tensor_type(&[16, 32], f32);
//! let full = ctx.tensor_type(&[64, 32], f32);
//! let (_f, entry) = build::func(&mut ctx, module, "gather", &[shard], &[full]);
//! let x = ctx.block_args(entry)[0];
//! let mut b = Builder::at_end(&mut ctx, entry);
//! let dp = b.ctx.symbol_ref("dp");
//! let g = b.create_value("coll.all_gather_into_tensor", &[x], full, &[("group", dp)]);
//! let y = b.create_value("coll.wait_tensor", &[g], full, &[]);
//! build::ret(&mut b, &[y]);
//! commlir::verify(&ctx, module)?;
//! assert!(commlir::print(&ctx, module).contains(
//!     "%0 = coll.all_gather_into_tensor %arg0 {group = @dp} : (tensor<16x32xf32>) -> tensor<64x32xf32>"));
//! # Ok::<(), commlir::Diagnostics>(())
//! ```
//!
//! # 3. Define and register a dialect from your crate
//!
//! An op is one `static` [`OpDef`](dialect::OpDef) registered with [`register_op!`]; it is
//! known to every [`Context`] of a binary that links the defining crate (registration goes
//! through `inventory`, no central list). The definition carries everything commlir's
//! generic machinery needs: operand/result/attribute constraints, traits (purity, memory
//! effects, `Collective`, `Blocking`, ...), a verifier, a **cost hook** (the op's runtime
//! estimate, used by the timeline, the report and the scheduling passes; see [`cost`]) and
//! its **comm-buffer operands** (PR #173513's argument registration: `coll-to-comm` realizes
//! each declared operand as a comm buffer of the declared kind, with no per-op code).
//!
//! ```rust
//! use commlir::dialect::*;
//! use commlir::{Context, OpId};
//!
//! commlir::register_dialect!(pub ACME = DialectDef {
//!     name: "acme",
//!     summary: "An embedder's ops",
//!     description: "",
//! });
//!
//! /// Reads every peer's shard of `x` from symmetric memory and sums them (blocking).
//! commlir::register_op!(pub SYMM_SUM = OpDef {
//!     name: "acme.symm_sum",
//!     summary: "Sum of every rank's `x`, read from peers' symmetric memory",
//!     operands: &[ArgDef::one("x", TypeConstraint::StaticTensor)],
//!     results: &[ArgDef::one("y", TypeConstraint::StaticTensor)],
//!     attributes: &[AttrDef::required("group", AttrConstraint::SymbolRef)],
//!     // Memory effects: reads `x` (its peers' copies too), allocates `y`.
//!     traits: &[Trait::Collective, Trait::Blocking, Trait::MemRead, Trait::MemAlloc],
//!     comm_buffer_operands: &[CommBufferOperand {
//!         operand: "x", kind: CommBufferKind::SymmMem, group_attr: "group",
//!     }],
//!     verify: Some(verify_comm_buffer_operands),
//!     cost: Some(symm_sum_cost),
//!     ..OpDef::EMPTY
//! });
//!
//! /// 5 µs plus the bytes read from peers at 4 GB/s (4 bytes per ns), in ns.
//! fn symm_sum_cost(ctx: &Context, op: OpId) -> Option<f64> {
//!     let bytes = tensor_bytes(ctx, ctx.value_type(ctx.operand(op, 0)))? as f64;
//!     let peers = (group_of(ctx, op).ok()?.size - 1) as f64;
//!     Some(5_000.0 + peers * bytes / 4.0)
//! }
//!
//! fn main() -> Result<(), commlir::Diagnostics> {
//!     let mut m = commlir::Module::parse("acme.mlir", r#"
//!     coll.group @tp {size = 2 : i64, symm_mem}
//!     func.func @f(%x: tensor<1024xf32>) -> tensor<1024xf32> {
//!       %h = compute.relu %x : tensor<1024xf32>
//!       %y = acme.symm_sum %h {group = @tp} : (tensor<1024xf32>) -> tensor<1024xf32>
//!       return %y : tensor<1024xf32>
//!     }
//!     "#)?;
//!     // The cost hook prices the op in the report: one peer, 4 KiB read.
//!     let report = m.report();
//!     assert_eq!(report.functions[0].collectives[0].op, "acme.symm_sum");
//!     assert_eq!(report.functions[0].collectives[0].comm_ns, 5_000.0 + 4096.0 / 4.0);
//!     // coll-to-comm realizes the declared operand: relu now writes symmetric memory.
//!     m.run_pipeline("builtin.module(func.func(coll-to-comm))")?;
//!     assert!(m.print().contains(
//!         "compute.relu %arg0 : (tensor<1024xf32>) -> tensor<1024xf32, #comm.buffer<symm_mem, @tp>>"));
//!     Ok(())
//! }
//! ```
//!
//! Passes are defined the same way: implement [`pass::Pass`] and register a
//! [`pass::PassInfo`] with [`register_pass!`]; the pass is then available by name in
//! pipeline strings (see the [`pass`] module).
//!
//! # 4. Build and run pipelines, from code and from strings
//!
//! A [`Pipeline`] is built from MLIR's textual form ([`Pipeline::parse`]) or from code
//! ([`Pipeline::new`] then [`Pipeline::add`] by name, typed helpers such as
//! [`Pipeline::coll_to_comm`] and [`Pipeline::reorder_peak_memory`], or your own pass
//! instances); [`Pipeline::to_pipeline_string`] prints either kind back.
//!
//! ```rust
//! use commlir::{CollToCommOptions, IterOptions, Module, Pipeline};
//!
//! let text = r#"
//! coll.group @tp {size = 2 : i64}
//! func.func @f(%x: tensor<1024x1024xf32>, %w: tensor<1024x1024xf32>) -> (tensor<1024x1024xf32>, tensor<1024x1024xf32>) {
//!   %a = compute.matmul %x, %w : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
//!   %b = compute.matmul %a, %w : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
//!   %r = coll.all_reduce %a {reduce_op = "sum", group = @tp} : tensor<1024x1024xf32>
//!   %y = coll.wait_tensor %r : tensor<1024x1024xf32>
//!   return %y, %b : tensor<1024x1024xf32>, tensor<1024x1024xf32>
//! }
//! "#;
//! let mut by_code = Module::parse("f.mlir", text)?;
//! let mut pipeline = Pipeline::new();
//! pipeline
//!     .coll_to_comm(&CollToCommOptions::default())?
//!     .reorder_peak_memory(&IterOptions::default())?
//!     .sink_waits_iterative(&IterOptions::default())?;
//! by_code.run(&mut pipeline)?;
//!
//! let mut by_string = Module::parse("f.mlir", text)?;
//! by_string.run_pipeline(&pipeline.to_pipeline_string())?;
//! assert_eq!(by_code.print(), by_string.print());
//!
//! // The wait sank below the second matmul: the all-reduce overlaps it.
//! let out = by_code.print();
//! let (wait, mm) = (out.find("comm.wait").unwrap(), out.rfind("compute.matmul").unwrap());
//! assert!(mm < wait, "{out}");
//! # Ok::<(), commlir::Diagnostics>(())
//! ```
//!
//! # 5. Read the report
//!
//! [`comm_report`] (or [`Module::report`]) computes what `commlir-opt --comm-report` writes,
//! as a [`Report`] value: per function, peak memory, compute / communication / exposed time
//! and makespan from the two-stream timeline, each collective, and the comm-buffer pools.
//! [`Report::to_json`] gives the JSON. See [`report`] for an example.
//!
//! # Linking
//!
//! Registrations live in statics that nothing references, so a binary must make sure the
//! defining crates are linked: [`register_all`] does it for commlir's own dialects and
//! passes (every entry point of this crate calls it), and a crate defining ops should offer
//! the same kind of function for its statics (see `examples/embed/src/lib.rs`).

#![warn(missing_docs)]

pub mod build;
pub mod cost;
pub mod diagnostics;
// The `commlir-opt` driver predates this facade; its public surface is documented there.
#[allow(missing_docs)]
pub mod driver;
mod module;
pub mod pipeline;
pub mod report;
pub mod text;

pub use commlir_dialects as dialects;
pub use commlir_ir as ir;
pub use commlir_passes as passes;
pub use driver::{opt_main, opt_main_with_args};

pub use diagnostics::{Diag, Diagnostics};
pub use module::Module;
pub use pipeline::{registered_passes, Pipeline};
pub use report::{
    comm_report, comm_report_json, comm_report_on, CollectiveReport, FunctionReport, Machine,
    PoolReport, Report,
};
pub use text::{
    parse_attr, parse_file, parse_str, parse_type, print, print_generic, print_with, verify,
};

// The IR core: what building, inspecting and rewriting IR takes.
pub use commlir_ir::printer::PrintOptions;
pub use commlir_ir::{
    Attr, AttrKind, BlockId, Builder, Context, DenseElem, Diagnostic, FloatKind, FloatValue, Ident,
    InsertPoint, IntValue, Loc, LocKind, OpId, OpState, RegionId, Severity, Signedness, SourceFile,
    SourceMgr, Type, TypeKind, Use, Value, ValueDef, DYNAMIC,
};

// Registration macros. They expand to paths through `$crate` (commlir-ir), so they work
// from a crate that depends on `commlir` alone.
pub use commlir_ir::{register_dialect, register_op, register_pass};

// The typed options of the passes with typed helpers on [`Pipeline`].
pub use commlir_passes::coll_to_comm::{CollToCommOptions, SymmAlgoChoice};
pub use commlir_passes::comm_plan_pools::PlanPoolsOptions;
pub use commlir_passes::schedule::iterative::IterOptions;

/// Everything a dialect definition needs: the op definition types, the registration
/// records, and the helpers commlir's own dialects use in their verifiers and cost hooks
/// (group lookup, tensor shapes and sizes, comm-buffer encodings).
pub mod dialect {
    pub use commlir_ir::opdef::{
        ArgDef, Arity, AttrConstraint, AttrDef, CommBufferKind, CommBufferOperand, CostFn,
        DialectDef, OpDef, Registry, Syntax, Trait, TypeConstraint, VerifyFn,
    };

    pub use commlir_dialects::coll::{group_of, GroupInfo};
    pub use commlir_dialects::comm::{buffer_encoding, is_comm_buffer, BufferEncoding};
    pub use commlir_dialects::shape::{
        same_modulo_encoding, tensor_bytes, tensor_info, ty_str, value_tensor, TensorInfo,
    };
    pub use commlir_dialects::symm::verify_comm_buffer_operands;
}

/// Defining passes: the [`Pass`](pass::Pass) trait, the static [`PassInfo`](pass::PassInfo)
/// registered with [`register_pass!`](crate::register_pass), options and statistics, and the
/// lower-level pass manager types behind [`Pipeline`].
///
/// ```rust
/// use commlir::pass::*;
/// use commlir::{Context, Diagnostic, OpId};
///
/// /// Counts the collectives of each function.
/// struct CountCollectives;
///
/// commlir::register_pass!(pub COUNT_COLLECTIVES = PassInfo {
///     argument: "acme-count-collectives",
///     name: "AcmeCountCollectives",
///     summary: "Count collectives",
///     description: "",
///     anchor: Anchor::FUNC,
///     options: &[],
///     statistics: &[StatisticDef::new("collectives", "Collectives seen")],
///     create: |_| Ok(Box::new(CountCollectives)),
/// });
///
/// impl Pass for CountCollectives {
///     fn info(&self) -> &'static PassInfo {
///         &COUNT_COLLECTIVES
///     }
///     fn run(&mut self, ctx: &mut Context, op: OpId, env: &mut PassEnv<'_>) -> Result<(), Diagnostic> {
///         let mut n = 0;
///         ctx.walk(op, |o| n += ctx.op_has_trait(o, commlir::dialect::Trait::Collective) as u64);
///         env.add_stat("collectives", n);
///         Ok(())
///     }
/// }
///
/// fn main() -> Result<(), commlir::Diagnostics> {
///     let mut m = commlir::Module::parse("c.mlir", r#"
///     coll.group @tp {size = 2 : i64}
///     func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
///       %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<4xf32>
///       %y = coll.wait_tensor %r : tensor<4xf32>
///       return %y : tensor<4xf32>
///     }
///     "#)?;
///     // Registered: usable by name, from a string.
///     let mut p = commlir::Pipeline::parse("builtin.module(func.func(acme-count-collectives))")?;
///     m.run(&mut p)?;
///     assert!(p.statistics_report().contains("1 collectives - Collectives seen"), "{}", p.statistics_report());
///     Ok(())
/// }
/// ```
pub mod pass {
    pub use commlir_ir::pass::{
        Anchor, IrPrintConfig, IrPrinter, OpPassManager, OptionDef, OptionKind, OptionValue, Pass,
        PassCtor, PassEnv, PassInfo, PassInstrumentation, PassManager, PassOptions, PassRegistry,
        PipelineError, StatisticDef, Statistics, TimingInstrumentation, TimingTree,
    };
}

/// Makes sure every op, dialect and pass registration of the commlir crates is linked into the
/// final binary (registrations live in statics that nothing else references). Every entry
/// point of this crate calls it; call it yourself before looking anything up by name in the
/// lower-level crates. Calling it again is harmless.
pub fn register_all() {
    commlir_passes::link();
}
