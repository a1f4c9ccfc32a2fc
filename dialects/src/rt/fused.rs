//! The `rt` form of the fused collective-matmul ops (`symm.fused_all_gather_matmul`,
//! `symm.fused_matmul_reduce_scatter`): one call op each, which the host program expands into
//! a chunked pipeline of cuBLAS GEMMs on the compute stream and launches of an
//! `rt.symm_fused_kernel` on the comm stream, ordered by events (see docs/codegen.md), or into
//! the NCCL fallback and the GEMMs when the pool is not peer-mapped.
//!
//! Every chunk GEMM is a row-major, strided-batched product `C = A·B` whose operands are
//! addressed by the chunk index `p`: the attributes give, in elements, how far chunk `p`
//! starts from the buffer (`*_step · p`) and the batch strides, so that gathering or
//! scattering along any dimension but the contraction one is a matter of strides, never of
//! a re-layout.

use super::{
    expect_memref, expect_type, nonneg, verify_epilogue_call, verify_epilogue_pair,
    verify_launch_shape, verify_world, ANY, DTYPE, EPILOGUE_BLOCK, EPILOGUE_GRID, GROUP,
    SYMM_EPILOGUE_OPERAND,
};
use commlir_ir::{
    register_op, ArgDef, AttrConstraint, AttrDef, Context, Diagnostic, OpDef, OpId, Trait,
};

const KINDS: &[&str] = &["all_gather_matmul", "matmul_reduce_scatter"];

/// Elements of a part of the accumulating reduce-scatter pipeline (`parts`), at least: a GEMM
/// of fewer output elements than about two waves of 128×256 tiles on a 132-SM GPU loses more
/// to its unfilled last wave than the pipeline saves by not reducing after the last GEMM
/// (measured: docs/benchmarks.md, async TP). `comm-to-rt` and the cost model both use it.
pub const ACCUMULATE_MIN_PART_ELEMS: i64 = 1 << 23;

/// The row blocks `comm-to-rt` cuts a two-rank reduce-scatter pipeline's chunk of
/// `chunk_elems` product elements into (1: no accumulation, the final reduction instead).
pub fn accumulate_parts(world: i64, chunk_elems: i64) -> i64 {
    if world == 2 && chunk_elems / 2 >= ACCUMULATE_MIN_PART_ELEMS {
        2
    } else {
        1
    }
}

register_op!(
    pub SYMM_FUSED_KERNEL = OpDef {
        name: "rt.symm_fused_kernel",
        summary: "The generated data-movement kernel of a fused collective-matmul pipeline",
        description: "Module-level symbol, compiled into one NVPTX entry of the kernel table. \
            Parameters: `(const commlir_symm_desc *desc, uint64_t in_offset, void *out, \
            uint32_t site, uint32_t step)`; one launch per pipeline step, on the comm stream \
            (the reduce-scatter's reduction, step G, on the compute stream). \
            `all_gather_matmul`: step 0 is the start barrier and the copy of this rank's shard \
            (at `in_offset` of the pool; `outer` segments of `seg` elements) into block `rank` \
            of the gathered buffer `out` (`outer` segments of G·`seg`), step s in [1, G) \
            copies the shard of rank (rank + s) mod G from that peer's pool, step G is the end \
            barrier, step G + 1 is the start barrier alone (for a gathered buffer that is \
            not a result, whose own block nobody reads), and step G + 1 + s signals rank \
            (rank + s) mod G that this rank's shard is in its pool and waits for the same \
            signal of rank (rank − s) mod G (a pushing pipeline). `matmul_reduce_scatter`: the pool holds at `in_offset` this rank's G \
            partial chunks of `seg` elements, then G receive slots; step s in [1, G) signals \
            rank (rank + s) mod G that its chunk is ready, waits for the signal of rank \
            (rank − s) mod G and copies that peer's chunk for this rank into receive slot \
            (rank − s) mod G, and step G + s does step s's signalling alone (a copy engine \
            moves the chunk); step G is the reduction of the G chunks in rank order into `out` \
            (reading only this GPU's memory: the own partial and the receive slots), and \
            step 2G the end barrier (every peer has pulled its chunks from this rank's \
            partials, so the workspace may be written again). With an `epilogue` (a reduce-scatter fused with \
            the elementwise chain that reads its result), the parameters after `step` are the \
            chain's other inputs, `out` is the chain's result, and step G applies the chain to \
            each reduced element instead of storing it.",
        attributes: &[
            AttrDef::required("sym_name", AttrConstraint::SymbolName),
            AttrDef::required("kind", AttrConstraint::StrEnum(KINDS)),
            DTYPE,
            AttrDef::required("world", AttrConstraint::Integer).doc("The group size G (1 to 8)."),
            AttrDef::required("outer", AttrConstraint::Integer)
                .doc("Segments per shard (all-gather; 1 for the reduce-scatter)."),
            AttrDef::required("seg", AttrConstraint::Integer)
                .doc("Elements per segment (all-gather) or per chunk (reduce-scatter)."),
            AttrDef::optional(
                "reduce_op",
                AttrConstraint::StrEnum(&["sum", "avg"]),
            )
            .doc("The reduction of the reduce-scatter."),
            FUSED_EPILOGUE,
            SYMM_EPILOGUE_OPERAND,
        ],
        traits: &[Trait::Symbol],
        verify: Some(|ctx, op| {
            nonneg(ctx, op, &["outer", "seg"])?;
            verify_world(ctx, op)?;
            let rs = ctx
                .inherent_attr(op, "kind")
                .and_then(|a| ctx.attr_as_str(a))
                == Some("matmul_reduce_scatter");
            if rs != ctx.inherent_attr(op, "reduce_op").is_some() {
                return Err(ctx.op_error(
                    op,
                    "'reduce_op' is required by matmul_reduce_scatter and absent from all_gather_matmul",
                ));
            }
            verify_epilogue_pair(ctx, op)?;
            if !rs && ctx.inherent_attr(op, "epilogue").is_some() {
                return Err(ctx.op_error(
                    op,
                    "an 'epilogue' is only fused into a matmul_reduce_scatter",
                ));
            }
            Ok(())
        }),
        example: "rt.symm_fused_kernel @s0_fused_all_gather_matmul {dtype = \"bf16\", kind = \"all_gather_matmul\", outer = 1 : i64, seg = 128 : i64, world = 2 : i64}",
        ..OpDef::EMPTY
    }
);

const FUSED_EPILOGUE: AttrDef = AttrDef::optional("epilogue", AttrConstraint::SymbolRef).doc(
    "The fused elementwise epilogue of a reduce-scatter pipeline that reduces after its last \
     GEMM: the `rt.kernel` of the chain that reads the reduced value (also launched on its \
     own by the NCCL fallback).",
);
const COPY_ENGINE: AttrDef = AttrDef::optional("copy_engine", AttrConstraint::Unit).doc(
    "Peer-mapped: the chunks move through `symm_peer_copy` (a copy engine, no SM) between \
     launches of `kernel` that only signal; without it `kernel` moves them with its blocks.",
);

const GEMM_ATTRS: [AttrDef; 6] = [
    AttrDef::required("m", AttrConstraint::Integer).doc("Rows of a chunk's product (per batch)."),
    AttrDef::required("k", AttrConstraint::Integer).doc("The contraction dimension."),
    AttrDef::required("batch", AttrConstraint::Integer).doc("Batches per chunk GEMM."),
    AttrDef::required("a_step", AttrConstraint::Integer)
        .doc("Elements of `a` between consecutive chunks."),
    AttrDef::required("a_stride", AttrConstraint::Integer)
        .doc("Elements of `a` between the batches of a chunk."),
    AttrDef::required("offset", AttrConstraint::Integer)
        .doc("Bytes: the shard's (all-gather) or the workspace's (reduce-scatter) pool offset."),
];

register_op!(
    pub SYMM_FUSED_ALL_GATHER_MATMUL = OpDef {
        name: "rt.symm_fused_all_gather_matmul",
        summary: "All-gather pipelined with its GEMMs (compute and comm streams, blocking)",
        description: "Operands (without `push`, which lists its own): the `symm_mem` pool holding the shard at `offset`, the gathered \
            buffer, the staging buffer of the NCCL fallback (the gathered buffer itself when \
            `batch` is 1, else the shards stacked rank by rank), the n right-hand sides `bᵢ` \
            (`k`×`ns[i]`), then the n products. The shard is `batch` blocks of `m` rows of `k` \
            (rows of the gathered dimension and those after it); chunk p of the gathered \
            buffer (and of each product) is block p of `m` rows in each of the `batch` blocks \
            of G·`m` rows. Peer-mapped: the comm stream runs `kernel` step by step (chunk \
            order rotated per rank) while the compute stream multiplies this rank's shard \
            straight from the pool, then each gathered chunk once its copy event completed. \
            Else `symm_fallback` all-gathers into the staging buffer on the compute stream, \
            the GEMMs follow, and `unpack` (when present) restores the gathered layout.",
        operands: &[ArgDef::variadic("buffers", ANY)],
        attributes: &[
            AttrDef::required("kernel", AttrConstraint::SymbolRef),
            AttrDef::optional("unpack", AttrConstraint::SymbolRef)
                .doc("The `rt.kernel` restoring the gathered layout in the fallback."),
            AttrDef::optional("return_a", AttrConstraint::Unit).doc(
                "The gathered buffer is a result: this rank's shard is copied into it too. \
                 Without it the pipeline's first step is the start barrier alone (this rank's \
                 GEMMs read the shard from the pool).",
            ),
            COPY_ENGINE,
            AttrDef::optional("push", AttrConstraint::Unit).doc(
                "With `copy_engine`: the operands are the pool, the right-hand sides, the \
                 products and, last, the shard wherever it is (no gathered or staging \
                 buffer); the pool is a workspace of G shard slots (`offset` 0). After the \
                 start barrier a copy engine pushes the shard into slot `rank` of every \
                 peer's workspace (`symm_peer_put`) and signals it, and this rank multiplies \
                 each peer's shard from its own slot once signalled: no copy into a pool \
                 first, no end barrier. The fallback copies the shard into slot `rank` and \
                 all-gathers in place into the workspace.",
            ),
            GEMM_ATTRS[0],
            GEMM_ATTRS[1],
            GEMM_ATTRS[2],
            GEMM_ATTRS[5],
            AttrDef::required("count", AttrConstraint::Integer)
                .doc("Elements of one shard (what each rank sends)."),
            AttrDef::required("ns", AttrConstraint::I64Array).doc("N of each product."),
            DTYPE,
            GROUP,
            AttrDef::required("grid", AttrConstraint::Integer),
            AttrDef::required("block", AttrConstraint::Integer),
        ],
        traits: &[Trait::Collective, Trait::MemRead, Trait::MemWrite, Trait::Blocking],
        verify: Some(verify_all_gather_matmul),
        example: "rt.symm_fused_all_gather_matmul %p, %ag, %ag, %b, %y {batch = 1 : i64, block = 32 : i64, count = 128 : i64, dtype = \"bf16\", grid = 1 : i64, group = @tp, k = 16 : i64, kernel = @s0_fused_all_gather_matmul, m = 8 : i64, ns = array<i64: 32>, offset = 0 : i64} : (!rt.pool, memref<16x16xbf16>, memref<16x16xbf16>, memref<16x32xbf16>, memref<16x32xbf16>) -> ()",
        ..OpDef::EMPTY
    }
);

fn verify_all_gather_matmul(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let ops = ctx.operands(op);
    let n = ctx
        .inherent_attr(op, "ns")
        .and_then(|a| ctx.attr_as_i64_array(a))
        .map_or(0, |v| v.len());
    let push = ctx.inherent_attr(op, "push").is_some();
    if push && ctx.inherent_attr(op, "copy_engine").is_none() {
        return Err(ctx.op_error(op, "'push' needs 'copy_engine'"));
    }
    let expected = if push { 2 + 2 * n } else { 3 + 2 * n };
    if n == 0 || ops.len() != expected {
        let (bufs, src) = if push {
            ("", ", then the shard")
        } else {
            (", the gathered and staging buffers", "")
        };
        return Err(ctx.op_error(
            op,
            format!(
                "expects the pool{bufs}, then {n} right-hand sides and {n} products{src}; got {} operands",
                ops.len()
            ),
        ));
    }
    expect_type(ctx, op, ops[0], "rt.pool", "operand 'pool'")?;
    for &v in &ops[1..] {
        expect_memref(ctx, op, v, "every buffer")?;
    }
    nonneg(ctx, op, &["m", "k", "batch", "offset", "count"])?;
    verify_launch_shape(ctx, op)
}

register_op!(
    pub SYMM_FUSED_MATMUL_REDUCE_SCATTER = OpDef {
        name: "rt.symm_fused_matmul_reduce_scatter",
        summary: "GEMM chunks pipelined with their reduce-scatter (compute and comm streams, blocking)",
        description: "Operands: the `symm_mem` workspace pool (G partial chunks of `chunk` \
            elements at `offset`, then G receive slots), `a`, `b` (K×N row-major, leading \
            dimension `ldb`) and the result (one chunk). Chunk p of the product is the GEMM of \
            `a` from `a_step·p` (batch stride `a_stride`) and `b` from `b_step·p`, `m`×`n` per \
            batch, into partial slot p. Peer-mapped: the compute stream computes the chunks in \
            the order rank + 1, …, rank + G − 1 (mod G), then rank, while the comm stream runs \
            `kernel` step s as soon as chunk rank + s is computed (peers pull their chunk and \
            this rank pulls its own); after the own chunk the compute stream waits for the \
            last pull and reduces in rank order (`kernel` step G), while the comm stream \
            runs the end barrier (step 2G), which the host program waits for only before a \
            `symm_mem` pool allocation of the workspace's group and size, a call or the \
            return (the workspace is not written again before every peer has pulled from \
            it). With \
            `parts` (two ranks, copy engines), each chunk is computed in `parts` row blocks, \
            a copy engine delivers each block of the peer's partial straight into the result, \
            and this rank's own GEMMs accumulate onto it (`gemm` with β = 1), so that no reduction \
            follows the last GEMM (and the workspace has no receive slots). Else all chunks are computed and `symm_fallback` \
            reduce-scatters them on the compute stream. With an `epilogue` (no `parts`), `out` \
            is the result of the elementwise chain that reads the reduced chunk and `extras` \
            are the chain's other inputs: the kernel's reduction applies the chain to each \
            element it reduces, and the fallback reduce-scatters into a temporary buffer, \
            then launches the `epilogue` kernel with it as argument `epilogue_operand`.",
        operands: &[
            ArgDef::one("pool", ANY),
            ArgDef::one("a", ANY),
            ArgDef::one("b", ANY),
            ArgDef::one("out", ANY),
            ArgDef::variadic("extras", ANY),
        ],
        attributes: &[
            AttrDef::required("kernel", AttrConstraint::SymbolRef),
            GEMM_ATTRS[0],
            AttrDef::required("n", AttrConstraint::Integer).doc("Columns of a chunk's product."),
            GEMM_ATTRS[1],
            GEMM_ATTRS[2],
            GEMM_ATTRS[3],
            GEMM_ATTRS[4],
            AttrDef::required("b_step", AttrConstraint::Integer)
                .doc("Elements of `b` between consecutive chunks (column blocks)."),
            AttrDef::required("ldb", AttrConstraint::Integer).doc("Row length of `b`."),
            AttrDef::required("chunk", AttrConstraint::Integer)
                .doc("Elements of one chunk (= m·n·batch)."),
            GEMM_ATTRS[5],
            AttrDef::required("reduce_op", AttrConstraint::StrEnum(&["sum", "avg"])),
            DTYPE,
            GROUP,
            AttrDef::required("grid", AttrConstraint::Integer),
            AttrDef::required("block", AttrConstraint::Integer),
            COPY_ENGINE,
            AttrDef::optional("parts", AttrConstraint::Integer).doc(
                "Row blocks per chunk of the accumulating pipeline (two ranks, `copy_engine`; \
                 each block contiguous in the chunk). Absent: the chunks are reduced after the \
                 last GEMM.",
            ),
            FUSED_EPILOGUE,
            SYMM_EPILOGUE_OPERAND,
            EPILOGUE_GRID,
            EPILOGUE_BLOCK,
        ],
        traits: &[Trait::Collective, Trait::MemRead, Trait::MemWrite, Trait::Blocking],
        verify: Some(|ctx, op| {
            expect_type(ctx, op, ctx.operand(op, 0), "rt.pool", "operand 'pool'")?;
            // At least 4 operands (the declaration's).
            let n = ctx.operands(op).len();
            for i in 1..n {
                expect_memref(ctx, op, ctx.operand(op, i), "every buffer")?;
            }
            verify_epilogue_pair(ctx, op)?;
            verify_epilogue_call(ctx, op, 4)?;
            let has = |a: &str| ctx.inherent_attr(op, a).is_some();
            if has("epilogue") && has("parts") {
                return Err(ctx.op_error(
                    op,
                    "an 'epilogue' needs the reduction after the last GEMM, not 'parts'",
                ));
            }
            nonneg(
                ctx,
                op,
                &["m", "n", "k", "batch", "a_step", "a_stride", "b_step", "ldb", "chunk", "offset"],
            )?;
            if let Some(p) = ctx.inherent_attr(op, "parts").and_then(|a| ctx.attr_as_i64(a)) {
                let i = |n: &str| {
                    ctx.inherent_attr(op, n)
                        .and_then(|a| ctx.attr_as_i64(a))
                        .unwrap_or(0)
                };
                let (m, batch) = (i("m"), i("batch"));
                let splits = if batch == 1 { m } else { batch };
                if p < 1 || splits % p != 0 || ctx.inherent_attr(op, "copy_engine").is_none() {
                    return Err(ctx.op_error(
                        op,
                        format!(
                            "'parts' = {p} must divide the chunk's {} ({splits}) and needs 'copy_engine'",
                            if batch == 1 { "rows" } else { "batches" }
                        ),
                    ));
                }
            }
            verify_launch_shape(ctx, op)
        }),
        example: "rt.symm_fused_matmul_reduce_scatter %w, %a, %b, %y {a_step = 128 : i64, a_stride = 0 : i64, b_step = 0 : i64, batch = 1 : i64, block = 32 : i64, chunk = 192 : i64, dtype = \"bf16\", grid = 1 : i64, group = @tp, k = 16 : i64, kernel = @s1_fused_matmul_reduce_scatter, ldb = 24 : i64, m = 8 : i64, n = 24 : i64, offset = 0 : i64, reduce_op = \"sum\"} : (!rt.pool, memref<16x16xbf16>, memref<16x24xbf16>, memref<8x24xbf16>) -> ()",
        ..OpDef::EMPTY
    }
);
