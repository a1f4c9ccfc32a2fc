//! The `sim` backend: the reference semantics of commlir programs, executed on N simulated
//! ranks in one process, deterministically.
//!
//! - [`interp`]: one rank's interpreter (frames, values → storage, dispatch);
//!   [`compute`], [`coll`] and [`comm`] give each dialect's op semantics.
//! - [`engine`]: NCCL's matching and ordering rules (per-communicator sequences, one comm
//!   stream per rank); [`collective`]: what each collective computes.
//! - [`scheduler`]: runs ranks cooperatively until all finish, or reports a deadlock.
//! - [`memory`]: mutable storage shared by aliases, and comm-buffer pools whose slots really
//!   alias; `pools`: executing planned programs (pools, slots, the liveness checks);
//!   [`groups`]: group layouts over N ranks.

mod coll;
pub mod collective;
mod comm;
pub mod compute;
pub mod engine;
pub mod groups;
pub mod interp;
pub mod memory;
mod pools;
pub mod scheduler;

use crate::error::SimError;
use crate::inputs;
use crate::output::RankResults;
use crate::tensor::TensorType;
use commlir_dialects::func::func_signature;
use commlir_ir::{Context, Diagnostic, OpId};
use engine::Engine;
use interp::RankInterp;

/// How to run a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimOptions {
    /// Number of simulated ranks.
    pub ranks: usize,
    /// The function to run; `None` picks the default (see [`find_entry`]).
    pub entry: Option<String>,
    /// Seed of the generated arguments.
    pub seed: u64,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            ranks: 2,
            entry: None,
            seed: 0,
        }
    }
}

/// Runs `module` on `opts.ranks` ranks and returns every rank's results, or the first error
/// as a diagnostic at the op that caused it.
pub fn run(ctx: &Context, module: OpId, opts: &SimOptions) -> Result<Vec<RankResults>, Diagnostic> {
    try_run(ctx, module, opts).map_err(|e| e.to_diagnostic(ctx))
}

/// [`run`], with the structured error.
pub fn try_run(
    ctx: &Context,
    module: OpId,
    opts: &SimOptions,
) -> Result<Vec<RankResults>, SimError> {
    if opts.ranks == 0 {
        return Err(SimError::Setup(
            "the number of ranks must be at least 1".into(),
        ));
    }
    let entry = find_entry(ctx, module, opts.entry.as_deref())?;
    let (params, _) = func_signature(ctx, entry)
        .ok_or_else(|| SimError::op(ctx, entry, "has no function type"))?;
    let arg_types = params
        .iter()
        .enumerate()
        .map(|(i, t)| {
            TensorType::from_type(ctx, *t).ok_or_else(|| {
                SimError::op(ctx, entry, format!("argument #{i} is not a statically shaped tensor the sim backend can generate"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut tasks = (0..opts.ranks)
        .map(|rank| {
            let args = arg_types
                .iter()
                .enumerate()
                .map(|(i, t)| inputs::generate(t, opts.seed, rank, i))
                .collect();
            RankInterp::new(ctx, rank, opts.ranks, entry, args)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut engine = Engine::new(opts.ranks);
    scheduler::run_ranks(&mut tasks, &mut engine)?;
    tasks
        .iter()
        .enumerate()
        .map(|(rank, t)| {
            Ok(RankResults {
                rank,
                results: t.results()?,
            })
        })
        .collect()
}

/// The function to run: `name` if given; otherwise the only public function with a body,
/// else `@main`, else the first function with a body. `root` may be a module or a function.
pub fn find_entry(ctx: &Context, root: OpId, name: Option<&str>) -> Result<OpId, SimError> {
    if ctx.op_name(root) == "func.func" {
        return Ok(root);
    }
    let mut funcs = Vec::new();
    for &r in ctx.op_regions(root) {
        for &b in ctx.region_blocks(r) {
            funcs.extend(ctx.block_ops(b).filter(|o| ctx.op_name(*o) == "func.func"));
        }
    }
    let has_body = |f: &OpId| {
        ctx.op_regions(*f)
            .first()
            .is_some_and(|r| !ctx.region_blocks(*r).is_empty())
    };
    if let Some(name) = name {
        return funcs
            .into_iter()
            .find(|f| ctx.symbol_name(*f) == Some(name))
            .ok_or_else(|| SimError::Setup(format!("no function named @{name} to run")));
    }
    let defined: Vec<OpId> = funcs.into_iter().filter(has_body).collect();
    let is_public = |f: &OpId| {
        ctx.inherent_attr(*f, "sym_visibility")
            .and_then(|a| ctx.attr_as_str(a))
            .is_none_or(|v| v == "public")
    };
    let public: Vec<OpId> = defined.iter().copied().filter(is_public).collect();
    if let [only] = public.as_slice() {
        return Ok(*only);
    }
    defined
        .iter()
        .copied()
        .find(|f| ctx.symbol_name(*f) == Some("main"))
        .or_else(|| defined.first().copied())
        .ok_or_else(|| SimError::Setup("the module has no function to run".into()))
}
