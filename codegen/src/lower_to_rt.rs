//! `comm-to-rt`: planned comm-level IR (after `coll-to-comm` and `comm-plan-pools`) to the
//! runtime-call dialect `rt`.
//!
//! Per function, in program order:
//! - tensors become `memref` buffers. A comm buffer is an `rt.pool_view` of its pool at its
//!   `comm.slot` offset; every other result gets its own `rt.alloc` (per-value allocation,
//!   stream-ordered on the compute stream) and an `rt.free` right after its last reader, unless
//!   it is returned (then the caller owns it). Arguments are the caller's buffers.
//! - `comm.pool` / `comm.pool_release` become `rt.pool_alloc` / `rt.pool_free`.
//! - elementwise chains are fused, and broadcasts they read absorbed into them
//!   ([`crate::fusion`]); each kernel is an `rt.kernel` symbol (identical kernels are shared)
//!   launched by `rt.launch`; matmuls become `rt.gemm`.
//! - a collective start becomes its `rt.nccl_*` call on the comm stream, preceded by a wait
//!   for a compute-stream event and followed by an event recorded on the comm stream; its
//!   `comm.wait` makes the compute stream wait for that event. The compute event is recorded
//!   right after the last kernel the collective depends on (one that writes the pool bytes it
//!   reads, or touches those it writes: [`comm_deps`]), so kernels the program places between
//!   that one and the collective run beside it; where that analysis does not apply, it is
//!   recorded at the collective. The one-shot all-reduce runs on the compute stream.
//! - before a pool is freed, the compute stream waits for all comm-stream work.
//! - a `func.call` stays a `func.call` on buffers: the callee's host function is called
//!   directly. The caller owns what the callee returns and frees it after its last reader, so
//!   a called function returns only fresh buffers (an argument, a repeated value or a comm
//!   buffer is cloned before its `return`). Callees must have bodies and the call graph must
//!   be acyclic (without control flow, recursion never ends).

mod attention;
mod comm_deps;
pub(crate) mod fused_matmul;
mod gemm_accumulate;

use crate::fusion::{self, FusionPlan};
use commlir_dialects::comm::{buffer_encoding, encoding_kind_str, pool_info, slot_of};
use commlir_dialects::rt;
use commlir_dialects::shape::{elem_bytes, value_tensor};
use commlir_ir::pass::{
    Anchor, OptionDef, OptionKind, Pass, PassEnv, PassInfo, PassOptions, StatisticDef,
};
use commlir_ir::{
    AttrKind, BlockId, Builder, Context, Diagnostic, FloatKind, OpId, OpState, Signedness, Type,
    TypeKind, Value,
};
use std::collections::{HashMap, HashSet};

commlir_ir::register_pass!(
    /// The `comm-to-rt` pass.
    pub COMM_TO_RT = PassInfo {
        argument: "comm-to-rt",
        name: "CommToRt",
        summary: "Lower planned comm-level IR to runtime calls (rt dialect)",
        description: "Turns every function of a module planned by `comm-plan-pools` into \
            `rt` calls: pools, per-value buffers with frees after the last reader, fused \
            elementwise kernels (`rt.kernel` + `rt.launch`), cuBLAS GEMMs, NCCL collectives on \
            the comm stream with events for their waits.",
        anchor: Anchor::MODULE,
        options: &[OptionDef::new(
            "attention",
            OptionKind::Enum(&["cudnn", "generated"]),
            "cudnn",
            "How f16/bf16 compute.attention and compute.attention_backward lower: `cudnn` \
             (rt.attention calls of cuDNN's fused flash attention) or `generated` (commlir's \
             own kernels: the forward only, one head of keys and values per query head)",
        )],
        statistics: &[
            StatisticDef::new("kernels", "Distinct kernels generated"),
            StatisticDef::new("launches", "Kernel launches"),
            StatisticDef::new("fused-ops", "Ops fused into a later kernel"),
            StatisticDef::new("collectives", "NCCL collective calls"),
        ],
        create: |o: &PassOptions| {
            let attention = AttentionLowering::parse(o.get_str("attention"))?;
            Ok(Box::new(CommToRt(LowerOptions { attention })))
        },
    }
);

/// The `comm-to-rt` pass instance.
pub struct CommToRt(LowerOptions);

/// How attention lowers (the pass option `attention`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AttentionLowering {
    /// `rt.attention` / `rt.attention_backward`: cuDNN's fused flash attention, where the
    /// element type and head dims suit it (`attention::cudnn_supported`).
    #[default]
    Cudnn,
    /// commlir's generated kernels (`rt.flash_attention`, or GEMMs around a softmax kernel).
    Generated,
}

impl AttentionLowering {
    fn parse(s: &str) -> Result<AttentionLowering, String> {
        match s {
            "" | "cudnn" => Ok(AttentionLowering::Cudnn),
            "generated" => Ok(AttentionLowering::Generated),
            o => Err(format!(
                "comm-to-rt: attention='{o}': expected 'cudnn' or 'generated'"
            )),
        }
    }
}

/// Choices of the lowering.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LowerOptions {
    pub attention: AttentionLowering,
}

impl Pass for CommToRt {
    fn info(&self) -> &'static PassInfo {
        &COMM_TO_RT
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let stats = lower_module_with(ctx, op, self.0)?;
        env.add_stat("kernels", stats.kernels);
        env.add_stat("launches", stats.launches);
        env.add_stat("fused-ops", stats.fused_ops);
        env.add_stat("collectives", stats.collectives);
        Ok(())
    }
}

/// Counts of what the lowering produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LowerStats {
    pub kernels: u64,
    pub launches: u64,
    pub fused_ops: u64,
    pub collectives: u64,
}

/// Threads per block of every elementwise / data-movement kernel.
pub const BLOCK: i64 = 256;
/// Upper bound of the grid: kernels loop grid-stride, so more blocks only add scheduling cost.
pub const MAX_GRID: i64 = 65535;

/// The grid for `n` independent work items at [`BLOCK`] threads per block.
pub fn grid_for(n: i64) -> i64 {
    ((n + BLOCK - 1) / BLOCK).clamp(1, MAX_GRID)
}

/// The module's single body block.
pub fn module_block(ctx: &Context, module: OpId) -> Option<BlockId> {
    let r = *ctx.op_regions(module).first()?;
    ctx.region_blocks(r).first().copied()
}

/// Lowers every function with a body in `module` with the default [`LowerOptions`].
pub fn lower_module(ctx: &mut Context, module: OpId) -> Result<LowerStats, Diagnostic> {
    lower_module_with(ctx, module, LowerOptions::default())
}

/// Lowers every function with a body in `module`.
pub fn lower_module_with(
    ctx: &mut Context,
    module: OpId,
    opts: LowerOptions,
) -> Result<LowerStats, Diagnostic> {
    let Some(body) = module_block(ctx, module) else {
        return Ok(LowerStats::default());
    };
    let funcs: Vec<OpId> = ctx
        .block_ops(body)
        .filter(|o| ctx.op_name(*o) == "func.func")
        .collect();
    let mut kernels = KernelTable::default();
    // Kernels already in the module (a second run, or hand-written rt) keep their names.
    for o in ctx.block_ops(body) {
        if ctx.op_name(o) == "rt.kernel" {
            kernels.count += 1;
        }
    }
    let mut stats = LowerStats::default();
    let called = check_calls(ctx, &funcs)?;
    for &f in &funcs {
        if called.contains(&f) {
            fresh_returns(ctx, f);
        }
    }
    for f in funcs {
        lower_function(ctx, f, &mut kernels, &mut stats, opts)?;
    }
    stats.kernels = kernels.by_key.len() as u64;
    Ok(stats)
}

/// The callee of a `func.call`, when it names a `func.func` of the module.
fn callee_of(ctx: &Context, call: OpId, by_name: &HashMap<&str, OpId>) -> Option<OpId> {
    let name = ctx
        .inherent_attr(call, "callee")
        .and_then(|a| ctx.attr_as_symbol(a))?;
    by_name.get(name).copied()
}

/// The deepest chain of calls a program may make: the sim backend's limit, and what the
/// runner's rank threads (256 MiB stacks, docs/runtime.md) hold with room to spare, each level
/// being one host-program frame of a few hundred bytes.
pub const MAX_CALL_DEPTH: usize = 10_000;

/// Checks every `func.call` of the module's functions and returns the functions that are
/// called. A callee must be a function with a body, and the call graph must be acyclic: the
/// IR has no control flow, so a recursive call could never return (the sim backend reports
/// the same program as exceeding its call depth). The walk is iterative (Kahn's algorithm),
/// so a call chain of any length is checked in constant stack.
fn check_calls(ctx: &Context, funcs: &[OpId]) -> Result<HashSet<OpId>, Diagnostic> {
    let by_name: HashMap<&str, OpId> = funcs
        .iter()
        .filter_map(|&f| ctx.symbol_name(f).map(|n| (n, f)))
        .collect();
    let index: HashMap<OpId, usize> = funcs.iter().enumerate().map(|(i, f)| (*f, i)).collect();
    // Edges caller → callee, with the first call op of each edge for the diagnostic.
    let mut out: Vec<Vec<(usize, OpId)>> = vec![Vec::new(); funcs.len()];
    let mut indeg = vec![0usize; funcs.len()];
    let mut called = HashSet::new();
    for (i, &f) in funcs.iter().enumerate() {
        let Some(&body) = ctx.region_blocks(ctx.op_regions(f)[0]).first() else {
            continue;
        };
        for op in ctx.block_ops(body) {
            if ctx.op_name(op) != "func.call" {
                continue;
            }
            let callee = callee_of(ctx, op, &by_name).ok_or_else(|| {
                err(
                    ctx,
                    op,
                    "comm-to-rt: the callee is not a function of this module",
                )
            })?;
            if ctx.region_blocks(ctx.op_regions(callee)[0]).is_empty() {
                return Err(err(
                    ctx,
                    op,
                    "comm-to-rt: calls a function declaration; the callee needs a body to be compiled",
                ));
            }
            called.insert(callee);
            let j = index[&callee];
            out[i].push((j, op));
            indeg[j] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..funcs.len()).filter(|&i| indeg[i] == 0).collect();
    let mut done = 0;
    // Longest call chain ending at each function (its frames on the rank thread's stack):
    // final once the function is ready, since every caller came first.
    let mut depth = vec![1usize; funcs.len()];
    while let Some(i) = ready.pop() {
        done += 1;
        if depth[i] > MAX_CALL_DEPTH {
            let f = funcs[i];
            return Err(err(
                ctx,
                f,
                format!(
                    "comm-to-rt: a chain of {} nested calls reaches this function; at most {MAX_CALL_DEPTH} are supported (each is a native frame of the host program, as the sim backend allows)",
                    depth[i] - 1
                ),
            ));
        }
        for &(j, _) in &out[i] {
            depth[j] = depth[j].max(depth[i] + 1);
            indeg[j] -= 1;
            if indeg[j] == 0 {
                ready.push(j);
            }
        }
    }
    if done < funcs.len() {
        // Every function left has a caller left; report the first call (in module order)
        // between two of them.
        let call = (0..funcs.len())
            .filter(|&i| indeg[i] > 0)
            .flat_map(|i| out[i].iter())
            .find(|(j, _)| indeg[*j] > 0)
            .map(|(_, c)| *c);
        if let Some(c) = call {
            return Err(err(
                ctx,
                c,
                "comm-to-rt: recursive call: without control flow the recursion could never end",
            ));
        }
    }
    Ok(called)
}

/// Makes every result of `func` (a function some `func.call` calls) a fresh buffer that the
/// caller owns and frees: an argument, a value returned twice, or a value that lives in a
/// comm pool is copied first (`compute.clone`). The entry function keeps returning such
/// values as they are; the runner tells its own allocations apart.
fn fresh_returns(ctx: &mut Context, func: OpId) {
    let Some(&body) = ctx.region_blocks(ctx.op_regions(func)[0]).first() else {
        return;
    };
    let Some(ret) = ctx.block_last(body) else {
        return;
    };
    if ctx.op_name(ret) != "func.return" {
        return;
    }
    let mut seen = HashSet::new();
    for (i, v) in ctx.operands(ret).to_vec().into_iter().enumerate() {
        let t = ctx.value_type(v);
        let aliasing = match ctx.defining_op(v) {
            None => true,
            Some(d) => matches!(ctx.op_name(d), "comm.wait" | "comm.alloc"),
        };
        if aliasing || buffer_encoding(ctx, t).is_some() || !seen.insert(v) {
            let plain = commlir_dialects::shape::strip_encoding(ctx, t);
            let mut bld = Builder::before(ctx, ret);
            let c = bld.create_value("compute.clone", &[v], plain, &[]);
            ctx.set_operand(ret, i, c);
        }
    }
}

/// Kernels created so far, deduplicated by a structural key.
#[derive(Default)]
struct KernelTable {
    by_key: HashMap<String, String>,
    count: usize,
}

/// The `memref` type with the shape and element type of tensor `t`.
fn memref_of(ctx: &mut Context, t: Type) -> Type {
    match ctx.type_kind(t).clone() {
        TypeKind::Tensor { shape, elem, .. } => ctx.ty(TypeKind::MemRef {
            shape,
            elem,
            rest: None,
        }),
        _ => t,
    }
}

/// The runtime's dtype spelling of an element type (NCCL's set), if it has one. NCCL has no
/// boolean type: `i1` (one byte holding 0 or 1) travels as `u8`.
pub fn dtype_name(ctx: &Context, elem: Type) -> Option<&'static str> {
    Some(match ctx.type_kind(elem) {
        TypeKind::Integer { width: 1, .. } => "u8",
        TypeKind::Float(FloatKind::F16) => "f16",
        TypeKind::Float(FloatKind::BF16) => "bf16",
        TypeKind::Float(FloatKind::F32) => "f32",
        TypeKind::Float(FloatKind::F64) => "f64",
        TypeKind::Integer {
            width: 8,
            signedness,
        } => {
            if *signedness == Signedness::Unsigned {
                "u8"
            } else {
                "i8"
            }
        }
        TypeKind::Integer {
            width: 32,
            signedness,
        } => {
            if *signedness == Signedness::Unsigned {
                "u32"
            } else {
                "i32"
            }
        }
        TypeKind::Integer {
            width: 64,
            signedness,
        } => {
            if *signedness == Signedness::Unsigned {
                "u64"
            } else {
                "i64"
            }
        }
        _ => return None,
    })
}

/// Whether kernels can compute on this element type (f16, bf16, f32, f64, and integers of
/// 1, 8, 16, 32 or 64 bits).
fn kernel_elem_ok(ctx: &Context, elem: Type) -> bool {
    matches!(
        ctx.type_kind(elem),
        TypeKind::Float(FloatKind::F16 | FloatKind::BF16 | FloatKind::F32 | FloatKind::F64)
            | TypeKind::Integer {
                width: 1 | 8 | 16 | 32 | 64,
                ..
            }
    )
}

/// Rejects a sum or avg reduction (`what`: "all-reduce", "reduce-scatter") of an `i1`
/// tensor: the sim adds i1 modulo 2 (xor), which no NCCL reduction of the `u8` bytes
/// reproduces (ncclSum of two 1s gives 2). max (logical or), min (logical and) and product
/// (and) are exact on 0/1 bytes.
fn check_i1_reduce(
    ctx: &Context,
    op: OpId,
    x: Value,
    reduce: Option<commlir_ir::Attr>,
    what: &str,
) -> Result<(), Diagnostic> {
    let is_i1 = value_tensor(ctx, x)
        .is_some_and(|t| matches!(ctx.type_kind(t.elem), TypeKind::Integer { width: 1, .. }));
    let r = reduce.and_then(|a| ctx.attr_as_str(a));
    if is_i1 && matches!(r, Some("sum" | "avg")) {
        return Err(err(
            ctx,
            op,
            format!(
                "comm-to-rt: a sum (or avg) {what} of i1 has no NCCL equivalent of the sim's \
                 wrapping (xor) semantics; use max (logical or) or min (logical and) \
                 (PyTorch reduces a bool SUM as MAX)"
            ),
        ));
    }
    Ok(())
}

/// Whether kernels compute `op` on integer tensor type `elem` (`kernels::int_op_support`);
/// `Ok` for float types.
fn kernel_int_op_ok(ctx: &Context, op: OpId, elem: Type) -> Result<(), String> {
    let TypeKind::Integer { .. } = ctx.type_kind(elem) else {
        return Ok(());
    };
    let ty = commlir_ir::printer::type_to_string(ctx, elem);
    crate::kernels::int_op_support(ctx.op_name(op), &ty)
}

/// Per-function lowering state.
struct Lowering {
    /// The pass options.
    opts: LowerOptions,
    /// Old tensor value → new buffer value.
    buf: HashMap<Value, Value>,
    /// Comm buffers: old value → (pool value, byte offset).
    comm: HashMap<Value, (Value, u64)>,
    /// (kind, group) → pool value.
    pools: HashMap<(String, String), Value>,
    /// Work handle → event recorded after the collective.
    work: HashMap<Value, Value>,
    /// Whether the compute stream issued work since the comm stream last waited for it.
    compute_dirty: bool,
    /// Whether the comm stream issued work since the compute stream last waited for it.
    comm_dirty: bool,
    /// The event recorded after the comm stream's latest work: a compute-stream wait on it
    /// orders the compute stream after *all* comm work so far (one stream runs in order), so
    /// no further comm → compute pair is needed before a pool release or the return.
    last_comm_event: Option<Value>,
    /// Transposes that only feed GEMMs: each GEMM reads the transpose's input with cuBLAS's
    /// transposed operand instead, and the transpose emits nothing
    /// ([`gemm_operand_transposes`]).
    gemm_transposed: HashSet<OpId>,
    /// Shards of pushing fused all-gather-matmuls that a plain clone would have copied into
    /// a comm buffer: clone result → the buffer cloned (the pipeline pushes it from there).
    shard_sources: HashMap<Value, Value>,
    /// Groups whose all-gathers push through copy engines when their pool is peer-mapped
    /// ([`push_groups`]).
    push_groups: HashSet<String>,
    /// The compute work each collective depends on, where [`comm_deps`] applies; else every
    /// collective waits for all compute issued before it.
    deps: Option<comm_deps::CommDeps>,
    /// Compute-stream events recorded for `deps`, by position.
    dep_events: HashMap<usize, Value>,
    /// The latest position the comm stream has waited for (through `dep_events`).
    comm_waited: Option<usize>,
    /// Launches of a plain two-input add kernel ([`gemm_accumulate`] may fold them).
    plain_adds: HashSet<OpId>,
}

fn err(ctx: &Context, op: OpId, msg: impl std::fmt::Display) -> Diagnostic {
    ctx.op_error(op, msg)
}

fn i64_attr(ctx: &mut Context, v: i64) -> commlir_ir::Attr {
    ctx.int_attr(v, 64)
}

fn lower_function(
    ctx: &mut Context,
    func: OpId,
    kernels: &mut KernelTable,
    stats: &mut LowerStats,
    opts: LowerOptions,
) -> Result<(), Diagnostic> {
    let region = ctx.op_regions(func)[0];
    let blocks = ctx.region_blocks(region).to_vec();
    let Some(&block) = blocks.first() else {
        return Ok(()); // a declaration
    };
    if blocks.len() > 1 {
        return Err(err(ctx, func, "comm-to-rt: expects a single-block body"));
    }
    let ops: Vec<OpId> = ctx.block_ops(block).collect();
    if ops.iter().any(|o| ctx.op_name(*o).starts_with("rt.")) {
        return Ok(()); // already lowered
    }
    hoist_slice_views(ctx, block);
    fold_double_transposes(ctx, block);
    rematerialize_upcasts(ctx, block);
    erase_dead_compute(ctx, block);
    let ops: Vec<OpId> = ctx.block_ops(block).collect();
    let plan = fusion::plan(ctx, &ops);
    stats.fused_ops += plan.num_fused() as u64;
    let mut st = Lowering {
        buf: HashMap::new(),
        comm: HashMap::new(),
        pools: HashMap::new(),
        work: HashMap::new(),
        compute_dirty: true,
        comm_dirty: false,
        last_comm_event: None,
        gemm_transposed: gemm_operand_transposes(ctx, &ops, &plan),
        shard_sources: HashMap::new(),
        push_groups: push_groups(ctx, &ops),
        deps: None,
        dep_events: HashMap::new(),
        comm_waited: None,
        plain_adds: HashSet::new(),
        opts,
    };
    st.deps = comm_deps::plan(
        ctx,
        &ops,
        &plan,
        &st.gemm_transposed,
        !st.push_groups.is_empty(),
    );
    // Arguments become the caller's buffers.
    for &a in ctx.block_args(block).to_vec().iter() {
        let t = ctx.value_type(a);
        if !matches!(ctx.type_kind(t), TypeKind::Tensor { .. }) {
            return Err(err(
                ctx,
                func,
                "comm-to-rt: every argument must be a ranked tensor",
            ));
        }
        if buffer_encoding(ctx, t).is_some() {
            return Err(err(
                ctx,
                func,
                "comm-to-rt: a comm-buffer argument has no pool slot; pass a plain tensor",
            ));
        }
        st.buf.insert(a, a);
    }
    let module = ctx.parent_op(func);
    for (i, &op) in ops.iter().enumerate() {
        if st.deps.as_ref().is_some_and(|d| d.record_at.contains(&i)) {
            let e = record_event(ctx, op, "compute");
            st.dep_events.insert(i, e);
        }
        lower_op(ctx, op, module, func, &plan, &mut st, kernels, stats)?;
    }
    // Retyped last: the lowering above still reads the arguments' tensor types.
    for &a in ctx.block_args(block).to_vec().iter() {
        let t = ctx.value_type(a);
        let m = memref_of(ctx, t);
        ctx.set_value_type(a, m);
    }
    for &op in ops.iter().rev() {
        ctx.erase_op(op);
    }
    insert_frees(ctx, block);
    let folded = gemm_accumulate::fold(ctx, block, &st.plain_adds) as u64;
    stats.launches -= folded;
    stats.fused_ops += folded;
    // The signature follows the buffers.
    let inputs: Vec<Type> = ctx
        .block_args(block)
        .iter()
        .map(|v| ctx.value_type(*v))
        .collect();
    let results: Vec<Type> = match ctx.block_last(block) {
        Some(r) if ctx.op_name(r) == "func.return" => {
            ctx.operands(r).iter().map(|v| ctx.value_type(*v)).collect()
        }
        _ => Vec::new(),
    };
    let ft = ctx.function_type(inputs, results);
    let fa = ctx.type_attr(ft);
    set_inherent(ctx, func, "function_type", fa);
    Ok(())
}

/// Sets an inherent attribute wherever it lives (properties of generic-form input, or the
/// attribute dictionary).
fn set_inherent(ctx: &mut Context, op: OpId, name: &str, value: commlir_ir::Attr) {
    if ctx.get_prop(op, name).is_some() {
        if let Some(p) = ctx.properties(op) {
            if let AttrKind::Dict(entries) = ctx.attr_kind(p).clone() {
                let entries = entries
                    .into_iter()
                    .map(|(k, v)| {
                        if ctx.ident_str(k) == name {
                            (k, value)
                        } else {
                            (k, v)
                        }
                    })
                    .collect();
                let d = ctx.dict_attr(entries);
                ctx.set_properties(op, Some(d));
                return;
            }
        }
    }
    ctx.set_attr(op, name, value);
}

/// Inserts `rt.free` after the last reader of every `rt.alloc` buffer that is not returned.
fn insert_frees(ctx: &mut Context, block: BlockId) {
    let ops: Vec<OpId> = ctx.block_ops(block).collect();
    let pos: HashMap<OpId, usize> = ops.iter().enumerate().map(|(i, o)| (*o, i)).collect();
    // Owned buffers: fresh allocations and the results of calls (fresh by `fresh_returns`).
    let owned: Vec<(OpId, Value)> = ops
        .iter()
        .flat_map(|&op| {
            let n = match ctx.op_name(op) {
                "rt.alloc" => 1,
                "func.call" => ctx.results(op).len(),
                _ => 0,
            };
            (0..n).map(move |i| (op, i))
        })
        .map(|(op, i)| (op, ctx.result(op, i)))
        .collect();
    for (op, b) in owned {
        // A view's readers read the allocation too.
        let users: Vec<OpId> = with_views(ctx, b)
            .into_iter()
            .flat_map(|v| ctx.uses(v).iter().map(|u| u.op).collect::<Vec<_>>())
            .filter(|u| !matches!(ctx.op_name(*u), "rt.view" | "rt.rank_view"))
            .collect();
        if users.iter().any(|u| ctx.op_name(*u) == "func.return") {
            continue;
        }
        let mut last = users
            .into_iter()
            .filter_map(|u| pos.get(&u).map(|p| (*p, u)))
            .max()
            .map_or(op, |(_, u)| u);
        // A buffer the comm stream reads (a staging buffer) is freed on the compute stream only
        // after the compute stream has waited for the comm stream.
        if rt::COMM_STREAM_OPS.contains(&ctx.op_name(last)) {
            let mut next = ctx.next_op(last);
            while let Some(n) = next {
                let waits_for_comm = ctx.op_name(n) == "rt.stream_wait"
                    && ctx.get_attr(n, "stream").and_then(|a| ctx.attr_as_str(a))
                        == Some("compute");
                if waits_for_comm {
                    last = n;
                    break;
                }
                next = ctx.next_op(n);
            }
        }
        let mut bld = Builder::after(ctx, last);
        bld.create("rt.free", &[b], &[], &[]);
    }
}

/// The buffer of an already lowered value.
fn buffer(ctx: &Context, st: &Lowering, op: OpId, v: Value) -> Result<Value, Diagnostic> {
    st.buf.get(&v).copied().ok_or_else(|| {
        err(
            ctx,
            op,
            "comm-to-rt: operand has no buffer (defined by an unsupported op)",
        )
    })
}

/// Creates the buffer `op`'s result `r` is stored to: a pool view for a comm buffer, else a
/// fresh allocation.
fn result_buffer(
    ctx: &mut Context,
    st: &mut Lowering,
    op: OpId,
    r: Value,
) -> Result<Value, Diagnostic> {
    result_buffer_at(ctx, st, op, op, r)
}

/// [`result_buffer`] of `r`, the result of `producer` (whose `comm.slot` places a comm
/// buffer), created before `op` (a collective that computes it as its epilogue).
fn result_buffer_at(
    ctx: &mut Context,
    st: &mut Lowering,
    producer: OpId,
    op: OpId,
    r: Value,
) -> Result<Value, Diagnostic> {
    let t = ctx.value_type(r);
    let m = memref_of(ctx, t);
    let b = if let Some(enc) = buffer_encoding(ctx, t) {
        let slot = slot_of(ctx, producer).ok_or_else(|| {
            err(
                ctx,
                op,
                "comm-to-rt: comm buffer without 'comm.slot': run comm-plan-pools first",
            )
        })?;
        let key = (enc.kind_str().to_string(), enc.group.clone());
        let pool = *st.pools.get(&key).ok_or_else(|| {
            err(
                ctx,
                op,
                format!(
                    "comm-to-rt: no comm.pool for ({}, @{}) before this op",
                    key.0, key.1
                ),
            )
        })?;
        let off = i64::try_from(slot.offset).unwrap_or(i64::MAX);
        let off = i64_attr(ctx, off);
        let mut bld = Builder::before(ctx, op);
        let v = bld.create_value("rt.pool_view", &[pool], m, &[("offset", off)]);
        st.comm.insert(r, (pool, slot.offset));
        v
    } else {
        let mut bld = Builder::before(ctx, op);
        bld.create_value("rt.alloc", &[], m, &[])
    };
    st.buf.insert(r, b);
    Ok(b)
}

/// The value a plain `compute.clone` copies into a comm buffer whose one reader is the shard
/// of a pushing fused all-gather-matmul (`fused_matmul::pushes`), or of a pushing async
/// all-gather when the value is an argument: the collective sends the value itself, so the
/// clone is not needed.
fn fused_shard_source(
    ctx: &Context,
    op: OpId,
    group: &crate::fusion::Group,
    push_groups: &HashSet<String>,
) -> Option<Value> {
    if ctx.op_name(op) != "compute.clone"
        || group.ops.len() != 1
        || !crate::kernels::is_plain_copy(ctx, op, &group.inputs)
    {
        return None;
    }
    let r = ctx.result(op, 0);
    buffer_encoding(ctx, ctx.value_type(r))?;
    let src = ctx.operand(op, 0);
    match ctx.uses(r) {
        [u] if u.index == 0 && fused_matmul::pushes(ctx, u.op) => Some(src),
        // A pushing all-gather of an argument's shard pushes it from the argument: the
        // caller's buffer, never written or freed during the call, so it stays what the
        // clone would have copied however late the comm stream reads it. (NCCL's
        // all-gathers keep the clone: sent from outside its registered pools, or staged
        // into them on the comm stream, the FSDP step measured 7 % slower.)
        [u] if ctx.op_name(u.op) == "comm.all_gather"
            && (u.index as usize) < ctx.operands(u.op).len() / 2
            && ctx.defining_op(src).is_none()
            && ctx
                .inherent_attr(u.op, "group")
                .and_then(|a| ctx.attr_as_symbol(a))
                .is_some_and(|g| push_groups.contains(g)) =>
        {
            Some(src)
        }
        _ => None,
    }
}

/// The (pool, offset) of a comm-buffer operand.
fn comm_loc(ctx: &Context, st: &Lowering, op: OpId, v: Value) -> Result<(Value, u64), Diagnostic> {
    st.comm.get(&v).copied().ok_or_else(|| {
        err(
            ctx,
            op,
            "comm-to-rt: collective operand is not a planned comm buffer",
        )
    })
}

fn dtype_of(ctx: &Context, op: OpId, v: Value) -> Result<&'static str, Diagnostic> {
    let t = value_tensor(ctx, v).ok_or_else(|| err(ctx, op, "comm-to-rt: expects tensors"))?;
    dtype_name(ctx, t.elem).ok_or_else(|| {
        err(
            ctx,
            op,
            "comm-to-rt: element type has no runtime dtype (f16, bf16, f32, f64, i8, u8, i32, u32, i64, u64)",
        )
    })
}

fn numel(ctx: &Context, v: Value) -> i64 {
    value_tensor(ctx, v).map_or(0, |t| t.numel())
}

/// Records an event on `stream` before `before` (after the work issued so far on it).
fn record_event(ctx: &mut Context, before: OpId, stream: &str) -> Value {
    let et = rt::event_type(ctx);
    let s = ctx.str_attr(stream);
    Builder::before(ctx, before).create_value("rt.event_record", &[], et, &[("stream", s)])
}

/// Makes `stream` wait for event `e`, before `before`.
fn wait_event(ctx: &mut Context, before: OpId, e: Value, stream: &str) {
    let s = ctx.str_attr(stream);
    Builder::before(ctx, before).create("rt.stream_wait", &[e], &[], &[("stream", s)]);
}

/// Makes `waiter` wait for the work issued so far on `from` (record + wait).
fn sync_streams(ctx: &mut Context, before: OpId, from: &str, waiter: &str) -> Value {
    let e = record_event(ctx, before, from);
    wait_event(ctx, before, e, waiter);
    e
}

#[allow(clippy::too_many_arguments)]
fn lower_op(
    ctx: &mut Context,
    op: OpId,
    module: Option<OpId>,
    func: OpId,
    plan: &FusionPlan,
    st: &mut Lowering,
    kernels: &mut KernelTable,
    stats: &mut LowerStats,
) -> Result<(), Diagnostic> {
    let name = ctx.op_name(op).to_string();
    if plan.absorbed.contains_key(&op) || plan.fused_into.contains_key(&op) {
        return Ok(()); // computed by a later kernel, or by its all-reduce's epilogue
    }
    if st.gemm_transposed.contains(&op) {
        return Ok(()); // read transposed by the GEMMs that use it
    }
    if let Some(&g) = plan.root_group.get(&op) {
        let group = &plan.groups[g];
        if let Some(src) = fused_shard_source(ctx, op, group, &st.push_groups) {
            let r = ctx.result(op, 0);
            result_buffer(ctx, st, op, r)?;
            let b = buffer(ctx, st, op, src)?;
            st.shard_sources.insert(r, b);
            return Ok(());
        }
        if let Some(b) = reshape_alias(ctx, st, op, group) {
            let r = ctx.result(op, 0);
            let m = memref_of(ctx, ctx.value_type(r));
            let v = Builder::before(ctx, op).create_value("rt.view", &[b], m, &[]);
            st.buf.insert(r, v);
            return Ok(());
        }
        let sym = kernel_symbol(ctx, module, func, group, kernels)?;
        let mut args = Vec::new();
        for &v in &group.inputs {
            args.push(buffer(ctx, st, op, v)?);
        }
        let r = ctx.result(op, 0);
        let out = result_buffer(ctx, st, op, r)?;
        args.push(out);
        let mut work = launch_items(ctx, op);
        // A plain copy moves one 16-byte vector per thread (kernels::copy).
        if let Some(rows) = crate::kernels::fused_row_count(ctx, &group.ops) {
            // A reduction with the chains around it: one block per row (kernels::rows).
            work = (rows as i64).max(1) * BLOCK;
        } else if group.ops.len() == 1 && crate::kernels::is_plain_copy(ctx, op, &group.inputs) {
            let bytes = value_tensor(ctx, r)
                .map(|t| work * commlir_dialects::shape::elem_bytes(ctx, t.elem).max(1) as i64);
            if let Some(b) = bytes {
                work = ((b + crate::kernels::COPY_VECTOR_BYTES as i64 - 1)
                    / crate::kernels::COPY_VECTOR_BYTES as i64)
                    .max(1);
            }
        } else if group.ops.len() == 1
            && matches!(ctx.op_name(op), "compute.permute" | "compute.broadcast")
        {
            // One 16-byte vector per thread where the kernel can (kernels::movement_vector_width).
            let w = crate::kernels::movement_vector_width(ctx, op) as i64;
            work = ((work + w - 1) / w).max(1);
        } else if crate::fusion::is_fused_chain(ctx, &group.ops) {
            // A fused elementwise chain (absorbed broadcasts included) handles one vector per
            // thread (kernels::elementwise).
            let w = crate::kernels::elementwise_vector_width(ctx, &group.ops) as i64;
            work = ((work + w - 1) / w).max(1);
        }
        let k = ctx.symbol_ref(&sym);
        let (grid, block) = if lane_walker(ctx, &group.ops) && grid_for(work) < FEW_BLOCKS {
            // Few lanes, each walking a long reduced dimension (a column sum over the tokens,
            // e.g. a norm's weight gradient): at 256 threads a block they would fill a few SMs
            // only. A warp a block spreads them over the whole GPU; every lane still sums in
            // the same order (the kernel strides by its launch shape), so the result is the
            // same bits.
            ((work + WARP - 1) / WARP, WARP)
        } else {
            (grid_for(work), BLOCK)
        };
        let grid = i64_attr(ctx, grid.clamp(1, MAX_GRID));
        let block = i64_attr(ctx, block);
        let mut bld = Builder::before(ctx, op);
        let launch = bld.create(
            "rt.launch",
            &args,
            &[],
            &[("kernel", k), ("grid", grid), ("block", block)],
        );
        if group.ops == [op] && ctx.op_name(op) == "compute.add" && group.inputs.len() == 2 {
            st.plain_adds.insert(launch);
        }
        st.compute_dirty = true;
        stats.launches += 1;
        return Ok(());
    }
    match name.as_str() {
        "comm.pool" => {
            let info = pool_info(ctx, op)
                .ok_or_else(|| err(ctx, op, "comm-to-rt: malformed comm.pool"))?;
            let kind = encoding_kind_str(info.kind);
            let pt = rt::pool_type(ctx);
            let attrs = [
                ("kind", ctx.str_attr(kind)),
                ("group", ctx.symbol_ref(&info.group)),
                (
                    "size",
                    i64_attr(ctx, i64::try_from(info.size).unwrap_or(i64::MAX)),
                ),
                (
                    "alignment",
                    i64_attr(ctx, i64::try_from(info.alignment).unwrap_or(i64::MAX)),
                ),
            ];
            let mut bld = Builder::before(ctx, op);
            let p = bld.create_value("rt.pool_alloc", &[], pt, &attrs);
            st.pools.insert((kind.to_string(), info.group), p);
        }
        "comm.pool_release" => {
            let pool_op = ctx.defining_op(ctx.operand(op, 0));
            let info = pool_op.and_then(|p| pool_info(ctx, p));
            let p = info
                .and_then(|i| {
                    st.pools
                        .get(&(encoding_kind_str(i.kind).to_string(), i.group))
                        .copied()
                })
                .ok_or_else(|| err(ctx, op, "comm-to-rt: releases an unknown pool"))?;
            if st.comm_dirty {
                sync_streams(ctx, op, "comm", "compute");
                st.comm_dirty = false;
            }
            let mut bld = Builder::before(ctx, op);
            bld.create("rt.pool_free", &[p], &[], &[]);
        }
        "comm.alloc" => {
            let r = ctx.result(op, 0);
            result_buffer(ctx, st, op, r)?;
        }
        "compute.matmul" => lower_matmul(ctx, op, st)?,
        "compute.attention" => attention::lower(ctx, op, module, func, st, kernels)?,
        "compute.attention_backward" => attention::lower_backward(ctx, op, st)?,
        "comm.all_reduce"
        | "comm.all_reduce_coalesced"
        | "comm.all_gather"
        | "comm.reduce_scatter"
        | "comm.all_to_all"
        | "comm.broadcast" => {
            stats.collectives += lower_collective(ctx, op, func, st, kernels)?;
        }
        "comm.shard_dim_alltoall" => {
            stats.collectives += 1;
            lower_shard_dim_alltoall(ctx, op, module, func, st, kernels)?;
            stats.launches += 2;
        }
        "comm.wait" => {
            let w = ctx.operand(op, 0);
            let e = *st
                .work
                .get(&w)
                .ok_or_else(|| err(ctx, op, "comm-to-rt: waits on an unknown work handle"))?;
            let s = ctx.str_attr("compute");
            let mut bld = Builder::before(ctx, op);
            bld.create("rt.stream_wait", &[e], &[], &[("stream", s)]);
            if st.last_comm_event == Some(e) {
                st.comm_dirty = false;
            }
            for (i, &r) in ctx.results(op).to_vec().iter().enumerate() {
                let b = ctx.operand(op, i + 1);
                let nb = buffer(ctx, st, op, b)?;
                st.buf.insert(r, nb);
                if let Some(&loc) = st.comm.get(&b) {
                    st.comm.insert(r, loc);
                }
            }
        }
        "symm.one_shot_all_reduce"
        | "symm.two_shot_all_reduce"
        | "symm.all_gather"
        | "symm.reduce_scatter" => {
            let epilogue = plan.epilogues.get(&op).map(|&g| &plan.groups[g]);
            lower_symm(ctx, op, module, func, st, kernels, epilogue)?;
        }
        "coll.all_slice" => lower_all_slice(ctx, op, module, func, st, kernels)?,
        "symm.fused_all_gather_matmul" => {
            fused_matmul::lower_all_gather_matmul(ctx, op, module, func, st, kernels)?;
        }
        "symm.fused_matmul_reduce_scatter" => {
            let epilogue = plan.epilogues.get(&op).map(|&g| &plan.groups[g]);
            fused_matmul::lower_matmul_reduce_scatter(
                ctx, op, module, func, st, kernels, epilogue,
            )?;
        }
        "func.call" => {
            let mut args = Vec::new();
            for &v in ctx.operands(op).to_vec().iter() {
                args.push(buffer(ctx, st, op, v)?);
            }
            let olds = ctx.results(op).to_vec();
            let mut tys = Vec::with_capacity(olds.len());
            for &r in &olds {
                let t = ctx.value_type(r);
                if !matches!(ctx.type_kind(t), TypeKind::Tensor { .. }) {
                    return Err(err(
                        ctx,
                        op,
                        "comm-to-rt: every call result must be a tensor",
                    ));
                }
                tys.push(memref_of(ctx, t));
            }
            let callee = ctx
                .inherent_attr(op, "callee")
                .ok_or_else(|| err(ctx, op, "requires 'callee'"))?;
            let mut bld = Builder::before(ctx, op);
            let call = bld.create("func.call", &args, &tys, &[("callee", callee)]);
            for (i, &r) in olds.iter().enumerate() {
                let nr = ctx.result(call, i);
                st.buf.insert(r, nr);
            }
            // The callee may have launched work on the compute stream; it made the compute
            // stream wait for its own collectives before returning.
            st.compute_dirty = true;
        }
        "func.return" => {
            let mut vals = Vec::new();
            for &v in ctx.operands(op).to_vec().iter() {
                vals.push(buffer(ctx, st, op, v)?);
            }
            if st.comm_dirty {
                sync_streams(ctx, op, "comm", "compute");
                st.comm_dirty = false;
            }
            let mut bld = Builder::before(ctx, op);
            bld.create("func.return", &vals, &[], &[]);
        }
        n if n.starts_with("coll.") => {
            return Err(err(ctx, op, "comm-to-rt: run coll-to-comm first"));
        }
        _ => {
            return Err(err(
                ctx,
                op,
                "comm-to-rt: no runtime lowering for this op yet",
            ));
        }
    }
    Ok(())
}

/// The buffer a kernel of reshapes only would copy, when the result can be a view of it
/// (`rt.view`): a row-major reshape moves no element. Only for an input the function
/// allocated (`rt.alloc` or a view of one: not an argument, a pool slot or a call's result)
/// and a result that is neither a comm buffer nor returned (the caller frees what it is
/// returned); the allocation then lives until the last reader of the buffer or its views.
fn reshape_alias(ctx: &Context, st: &Lowering, op: OpId, group: &fusion::Group) -> Option<Value> {
    let [input] = group.inputs[..] else {
        return None;
    };
    if !group
        .ops
        .iter()
        .all(|o| ctx.op_name(*o) == "compute.reshape")
    {
        return None;
    }
    let r = ctx.result(op, 0);
    if buffer_encoding(ctx, ctx.value_type(r)).is_some()
        || buffer_encoding(ctx, ctx.value_type(input)).is_some()
        || ctx
            .get_attr(op, commlir_dialects::comm::SLOT_ATTR)
            .is_some()
        || ctx
            .uses(r)
            .iter()
            .any(|u| ctx.op_name(u.op) == "func.return")
    {
        return None;
    }
    let b = *st.buf.get(&input)?;
    let owned = ctx
        .defining_op(b)
        .is_some_and(|d| matches!(ctx.op_name(d), "rt.alloc" | "rt.view"));
    (owned && !st.comm.contains_key(&input)).then_some(b)
}

/// Whether the `coll.all_slice` `op` is lowered to a view of this rank's rows of its input
/// (`rt.rank_view`, no kernel, no allocation): a slice along dim 0 (contiguous rows) whose
/// input is no comm buffer (a slot may be planned into other bytes after its last reader at
/// the comm level, this slice) and whose result is a plain tensor that is not returned (the
/// caller frees what it is returned). [`hoist_slice_views`] moves such slices up.
fn slice_is_view(ctx: &Context, st: &Lowering, op: OpId) -> bool {
    let (x, r) = (ctx.operand(op, 0), ctx.result(op, 0));
    let dim0 = ctx
        .inherent_attr(op, "dim")
        .and_then(|a| ctx.attr_as_i64(a))
        == Some(0);
    dim0 && !st.comm.contains_key(&x) && plain_result(ctx, op, x, r)
}

/// The part of [`slice_is_view`] that needs no lowering state.
fn plain_result(ctx: &Context, op: OpId, x: Value, r: Value) -> bool {
    buffer_encoding(ctx, ctx.value_type(x)).is_none()
        && buffer_encoding(ctx, ctx.value_type(r)).is_none()
        && ctx
            .get_attr(op, commlir_dialects::comm::SLOT_ATTR)
            .is_none()
        && !ctx
            .uses(r)
            .iter()
            .any(|u| ctx.op_name(u.op) == "func.return")
}

/// Moves every `coll.all_slice` that becomes a view ([`slice_is_view`]) right after its
/// input's definition (to the top of the block for an argument): a view costs nothing where
/// it stands, and from there the fusion plan sees its rows ready before the collectives that
/// precede its readers (the residual add after the first reduce-scatter of a
/// sequence-parallel block reads the sliced input, and becomes that reduce-scatter's
/// epilogue).
fn hoist_slice_views(ctx: &mut Context, block: BlockId) {
    let slices: Vec<OpId> = ctx
        .block_ops(block)
        .filter(|&o| {
            ctx.op_name(o) == "coll.all_slice"
                && ctx.inherent_attr(o, "dim").and_then(|a| ctx.attr_as_i64(a)) == Some(0)
                && plain_result(ctx, o, ctx.operand(o, 0), ctx.result(o, 0))
        })
        .collect();
    for s in slices {
        match ctx.defining_op(ctx.operand(s, 0)) {
            Some(d) if ctx.op_parent(d) == Some(block) => ctx.move_after(s, d),
            Some(_) => {}
            None => {
                if let Some(first) = ctx.block_ops(block).next().filter(|&f| f != s) {
                    ctx.move_before(s, first);
                }
            }
        }
    }
}

/// Whether `op` swaps the last two dims of its operand and nothing else: a rank-2
/// `compute.transpose`, or a `compute.permute` that swaps the last two dims.
fn swaps_last_two(ctx: &Context, op: OpId) -> bool {
    let name = ctx.op_name(op);
    if !matches!(name, "compute.transpose" | "compute.permute") {
        return false;
    }
    let rank = value_tensor(ctx, ctx.result(op, 0)).map_or(0, |t| t.shape.len());
    match name {
        "compute.transpose" => rank == 2,
        "compute.permute" => ctx
            .inherent_attr(op, "perm")
            .and_then(|a| ctx.attr_as_i64_array(a))
            .is_some_and(|p| {
                let n = p.len();
                n >= 2
                    && p[..n - 2].iter().enumerate().all(|(i, &d)| d == i as i64)
                    && p[n - 2] == n as i64 - 1
                    && p[n - 1] == n as i64 - 2
            }),
        _ => false,
    }
}

/// Folds a transpose of a transpose (both swapping the last two dims) into the first one's
/// operand: readers of the outer result read the original value. Autograd produces these
/// around every linear layer (the weight's transpose is transposed back for the input
/// gradient, the weight gradient is computed transposed and transposed back), and each
/// would otherwise be a kernel over a weight-sized matrix. Plain tensors only (no comm
/// buffer, no pool slot): the fold is exact, so results are unchanged. The inner transpose
/// stays for its other readers (a GEMM usually reads it through cuBLAS's transposition).
fn fold_double_transposes(ctx: &mut Context, block: BlockId) {
    let plain = |ctx: &Context, op: OpId| {
        ctx.get_attr(op, commlir_dialects::comm::SLOT_ATTR)
            .is_none()
            && buffer_encoding(ctx, ctx.value_type(ctx.operand(op, 0))).is_none()
            && buffer_encoding(ctx, ctx.value_type(ctx.result(op, 0))).is_none()
    };
    let ops: Vec<OpId> = ctx.block_ops(block).collect();
    for outer in ops {
        if !swaps_last_two(ctx, outer) || !plain(ctx, outer) {
            continue;
        }
        let Some(inner) = ctx.defining_op(ctx.operand(outer, 0)) else {
            continue;
        };
        if !swaps_last_two(ctx, inner) || !plain(ctx, inner) {
            continue;
        }
        let (orig, r) = (ctx.operand(inner, 0), ctx.result(outer, 0));
        if ctx.value_type(orig) != ctx.value_type(r) {
            continue;
        }
        ctx.replace_all_uses(r, orig);
        ctx.erase_op(outer);
        if ctx.uses(ctx.result(inner, 0)).is_empty() {
            ctx.erase_op(inner);
        }
    }
}

/// Erases `compute` ops whose results nothing reads (pure ops only, no comm buffer or pool
/// slot among their results), last first so that chains of them go too: a kernel whose result
/// is never read would still be launched. The exporter leaves such ops behind when a later
/// view undoes an earlier one (a transpose whose transpose was folded away).
fn erase_dead_compute(ctx: &mut Context, block: BlockId) {
    let ops: Vec<OpId> = ctx.block_ops(block).collect();
    for op in ops.into_iter().rev() {
        let dead = ctx.op_name(op).starts_with("compute.")
            && ctx.op_has_trait(op, commlir_ir::Trait::Pure)
            && ctx
                .get_attr(op, commlir_dialects::comm::SLOT_ATTR)
                .is_none()
            && !ctx.results(op).is_empty()
            && ctx.results(op).iter().all(|&r| {
                ctx.uses(r).is_empty() && buffer_encoding(ctx, ctx.value_type(r)).is_none()
            });
        if dead {
            ctx.erase_op(op);
        }
    }
}

/// Recomputes exact widening casts (f16/bf16 to f32/f64) at their far readers (more than
/// [`FAR_READER`] ops later): the wide result is then not kept for them, since a copy of the
/// cast right before an elementwise reader fuses into that reader's kernel, and what stays
/// live in between is the narrow source. Near readers (the forward's own kernel, where the
/// cast is computed once) keep the original. A training step upcasts
/// an activation for the forward's norm or SiLU and reads the f32 copy again in the backward;
/// keeping the narrow source (saved anyway) instead of the wide copy halves what stays live in
/// between, as Inductor's recomputation of pointwise ops does. Plain tensors only; the results
/// are the same bits (the widening is exact).
fn rematerialize_upcasts(ctx: &mut Context, block: BlockId) {
    let ops: Vec<OpId> = ctx.block_ops(block).collect();
    let pos: HashMap<OpId, usize> = ops.iter().enumerate().map(|(i, &o)| (o, i)).collect();
    let widening = |ctx: &Context, from: Value, to: Value| {
        let (Some(a), Some(b)) = (value_tensor(ctx, from), value_tensor(ctx, to)) else {
            return false;
        };
        let kind = |t| match ctx.type_kind(t) {
            TypeKind::Float(k) => Some(*k),
            _ => None,
        };
        matches!(
            (kind(a.elem), kind(b.elem)),
            (
                Some(FloatKind::F16 | FloatKind::BF16),
                Some(FloatKind::F32 | FloatKind::F64)
            )
        )
    };
    for cast in ops {
        if ctx.op_name(cast) != "compute.cast"
            || ctx
                .get_attr(cast, commlir_dialects::comm::SLOT_ATTR)
                .is_some()
        {
            continue;
        }
        let (src, r) = (ctx.operand(cast, 0), ctx.result(cast, 0));
        if !widening(ctx, src, r)
            || buffer_encoding(ctx, ctx.value_type(src)).is_some()
            || buffer_encoding(ctx, ctx.value_type(r)).is_some()
        {
            continue;
        }
        let users: Vec<commlir_ir::Use> = ctx.uses(r).to_vec();
        if users.iter().any(|u| ctx.op_name(u.op) == "func.return") {
            continue;
        }
        let at = pos[&cast];
        let far: Vec<commlir_ir::Use> = users
            .into_iter()
            .filter(|u| pos.get(&u.op).is_some_and(|&p| p > at + FAR_READER))
            .collect();
        if far.is_empty() {
            continue;
        }
        // Keeping the narrow source alive until the last reader instead of the wide copy
        // holds fewer bytes whatever else reads the source.
        let ty = ctx.value_type(r);
        for u in far {
            let copy = Builder::before(ctx, u.op).create_value("compute.cast", &[src], ty, &[]);
            ctx.set_operand(u.op, u.index as usize, copy);
        }
        if ctx.uses(r).is_empty() {
            ctx.erase_op(cast);
        }
    }
}

/// Ops after a cast beyond which a reader recomputes it ([`rematerialize_upcasts`]): a
/// training step's backward reads the forward's casts hundreds of ops later; a forward's own
/// readers are a few ops away.
const FAR_READER: usize = 32;

/// `b` and every `rt.view` or `rt.rank_view` of it, transitively.
fn with_views(ctx: &Context, b: Value) -> Vec<Value> {
    let mut all = vec![b];
    let mut i = 0;
    while i < all.len() {
        for u in ctx.uses(all[i]) {
            if matches!(ctx.op_name(u.op), "rt.view" | "rt.rank_view") {
                all.push(ctx.result(u.op, 0));
            }
        }
        i += 1;
    }
    all
}

/// Number of independent work items (threads) of a kernel rooted at `op`.
/// Threads of a warp: the block size of kernels whose lanes are few ([`lane_walker`]).
const WARP: i64 = 32;
/// Below this many blocks of [`BLOCK`] threads, a lane-walking kernel launches warps instead
/// (twice the SMs of an H100/H200).
const FEW_BLOCKS: i64 = 264;

/// Whether a kernel's single op walks a reduced dimension one thread per lane (a standalone
/// `reduce_sum`, `reduce_max` or `softmax` off the last dimension), so that its launch shape
/// is free: the kernel loops grid-stride over lanes whatever the block size.
fn lane_walker(ctx: &Context, ops: &[OpId]) -> bool {
    match ops {
        [op] => match ctx.op_name(*op) {
            "compute.reduce_max" => true,
            "compute.reduce_sum" | "compute.softmax" => !crate::kernels::is_row_block(ctx, *op),
            _ => false,
        },
        _ => false,
    }
}

fn launch_items(ctx: &Context, op: OpId) -> i64 {
    let r = ctx.result(op, 0);
    match ctx.op_name(op) {
        // One thread per lane: the reduced dimension is walked by the thread, in order.
        "compute.softmax" | "compute.reduce_sum" | "compute.reduce_max" => {
            let x = ctx.operand(op, 0);
            let t = value_tensor(ctx, x).unwrap_or_else(|| value_tensor(ctx, r).unwrap());
            let dim = ctx
                .inherent_attr(op, "dim")
                .and_then(|a| ctx.attr_as_i64(a))
                .unwrap_or(0) as usize;
            let len = t.shape.get(dim).copied().unwrap_or(1).max(1);
            let lanes = (t.numel() / len).max(1);
            // One block per row (kernels::row_block); reduce_max is always one thread per
            // lane (kernels::standalone).
            if ctx.op_name(op) != "compute.reduce_max" && crate::kernels::is_row_block(ctx, op) {
                lanes * BLOCK
            } else {
                lanes
            }
        }
        _ => numel(ctx, r).max(1),
    }
}

/// The transposes of `ops` that cuBLAS can apply instead: a `compute.transpose`, or a
/// `compute.permute` swapping the last two dimensions of a rank-2 or rank-3 tensor, whose
/// every use is an operand of a `compute.matmul` of the same rank, reading a plain tensor (not
/// a comm buffer) and writing its result to no pool slot. A GEMM reads the input with its
/// operand transposed (`transa`/`transb`), so the transpose's kernel and buffer disappear:
/// `x @ W.T` of an `nn.Linear` exported from PyTorch costs one GEMM, not a copy of the weight
/// and a GEMM.
fn gemm_operand_transposes(ctx: &Context, ops: &[OpId], plan: &FusionPlan) -> HashSet<OpId> {
    let swaps_last_two = |op: OpId| -> Option<usize> {
        let name = ctx.op_name(op);
        if name != "compute.transpose" && name != "compute.permute" {
            return None;
        }
        let rank = value_tensor(ctx, ctx.result(op, 0))?.shape.len();
        match name {
            "compute.transpose" if rank == 2 => Some(2),
            "compute.permute" => {
                let perm = ctx.attr_as_i64_array(ctx.inherent_attr(op, "perm")?)?;
                match perm.as_slice() {
                    [1, 0] => Some(2),
                    [0, 2, 1] => Some(3),
                    _ => None,
                }
            }
            _ => None,
        }
    };
    ops.iter()
        .copied()
        .filter(|&op| {
            let Some(rank) = swaps_last_two(op) else {
                return false;
            };
            if plan.absorbed.contains_key(&op)
                || ctx
                    .get_attr(op, commlir_dialects::comm::SLOT_ATTR)
                    .is_some()
                || buffer_encoding(ctx, ctx.value_type(ctx.operand(op, 0))).is_some()
                || buffer_encoding(ctx, ctx.value_type(ctx.result(op, 0))).is_some()
            {
                return false;
            }
            let uses = ctx.uses(ctx.result(op, 0));
            !uses.is_empty()
                && uses.iter().all(|u| {
                    ctx.op_name(u.op) == "compute.matmul"
                        && value_tensor(ctx, ctx.result(u.op, 0))
                            .is_some_and(|t| t.shape.len() == rank)
                })
        })
        .collect()
}

fn lower_matmul(ctx: &mut Context, op: OpId, st: &mut Lowering) -> Result<(), Diagnostic> {
    let (a, b, r) = (ctx.operand(op, 0), ctx.operand(op, 1), ctx.result(op, 0));
    let (ta, tb) = match (value_tensor(ctx, a), value_tensor(ctx, b)) {
        (Some(x), Some(y)) => (x, y),
        _ => return Err(err(ctx, op, "expects tensors")),
    };
    let (batch, m, k, n) = match (ta.shape.as_slice(), tb.shape.as_slice()) {
        ([m, k], [_, n]) => (1, *m, *k, *n),
        ([bb, m, k], [_, _, n]) => (*bb, *m, *k, *n),
        _ => return Err(err(ctx, op, "comm-to-rt: matmul of unexpected rank")),
    };
    // cuBLAS GEMM here is float-only; integer matmul has no kernel either.
    kernel_int_op_ok(ctx, op, ta.elem).map_err(|m| err(ctx, op, format!("comm-to-rt: {m}")))?;
    let dtype = dtype_of(ctx, op, a)?;
    // An operand that is a folded transpose is read from the transpose's input.
    let source = |v: Value| {
        ctx.defining_op(v)
            .filter(|d| st.gemm_transposed.contains(d))
            .map_or((v, false), |d| (ctx.operand(d, 0), true))
    };
    let ((a, trans_a), (b, trans_b)) = (source(a), source(b));
    let ba = buffer(ctx, st, op, a)?;
    let bb = buffer(ctx, st, op, b)?;
    let out = result_buffer(ctx, st, op, r)?;
    // Row-major C[m×n] = A[m×k]·B[k×n] is column-major Cᵀ = Bᵀ·Aᵀ, and a row-major matrix
    // read column-major is its transpose: so cuBLAS gets (B, A) with no transposition,
    // m' = n, n' = m, and leading dimensions n, k, n. A B that is the transpose of a
    // row-major W[n×k] is W read column-major (Wᵀ, leading dimension k) transposed by cuBLAS;
    // an A that is the transpose of V[k×m] likewise (leading dimension m).
    let attrs = [
        ("transa", i64::from(trans_b)),
        ("transb", i64::from(trans_a)),
        ("m", n),
        ("n", m),
        ("k", k),
        ("lda", if trans_b { k } else { n }),
        ("ldb", if trans_a { m } else { k }),
        ("ldc", n),
        ("stride_a", k * n),
        ("stride_b", m * k),
        ("stride_c", m * n),
        ("batch", batch),
    ];
    let mut named: Vec<(&str, commlir_ir::Attr)> =
        attrs.iter().map(|(k, v)| (*k, i64_attr(ctx, *v))).collect();
    named.push(("dtype", ctx.str_attr(dtype)));
    let mut bld = Builder::before(ctx, op);
    bld.create("rt.gemm", &[bb, ba, out], &[], &named);
    st.compute_dirty = true;
    Ok(())
}

/// One NCCL call to emit: op name, pool operands, attributes.
type NcclCall = (
    &'static str,
    Vec<Value>,
    Vec<(&'static str, commlir_ir::Attr)>,
);

/// The `symm_mem` groups of a function whose all-gathers may push through copy engines: on a
/// peer-mapped pool, each rank's comm stream passes a barrier (every rank's comm stream has
/// reached the collective, so every rank is done with its receive buffer, as NCCL's own
/// ordering guarantees), a copy engine writes the shard into block `rank` of each peer's
/// receive buffer, and a signal pair per peer says it is there. No SM moves a byte, so the
/// GEMMs beside the gather keep every SM (NCCL's all-gather takes a block per channel).
///
/// The signals use row 0 of the pool's signal pad, as the fused pipelines' steps do, which
/// also run on the comm stream, in program order, identically on every rank. A blocking
/// `symm` collective signals from the compute stream, which could interleave with the comm
/// stream's signals; a group with one in the function keeps NCCL's all-gather.
///
/// Off unless `COMMLIR_PUSH_ALL_GATHER=1` at compile time: on two H100s NCCL's all-gathers
/// beside the GEMMs still finish sooner (the FSDP step measured 3 % slower with the pushes,
/// docs/benchmarks.md), so this is an experiment knob until the cost model can choose.
fn push_groups(ctx: &Context, ops: &[OpId]) -> HashSet<String> {
    if !std::env::var("COMMLIR_PUSH_ALL_GATHER").is_ok_and(|v| v.trim() == "1") {
        return HashSet::new();
    }
    let group = |op: OpId| {
        ctx.inherent_attr(op, "group")
            .and_then(|a| ctx.attr_as_symbol(a))
            .map(str::to_string)
    };
    let mut groups = HashSet::new();
    let mut blocking = HashSet::new();
    for &op in ops {
        let name = ctx.op_name(op);
        if name == "comm.all_gather" {
            let symm = commlir_dialects::coll::group_of(ctx, op).is_ok_and(|g| g.symm_mem);
            if let Some(g) = group(op).filter(|_| symm) {
                groups.insert(g);
            }
        } else if name.starts_with("symm.") && !name.starts_with("symm.fused_") {
            blocking.extend(group(op));
        }
    }
    groups.retain(|g| !blocking.contains(g));
    groups
}

fn lower_collective(
    ctx: &mut Context,
    op: OpId,
    func: OpId,
    st: &mut Lowering,
    kernels: &mut KernelTable,
) -> Result<u64, Diagnostic> {
    let name = ctx.op_name(op).to_string();
    let group = ctx
        .inherent_attr(op, "group")
        .ok_or_else(|| err(ctx, op, "requires 'group'"))?;
    let reduce = ctx.inherent_attr(op, "reduce_op");
    let anchor = st.deps.as_ref().map(|d| d.anchor.get(&op).copied());
    match anchor {
        // Only the compute work this collective depends on (`comm_deps`); nothing when an
        // earlier wait of the comm stream covers it.
        Some(Some(k)) if st.comm_waited.is_none_or(|w| w < k) => {
            let e = *st
                .dep_events
                .get(&k)
                .ok_or_else(|| err(ctx, op, "comm-to-rt: no compute event for this collective"))?;
            wait_event(ctx, op, e, "comm");
            st.comm_waited = Some(k);
        }
        Some(Some(_)) => {}
        _ if st.compute_dirty => {
            sync_streams(ctx, op, "compute", "comm");
            st.compute_dirty = false;
        }
        _ => {}
    }
    let operands = ctx.operands(op).to_vec();
    // (op name, pool operands, attributes) of each NCCL call.
    let mut calls: Vec<NcclCall> = Vec::new();
    match name.as_str() {
        "comm.all_reduce" | "comm.all_reduce_coalesced" => {
            for &x in &operands {
                check_i1_reduce(ctx, op, x, reduce, "all-reduce")?;
                let (p, off) = comm_loc(ctx, st, op, x)?;
                let dtype = dtype_of(ctx, op, x)?;
                let attrs = vec![
                    ("offset", i64_attr(ctx, off as i64)),
                    ("count", i64_attr(ctx, numel(ctx, x))),
                    ("dtype", ctx.str_attr(dtype)),
                    (
                        "reduce_op",
                        reduce.ok_or_else(|| err(ctx, op, "requires 'reduce_op'"))?,
                    ),
                    ("group", group),
                ];
                calls.push(("rt.nccl_all_reduce", vec![p], attrs));
            }
        }
        "comm.broadcast" => {
            let x = operands[0];
            let (p, off) = comm_loc(ctx, st, op, x)?;
            let dtype = dtype_of(ctx, op, x)?;
            let root = ctx
                .inherent_attr(op, "src")
                .ok_or_else(|| err(ctx, op, "requires 'src'"))?;
            let attrs = vec![
                ("offset", i64_attr(ctx, off as i64)),
                ("count", i64_attr(ctx, numel(ctx, x))),
                ("root", root),
                ("dtype", ctx.str_attr(dtype)),
                ("group", group),
            ];
            calls.push(("rt.nccl_broadcast", vec![p], attrs));
        }
        "comm.all_gather" | "comm.reduce_scatter" | "comm.all_to_all" => {
            let half = operands.len() / 2;
            for i in 0..half {
                let (x, y) = (operands[i], operands[half + i]);
                let g = ctx.attr_as_symbol(group).unwrap_or("").to_string();
                let push = name == "comm.all_gather" && st.push_groups.contains(&g);
                // An argument's shard whose clone was skipped ([`fused_shard_source`]) is
                // pushed from the argument.
                let (px, ox) = match st.shard_sources.get(&x) {
                    Some(&src) if push => (src, 0),
                    _ => comm_loc(ctx, st, op, x)?,
                };
                let (py, oy) = comm_loc(ctx, st, op, y)?;
                let dtype = dtype_of(ctx, op, x)?;
                let mut attrs = vec![
                    ("send_offset", i64_attr(ctx, ox as i64)),
                    ("recv_offset", i64_attr(ctx, oy as i64)),
                    ("dtype", ctx.str_attr(dtype)),
                    ("group", group),
                ];
                let call = match name.as_str() {
                    "comm.all_gather" => {
                        attrs.push(("send_count", i64_attr(ctx, numel(ctx, x))));
                        if push {
                            let world = group_size(ctx, op, &g)?;
                            // The signals alone: any shape's kernel will do.
                            let sym =
                                fused_matmul::signal_kernel(ctx, op, func, kernels, dtype, world);
                            attrs.push(("push_kernel", ctx.symbol_ref(&sym)));
                        }
                        "rt.nccl_all_gather"
                    }
                    "comm.reduce_scatter" => {
                        check_i1_reduce(ctx, op, x, reduce, "reduce-scatter")?;
                        attrs.push(("recv_count", i64_attr(ctx, numel(ctx, y))));
                        if let Some(f) = ctx.inherent_attr(op, "prescale") {
                            // NCCL's pre-multiplied sum: an avg divides by G in its factor,
                            // which stays a power of two only for a power-of-two G.
                            let avg = reduce.and_then(|r| ctx.attr_as_str(r)) == Some("avg");
                            let g = ctx.attr_as_symbol(group).unwrap_or("").to_string();
                            if avg && !(group_size(ctx, op, &g)? as u64).is_power_of_two() {
                                return Err(err(
                                    ctx,
                                    op,
                                    "comm-to-rt: a 'prescale' with avg needs a power-of-two group",
                                ));
                            }
                            attrs.push(("prescale", f));
                        }
                        attrs.push((
                            "reduce_op",
                            reduce.ok_or_else(|| err(ctx, op, "requires 'reduce_op'"))?,
                        ));
                        "rt.nccl_reduce_scatter"
                    }
                    _ => {
                        let t =
                            value_tensor(ctx, x).ok_or_else(|| err(ctx, op, "expects tensors"))?;
                        let rows = t.shape.first().copied().unwrap_or(1).max(1);
                        attrs.push(("count", i64_attr(ctx, t.numel())));
                        attrs.push(("row_elems", i64_attr(ctx, t.numel() / rows)));
                        for s in ["input_split_sizes", "output_split_sizes"] {
                            if let Some(a) = ctx.inherent_attr(op, s) {
                                attrs.push((s, a));
                            }
                        }
                        "rt.nccl_all_to_all"
                    }
                };
                calls.push((call, vec![px, py], attrs));
            }
        }
        _ => unreachable!("not a collective: {name}"),
    }
    // Pushing all-gathers are no NCCL calls: nothing to group (each is ordered on the comm
    // stream, the same on every rank).
    let pushing = calls
        .iter()
        .any(|(_, _, attrs)| attrs.iter().any(|(n, _)| *n == "push_kernel"));
    let coalesced = calls.len() > 1 && !pushing;
    let n = calls.len() as u64;
    let mut bld = Builder::before(ctx, op);
    if coalesced {
        bld.create("rt.nccl_group_start", &[], &[], &[]);
    }
    for (call, pools, attrs) in &calls {
        bld.create(call, pools, &[], attrs);
    }
    if coalesced {
        bld.create("rt.nccl_group_end", &[], &[], &[]);
    }
    let et = rt::event_type(ctx);
    let s = ctx.str_attr("comm");
    let mut bld = Builder::before(ctx, op);
    let e = bld.create_value("rt.event_record", &[], et, &[("stream", s)]);
    st.work.insert(ctx.result(op, 0), e);
    st.comm_dirty = true;
    st.last_comm_event = Some(e);
    Ok(n)
}

/// `comm.shard_dim_alltoall` (blocking): pack the input's G chunks of `shard_dim` into a
/// staging buffer (chunk j contiguous, for rank j), all-to-all into a second staging buffer,
/// wait, and unpack the G received blocks along `gather_dim` into the destination slot. This
/// is the sim's definition: concatenate every rank's input along `gather_dim`, keep part
/// `rank` of `shard_dim`. With `gather_dim == shard_dim` that is the rank's own input: a copy.
fn lower_shard_dim_alltoall(
    ctx: &mut Context,
    op: OpId,
    module: Option<OpId>,
    func: OpId,
    st: &mut Lowering,
    kernels: &mut KernelTable,
) -> Result<(), Diagnostic> {
    let (x, o, r) = (ctx.operand(op, 0), ctx.operand(op, 1), ctx.result(op, 0));
    let xb = buffer(ctx, st, op, x)?;
    let ob = buffer(ctx, st, op, o)?;
    st.buf.insert(r, ob);
    if let Some(&loc) = st.comm.get(&o) {
        st.comm.insert(r, loc);
    }
    let int = |ctx: &Context, n: &str| {
        ctx.inherent_attr(op, n)
            .and_then(|a| ctx.attr_as_i64(a))
            .unwrap_or(0)
    };
    let (gd, sd) = (int(ctx, "gather_dim"), int(ctx, "shard_dim"));
    let group_attr = ctx
        .inherent_attr(op, "group")
        .ok_or_else(|| err(ctx, op, "requires 'group'"))?;
    let g = commlir_dialects::coll::group_of(ctx, op)?.size;
    let xt = value_tensor(ctx, x).ok_or_else(|| err(ctx, op, "expects tensors"))?;
    let ot = value_tensor(ctx, o).ok_or_else(|| err(ctx, op, "expects tensors"))?;
    if !kernel_elem_ok(ctx, xt.elem) {
        return Err(err(
            ctx,
            op,
            "comm-to-rt: kernels support f16, bf16, f32, f64 and 1/8/16/32/64-bit integer tensors only",
        ));
    }
    let plain_x = ctx.tensor_type(&xt.shape, xt.elem);
    let plain_o = ctx.tensor_type(&ot.shape, ot.elem);
    if gd == sd {
        let k = synthetic_kernel(
            ctx,
            module,
            func,
            kernels,
            "compute.clone",
            None,
            plain_x,
            plain_x,
        )?;
        launch(ctx, op, &k, &[xb, ob], xt.numel());
        st.compute_dirty = true;
        return Ok(());
    }
    let mut chunk = xt.shape.clone();
    chunk[sd as usize] /= g.max(1);
    let mut staged = vec![g];
    staged.extend(&chunk);
    let staged_t = ctx.tensor_type(&staged, xt.elem);
    let staged_m = memref_of(ctx, staged_t);
    let pack = synthetic_kernel(
        ctx,
        module,
        func,
        kernels,
        "rt.pack_chunks",
        Some(sd),
        plain_x,
        staged_t,
    )?;
    let unpack = synthetic_kernel(
        ctx,
        module,
        func,
        kernels,
        "rt.unpack_chunks",
        Some(gd),
        staged_t,
        plain_o,
    )?;
    let mut bld = Builder::before(ctx, op);
    let send = bld.create_value("rt.alloc", &[], staged_m, &[]);
    let recv = bld.create_value("rt.alloc", &[], staged_m, &[]);
    launch(ctx, op, &pack, &[xb, send], xt.numel());
    sync_streams(ctx, op, "compute", "comm");
    let dtype = dtype_of(ctx, op, x)?;
    let rows = staged[0].max(1);
    let attrs = [
        ("send_offset", i64_attr(ctx, 0)),
        ("recv_offset", i64_attr(ctx, 0)),
        ("count", i64_attr(ctx, xt.numel())),
        ("row_elems", i64_attr(ctx, xt.numel() / rows)),
        ("dtype", ctx.str_attr(dtype)),
        ("group", group_attr),
    ];
    let mut bld = Builder::before(ctx, op);
    bld.create("rt.nccl_all_to_all", &[send, recv], &[], &attrs);
    // Blocking: the compute stream waits right away (for all comm work so far).
    sync_streams(ctx, op, "comm", "compute");
    st.comm_dirty = false;
    launch(ctx, op, &unpack, &[recv, ob], ot.numel());
    st.compute_dirty = true;
    Ok(())
}

/// `coll.all_slice` (no communication): this rank's block along `dim`. Along dim 0 the block
/// is contiguous at `rank · block bytes`; along another dim the input is first packed
/// chunk-major (`rt.pack_chunks`), which makes block `rank` contiguous the same way. The
/// rank is known only when the program runs (`rt.rank_view` asks the runtime), so the copy
/// out of it is a plain clone kernel of one block.
fn lower_all_slice(
    ctx: &mut Context,
    op: OpId,
    module: Option<OpId>,
    func: OpId,
    st: &mut Lowering,
    kernels: &mut KernelTable,
) -> Result<(), Diagnostic> {
    let x = ctx.operand(op, 0);
    let r = ctx.result(op, 0);
    let (Some(xt), Some(rt)) = (value_tensor(ctx, x), value_tensor(ctx, r)) else {
        return Err(err(ctx, op, "comm-to-rt: all_slice needs static tensors"));
    };
    let dim = ctx
        .inherent_attr(op, "dim")
        .and_then(|a| ctx.attr_as_i64(a))
        .ok_or_else(|| err(ctx, op, "requires 'dim'"))?;
    let group_attr = ctx
        .inherent_attr(op, "group")
        .ok_or_else(|| err(ctx, op, "requires 'group'"))?;
    let xb = buffer(ctx, st, op, x)?;
    let plain_r = ctx.tensor_type(&rt.shape, rt.elem);
    let block_bytes = rt.numel() * elem_bytes(ctx, rt.elem) as i64;
    if slice_is_view(ctx, st, op) {
        // This rank's rows of the input, read where they are.
        let view_t = memref_of(ctx, plain_r);
        let stride = i64_attr(ctx, block_bytes);
        let view = Builder::before(ctx, op).create_value(
            "rt.rank_view",
            &[xb],
            view_t,
            &[("stride", stride), ("group", group_attr)],
        );
        st.buf.insert(r, view);
        return Ok(());
    }
    let rb = result_buffer(ctx, st, op, r)?;
    let src = if dim == 0 {
        xb
    } else {
        let g = xt.shape[dim as usize] / rt.shape[dim as usize].max(1);
        let mut staged = vec![g];
        staged.extend(&rt.shape);
        let staged_t = ctx.tensor_type(&staged, xt.elem);
        let staged_m = memref_of(ctx, staged_t);
        let plain_x = ctx.tensor_type(&xt.shape, xt.elem);
        let pack = synthetic_kernel(
            ctx,
            module,
            func,
            kernels,
            "rt.pack_chunks",
            Some(dim),
            plain_x,
            staged_t,
        )?;
        let mut bld = Builder::before(ctx, op);
        let t = bld.create_value("rt.alloc", &[], staged_m, &[]);
        launch(ctx, op, &pack, &[xb, t], xt.numel());
        t
    };
    let view_t = memref_of(ctx, plain_r);
    let stride = i64_attr(ctx, block_bytes);
    let mut bld = Builder::before(ctx, op);
    let view = bld.create_value(
        "rt.rank_view",
        &[src],
        view_t,
        &[("stride", stride), ("group", group_attr)],
    );
    let copy = synthetic_kernel(
        ctx,
        module,
        func,
        kernels,
        "compute.clone",
        None,
        plain_r,
        plain_r,
    )?;
    launch(ctx, op, &copy, &[view, rb], rt.numel());
    st.buf.insert(r, rb);
    st.compute_dirty = true;
    Ok(())
}

/// A symm collective (`symm.*`, blocking, compute stream) → an `rt.symm_kernel` specialized
/// on (collective, count, dtype, reduction, G) and the `rt.symm_collective` that launches it
/// (or calls the runtime's NCCL fallback when the pool is not peer-mapped).
///
/// With an `epilogue` (a one-shot all-reduce whose result only its fusion group reads, see
/// [`crate::fusion`]), the group's plain `rt.kernel` is created for the fallback, the symm
/// kernel carries it as `epilogue`, and the collective stores the group's result instead of
/// the reduced tensor: its operands are `(pool, chain result, chain inputs but the reduced
/// value...)`.
fn lower_symm(
    ctx: &mut Context,
    op: OpId,
    module: Option<OpId>,
    func: OpId,
    st: &mut Lowering,
    kernels: &mut KernelTable,
    epilogue: Option<&fusion::Group>,
) -> Result<(), Diagnostic> {
    let name = ctx.op_name(op).to_string();
    let coll = name.trim_start_matches("symm.").to_string();
    let x = ctx.operand(op, 0);
    let reduce = ctx.inherent_attr(op, "reduce_op");
    let what = if coll == "reduce_scatter" {
        "reduce-scatter"
    } else {
        "all-reduce"
    };
    check_i1_reduce(ctx, op, x, reduce, what)?;
    let (pool, off) = comm_loc(ctx, st, op, x)?;
    let dtype = dtype_of(ctx, op, x)?;
    let group_attr = ctx
        .inherent_attr(op, "group")
        .ok_or_else(|| err(ctx, op, "requires 'group'"))?;
    let group = ctx.attr_as_symbol(group_attr).unwrap_or("").to_string();
    let world = group_size(ctx, op, &group)?;
    let r = ctx.result(op, 0);
    let n = numel(ctx, x);
    // `count` as the ABI counts: per rank for the all-gather (sent) and reduce-scatter
    // (received), the whole tensor for the all-reduces.
    let count = match coll.as_str() {
        "reduce_scatter" => n / world,
        _ => n,
    };
    // The fused chain: its kernel (the fallback's), which argument is the reduced value,
    // its other inputs' buffers and its result's buffer.
    let mut fused = None;
    if let Some(grp) = epilogue {
        let chain = kernel_symbol(ctx, module, func, grp, kernels)?;
        let operand = grp
            .inputs
            .iter()
            .position(|v| *v == r)
            .ok_or_else(|| err(ctx, op, "comm-to-rt: epilogue does not read the all-reduce"))?;
        let mut extras = Vec::new();
        for &v in grp.inputs.iter().filter(|v| **v != r) {
            extras.push(buffer(ctx, st, op, v)?);
        }
        let y = ctx.result(grp.root, 0);
        let t = ctx.value_type(y);
        let m = memref_of(ctx, t);
        let yb = Builder::before(ctx, op).create_value("rt.alloc", &[], m, &[]);
        st.buf.insert(y, yb);
        // The fallback launches the chain kernel as `lower_op` would have.
        let w = crate::kernels::elementwise_vector_width(ctx, &grp.ops) as i64;
        let work = ((launch_items(ctx, grp.root) + w - 1) / w).max(1);
        fused = Some((chain, operand, extras, yb, grid_for(work)));
    }
    let out = if let Some((_, _, _, yb, _)) = &fused {
        *yb
    } else if coll == "two_shot_all_reduce" {
        // In place: the result is the input's slot.
        let b = buffer(ctx, st, op, x)?;
        st.buf.insert(r, b);
        st.comm.insert(r, (pool, off));
        b
    } else {
        result_buffer(ctx, st, op, r)?
    };
    let elem = value_tensor(ctx, x).map_or(1, |t| elem_bytes(ctx, t.elem));
    let reduce_name = reduce.and_then(|a| ctx.attr_as_str(a)).map(str::to_string);
    let chain = fused.as_ref().map(|(c, o, ..)| (c.clone(), *o));
    let key = format!("symm:{coll}:{count}:{dtype}:{reduce_name:?}:{world}:{chain:?}");
    let sym = match kernels.by_key.get(&key) {
        Some(s) => s.clone(),
        None => {
            require_module(ctx, module, func)?;
            let mut sym = format!("s{}_{coll}", kernels.count);
            if let Some((c, _)) = &chain {
                // `s3_one_shot_all_reduce_add` for the epilogue kernel `k2_add`.
                let ops = c.split_once('_').map_or(c.as_str(), |(_, o)| o);
                sym = format!("{sym}_{ops}");
                sym.truncate(64);
            }
            kernels.count += 1;
            let mut attrs: Vec<(&str, commlir_ir::Attr)> = vec![
                ("sym_name", ctx.str_attr(&sym)),
                ("coll", ctx.str_attr(&coll)),
                ("count", i64_attr(ctx, count)),
                ("dtype", ctx.str_attr(dtype)),
                ("world", i64_attr(ctx, world)),
            ];
            if let Some(rd) = &reduce_name {
                attrs.push(("reduce_op", ctx.str_attr(rd)));
            }
            if let Some((c, o)) = &chain {
                attrs.push(("epilogue", ctx.symbol_ref(c)));
                attrs.push(("epilogue_operand", i64_attr(ctx, *o as i64)));
            }
            insert_kernel_op(ctx, op, func, "rt.symm_kernel", attrs);
            kernels.by_key.insert(key, sym.clone());
            sym
        }
    };
    let (grid, block) = crate::symm_kernels::launch_shape(&coll, count, elem, world as u64);
    let mut attrs: Vec<(&str, commlir_ir::Attr)> = vec![
        ("coll", ctx.str_attr(&coll)),
        ("kernel", ctx.symbol_ref(&sym)),
        ("offset", i64_attr(ctx, off as i64)),
        ("count", i64_attr(ctx, count)),
        ("dtype", ctx.str_attr(dtype)),
        ("group", group_attr),
        ("grid", i64_attr(ctx, grid as i64)),
        ("block", i64_attr(ctx, block as i64)),
    ];
    if let Some(rd) = reduce {
        attrs.push(("reduce_op", rd));
    }
    let mut operands = vec![pool, out];
    if let Some((c, o, extras, _, egrid)) = &fused {
        attrs.push(("epilogue", ctx.symbol_ref(c)));
        attrs.push(("epilogue_operand", i64_attr(ctx, *o as i64)));
        attrs.push(("epilogue_grid", i64_attr(ctx, *egrid)));
        attrs.push(("epilogue_block", i64_attr(ctx, BLOCK)));
        operands.extend(extras);
    }
    let mut bld = Builder::before(ctx, op);
    bld.create("rt.symm_collective", &operands, &[], &attrs);
    st.compute_dirty = true;
    Ok(())
}

/// Kernels are symbols of the module: `func` must be in one.
fn require_module(ctx: &Context, module: Option<OpId>, func: OpId) -> Result<(), Diagnostic> {
    if module.is_none() {
        return Err(err(
            ctx,
            func,
            "comm-to-rt: the function must be in a module",
        ));
    }
    Ok(())
}

/// Creates the kernel op `name` with `attrs` (sorted by name, as the IR keeps them) at
/// `op`'s location, before `func`.
fn insert_kernel_op(
    ctx: &mut Context,
    op: OpId,
    func: OpId,
    name: &str,
    attrs: Vec<(&str, commlir_ir::Attr)>,
) {
    let loc = ctx.op_loc(op);
    let mut k = OpState::new(ctx.ident(name), loc);
    for (nm, v) in attrs {
        k.attrs.push((ctx.ident(nm), v));
    }
    k.attrs
        .sort_by(|a, b| ctx.ident_str(a.0).cmp(ctx.ident_str(b.0)));
    let kop = ctx.create_op(k);
    ctx.insert_before(func, kop);
}

/// The size of group `@name` as seen from `op`, in [1, `abi::SYMM_MAX_PEERS`].
fn group_size(ctx: &Context, op: OpId, name: &str) -> Result<i64, Diagnostic> {
    let size = ctx
        .lookup_symbol(op, name)
        .and_then(|g| ctx.inherent_attr(g, "size"))
        .and_then(|a| ctx.attr_as_i64(a))
        .ok_or_else(|| err(ctx, op, format!("comm-to-rt: unknown group @{name}")))?;
    let max = crate::abi::SYMM_MAX_PEERS as i64;
    if !(1..=max).contains(&size) {
        return Err(err(
            ctx,
            op,
            format!("comm-to-rt: symmetric-memory kernels support groups of 1 to {max} ranks, @{name} has {size}"),
        ));
    }
    Ok(size)
}

/// Emits an `rt.launch` of kernel `k` over `items` elements before `op`.
fn launch(ctx: &mut Context, op: OpId, k: &str, args: &[Value], items: i64) {
    let ks = ctx.symbol_ref(k);
    let grid = i64_attr(ctx, grid_for(items));
    let block = i64_attr(ctx, BLOCK);
    let mut bld = Builder::before(ctx, op);
    bld.create(
        "rt.launch",
        args,
        &[],
        &[("kernel", ks), ("grid", grid), ("block", block)],
    );
}

/// A one-op kernel `result = OP(arg) {dim}` built from scratch (no source op to clone).
#[allow(clippy::too_many_arguments)]
fn synthetic_kernel(
    ctx: &mut Context,
    module: Option<OpId>,
    func: OpId,
    kernels: &mut KernelTable,
    op_name: &str,
    dim: Option<i64>,
    arg: Type,
    result: Type,
) -> Result<String, Diagnostic> {
    let attrs: Vec<(&str, commlir_ir::Attr)> = match dim {
        Some(d) => vec![("dim", i64_attr(ctx, d))],
        None => Vec::new(),
    };
    synthetic_kernel_with(ctx, module, func, kernels, op_name, &attrs, &[arg], result)
}

/// A one-op kernel `result = OP(args…) {attrs}` built from scratch; kernels with the same op,
/// attributes and types are one symbol.
#[allow(clippy::too_many_arguments)]
fn synthetic_kernel_with(
    ctx: &mut Context,
    module: Option<OpId>,
    func: OpId,
    kernels: &mut KernelTable,
    op_name: &str,
    attrs: &[(&str, commlir_ir::Attr)],
    args: &[Type],
    result: Type,
) -> Result<String, Diagnostic> {
    let printed: Vec<String> = attrs
        .iter()
        .map(|(n, a)| format!("{n}={}", commlir_ir::printer::attr_to_string(ctx, *a)))
        .collect();
    let types: Vec<String> = args
        .iter()
        .map(|t| commlir_ir::printer::type_to_string(ctx, *t))
        .collect();
    let key = format!(
        "{op_name}{{{}}}({})->{}",
        printed.join(","),
        types.join(", "),
        commlir_ir::printer::type_to_string(ctx, result)
    );
    if let Some(s) = kernels.by_key.get(&key) {
        return Ok(s.clone());
    }
    require_module(ctx, module, func)?;
    let short = op_name.rsplit('.').next().unwrap_or(op_name);
    let sym = format!("k{}_{short}", kernels.count);
    kernels.count += 1;
    let loc = ctx.op_loc(func);
    let mut s = OpState::new(ctx.ident("rt.kernel"), loc);
    let sn = ctx.str_attr(&sym);
    s.attrs.push((ctx.ident("sym_name"), sn));
    s.num_regions = 1;
    let kop = ctx.create_op(s);
    let region = ctx.op_regions(kop)[0];
    let body = ctx.new_block(args);
    ctx.append_block(region, body);
    let a = ctx.block_args(body).to_vec();
    let mut bld = Builder::at_end(ctx, body);
    bld.loc = loc;
    let v = bld.create_value(op_name, &a, result, attrs);
    bld.create("rt.yield", &[v], &[], &[]);
    ctx.insert_before(func, kop);
    kernels.by_key.insert(key, sym.clone());
    Ok(sym)
}

/// Creates (or reuses) the `rt.kernel` of a fusion group; returns its symbol name.
fn kernel_symbol(
    ctx: &mut Context,
    module: Option<OpId>,
    func: OpId,
    group: &fusion::Group,
    kernels: &mut KernelTable,
) -> Result<String, Diagnostic> {
    for &m in &group.ops {
        for &v in ctx.operands(m).iter().chain(ctx.results(m)) {
            let ok = value_tensor(ctx, v).is_some_and(|t| kernel_elem_ok(ctx, t.elem));
            if !ok {
                return Err(err(
                    ctx,
                    m,
                    "comm-to-rt: kernels support f16, bf16, f32, f64 and 1/8/16/32/64-bit integer tensors only",
                ));
            }
            if let Some(t) = value_tensor(ctx, v) {
                kernel_int_op_ok(ctx, m, t.elem)
                    .map_err(|msg| err(ctx, m, format!("comm-to-rt: {msg}")))?;
            }
        }
    }
    let key = kernel_key(ctx, group);
    if let Some(s) = kernels.by_key.get(&key) {
        return Ok(s.clone());
    }
    // Named after its ops; an absorbed view is a way of reading an input, not an op of the
    // chain, so `kN_broadcast` always names a materializing kernel (a kernel that only moves
    // data is named after its views).
    let fused = group.ops.len() > 1 && !fusion::is_movement(ctx, &group.ops);
    let short: Vec<&str> = group
        .ops
        .iter()
        .filter(|o| !(fused && crate::kernels::index_map::is_view(ctx.op_name(**o))))
        .map(|o| ctx.op_name(*o).trim_start_matches("compute."))
        .collect();
    let mut sym = format!("k{}_{}", kernels.count, short.join("_"));
    if sym.len() > 64 {
        sym.truncate(64);
    }
    kernels.count += 1;
    // Build the kernel: block arguments are the inputs (tensors without encoding), the body
    // clones the group's ops, and `rt.yield` returns the root.
    let loc = ctx.op_loc(group.root);
    let arg_types: Vec<Type> = group
        .inputs
        .iter()
        .map(|v| {
            let t = ctx.value_type(*v);
            commlir_dialects::shape::strip_encoding(ctx, t)
        })
        .collect();
    let kname = ctx.ident("rt.kernel");
    let mut s = OpState::new(kname, loc);
    let sn = ctx.str_attr(&sym);
    s.attrs.push((ctx.ident("sym_name"), sn));
    s.num_regions = 1;
    let kop = ctx.create_op(s);
    let region = ctx.op_regions(kop)[0];
    let body = ctx.new_block(&arg_types);
    ctx.append_block(region, body);
    let mut map: HashMap<Value, Value> = HashMap::new();
    for (i, &v) in group.inputs.iter().enumerate() {
        map.insert(v, ctx.block_args(body)[i]);
    }
    for &m in &group.ops {
        let operands: Vec<Value> = ctx.operands(m).iter().map(|v| map[v]).collect();
        let rts: Vec<Type> = ctx
            .results(m)
            .to_vec()
            .iter()
            .map(|r| {
                let t = ctx.value_type(*r);
                commlir_dialects::shape::strip_encoding(ctx, t)
            })
            .collect();
        let mut c = OpState::new(ctx.op_name_ident(m), ctx.op_loc(m));
        c.operands = operands;
        c.result_types = rts;
        c.properties = ctx.properties(m);
        c.attrs = ctx
            .attrs(m)
            .iter()
            .filter(|(k, _)| {
                let k = ctx.ident_str(*k);
                k != commlir_dialects::comm::SLOT_ATTR && k != "cost_ns"
            })
            .copied()
            .collect();
        let nop = ctx.create_op(c);
        ctx.append_op(body, nop);
        for (i, &r) in ctx.results(m).to_vec().iter().enumerate() {
            map.insert(r, ctx.result(nop, i));
        }
    }
    let y = map[&ctx.result(group.root, 0)];
    let mut bld = Builder::at_end(ctx, body);
    bld.loc = loc;
    bld.create("rt.yield", &[y], &[], &[]);
    match module {
        Some(_) => ctx.insert_before(func, kop),
        None => {
            return Err(err(
                ctx,
                func,
                "comm-to-rt: the function must be in a module",
            ))
        }
    }
    kernels.by_key.insert(key, sym.clone());
    Ok(sym)
}

/// A structural key of a group: equal keys compute the same function of their inputs.
fn kernel_key(ctx: &Context, group: &fusion::Group) -> String {
    use std::fmt::Write;
    let mut key = String::new();
    let mut idx: HashMap<Value, String> = HashMap::new();
    for (i, &v) in group.inputs.iter().enumerate() {
        // Shape and element type only: encodings do not change what a kernel computes.
        if let Some(t) = value_tensor(ctx, v) {
            let e = commlir_ir::printer::type_to_string(ctx, t.elem);
            let _ = write!(key, "in{i}:{:?}x{e};", t.shape);
        }
        idx.insert(v, format!("in{i}"));
    }
    for (j, &m) in group.ops.iter().enumerate() {
        let _ = write!(key, "{}(", ctx.op_name(m));
        for v in ctx.operands(m) {
            let _ = write!(key, "{},", idx.get(v).map_or("?", |s| s.as_str()));
        }
        key.push(')');
        for (k, a) in ctx.attrs(m) {
            let k = ctx.ident_str(*k);
            if k != commlir_dialects::comm::SLOT_ATTR && k != "cost_ns" {
                let _ = write!(key, "{k}={};", commlir_ir::printer::attr_to_string(ctx, *a));
            }
        }
        if let Some(p) = ctx.properties(m) {
            let _ = write!(key, "<{}>", commlir_ir::printer::attr_to_string(ctx, p));
        }
        for r in ctx.results(m) {
            let t = value_tensor(ctx, *r);
            if let Some(t) = t {
                let _ = write!(
                    key,
                    "->{:?}x{}",
                    t.shape,
                    commlir_ir::printer::type_to_string(ctx, t.elem)
                );
            }
            idx.insert(*r, format!("v{j}"));
        }
        key.push(';');
    }
    key
}

/// Bytes of one element of tensor `t` (for pointer arithmetic in the host program).
pub fn elem_size(ctx: &Context, t: Type) -> u64 {
    elem_bytes(ctx, t)
}
