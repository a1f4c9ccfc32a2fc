//! Row kernels: a `compute.reduce_sum` / `compute.reduce_max` along the last dimension fused
//! with the chains around it (`crate::fusion`, *Row reductions*), Inductor's persistent
//! reduction. RMSNorm, `cast(x) · rsqrt(mean(cast(x)²) + eps) · w`, is one kernel that reads
//! `x` once and writes only its result.
//!
//! The kernel body ([`super::fused::Body`]) holds three kinds of values: *row-shaped* ones
//! (the reduction's operand and the chains computing it, the epilogue chain and what it
//! reads), evaluated at the flat element index `row · len + col` exactly as a fused chain
//! evaluates them; *per-row* ones (the reduction's result and the chain on it: the scale by
//! `1/len`, `+ eps`, `rsqrt`), evaluated at index `row`; and the broadcasts of a per-row value
//! back to the rows (index map `j / len`), which read the value the block computed. Per row
//! (one block per row, rows grid-stride over blocks, so any grid is correct; `rt.launch`
//! gives `min(rows, 65535)` blocks of 256 threads, a multiple of 32 up to 1024 works):
//!
//! 1. each thread evaluates the operand at its elements (`t, t + ntid, …`; 16-byte vectors of
//!    elements when the row length is a multiple of the vector width and every pointer is
//!    aligned) and folds them in f32, in order: `+`, or `llvm.maximum` (NaN-propagating);
//! 2. a block reduction (5 butterfly shuffles per warp, then the per-warp partials through
//!    shared memory in warp order; a partner lane past the block contributes the identity)
//!    gives every thread the row's value, rounded to the reduction's element type as the sim
//!    rounds its result; each thread then evaluates the per-row chain on it (the same ops on
//!    the same value in every thread);
//! 3. each thread evaluates the epilogue at its elements, the broadcasts reading the per-row
//!    value, and stores it; without an epilogue, thread 0 stores the per-row value.
//!
//! Rows of at most [`super::ROW_REG_VECTORS`] vectors per thread (8192 bf16 elements at 256
//! threads) are read from global memory once: the vectors loaded in step 1 are kept in
//! registers and step 3 evaluates the epilogue from them (recomputing the cheap prologue ops,
//! such as a cast, instead of keeping their results). Longer rows, or rows whose length is not
//! a multiple of the vector width (or unaligned views), read the row's inputs twice, the
//! second time mostly from L2.
//!
//! Every op's result is rounded as the unfused kernels round it. The sum's association is the
//! block kernels' (per-thread partials, shuffle tree, warp-order walk), not the sim's
//! in-order walk, so a sum agrees with the sim within `--check`'s tolerance rather than bit
//! for bit, exactly like the standalone `reduce_sum` row kernel (one thread, as on the host
//! tests, walks the row in order: the sim's bits); a maximum is exact in any order.

use super::fused::{computed, stored, Body, Eval, Piece, Val, VectorLoads};
use super::{transcendental_used, Elem, Gen, Kind, R, ROW_REG_VECTORS, VECTOR_BYTES};
use commlir_ir::{Context as IrContext, OpId, Value};
use inkwell::intrinsics::Intrinsic;
use inkwell::values::{FloatValue, FunctionValue, IntValue, PointerValue};
use inkwell::IntPredicate;

/// `?` for inkwell's builder errors.
macro_rules! b {
    ($e:expr) => {
        $e.map_err(|e| e.to_string())?
    };
}

/// The thread's place in its block, read once at the kernel's entry.
#[derive(Clone, Copy)]
struct Block<'c> {
    tid: IntValue<'c>,
    ntid: IntValue<'c>,
    lane: IntValue<'c>,
    warp: IntValue<'c>,
    nwarps: IntValue<'c>,
    smem: PointerValue<'c>,
    shfl: FunctionValue<'c>,
}

/// How a row is walked ([`Gen::row_fused`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// Element by element.
    Scalar,
    /// 16-byte vectors, loaded again for the epilogue.
    Stream,
    /// 16-byte vectors, `n` per thread kept in registers.
    Registers(u64),
}

/// The compile-time facts of one row kernel.
struct Row<'b> {
    body: &'b Body,
    reduction: OpId,
    max: bool,
    /// The reduction's result element type (its value is rounded to it).
    re: Elem,
    /// What the kernel stores: the epilogue's result, or the per-row value.
    result: Value,
    rk: Kind,
    /// Elements per row; rows.
    len: u64,
    rows: u64,
    width: u64,
    epilogue: bool,
    /// Kernel arguments (the result is the parameter after them).
    nargs: usize,
}

impl<'a, 'c> Gen<'a, 'c> {
    /// A row kernel (module docs): `ops` of the kernel body, with one reduction along the
    /// last dim of its operand.
    pub(super) fn row_fused(
        &mut self,
        ctx: &IrContext,
        f: FunctionValue<'c>,
        ops: &[OpId],
        args: &[Value],
        result: Value,
    ) -> R<()> {
        let body = Body::new(self, ctx, ops, args)?;
        let [reduction] = body.reductions[..] else {
            return Err("a row kernel has exactly one reduction".into());
        };
        if !body.concats.is_empty() {
            return Err("a concat in a row kernel".into());
        }
        let x = ctx.operand(reduction, 0);
        let (Kind::Float(ie), xshape) = self.kind_of(ctx, x)? else {
            return Err("a row kernel reduces f16, bf16 or f32 values".into());
        };
        let (Kind::Float(re), _) = self.kind_of(ctx, ctx.result(reduction, 0))? else {
            return Err("a row kernel reduces f16, bf16 or f32 values".into());
        };
        if self.compute_ty(ie) != self.cx.f32_type() || self.compute_ty(re) != self.cx.f32_type() {
            return Err("a row kernel reduces f16, bf16 or f32 values".into());
        }
        let len = xshape.last().copied().unwrap_or(1).max(1) as u64;
        let n = xshape.iter().product::<i64>().max(0) as u64;
        let per_row: Vec<i64> = {
            let mut s = xshape.clone();
            s.pop();
            s
        };
        for (&b, &op) in &body.deferred {
            let (_, to) = self.kind_of(ctx, b)?;
            let (_, from) = self.kind_of(ctx, ctx.operand(op, 0))?;
            let numel = |s: &[i64]| s.iter().product::<i64>();
            if ctx.op_name(op) != "compute.broadcast"
                || numel(&from) != numel(&per_row)
                || !crate::fusion::is_row_broadcast(&from, &to, len)
            {
                return Err(
                    "a row kernel reads per-row values only broadcast to their rows".into(),
                );
            }
        }
        let (rk, _) = self.kind_of(ctx, result)?;
        let row = Row {
            body: &body,
            reduction,
            max: ctx.op_name(reduction) == "compute.reduce_max",
            re,
            result,
            rk,
            len,
            rows: n / len,
            width: super::elementwise_vector_width(ctx, ops),
            epilogue: !body.deferred.is_empty(),
            nargs: args.len(),
        };
        if transcendental_used(ctx, ops) {
            self.all_helpers()?;
        }
        self.b
            .position_at_end(f.get_first_basic_block().ok_or("no entry")?);
        let blk = self.block_regs()?;
        let ctaid = self.sreg("llvm.nvvm.read.ptx.sreg.ctaid.x")?;
        let nctaid = self.sreg("llvm.nvvm.read.ptx.sreg.nctaid.x")?;
        let rows_loop = |g: &Self, walk: Walk| -> R<()> {
            g.counted(f, ctaid, g.i64(row.rows), nctaid, |g, r| {
                g.row_body(ctx, f, &row, &blk, r, walk)
            })
        };
        let nvec = len / row.width;
        if !len.is_multiple_of(row.width) || nvec == 0 {
            return rows_loop(self, Walk::Scalar);
        }
        let aligned = self.all_aligned(f, args.len() + 1)?;
        let vec_bb = self.cx.append_basic_block(f, "rvec");
        let sc_bb = self.cx.append_basic_block(f, "rscalar");
        let done = self.cx.append_basic_block(f, "rdone");
        b!(self.b.build_conditional_branch(aligned, vec_bb, sc_bb));
        self.b.position_at_end(vec_bb);
        let regs = nvec.div_ceil(crate::lower_to_rt::BLOCK as u64);
        if regs <= ROW_REG_VECTORS {
            // The row fits in `regs` vectors per thread (always at `rt.launch`'s block).
            let cap = b!(self.b.build_int_mul(blk.ntid, self.i64(regs), "cap"));
            let fits = b!(self
                .b
                .build_int_compare(IntPredicate::ULE, self.i64(nvec), cap, "fits"));
            let reg_bb = self.cx.append_basic_block(f, "rregs");
            let st_bb = self.cx.append_basic_block(f, "rstream");
            b!(self.b.build_conditional_branch(fits, reg_bb, st_bb));
            self.b.position_at_end(reg_bb);
            rows_loop(self, Walk::Registers(regs))?;
            b!(self.b.build_unconditional_branch(done));
            self.b.position_at_end(st_bb);
        }
        rows_loop(self, Walk::Stream)?;
        b!(self.b.build_unconditional_branch(done));
        self.b.position_at_end(sc_bb);
        rows_loop(self, Walk::Scalar)?;
        b!(self.b.build_unconditional_branch(done));
        self.b.position_at_end(done);
        Ok(())
    }

    fn block_regs(&self) -> R<Block<'c>> {
        let tid = self.sreg("llvm.nvvm.read.ptx.sreg.tid.x")?;
        let ntid = self.sreg("llvm.nvvm.read.ptx.sreg.ntid.x")?;
        let nwarps = b!(self.b.build_int_add(ntid, self.i64(31), "nw"));
        Ok(Block {
            tid,
            ntid,
            lane: b!(self.b.build_and(tid, self.i64(31), "lane")),
            warp: b!(self.b.build_right_shift(tid, self.i64(5), false, "warp")),
            nwarps: b!(self.b.build_right_shift(nwarps, self.i64(5), false, "nw")),
            smem: self.shared_partials()?,
            shfl: Intrinsic::find("llvm.nvvm.shfl.sync.bfly.f32")
                .ok_or("no llvm.nvvm.shfl.sync.bfly.f32")?
                .get_declaration(self.m, &[])
                .ok_or("cannot declare shfl")?,
        })
    }

    /// One row `r` (module docs, steps 1 to 3).
    fn row_body(
        &self,
        ctx: &IrContext,
        f: FunctionValue<'c>,
        row: &Row<'_>,
        blk: &Block<'c>,
        r: IntValue<'c>,
        walk: Walk,
    ) -> R<()> {
        let ct = self.cx.f32_type();
        let base = b!(self.b.build_int_mul(r, self.i64(row.len), "base"));
        let x = ctx.operand(row.reduction, 0);
        let init = ct.const_float(if row.max { f64::NEG_INFINITY } else { 0.0 });
        let maxf = self.intrinsic("llvm.maximum", ct.into())?;
        let comb = |g: &Self, a: FloatValue<'c>, v: FloatValue<'c>| -> R<FloatValue<'c>> {
            if row.max {
                g.call_f(maxf, &[a, v])
            } else {
                Ok(b!(g.b.build_float_add(a, v, "acc")))
            }
        };
        let w = row.width;
        // The operand at element `j`, one at a time.
        let x_at = |g: &Self, j: IntValue<'c>| -> R<FloatValue<'c>> {
            let mut ev = Eval::new(row.body, &[]);
            let v = ev.value(g, ctx, x, None, &mut |g, v, p| {
                g.row_leaf(ctx, f, row.body, v, p, j)
            })?;
            Ok(computed(g, v)?.into_float_value())
        };
        // Step 1: this thread's partial.
        let mut slots: Vec<(IntValue<'c>, IntValue<'c>, VectorLoads<'c>)> = Vec::new();
        let partial = match walk {
            Walk::Scalar => self.strided_fold(
                f,
                blk.tid,
                self.i64(row.len),
                blk.ntid,
                init,
                &|g, c, acc| {
                    let j = b!(g.b.build_int_add(base, c, "j"));
                    comb(g, acc, x_at(g, j)?)
                },
            )?,
            Walk::Stream => self.strided_fold(
                f,
                blk.tid,
                self.i64(row.len / w),
                blk.ntid,
                init,
                &|g, vi, acc| {
                    let first = g.vector_first(base, vi, w)?;
                    let mut cache = VectorLoads::default();
                    let mut acc = acc;
                    for l in 0..w {
                        acc = comb(
                            g,
                            acc,
                            g.row_lane(ctx, f, row, &mut cache, x, first, l, &[])?,
                        )?;
                    }
                    Ok(acc)
                },
            )?,
            Walk::Registers(regs) => {
                let nvec = row.len / w;
                let mut acc = init;
                for s in 0..regs {
                    // Vector `tid + s·ntid`; past the row, the last vector is read (in bounds)
                    // and left out of the fold, so the order equals the streaming walk's.
                    let sn = b!(self.b.build_int_mul(blk.ntid, self.i64(s), "sn"));
                    let vi = b!(self.b.build_int_add(blk.tid, sn, "vi"));
                    let valid =
                        b!(self
                            .b
                            .build_int_compare(IntPredicate::ULT, vi, self.i64(nvec), "ok"));
                    let vi = b!(self.b.build_select(valid, vi, self.i64(nvec - 1), "vc"))
                        .into_int_value();
                    let first = self.vector_first(base, vi, w)?;
                    let mut cache = VectorLoads::default();
                    for l in 0..w {
                        let v = self.row_lane(ctx, f, row, &mut cache, x, first, l, &[])?;
                        let n = comb(self, acc, v)?;
                        acc = b!(self.b.build_select(valid, n, acc, "acc")).into_float_value();
                    }
                    slots.push((valid, first, cache));
                }
                acc
            }
        };
        // Step 2: the row's value and the per-row chain.
        let total = self.block_reduce(f, blk, partial, row.max)?;
        let reduced = Val::Computed(self.round(row.re, total)?.into());
        let mut per_row = Eval::new(row.body, &[]);
        per_row
            .provided
            .insert(ctx.result(row.reduction, 0), reduced);
        let mut at_row = |g: &Self, v: Value, p: Piece| g.row_leaf(ctx, f, row.body, v, p, r);
        if !row.epilogue {
            let v = per_row.value(self, ctx, row.result, None, &mut at_row)?;
            let v = stored(self, v, row.rk)?;
            let t0 = b!(self
                .b
                .build_int_compare(IntPredicate::EQ, blk.tid, self.i64(0), "t0"));
            let out = self.param(f, row.nargs)?;
            return self.when(f, t0, &|g| g.store_any_stored(row.rk, out, r, v));
        }
        let mut provided = Vec::new();
        for (&bc, &op) in &row.body.deferred {
            let v = per_row.value(self, ctx, ctx.operand(op, 0), None, &mut at_row)?;
            provided.push((bc, v));
        }
        let out = self.param(f, row.nargs)?;
        // Step 3: the epilogue at this thread's elements.
        match walk {
            Walk::Scalar => self.counted(f, blk.tid, self.i64(row.len), blk.ntid, |g, c| {
                let j = b!(g.b.build_int_add(base, c, "j"));
                let mut ev = Eval::new(row.body, &[]);
                ev.provided.extend(provided.iter().copied());
                let v = ev.value(g, ctx, row.result, None, &mut |g, v, p| {
                    g.row_leaf(ctx, f, row.body, v, p, j)
                })?;
                g.store_any_stored(row.rk, out, j, stored(g, v, row.rk)?)
            }),
            Walk::Stream => self.counted(f, blk.tid, self.i64(row.len / w), blk.ntid, |g, vi| {
                let first = g.vector_first(base, vi, w)?;
                let mut cache = VectorLoads::default();
                g.store_row_vector(ctx, f, row, &mut cache, first, &provided, out)
            }),
            Walk::Registers(_) => {
                for (valid, first, mut cache) in slots {
                    self.when_mut(f, valid, &mut |g| {
                        g.store_row_vector(ctx, f, row, &mut cache, first, &provided, out)
                    })?;
                }
                Ok(())
            }
        }
    }

    /// `base + vi · w`.
    fn vector_first(&self, base: IntValue<'c>, vi: IntValue<'c>, w: u64) -> R<IntValue<'c>> {
        let col = b!(self.b.build_int_mul(vi, self.i64(w), "col"));
        Ok(b!(self.b.build_int_add(base, col, "first")))
    }

    /// Leaf `v` (in `piece`) at element `j` of its own index space.
    fn row_leaf(
        &self,
        ctx: &IrContext,
        f: FunctionValue<'c>,
        body: &Body,
        v: Value,
        piece: Piece,
        j: IntValue<'c>,
    ) -> R<Val<'c>> {
        let (a, vi) = body.leaf_index(self, ctx, v, piece)?;
        let (k, _) = self.kind_of(ctx, v)?;
        let idx = self.view_index(j, &vi.strided())?;
        self.load_stored(k, self.param(f, a)?, idx)
    }

    /// Lane `l` of value `v` (row-shaped) for the vector from element `first`, as an f32,
    /// the leaves read through `cache`; `provided` are the per-row broadcasts' values.
    #[allow(clippy::too_many_arguments)]
    fn row_lane(
        &self,
        ctx: &IrContext,
        f: FunctionValue<'c>,
        row: &Row<'_>,
        cache: &mut VectorLoads<'c>,
        v: Value,
        first: IntValue<'c>,
        l: u64,
        provided: &[(Value, Val<'c>)],
    ) -> R<FloatValue<'c>> {
        let x = self.row_lane_val(ctx, f, row, cache, v, first, l, provided)?;
        Ok(computed(self, x)?.into_float_value())
    }

    #[allow(clippy::too_many_arguments)]
    fn row_lane_val(
        &self,
        ctx: &IrContext,
        f: FunctionValue<'c>,
        row: &Row<'_>,
        cache: &mut VectorLoads<'c>,
        v: Value,
        first: IntValue<'c>,
        l: u64,
        provided: &[(Value, Val<'c>)],
    ) -> R<Val<'c>> {
        let mut ev = Eval::new(row.body, &[]);
        ev.provided.extend(provided.iter().copied());
        ev.value(self, ctx, v, None, &mut |g, leaf, p| {
            cache.lane(g, ctx, f, row.body, (leaf, p), first, l, row.width)
        })
    }

    /// Evaluates the epilogue on the `width` elements from `first` and stores them as one
    /// vector.
    #[allow(clippy::too_many_arguments)]
    fn store_row_vector(
        &self,
        ctx: &IrContext,
        f: FunctionValue<'c>,
        row: &Row<'_>,
        cache: &mut VectorLoads<'c>,
        first: IntValue<'c>,
        provided: &[(Value, Val<'c>)],
        out: PointerValue<'c>,
    ) -> R<()> {
        let w = row.width;
        let mut acc = self.vec_ty(row.rk, w as u32).get_poison();
        for l in 0..w {
            let v = self.row_lane_val(ctx, f, row, cache, row.result, first, l, provided)?;
            let s = stored(self, v, row.rk)?;
            let lane = self.cx.i32_type().const_int(l, false);
            acc = b!(self.b.build_insert_element(acc, s, lane, "acc"));
        }
        let p = unsafe {
            b!(self
                .b
                .build_in_bounds_gep(self.storage_any(row.rk), out, &[first], "vo"))
        };
        let st = b!(self.b.build_store(p, acc));
        st.set_alignment(VECTOR_BYTES as u32)
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// `acc = init; for (i = start; i < end; i += step) acc = body(i, acc)`; returns `acc`.
    fn strided_fold(
        &self,
        f: FunctionValue<'c>,
        start: IntValue<'c>,
        end: IntValue<'c>,
        step: IntValue<'c>,
        init: FloatValue<'c>,
        body: &dyn Fn(&Self, IntValue<'c>, FloatValue<'c>) -> R<FloatValue<'c>>,
    ) -> R<FloatValue<'c>> {
        let pre = self.b.get_insert_block().ok_or("no insert block")?;
        let head = self.cx.append_basic_block(f, "shead");
        let bb = self.cx.append_basic_block(f, "sbody");
        let exit = self.cx.append_basic_block(f, "sexit");
        b!(self.b.build_unconditional_branch(head));
        self.b.position_at_end(head);
        let k = b!(self.b.build_phi(self.cx.i64_type(), "k"));
        let acc = b!(self.b.build_phi(init.get_type(), "acc"));
        k.add_incoming(&[(&start, pre)]);
        acc.add_incoming(&[(&init, pre)]);
        let kv = k.as_basic_value().into_int_value();
        let av = acc.as_basic_value().into_float_value();
        let c = b!(self.b.build_int_compare(IntPredicate::ULT, kv, end, "c"));
        b!(self.b.build_conditional_branch(c, bb, exit));
        self.b.position_at_end(bb);
        let nacc = body(self, kv, av)?;
        let next = b!(self.b.build_int_add(kv, step, "kn"));
        let latch = self.b.get_insert_block().ok_or("no insert block")?;
        k.add_incoming(&[(&next, latch)]);
        acc.add_incoming(&[(&nacc, latch)]);
        b!(self.b.build_unconditional_branch(head));
        self.b.position_at_end(exit);
        Ok(av)
    }

    /// The block-wide sum (or maximum) of one f32 per thread, in every thread: butterfly
    /// shuffles within each warp (a partner past the block's last thread gives the identity),
    /// then the warps' partials through shared memory, combined in warp order.
    fn block_reduce(
        &self,
        f: FunctionValue<'c>,
        blk: &Block<'c>,
        v: FloatValue<'c>,
        max: bool,
    ) -> R<FloatValue<'c>> {
        let ct = self.cx.f32_type();
        let maxf = self.intrinsic("llvm.maximum", ct.into())?;
        let identity = ct.const_float(if max { f64::NEG_INFINITY } else { 0.0 });
        let comb = |a: FloatValue<'c>, b: FloatValue<'c>| -> R<FloatValue<'c>> {
            if max {
                self.call_f(maxf, &[a, b])
            } else {
                Ok(b!(self.b.build_float_add(a, b, "r")))
            }
        };
        let mut v = v;
        for off in [16u64, 8, 4, 2, 1] {
            let o = self.shfl_bfly(blk.shfl, v, off)?;
            let src = b!(self.b.build_xor(blk.tid, self.i64(off), "src"));
            let live = b!(self
                .b
                .build_int_compare(IntPredicate::ULT, src, blk.ntid, "live"));
            let o = b!(self.b.build_select(live, o, identity, "lv")).into_float_value();
            v = comb(v, o)?;
        }
        let is0 = b!(self
            .b
            .build_int_compare(IntPredicate::EQ, blk.lane, self.i64(0), "l0"));
        self.when(f, is0, &|g| {
            let p = unsafe { b!(g.b.build_in_bounds_gep(ct, blk.smem, &[blk.warp], "sp")) };
            b!(g.b.build_store(p, v));
            Ok(())
        })?;
        self.barrier()?;
        let total = self.strided_fold(
            f,
            self.i64(0),
            blk.nwarps,
            self.i64(1),
            identity,
            &|g, w, a| {
                let p = unsafe { b!(g.b.build_in_bounds_gep(ct, blk.smem, &[w], "sp")) };
                let pv = b!(g.b.build_load(ct, p, "pv")).into_float_value();
                if max {
                    g.call_f(maxf, &[a, pv])
                } else {
                    Ok(b!(g.b.build_float_add(a, pv, "r")))
                }
            },
        )?;
        // The partials are reused by the next row.
        self.barrier()?;
        Ok(total)
    }

    /// `if c { body }`.
    fn when(&self, f: FunctionValue<'c>, c: IntValue<'c>, body: &dyn Fn(&Self) -> R<()>) -> R<()> {
        let then = self.cx.append_basic_block(f, "then");
        let join = self.cx.append_basic_block(f, "then.j");
        b!(self.b.build_conditional_branch(c, then, join));
        self.b.position_at_end(then);
        body(self)?;
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(join);
        Ok(())
    }

    /// [`Self::when`] with a body that mutates its captures.
    fn when_mut(
        &self,
        f: FunctionValue<'c>,
        c: IntValue<'c>,
        body: &mut dyn FnMut(&Self) -> R<()>,
    ) -> R<()> {
        let then = self.cx.append_basic_block(f, "then");
        let join = self.cx.append_basic_block(f, "then.j");
        b!(self.b.build_conditional_branch(c, then, join));
        self.b.position_at_end(then);
        body(self)?;
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(join);
        Ok(())
    }
}
