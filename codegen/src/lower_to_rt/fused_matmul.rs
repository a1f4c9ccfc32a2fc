//! `comm-to-rt` of the fused collective-matmul ops: `symm.fused_all_gather_matmul` →
//! `rt.symm_fused_all_gather_matmul`, `symm.fused_matmul_reduce_scatter` →
//! `rt.symm_fused_matmul_reduce_scatter` (inside a workspace pool), each with the
//! `rt.symm_fused_kernel` that moves its chunks.
//!
//! The geometry is settled here, once: a gather or scatter along any dimension but the
//! contraction one is a strided-batched GEMM per chunk (the dimensions before it are the
//! batch, those from it on are rows, or, for the last dimension of the product, a column
//! block of `b`), so neither the pipeline nor the kernels ever transpose data.

use super::{
    buffer, comm_loc, dtype_of, err, group_size, i64_attr, insert_kernel_op, memref_of,
    require_module, result_buffer, synthetic_kernel, KernelTable, Lowering,
};
use commlir_dialects::rt;
use commlir_dialects::shape::{elem_bytes, value_tensor};
use commlir_ir::{AttrKind, Builder, Context, Diagnostic, OpId};

/// An optional dimension attribute (default 0).
fn dim_attr(ctx: &Context, op: OpId, name: &str) -> i64 {
    ctx.inherent_attr(op, name)
        .and_then(|a| ctx.attr_as_i64(a))
        .unwrap_or(0)
}

fn product(dims: &[i64]) -> i64 {
    dims.iter().product()
}

/// The (group attribute, group size) of a fused op.
fn group_of(ctx: &Context, op: OpId) -> Result<(commlir_ir::Attr, i64), Diagnostic> {
    let g = ctx
        .inherent_attr(op, "group")
        .ok_or_else(|| err(ctx, op, "requires 'group'"))?;
    let name = ctx.attr_as_symbol(g).unwrap_or("").to_string();
    Ok((g, group_size(ctx, op, &name)?))
}

/// The dtype of a fused op: cuBLAS multiplies floating-point matrices only.
fn float_dtype(ctx: &Context, op: OpId) -> Result<&'static str, Diagnostic> {
    let d = dtype_of(ctx, op, ctx.operand(op, 0))?;
    if !matches!(d, "f16" | "bf16" | "f32" | "f64") {
        return Err(err(
            ctx,
            op,
            format!(
                "comm-to-rt: fused collective-matmul ops multiply floating-point matrices, got {d}"
            ),
        ));
    }
    Ok(d)
}

/// Creates (or reuses) the `rt.symm_fused_kernel` of a pipeline; returns its symbol.
#[allow(clippy::too_many_arguments)]
fn fused_kernel(
    ctx: &mut Context,
    op: OpId,
    func: OpId,
    kernels: &mut KernelTable,
    kind: &str,
    dtype: &str,
    world: i64,
    (outer, seg): (i64, i64),
    reduce: Option<&str>,
    epilogue: Option<(&str, usize)>,
) -> String {
    let key = format!("fused:{kind}:{dtype}:{world}:{outer}:{seg}:{reduce:?}:{epilogue:?}");
    if let Some(s) = kernels.by_key.get(&key) {
        return s.clone();
    }
    // `s<N>_…` like the symm kernels, so that the runtime names them in fault reports.
    let sym = format!("s{}_fused_{kind}", kernels.count);
    kernels.count += 1;
    let mut attrs: Vec<(&str, commlir_ir::Attr)> = vec![
        ("sym_name", ctx.str_attr(&sym)),
        ("kind", ctx.str_attr(kind)),
        ("dtype", ctx.str_attr(dtype)),
        ("world", i64_attr(ctx, world)),
        ("outer", i64_attr(ctx, outer)),
        ("seg", i64_attr(ctx, seg)),
    ];
    if let Some(r) = reduce {
        attrs.push(("reduce_op", ctx.str_attr(r)));
    }
    if let Some((chain, operand)) = epilogue {
        attrs.push(("epilogue", ctx.symbol_ref(chain)));
        attrs.push(("epilogue_operand", i64_attr(ctx, operand as i64)));
    }
    insert_kernel_op(ctx, op, func, "rt.symm_fused_kernel", attrs);
    kernels.by_key.insert(key, sym.clone());
    sym
}

/// The `rt.symm_fused_kernel` whose signal-only all-gather steps (G + 1: the barrier, G + 1 +
/// s: push s's signals) order a pushing `rt.nccl_all_gather` (`push_kernel`); those steps read
/// neither `outer` nor `seg`, so one kernel per (dtype, G) serves every shape.
pub(super) fn signal_kernel(
    ctx: &mut Context,
    op: OpId,
    func: OpId,
    kernels: &mut KernelTable,
    dtype: &str,
    world: i64,
) -> String {
    fused_kernel(
        ctx,
        op,
        func,
        kernels,
        "all_gather_matmul",
        dtype,
        world,
        (1, 1),
        None,
        None,
    )
}

/// `(grid, block)` of the launches that move `elems` elements per step, and `copy_engine`.
/// The chunks move through copy engines (`symm_peer_copy`), which leave every SM to the GEMM
/// beside them, so the kernel's launches on the comm stream only signal, with one block (a
/// reduce-scatter's reduction on the compute stream sizes its own grid,
/// `symm_kernels::reduce_grid`); `COMMLIR_FUSED_TRANSFER=kernel` at compile time moves them with the kernel's
/// blocks instead, and `COMMLIR_FUSED_COPY_GRID=N` caps that kernel's grid (up to 64 blocks,
/// the symm kernels') at N. Both are experiment knobs of the benchmarks
/// (bench/gpu/prepare_async_tp.sh builds the variants).
fn launch_attrs(
    ctx: &mut Context,
    elems: i64,
    elem: u64,
    world: i64,
) -> Vec<(&'static str, commlir_ir::Attr)> {
    let (grid, block) = crate::symm_kernels::launch_shape("copy", elems, elem, world as u64);
    let grid = std::env::var("COMMLIR_FUSED_COPY_GRID")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&cap| cap >= 1)
        .map_or(grid, |cap| grid.min(cap));
    let copy_engine = !kernel_transfer();
    let grid = if copy_engine { 1 } else { grid };
    let mut attrs = vec![
        ("grid", i64_attr(ctx, grid as i64)),
        ("block", i64_attr(ctx, block as i64)),
    ];
    if copy_engine {
        attrs.push(("copy_engine", ctx.unit_attr()));
    }
    attrs
}

/// Whether `comm-to-rt` lowers the fused all-gather-matmul `op` to a pushing pipeline
/// (`push`): with copy engines and a gathered A that is not a result, each rank pushes its
/// shard from wherever it is into its peers' workspaces, so the shard never needs copying into
/// a pool of its own. `COMMLIR_FUSED_AG=pull` at compile time keeps the pulling pipeline (an
/// experiment knob of the benchmarks).
pub(super) fn pushes(ctx: &Context, op: OpId) -> bool {
    ctx.op_name(op) == "symm.fused_all_gather_matmul"
        && ctx.inherent_attr(op, "return_a").is_none()
        && !kernel_transfer()
        && std::env::var("COMMLIR_FUSED_AG").map_or(true, |v| v.trim() != "pull")
}

/// `COMMLIR_FUSED_TRANSFER=kernel` at compile time (see [`launch_attrs`]).
fn kernel_transfer() -> bool {
    std::env::var("COMMLIR_FUSED_TRANSFER").is_ok_and(|v| v.trim() == "kernel")
}

/// `symm.fused_all_gather_matmul` → `rt.symm_fused_all_gather_matmul`.
pub(super) fn lower_all_gather_matmul(
    ctx: &mut Context,
    op: OpId,
    module: Option<OpId>,
    func: OpId,
    st: &mut Lowering,
    kernels: &mut KernelTable,
) -> Result<(), Diagnostic> {
    require_module(ctx, module, func)?;
    let a = ctx.operand(op, 0);
    let dtype = float_dtype(ctx, op)?;
    let (group, world) = group_of(ctx, op)?;
    let push = pushes(ctx, op);
    let (pool, off) = if push {
        // The workspace: G shard slots.
        let size = (world * value_tensor(ctx, a).map_or(0, |t| t.numel())) as u64
            * value_tensor(ctx, a).map_or(1, |t| elem_bytes(ctx, t.elem));
        (workspace(ctx, op, group, size), 0)
    } else {
        comm_loc(ctx, st, op, a)?
    };
    let at = value_tensor(ctx, a).ok_or_else(|| err(ctx, op, "expects tensors"))?;
    let (shape, elem_ty) = (at.shape.clone(), at.elem);
    let elem = elem_bytes(ctx, elem_ty);
    let d = dim_attr(ctx, op, "gather_dim");
    let rank = shape.len();
    if rank < 2 || d < 0 || d as usize >= rank - 1 {
        return Err(err(
            ctx,
            op,
            "comm-to-rt: gather_dim must precede the contraction dimension",
        ));
    }
    let d = d as usize;
    let batch = product(&shape[..d]);
    let m = product(&shape[d..rank - 1]);
    let k = shape[rank - 1];
    let count = batch * m * k;
    let return_a = ctx.inherent_attr(op, "return_a").is_some();
    let nb = ctx.operands(op).len() - 1;
    let first = usize::from(return_a);
    let mut operands = vec![pool];
    let mut unpack = None;
    if !push {
        // The gathered buffer (the first result with `return_a`) and the fallback's staging
        // buffer: NCCL stacks the shards rank by rank, which is the gathered layout only when
        // nothing precedes the gathered dimension. A pushing pipeline needs neither: its
        // workspace holds every shard, and its fallback gathers there in place.
        let mut gshape = shape.clone();
        gshape[d] *= world;
        let gtensor = ctx.tensor_type(&gshape, elem_ty);
        let gathered = if return_a {
            let r = ctx.result(op, 0);
            result_buffer(ctx, st, op, r)?
        } else {
            let mt = memref_of(ctx, gtensor);
            Builder::before(ctx, op).create_value("rt.alloc", &[], mt, &[])
        };
        let stage = if batch == 1 {
            gathered
        } else {
            let mut sshape = vec![world];
            sshape.extend_from_slice(&shape);
            let stensor = ctx.tensor_type(&sshape, elem_ty);
            if return_a {
                let sym = synthetic_kernel(
                    ctx,
                    module,
                    func,
                    kernels,
                    "rt.unpack_chunks",
                    Some(d as i64),
                    stensor,
                    gtensor,
                )?;
                unpack = Some(sym);
            }
            let mt = memref_of(ctx, stensor);
            Builder::before(ctx, op).create_value("rt.alloc", &[], mt, &[])
        };
        operands.extend([gathered, stage]);
    }
    let mut ns = Vec::with_capacity(nb);
    for i in 0..nb {
        let b = ctx.operand(op, 1 + i);
        operands.push(buffer(ctx, st, op, b)?);
        ns.push(value_tensor(ctx, b).map_or(0, |t| *t.shape.last().unwrap_or(&0)));
    }
    for i in 0..nb {
        let r = ctx.result(op, first + i);
        operands.push(result_buffer(ctx, st, op, r)?);
    }
    if push {
        // The shard: what a skipped clone would have copied, else its own buffer.
        let source = match st.shard_sources.get(&a) {
            Some(&b) => b,
            None => buffer(ctx, st, op, a)?,
        };
        operands.push(source);
    }
    let sym = fused_kernel(
        ctx,
        op,
        func,
        kernels,
        "all_gather_matmul",
        dtype,
        world,
        (batch, m * k),
        None,
        None,
    );
    let mut attrs: Vec<(&str, commlir_ir::Attr)> = vec![
        ("kernel", ctx.symbol_ref(&sym)),
        ("m", i64_attr(ctx, m)),
        ("k", i64_attr(ctx, k)),
        ("batch", i64_attr(ctx, batch)),
        ("offset", i64_attr(ctx, off as i64)),
        ("count", i64_attr(ctx, count)),
        ("ns", i64_array(ctx, &ns)),
        ("dtype", ctx.str_attr(dtype)),
        ("group", group),
    ];
    if return_a {
        attrs.push(("return_a", ctx.unit_attr()));
    }
    if let Some(u) = unpack {
        attrs.push(("unpack", ctx.symbol_ref(&u)));
    }
    if push {
        attrs.push(("push", ctx.unit_attr()));
    }
    attrs.extend(launch_attrs(ctx, count, elem, world));
    let mut bld = Builder::before(ctx, op);
    bld.create("rt.symm_fused_all_gather_matmul", &operands, &[], &attrs);
    if push {
        // Blocking on the compute stream: the workspace goes back right away.
        bld.create("rt.pool_free", &[pool], &[], &[]);
    }
    st.compute_dirty = true;
    Ok(())
}

/// The chunk GEMMs of a `symm.fused_matmul_reduce_scatter`, in elements.
struct RsGeometry {
    m: i64,
    n: i64,
    k: i64,
    batch: i64,
    a_step: i64,
    a_stride: i64,
    b_step: i64,
    /// Row length of `b`.
    ldb: i64,
    /// Elements of one chunk (m·n·batch).
    chunk: i64,
    world: i64,
    elem: u64,
}

/// The geometry of the reduce-scatter pipeline of `op`: a scatter along any dimension but
/// the last is a row block (per batch of the dimensions before it), along the last a column
/// block of `b`.
fn rs_geometry(ctx: &Context, op: OpId) -> Result<RsGeometry, Diagnostic> {
    let (a, b) = (ctx.operand(op, 0), ctx.operand(op, 1));
    let (_, world) = group_of(ctx, op)?;
    let at = value_tensor(ctx, a).ok_or_else(|| err(ctx, op, "expects tensors"))?;
    let (ashape, elem) = (at.shape.clone(), elem_bytes(ctx, at.elem));
    let n_all = value_tensor(ctx, b)
        .and_then(|t| t.shape.last().copied())
        .unwrap_or(0);
    let rank = ashape.len();
    let k = ashape[rank - 1];
    let mut y = ashape.clone();
    y[rank - 1] = n_all;
    let d = dim_attr(ctx, op, "scatter_dim");
    if d < 0 || d as usize >= rank || world <= 0 || y[d as usize] % world != 0 {
        return Err(err(
            ctx,
            op,
            format!("comm-to-rt: cannot scatter dim {d} of the product over {world} ranks"),
        ));
    }
    let d = d as usize;
    let (m, n, batch, a_step, a_stride, b_step) = if d + 1 < rank {
        let inner = product(&y[d + 1..rank - 1]);
        let rows = y[d] / world * inner;
        (rows, n_all, product(&y[..d]), rows * k, y[d] * inner * k, 0)
    } else {
        let cols = n_all / world;
        (product(&y[..rank - 1]), cols, 1, 0, 0, cols)
    };
    Ok(RsGeometry {
        m,
        n,
        k,
        batch,
        a_step,
        a_stride,
        b_step,
        ldb: n_all,
        chunk: m * n * batch,
        world,
        elem,
    })
}

/// Whether `comm-to-rt` lowers the `symm.fused_matmul_reduce_scatter` `op` to a pipeline that
/// reduces after its last GEMM (every one but the accumulating, [`accumulate_parts`]): only
/// that reduction can apply an elementwise epilogue (`crate::fusion`).
pub(crate) fn reduces_after_last_gemm(ctx: &Context, op: OpId) -> bool {
    let Ok(g) = rs_geometry(ctx, op) else {
        return false;
    };
    let floats = dtype_of(ctx, op, ctx.operand(op, 0))
        .is_ok_and(|d| matches!(d, "f16" | "bf16" | "f32" | "f64"));
    floats && accumulate_parts(g.world, !kernel_transfer(), g.m, g.batch, g.chunk).is_none()
}

/// `symm.fused_matmul_reduce_scatter` → `rt.symm_fused_matmul_reduce_scatter` in a workspace
/// pool of its own (allocated around the call: the runtime caches pools by size, so after
/// the first call this is host bookkeeping only).
///
/// With an `epilogue` (the fusion group of the elementwise chain that alone reads the result,
/// see [`crate::fusion`]), the group's plain `rt.kernel` is created for the fallback, the
/// pipeline's kernel carries it as `epilogue`, and the call stores the chain's result: its
/// operands are `(pool, a, b, chain result, chain inputs but the reduced value...)`.
#[allow(clippy::too_many_arguments)]
pub(super) fn lower_matmul_reduce_scatter(
    ctx: &mut Context,
    op: OpId,
    module: Option<OpId>,
    func: OpId,
    st: &mut Lowering,
    kernels: &mut KernelTable,
    epilogue: Option<&crate::fusion::Group>,
) -> Result<(), Diagnostic> {
    require_module(ctx, module, func)?;
    let (a, b, r) = (ctx.operand(op, 0), ctx.operand(op, 1), ctx.result(op, 0));
    let dtype = float_dtype(ctx, op)?;
    let (group, world) = group_of(ctx, op)?;
    let reduce = ctx
        .inherent_attr(op, "reduce_op")
        .and_then(|x| ctx.attr_as_str(x))
        .unwrap_or("sum")
        .to_string();
    let g = rs_geometry(ctx, op)?;
    let (chunk, elem) = (g.chunk, g.elem);
    let ab = buffer(ctx, st, op, a)?;
    let bb = buffer(ctx, st, op, b)?;
    // The chain: its kernel (the fallback's), which argument is the reduced value, the
    // buffers of its other inputs, and its result's buffer (at the root's slot, if any).
    let mut fused = None;
    if let Some(grp) = epilogue {
        let chain = super::kernel_symbol(ctx, module, func, grp, kernels)?;
        let operand = grp.inputs.iter().position(|v| *v == r).ok_or_else(|| {
            err(
                ctx,
                op,
                "comm-to-rt: epilogue does not read the reduce-scatter",
            )
        })?;
        let mut extras = Vec::new();
        for &v in grp.inputs.iter().filter(|v| **v != r) {
            extras.push(buffer(ctx, st, op, v)?);
        }
        let y = ctx.result(grp.root, 0);
        let yb = super::result_buffer_at(ctx, st, grp.root, op, y)?;
        let w = crate::kernels::elementwise_vector_width(ctx, &grp.ops) as i64;
        let work = ((super::launch_items(ctx, grp.root) + w - 1) / w).max(1);
        fused = Some((chain, operand, extras, yb, super::grid_for(work)));
    }
    let out = match &fused {
        Some((_, _, _, yb, _)) => *yb,
        None => result_buffer(ctx, st, op, r)?,
    };
    let sym = fused_kernel(
        ctx,
        op,
        func,
        kernels,
        "matmul_reduce_scatter",
        dtype,
        world,
        (1, chunk),
        Some(&reduce),
        fused.as_ref().map(|(c, o, ..)| (c.as_str(), *o)),
    );
    let mut attrs: Vec<(&str, commlir_ir::Attr)> = vec![
        ("kernel", ctx.symbol_ref(&sym)),
        ("m", i64_attr(ctx, g.m)),
        ("n", i64_attr(ctx, g.n)),
        ("k", i64_attr(ctx, g.k)),
        ("batch", i64_attr(ctx, g.batch)),
        ("a_step", i64_attr(ctx, g.a_step)),
        ("a_stride", i64_attr(ctx, g.a_stride)),
        ("b_step", i64_attr(ctx, g.b_step)),
        ("ldb", i64_attr(ctx, g.ldb)),
        ("chunk", i64_attr(ctx, chunk)),
        ("offset", i64_attr(ctx, 0)),
        ("reduce_op", ctx.str_attr(&reduce)),
        ("dtype", ctx.str_attr(dtype)),
        ("group", group),
    ];
    attrs.extend(launch_attrs(ctx, chunk, elem, world));
    let copy_engine = attrs.iter().any(|(n, _)| *n == "copy_engine");
    let parts = accumulate_parts(world, copy_engine, g.m, g.batch, chunk);
    if let Some(p) = parts {
        if fused.is_some() {
            return Err(err(
                ctx,
                op,
                "comm-to-rt: an epilogue needs the reduction after the last GEMM",
            ));
        }
        attrs.push(("parts", i64_attr(ctx, p)));
    }
    let mut operands = vec![ab, bb, out];
    if let Some((c, o, extras, _, egrid)) = &fused {
        attrs.push(("epilogue", ctx.symbol_ref(c)));
        attrs.push(("epilogue_operand", i64_attr(ctx, *o as i64)));
        attrs.push(("epilogue_grid", i64_attr(ctx, *egrid)));
        attrs.push(("epilogue_block", i64_attr(ctx, super::BLOCK)));
        operands.extend(extras);
    }
    // The workspace: G partial chunks, then G receive slots (none when the pipeline
    // accumulates: the peer's partial lands in the result).
    let slots = if parts.is_some() { world } else { 2 * world };
    let pool = workspace(ctx, op, group, (slots * chunk) as u64 * elem);
    operands.insert(0, pool);
    let mut bld = Builder::before(ctx, op);
    bld.create(
        "rt.symm_fused_matmul_reduce_scatter",
        &operands,
        &[],
        &attrs,
    );
    // The call leaves the compute stream after all of its comm-stream work, so the
    // workspace goes back right away.
    bld.create("rt.pool_free", &[pool], &[], &[]);
    st.compute_dirty = true;
    Ok(())
}

/// The `parts` of a reduce-scatter pipeline that accumulates onto the peer's partial: two
/// ranks, copy engines, and chunks that split into two row (or batch) blocks of at least
/// [`rt::ACCUMULATE_MIN_PART_ELEMS`] (`rt::accumulate_parts`). `COMMLIR_FUSED_PARTS=N` at
/// compile time asks for N parts wherever they divide the chunk (1: never accumulate), an
/// experiment knob of the benchmarks.
fn accumulate_parts(world: i64, copy_engine: bool, m: i64, batch: i64, chunk: i64) -> Option<i64> {
    if world != 2 || !copy_engine {
        return None;
    }
    let splits = if batch == 1 { m } else { batch };
    let forced = std::env::var("COMMLIR_FUSED_PARTS")
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok());
    let parts = forced.unwrap_or_else(|| rt::accumulate_parts(world, chunk));
    (parts >= 2 && splits % parts == 0).then_some(parts)
}

/// An `rt.pool_alloc` of a `symm_mem` workspace of `size` bytes on `group`, before `op` (the
/// pipeline frees it right after; the runtime caches pools by size, so after the first call
/// that is host bookkeeping only).
fn workspace(ctx: &mut Context, op: OpId, group: commlir_ir::Attr, size: u64) -> commlir_ir::Value {
    let pt = rt::pool_type(ctx);
    let pattrs = [
        ("kind", ctx.str_attr("symm_mem")),
        ("group", group),
        ("size", i64_attr(ctx, size.max(1) as i64)),
        ("alignment", i64_attr(ctx, 64)),
    ];
    Builder::before(ctx, op).create_value("rt.pool_alloc", &[], pt, &pattrs)
}

/// `array<i64: …>`.
fn i64_array(ctx: &mut Context, vals: &[i64]) -> commlir_ir::Attr {
    let elem = ctx.int_type(64);
    let values = vals
        .iter()
        .map(|v| commlir_ir::DenseElem::Int(commlir_ir::IntValue::Small(i128::from(*v))))
        .collect();
    ctx.attr(AttrKind::DenseArray { elem, values })
}
