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
mod fused;
pub mod groups;
pub mod interp;
pub mod memory;
mod pools;
mod replicated;
pub mod scheduler;

use crate::error::SimError;
use crate::inputs;
use crate::output::RankResults;
use crate::tensor::{Tensor, TensorType};
use crate::tensor_file::{self, InputFiles};
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
    try_run_with_inputs(ctx, module, opts, None)
}

/// Arguments read from files instead of generated (`commlir-run --inputs`).
#[derive(Clone, Copy, Debug)]
pub struct FileInputs<'a> {
    pub files: &'a InputFiles,
    /// The program's text, where the arguments' SSA names are read
    /// ([`tensor_file::entry_arg_names`]); `None` accepts only the `arg{i}` names.
    pub source: Option<&'a str>,
}

/// [`run`], with the arguments from `inputs` (each rank reads its own file; arguments the
/// files lack under `partial` are generated).
pub fn run_with_inputs(
    ctx: &Context,
    module: OpId,
    opts: &SimOptions,
    inputs: Option<FileInputs<'_>>,
) -> Result<Vec<RankResults>, Diagnostic> {
    try_run_with_inputs(ctx, module, opts, inputs).map_err(|e| e.to_diagnostic(ctx))
}

/// [`run_with_inputs`], with the structured error.
pub fn try_run_with_inputs(
    ctx: &Context,
    module: OpId,
    opts: &SimOptions,
    inputs: Option<FileInputs<'_>>,
) -> Result<Vec<RankResults>, SimError> {
    if opts.ranks == 0 {
        return Err(SimError::Setup(
            "the number of ranks must be at least 1".into(),
        ));
    }
    let entry = find_entry(ctx, module, opts.entry.as_deref())?;
    check_sizes(ctx, module, opts.ranks)?;
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
    let input_ranks = replicated::input_ranks(ctx, entry, arg_types.len(), opts.ranks)?;
    let provided = match inputs {
        Some(f) => read_files(ctx, entry, &f, &arg_types, &input_ranks, opts.ranks)?,
        None => vec![vec![None; arg_types.len()]; opts.ranks],
    };
    let mut tasks = provided
        .into_iter()
        .enumerate()
        .map(|(rank, given)| {
            let args = arg_types
                .iter()
                .zip(given)
                .enumerate()
                .map(|(i, (t, g))| {
                    g.unwrap_or_else(|| inputs::generate(t, opts.seed, input_ranks[i][rank], i))
                })
                .collect();
            RankInterp::new(ctx, rank, opts.ranks, entry, args)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut engine = Engine::new(opts.ranks);
    // Every `func.call` resolves its callee: through the symbol cache that is one lookup,
    // not a scan of the module's functions (quadratic in a long call chain). The sim never
    // changes the IR, so the cache stays valid for the whole run.
    ctx.with_symbol_cache(|| scheduler::run_ranks(&mut tasks, &mut engine))?;
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

/// Every rank's arguments from its file (`None`: generate it). An argument marked
/// `coll.replicated` must hold the same tensor on every rank of its subgroup, as the program
/// assumes; a file that breaks this is an error rather than a run with inconsistent ranks.
fn read_files(
    ctx: &Context,
    entry: OpId,
    inputs: &FileInputs<'_>,
    types: &[TensorType],
    input_ranks: &[Vec<usize>],
    ranks: usize,
) -> Result<Vec<Vec<Option<Tensor>>>, SimError> {
    let names = tensor_file::entry_arg_names(ctx, entry, inputs.source);
    let at_entry = |e: tensor_file::InputError| match e.arg {
        Some(_) => SimError::op(ctx, entry, e.message),
        None => SimError::Setup(e.message),
    };
    let provided = if tensor_file::is_per_rank(&inputs.files.pattern) {
        (0..ranks)
            .map(|r| tensor_file::read_inputs(inputs.files, r, &names, types).map_err(at_entry))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        // One file for every rank: read (and check) it once.
        let one = tensor_file::read_inputs(inputs.files, 0, &names, types).map_err(at_entry)?;
        vec![one; ranks]
    };
    for (i, sources) in input_ranks.iter().enumerate() {
        for (rank, &src) in sources.iter().enumerate() {
            if provided[rank][i] != provided[src][i] {
                let name = names.get(i).cloned().flatten().unwrap_or(format!("arg{i}"));
                return Err(SimError::op(
                    ctx,
                    entry,
                    format!("argument #{i} (%{name}) is marked coll.replicated, but the inputs of rank {rank} and rank {src} differ"),
                ));
            }
        }
    }
    Ok(provided)
}

/// Largest memory the simulated ranks may use together, in bytes. The sim backend holds every
/// tensor of every rank in host memory; beyond this a program is a GPU-sized workload, and
/// failing up front with a diagnostic beats exhausting the host.
pub const MAX_SIM_BYTES: u64 = 8 << 30;

/// Rejects programs whose tensors cannot fit the sim backend's memory budget: the sum over all
/// values of the module (an upper bound on what is live at once), times the number of ranks.
fn check_sizes(ctx: &Context, module: OpId, ranks: usize) -> Result<(), SimError> {
    let mut total: u64 = 0;
    let mut worst: Option<(OpId, u64)> = None;
    let mut err = None;
    ctx.walk(module, |op| {
        if err.is_some() {
            return;
        }
        let mut vals: Vec<commlir_ir::Value> = ctx.results(op).to_vec();
        for &r in ctx.op_regions(op) {
            for &b in ctx.region_blocks(r) {
                vals.extend_from_slice(ctx.block_args(b));
            }
        }
        for v in vals {
            let bytes = match commlir_dialects::shape::tensor_info(ctx, ctx.value_type(v)) {
                Some(t) => commlir_dialects::shape::tensor_bytes(ctx, ctx.value_type(v))
                    .filter(|_| t.shape.iter().all(|d| *d >= 0))
                    .unwrap_or(u64::MAX),
                None => 0,
            };
            total = total.saturating_add(bytes.saturating_mul(ranks as u64));
            if worst.is_none_or(|(_, w)| bytes > w) {
                worst = Some((op, bytes));
            }
            if total > MAX_SIM_BYTES {
                let (at, b) = worst.unwrap_or((op, bytes));
                err = Some(SimError::op(
                    ctx,
                    at,
                    format!(
                        "needs more memory than the sim backend allows ({} bytes on {ranks} ranks; largest tensor {b} bytes, limit {MAX_SIM_BYTES} bytes in all): run it on the cuda backend",
                        total
                    ),
                ));
                return;
            }
        }
    });
    err.map_or(Ok(()), Err)
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
    if let Some(name) = name {
        return funcs
            .into_iter()
            .find(|f| ctx.symbol_name(*f) == Some(name))
            .ok_or_else(|| SimError::Setup(format!("no function named @{name} to run")));
    }
    commlir_dialects::func::default_entry(ctx, &funcs)
        .ok_or_else(|| SimError::Setup("the module has no function to run".into()))
}
