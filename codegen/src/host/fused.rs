//! Host code of the fused collective-matmul pipelines (`rt.symm_fused_all_gather_matmul`,
//! `rt.symm_fused_matmul_reduce_scatter`).
//!
//! Peer-mapped pool (`symm_pool_desc` non-null): the chunk loop is unrolled (G is a
//! compile-time constant) but the chunk *index* of each step is computed at run time from
//! this process's group rank (`group_rank`), since step s handles rank (rank + s) mod G's
//! chunk, as the seed's pipelines do. The comm stream runs the `rt.symm_fused_kernel` steps
//! (`launch_on`), the compute stream the cuBLAS GEMMs; an event per step orders each GEMM
//! after the copy it reads (all-gather) or each pull after the GEMM it reads
//! (reduce-scatter), and the compute stream finally waits for the comm stream's last data
//! movement, so the op is blocking on the compute stream like every symm op. The
//! reduce-scatter reduces on the compute stream, and its end barrier (peers still pulling
//! from this rank's partials) is waited for only where a workspace may be handed out again
//! ([`Host::await_workspaces`]).
//!
//! With copy engines the all-gather pushes its shard into each peer's workspace
//! (`symm_peer_put`) instead of the peers pulling it from a pool, and a two-rank
//! reduce-scatter of large chunks accumulates in row blocks onto the peer's partial
//! (`gemm` with β ≠ 0) instead of reducing after the last GEMM (docs/codegen.md).
//!
//! Not peer-mapped: `symm_fallback` (NCCL, compute stream) moves everything at once and the
//! GEMMs run before (reduce-scatter) or after (all-gather) it.

use super::{abi, Host, R};
use commlir_ir::{Context as IrContext, OpId};
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, IntValue, PointerValue};

/// `(alpha, beta)` of a GEMM that overwrites its result.
const PLAIN: (f64, f64) = (1.0, 0.0);

/// One row-major strided-batched GEMM `C = A·B`: `rows`×`cols` per batch, contraction `k`,
/// pointers and strides in elements, `ldb`/`ldc` the row lengths of B and C.
struct Gemm<'c> {
    rows: i64,
    cols: i64,
    k: i64,
    a: PointerValue<'c>,
    a_stride: i64,
    b: PointerValue<'c>,
    ldb: i64,
    c: PointerValue<'c>,
    ldc: i64,
    c_stride: i64,
    batch: i64,
}

impl<'c> Host<'_, 'c> {
    /// `ptr + idx · scale` bytes, `idx` a run-time i64.
    fn offset(&self, ptr: PointerValue<'c>, idx: IntValue<'c>, scale: i64) -> R<PointerValue<'c>> {
        let by = b!(self.b.build_int_mul(idx, self.i64(scale), "by"));
        Ok(unsafe {
            b!(self
                .b
                .build_in_bounds_gep(self.cx.i8_type(), ptr, &[by], "chunk"))
        })
    }

    /// A row-major GEMM through cuBLAS's column-major `gemm`: `Cᵀ = Bᵀ·Aᵀ`, so cuBLAS gets
    /// (B, A) untransposed with m = cols, n = rows; `C = alpha·A·B + beta·C`.
    fn row_gemm(&self, g: &Gemm<'c>, dtype: IntValue<'c>, (alpha, beta): (f64, f64)) -> R<()> {
        let i = |v: i64| -> BasicMetadataValueEnum<'c> { self.i64(v).into() };
        let f = |v: f64| -> BasicMetadataValueEnum<'c> { self.cx.f64_type().const_float(v).into() };
        self.call(
            "gemm",
            &[
                self.i32(0).into(),
                self.i32(0).into(),
                i(g.cols),
                i(g.rows),
                i(g.k),
                g.b.into(),
                i(g.ldb),
                i(0),
                g.a.into(),
                i(g.k),
                i(g.a_stride),
                g.c.into(),
                i(g.ldc),
                i(g.c_stride),
                i(g.batch),
                dtype.into(),
                f(alpha),
                f(beta),
            ],
        )
    }

    /// Step `s` of a fused op's `symm` kernel on the comm stream: the kernel's values are
    /// the descriptor, the pool offset, the buffer, the kernel's index and the step.
    #[allow(clippy::too_many_arguments)]
    fn symm_step(
        &self,
        kernel: u32,
        grid: i64,
        block: i64,
        desc: PointerValue<'c>,
        offset: i64,
        buf: PointerValue<'c>,
        s: i64,
        extras: &[PointerValue<'c>],
    ) -> R<()> {
        let vals = self.step_values(desc, offset, buf, kernel, s, extras);
        self.launch_values(Some(abi::STREAM_COMM), kernel, grid, block, &vals)
    }

    /// The values of step `s` of a fused op's kernel: the descriptor, the pool offset, the
    /// buffer, the kernel's index (its site), the step, then the epilogue's operands.
    fn step_values(
        &self,
        desc: PointerValue<'c>,
        offset: i64,
        buf: PointerValue<'c>,
        kernel: u32,
        s: i64,
        extras: &[PointerValue<'c>],
    ) -> Vec<BasicValueEnum<'c>> {
        let mut vals: Vec<BasicValueEnum<'c>> = vec![
            desc.into(),
            self.i64(offset).into(),
            buf.into(),
            self.i32(u64::from(kernel)).into(),
            self.i32(s as u64).into(),
        ];
        vals.extend(extras.iter().map(|p| BasicValueEnum::from(*p)));
        vals
    }

    /// `launch_on(stream, kernel, …)` with the given parameter values (pointers to them in
    /// the launch scratch arrays, which `function` sizes for the fused ops).
    fn launch_values(
        &self,
        stream: Option<u32>,
        kernel: u32,
        grid: i64,
        block: i64,
        vals: &[BasicValueEnum<'c>],
    ) -> R<()> {
        let sc = self.scratch.ok_or("no scratch arrays")?;
        for (i, v) in vals.iter().enumerate() {
            let idx = [self.i64(i as i64)];
            // Each value gets an 8-byte cell of `kvals`, whatever its width.
            let vp = unsafe { b!(self.b.build_in_bounds_gep(self.ptr(), sc.kvals, &idx, "fv")) };
            b!(self.b.build_store(vp, *v));
            let pp = unsafe {
                b!(self
                    .b
                    .build_in_bounds_gep(self.ptr(), sc.kparams, &idx, "fp"))
            };
            b!(self.b.build_store(pp, vp));
        }
        let mut args: Vec<BasicMetadataValueEnum<'c>> = Vec::new();
        if let Some(s) = stream {
            args.push(self.i32(u64::from(s)).into());
        }
        args.extend::<[BasicMetadataValueEnum<'c>; 6]>([
            self.i32(u64::from(kernel)).into(),
            self.i32(grid as u64).into(),
            self.i32(block as u64).into(),
            self.i32(0).into(),
            sc.kparams.into(),
            self.i32(vals.len() as u64).into(),
        ]);
        self.call(
            if stream.is_some() {
                "launch_on"
            } else {
                "launch"
            },
            &args,
        )
    }

    /// `symm_peer_copy` on the comm stream: `rows` rows of `row_bytes` bytes from group rank
    /// `peer`'s mapping of `pool` (`src_offset` bytes in), to `dst`, rows `dst_pitch` apart.
    #[allow(clippy::too_many_arguments)]
    fn peer_copy(
        &self,
        pool: PointerValue<'c>,
        peer: IntValue<'c>,
        src_offset: IntValue<'c>,
        dst: PointerValue<'c>,
        rows: i64,
        row_bytes: i64,
        dst_pitch: i64,
    ) -> R<()> {
        let peer = b!(self
            .b
            .build_int_truncate(peer, self.cx.i32_type(), "peer32"));
        self.call(
            "symm_peer_copy",
            &[
                self.i32(u64::from(abi::STREAM_COMM)).into(),
                pool.into(),
                peer.into(),
                src_offset.into(),
                dst.into(),
                self.i64(rows).into(),
                self.i64(row_bytes).into(),
                self.i64(dst_pitch).into(),
            ],
        )
    }

    fn record(&self, stream: u32, e: u32) -> R<()> {
        self.call(
            "event_record",
            &[
                self.i32(u64::from(stream)).into(),
                self.i32(u64::from(e)).into(),
            ],
        )
    }
    /// `symm_peer_put` on the comm stream: `bytes` from `src` into group rank `peer`'s
    /// mapping of `pool`, `dst_offset` bytes in.
    fn peer_put(
        &self,
        pool: PointerValue<'c>,
        peer: IntValue<'c>,
        dst_offset: IntValue<'c>,
        src: PointerValue<'c>,
        bytes: i64,
    ) -> R<()> {
        let peer = b!(self
            .b
            .build_int_truncate(peer, self.cx.i32_type(), "peer32"));
        self.call(
            "symm_peer_put",
            &[
                self.i32(u64::from(abi::STREAM_COMM)).into(),
                pool.into(),
                peer.into(),
                dst_offset.into(),
                src.into(),
                self.i64(bytes).into(),
            ],
        )
    }

    /// `copy_on(stream, dst, src, bytes)`.
    fn copy_on(
        &self,
        stream: u32,
        dst: PointerValue<'c>,
        src: PointerValue<'c>,
        bytes: i64,
    ) -> R<()> {
        self.call(
            "copy_on",
            &[
                self.i32(u64::from(stream)).into(),
                dst.into(),
                src.into(),
                self.i64(bytes).into(),
            ],
        )
    }
    fn wait(&self, stream: u32, e: u32) -> R<()> {
        self.call(
            "stream_wait",
            &[
                self.i32(u64::from(stream)).into(),
                self.i32(u64::from(e)).into(),
            ],
        )
    }

    /// The pool's descriptor, and the branch to the peer-mapped block (returned, with the
    /// fallback block and the join block).
    fn fused_branch(
        &self,
        pool: PointerValue<'c>,
    ) -> R<(PointerValue<'c>, [inkwell::basic_block::BasicBlock<'c>; 3])> {
        let slot = self.slot.ok_or("no slot")?;
        self.call("symm_pool_desc", &[pool.into(), slot.into()])?;
        let desc = b!(self.b.build_load(self.ptr(), slot, "desc")).into_pointer_value();
        let f = self.func.ok_or("no function")?;
        let mapped = self.cx.append_basic_block(f, "fused_pipeline");
        let fallback = self.cx.append_basic_block(f, "fused_nccl");
        let join = self.cx.append_basic_block(f, "fused_done");
        let is_null = b!(self.b.build_is_null(desc, "unmapped"));
        b!(self.b.build_conditional_branch(is_null, fallback, mapped));
        self.b.position_at_end(mapped);
        Ok((desc, [mapped, fallback, join]))
    }

    /// This process's rank in the op's group, as an i64.
    fn fused_rank(&self, ctx: &IrContext, op: OpId) -> R<IntValue<'c>> {
        let slot = self.slot.ok_or("no slot")?;
        self.call(
            "group_rank",
            &[self.group_index(ctx, op)?.into(), slot.into()],
        )?;
        let r = b!(self.b.build_load(self.cx.i32_type(), slot, "grank")).into_int_value();
        Ok(b!(self.b.build_int_z_extend(
            r,
            self.cx.i64_type(),
            "grank64"
        )))
    }

    /// `(rank + s) mod G`.
    fn chunk_of(&self, rank: IntValue<'c>, s: i64, world: i64) -> R<IntValue<'c>> {
        let p = b!(self.b.build_int_add(rank, self.i64(s), "ps"));
        Ok(b!(self.b.build_int_unsigned_rem(p, self.i64(world), "p")))
    }

    pub(super) fn world_of(&self, ctx: &IrContext, op: OpId) -> R<i64> {
        let g = ctx
            .inherent_attr(op, "group")
            .and_then(|a| ctx.attr_as_symbol(a))
            .ok_or("requires 'group'")?;
        self.groups
            .iter()
            .find(|e| e.name == g)
            .map(|e| e.size)
            .ok_or_else(|| format!("no coll.group @{g} in the module"))
    }

    /// `rt.symm_fused_all_gather_matmul` (module docs).
    pub(super) fn fused_all_gather_matmul(
        &self,
        ctx: &IrContext,
        op: OpId,
        bufs: &[PointerValue<'c>],
        next_event: &mut u32,
    ) -> R<()> {
        let a = |n: &str| Self::attr_i64(ctx, op, n);
        let (m, k, batch, offset, count) =
            (a("m")?, a("k")?, a("batch")?, a("offset")?, a("count")?);
        let (grid, block) = (a("grid")?, a("block")?);
        let ns = ctx
            .inherent_attr(op, "ns")
            .and_then(|x| ctx.attr_as_i64_array(x))
            .ok_or("requires 'ns'")?;
        let world = self.world_of(ctx, op)?;
        let nb = ns.len();
        let push = ctx.inherent_attr(op, "push").is_some();
        // (pool, gathered, staging, bs, outs), or (pool, bs, outs, shard) when pushing.
        let first_b = if push { 1 } else { 3 };
        if bufs.len() != first_b + 2 * nb + usize::from(push) {
            return Err("operand count does not match 'ns'".into());
        }
        let pool = bufs[0];
        let (bs, outs) = (
            &bufs[first_b..first_b + nb],
            &bufs[first_b + nb..first_b + 2 * nb],
        );
        // A pushing pipeline's shard, wherever it is (the pool is then its workspace).
        let source = push.then(|| bufs[first_b + 2 * nb]);
        // The gathered buffer (the kernel's `out`; none when pushing) and the fallback's
        // staging buffer (the workspace itself when pushing).
        let (gathered, stage) = if push {
            (pool, pool)
        } else {
            (bufs[1], bufs[2])
        };
        let dtype = self.dtype(ctx, op)?;
        let esz = elem_size(Self::attr_str(ctx, op, "dtype")?)?;
        let kernel = self.kernel_index(ctx, op, "kernel")? as u32;
        let shard = self.at(pool, offset)?;
        // Product i's chunk p: block p of `m` rows in each of the `batch` blocks of G·m rows.
        let gemm = |p: IntValue<'c>, a_ptr: PointerValue<'c>, a_stride: i64| -> R<()> {
            for i in 0..nb {
                let n = ns[i];
                let c = self.offset(outs[i], p, m * n * esz)?;
                self.row_gemm(
                    &Gemm {
                        rows: m,
                        cols: n,
                        k,
                        a: a_ptr,
                        a_stride,
                        b: bs[i],
                        ldb: n,
                        c,
                        ldc: n,
                        c_stride: world * m * n,
                        batch,
                    },
                    dtype,
                    PLAIN,
                )?;
            }
            Ok(())
        };
        let (desc, [_, fallback, join]) = self.fused_branch(pool)?;
        let rank = self.fused_rank(ctx, op)?;
        let events = self.take_events(next_event, world as u32 + 1);
        let (compute, comm) = (abi::STREAM_COMPUTE, abi::STREAM_COMM);
        let step =
            |s: i64, grid: i64| self.symm_step(kernel, grid, block, desc, offset, gathered, s, &[]);
        // The shard was written on the compute stream: the comm stream starts after it.
        self.record(compute, events[0])?;
        self.wait(comm, events[0])?;
        // The own block of the gathered buffer is read only when the buffer is a result;
        // otherwise the first step is the start barrier alone (step G + 1).
        let return_a = ctx.inherent_attr(op, "return_a").is_some();
        let shard_bytes = count * esz;
        if let Some(src) = source {
            // Push: after the start barrier (every peer is done reading its workspace), a
            // copy engine writes this rank's shard into slot `rank` of each peer's
            // workspace, and step G + 1 + s tells peer rank + s it is there and waits for
            // rank − s's shard in this rank's slot rank − s. No copy into a pool of one's own,
            // and no end barrier: nobody reads this rank's memory.
            step(world + 1, 1)?;
            for s in 1..world {
                let p = self.chunk_of(rank, s, world)?;
                let dst = b!(self.b.build_int_mul(rank, self.i64(shard_bytes), "slot"));
                self.peer_put(pool, p, dst, src, shard_bytes)?;
                step(world + 1 + s, 1)?;
                self.record(comm, events[s as usize])?;
            }
            self.record(comm, events[world as usize])?;
            gemm(rank, src, m * k)?;
            for s in 1..world {
                self.wait(compute, events[s as usize])?;
                let q = self.chunk_of(rank, world - s, world)?;
                gemm(q, self.offset(pool, q, shard_bytes)?, m * k)?;
            }
        } else {
            if ctx.inherent_attr(op, "copy_engine").is_some() {
                // Copy engines move the chunks; the kernel only signals, with one block.
                let copy = |p: IntValue<'c>| -> R<()> {
                    let dst = self.offset(gathered, p, m * k * esz)?;
                    let src = self.i64(offset);
                    self.peer_copy(pool, p, src, dst, batch, m * k * esz, world * m * k * esz)
                };
                step(world + 1, 1)?;
                for s in 1..world {
                    copy(self.chunk_of(rank, s, world)?)?;
                    self.record(comm, events[s as usize])?;
                }
                if return_a {
                    copy(rank)?;
                }
                step(world, 1)?;
            } else {
                step(if return_a { 0 } else { world + 1 }, grid)?;
                for s in 1..world {
                    step(s, grid)?;
                    self.record(comm, events[s as usize])?;
                }
                step(world, grid)?;
            }
            self.record(comm, events[world as usize])?;
            // This rank's shard needs no copy: its GEMMs run at once, from the pool.
            gemm(rank, shard, m * k)?;
            for s in 1..world {
                self.wait(compute, events[s as usize])?;
                let p = self.chunk_of(rank, s, world)?;
                let a_ptr = self.offset(gathered, p, m * k * esz)?;
                gemm(p, a_ptr, world * m * k)?;
            }
        }
        self.wait(compute, events[world as usize])?;
        b!(self.b.build_unconditional_branch(join));
        // NCCL: the shards stacked rank by rank in the staging buffer, then every chunk.
        self.b.position_at_end(fallback);
        let ag = abi::code(abi::SYMM_COLLS, "all_gather").ok_or("no all_gather code")?;
        if let Some(src) = source {
            // In place in the workspace: the shard into slot `rank`, which NCCL sends from.
            let rank = self.fused_rank(ctx, op)?;
            let own = self.offset(pool, rank, shard_bytes)?;
            self.copy_on(compute, own, src, shard_bytes)?;
            self.symm_fallback(ctx, op, ag, (own, 0), stage, count, self.i32(0))?;
        } else {
            self.symm_fallback(ctx, op, ag, (pool, offset), stage, count, self.i32(0))?;
        }
        for p in 0..world {
            let pv = self.i64(p);
            let a_ptr = self.offset(stage, pv, count * esz)?;
            gemm(pv, a_ptr, m * k)?;
        }
        if ctx.inherent_attr(op, "unpack").is_some() {
            let u = self.kernel_index(ctx, op, "unpack")? as u32;
            let items = world * count;
            self.launch_values(
                None,
                u,
                crate::lower_to_rt::grid_for(items),
                crate::lower_to_rt::BLOCK,
                &[stage.into(), gathered.into()],
            )?;
        }
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(join);
        Ok(())
    }

    /// `rt.symm_fused_matmul_reduce_scatter` (module docs).
    pub(super) fn fused_matmul_reduce_scatter(
        &self,
        ctx: &IrContext,
        op: OpId,
        bufs: &[PointerValue<'c>],
        next_event: &mut u32,
    ) -> R<()> {
        let a = |n: &str| Self::attr_i64(ctx, op, n);
        let (m, n, k, batch) = (a("m")?, a("n")?, a("k")?, a("batch")?);
        let (a_step, a_stride, b_step, ldb) =
            (a("a_step")?, a("a_stride")?, a("b_step")?, a("ldb")?);
        let (chunk, offset, grid, block) = (a("chunk")?, a("offset")?, a("grid")?, a("block")?);
        let world = self.world_of(ctx, op)?;
        let [pool, a_buf, b_buf, out, extras @ ..] = bufs else {
            return Err("expects at least 4 operands".into());
        };
        let (pool, a_buf, b_buf, out) = (*pool, *a_buf, *b_buf, *out);
        let dtype = self.dtype(ctx, op)?;
        let esz = elem_size(Self::attr_str(ctx, op, "dtype")?)?;
        let kernel = self.kernel_index(ctx, op, "kernel")? as u32;
        let partials = self.at(pool, offset)?;
        // Part h of `parts` of chunk p of the product into `c` (`C = alpha·A·B + beta·C`): a
        // block of rows (one batch) or of batches, contiguous in the chunk.
        let part_gemm = |p: IntValue<'c>,
                         (h, parts): (i64, i64),
                         c: PointerValue<'c>,
                         scale: (f64, f64)|
         -> R<()> {
            let (rows, nbatch, a_skip) = if batch == 1 {
                (m / parts, 1, h * (m / parts) * k)
            } else {
                (m, batch / parts, h * (batch / parts) * a_stride)
            };
            let a_ptr = self.offset(a_buf, p, a_step * esz)?;
            let g = Gemm {
                rows,
                cols: n,
                k,
                a: self.at(a_ptr, a_skip * esz)?,
                a_stride,
                b: self.offset(b_buf, p, b_step * esz)?,
                ldb,
                c,
                ldc: n,
                c_stride: m * n,
                batch: nbatch,
            };
            self.row_gemm(&g, dtype, scale)
        };
        // Chunk p of the product into partial slot p.
        let gemm =
            |p: IntValue<'c>| part_gemm(p, (0, 1), self.offset(partials, p, chunk * esz)?, PLAIN);
        let (desc, [_, fallback, join]) = self.fused_branch(pool)?;
        let rank = self.fused_rank(ctx, op)?;
        if let Some(parts) = ctx
            .inherent_attr(op, "parts")
            .and_then(|x| ctx.attr_as_i64(x))
        {
            if world != 2 {
                return Err(format!("'parts' needs a group of two ranks, got {world}"));
            }
            let (compute, comm) = (abi::STREAM_COMPUTE, abi::STREAM_COMM);
            let events = self.take_events(next_event, 2 * parts as u32);
            let part_bytes = chunk / parts * esz;
            let peer = self.chunk_of(rank, 1, world)?;
            // The peer's chunk part by part; after each, a copy engine pulls the peer's
            // matching part of this rank's chunk straight into the result.
            for h in 0..parts {
                let slot = self.offset(partials, peer, chunk * esz)?;
                part_gemm(peer, (h, parts), self.at(slot, h * part_bytes)?, PLAIN)?;
                let (done, landed) = (events[2 * h as usize], events[2 * h as usize + 1]);
                self.record(compute, done)?;
                self.wait(comm, done)?;
                self.symm_step(kernel, 1, block, desc, offset, out, world + 1, &[])?;
                let by = b!(self.b.build_int_mul(rank, self.i64(chunk * esz), "mine"));
                let src = b!(self
                    .b
                    .build_int_add(by, self.i64(offset + h * part_bytes), "src"));
                let dst = self.at(out, h * part_bytes)?;
                self.peer_copy(pool, peer, src, dst, 1, part_bytes, part_bytes)?;
                self.record(comm, landed)?;
            }
            // The end barrier: the peer's pulls from this rank's partials are complete.
            self.symm_step(kernel, 1, block, desc, offset, out, 2 * world, &[])?;
            // This rank's own chunk, part by part, accumulated onto the peer's part.
            let (alpha, beta) = if Self::attr_str(ctx, op, "reduce_op")? == "avg" {
                (1.0 / world as f64, 1.0 / world as f64)
            } else {
                (1.0, 1.0)
            };
            for h in 0..parts {
                self.wait(compute, events[2 * h as usize + 1])?;
                let c = self.at(out, h * part_bytes)?;
                part_gemm(rank, (h, parts), c, (alpha, beta))?;
            }
        } else {
            let events = self.take_events(next_event, world as u32);
            let (compute, comm) = (abi::STREAM_COMPUTE, abi::STREAM_COMM);
            let step = |s: i64, grid: i64| {
                self.symm_step(kernel, grid, block, desc, offset, out, s, extras)
            };
            let copy_engine = ctx.inherent_attr(op, "copy_engine").is_some();
            let chunk_bytes = chunk * esz;
            // The peers' chunks first (rank + s for s = 1 … G − 1), each one's transfer (step s on
            // the comm stream) overlapping the GEMM of the next; this rank's own chunk last, so
            // that it hides the last transfer too (as the seed's producer pipeline orders them).
            for s in (1..world).chain([0]) {
                let p = self.chunk_of(rank, s, world)?;
                gemm(p)?;
                if s > 0 {
                    self.record(compute, events[s as usize])?;
                    self.wait(comm, events[s as usize])?;
                    if copy_engine {
                        // Step s's signals (one block), then a copy engine pulls rank
                        // (rank − s)'s partial for this rank into receive slot rank − s.
                        step(world + s, 1)?;
                        let from = self.chunk_of(rank, world - s, world)?;
                        let by = b!(self.b.build_int_mul(rank, self.i64(chunk_bytes), "mine"));
                        let src = b!(self.b.build_int_add(by, self.i64(offset), "src_off"));
                        let recv = self.offset(partials, from, chunk_bytes)?;
                        let dst = self.at(recv, world * chunk_bytes)?;
                        self.peer_copy(pool, from, src, dst, 1, chunk_bytes, chunk_bytes)?;
                    } else {
                        step(s, grid)?;
                    }
                }
            }
            // Every pull is issued; the end barrier follows them on the comm stream, and the
            // reduction (own partial, receive slots: this GPU's memory only) runs on the
            // compute stream, right after the own GEMM, once the last pull has landed.
            self.record(comm, events[0])?;
            step(2 * world, 1)?;
            self.wait(compute, events[0])?;
            let rgrid = crate::symm_kernels::reduce_grid(chunk, esz as u64) as i64;
            self.launch_values(
                Some(compute),
                kernel,
                rgrid,
                block,
                &self.step_values(desc, offset, out, kernel, world, extras),
            )?;
        }
        b!(self.b.build_unconditional_branch(join));
        self.rs_fallback(
            ctx,
            op,
            (pool, offset),
            (out, extras),
            chunk,
            [fallback, join],
            &gemm,
        )?;
        // After the end barrier on the comm stream (nothing on it in the fallback).
        self.release_workspace(ctx, op)
    }

    /// A pushing `rt.nccl_all_gather` (`push_kernel`) from `send` into the gathered buffer
    /// `recv` of the pool `recv_pool`, all on the comm stream: on a peer-mapped pool, the own
    /// block by a local copy engine, the barrier (step G + 1), then per peer a copy engine's
    /// push and its signal pair (step G + 1 + s); otherwise `ncclAllGather`.
    pub(super) fn push_all_gather(
        &self,
        ctx: &IrContext,
        op: OpId,
        (send, recv): (PointerValue<'c>, PointerValue<'c>),
        recv_pool: PointerValue<'c>,
    ) -> R<()> {
        let count = Self::attr_i64(ctx, op, "send_count")?;
        let recv_offset = Self::attr_i64(ctx, op, "recv_offset")?;
        let bytes = count * elem_size(Self::attr_str(ctx, op, "dtype")?)?;
        let world = self.world_of(ctx, op)?;
        let kernel = self.kernel_index(ctx, op, "push_kernel")? as u32;
        let comm = abi::STREAM_COMM;
        let (desc, [_, fallback, join]) = self.fused_branch(recv_pool)?;
        let rank = self.fused_rank(ctx, op)?;
        // The own block, unless the send buffer already is it (an in-place gather).
        let own = self.offset(recv, rank, bytes)?;
        let f = self.func.ok_or("no function")?;
        let (copy, copied) = (
            self.cx.append_basic_block(f, "own_block"),
            self.cx.append_basic_block(f, "own_done"),
        );
        let in_place =
            b!(self
                .b
                .build_int_compare(inkwell::IntPredicate::EQ, own, send, "in_place"));
        b!(self.b.build_conditional_branch(in_place, copied, copy));
        self.b.position_at_end(copy);
        self.copy_on(comm, own, send, bytes)?;
        b!(self.b.build_unconditional_branch(copied));
        self.b.position_at_end(copied);
        // One block of 32 threads: the barrier's threads cover up to 32 peers.
        let step = |s: i64| self.symm_step(kernel, 1, 32, desc, 0, recv, s, &[]);
        step(world + 1)?;
        for s in 1..world {
            let p = self.chunk_of(rank, s, world)?;
            let at = b!(self.b.build_int_mul(rank, self.i64(bytes), "block"));
            let at = b!(self.b.build_int_add(at, self.i64(recv_offset), "dst"));
            self.peer_put(recv_pool, p, at, send, bytes)?;
            step(world + 1 + s)?;
        }
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(fallback);
        let g = self.group_index(ctx, op)?.into();
        let d = self.dtype(ctx, op)?.into();
        let c = self.i64(count).into();
        self.call("all_gather", &[g, send.into(), recv.into(), c, d])?;
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(join);
        Ok(())
    }

    /// The reduce-scatter pipeline's NCCL block: every chunk, then the reduce-scatter of the
    /// partials (with an epilogue: into a temporary that the chain's own kernel reads, `out`
    /// being the chain's result and `extras` its other inputs); then the join.
    #[allow(clippy::too_many_arguments)]
    fn rs_fallback(
        &self,
        ctx: &IrContext,
        op: OpId,
        at: (PointerValue<'c>, i64),
        (out, extras): (PointerValue<'c>, &[PointerValue<'c>]),
        chunk: i64,
        [fallback, join]: [inkwell::basic_block::BasicBlock<'c>; 2],
        gemm: &dyn Fn(IntValue<'c>) -> R<()>,
    ) -> R<()> {
        self.b.position_at_end(fallback);
        for p in 0..self.world_of(ctx, op)? {
            gemm(self.i64(p))?;
        }
        let rs = abi::code(abi::SYMM_COLLS, "reduce_scatter").ok_or("no reduce_scatter code")?;
        let reduced = self.epilogue_input(ctx, op, chunk)?.unwrap_or(out);
        self.symm_fallback(ctx, op, rs, at, reduced, chunk, self.redop(ctx, op)?)?;
        if reduced != out {
            self.launch_epilogue(ctx, op, extras, reduced, out)?;
        }
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(join);
        Ok(())
    }

    /// After the reduce-scatter pipeline `op`: the comm stream records the function's
    /// release event behind the pipeline's end barrier. The compute stream does not wait for
    /// it there: nothing after the pipeline reads the workspace, and the barrier (peers still
    /// pulling from this rank's partials) would only delay the next kernel.
    fn release_workspace(&self, ctx: &IrContext, op: OpId) -> R<()> {
        let e = self.release.ok_or("no release event")?;
        let alloc = ctx
            .defining_op(ctx.operand(op, 0))
            .filter(|d| ctx.op_name(*d) == "rt.pool_alloc")
            .ok_or("the workspace is not an rt.pool_alloc")?;
        let key = Self::pool_key(ctx, alloc)?;
        self.record(abi::STREAM_COMM, e)?;
        let mut released = self.released.borrow_mut();
        if !released.contains(&key) {
            released.push(key);
        }
        Ok(())
    }

    /// The (group, bytes) of the `symm_mem` `rt.pool_alloc` `op`: the runtime hands a freed
    /// pool out again only to an allocation of the same kind, group and size.
    pub(super) fn pool_key(ctx: &IrContext, op: OpId) -> R<(String, i64)> {
        let group = ctx
            .inherent_attr(op, "group")
            .and_then(|a| ctx.attr_as_symbol(a))
            .ok_or("requires 'group'")?;
        Ok((group.to_string(), Self::attr_i64(ctx, op, "size")?))
    }

    /// Before anything that may hand out a released workspace again: a `symm_mem` pool
    /// allocation of a released workspace's group and size (`key`; the runtime reuses freed
    /// pools of the same kind, group and size), a call or the return to the caller (`None`).
    /// The compute stream waits for every end barrier issued so far; later comm-stream work
    /// follows them in stream order. Allocations of other sizes (the all-gather pipelines'
    /// workspaces between two reduce-scatters) do not wait, so the barrier stays off the
    /// compute stream's path. The runtime skips the wait when the stream is already ordered
    /// after the barrier (`order.rs`).
    pub(super) fn await_workspaces(&self, key: Option<(String, i64)>) -> R<()> {
        let Some(e) = self.release else {
            return Ok(());
        };
        let released = self.released.borrow();
        let reused = match &key {
            Some(k) => released.contains(k),
            None => !released.is_empty(),
        };
        if reused {
            self.wait(abi::STREAM_COMPUTE, e)?;
        }
        Ok(())
    }

    /// `n` fresh event indices of the function.
    fn take_events(&self, next_event: &mut u32, n: u32) -> Vec<u32> {
        let first = *next_event;
        *next_event += n;
        (first..first + n).collect()
    }
}

/// Bytes per element of a float dtype spelling.
fn elem_size(dtype: &str) -> R<i64> {
    Ok(match dtype {
        "f16" | "bf16" => 2,
        "f32" => 4,
        "f64" => 8,
        d => {
            return Err(format!(
                "fused collective-matmul ops multiply floats, got {d}"
            ))
        }
    })
}
