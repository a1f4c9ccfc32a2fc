//! The data-movement kernels of the fused collective-matmul pipelines
//! (`rt.symm_fused_kernel`), built from the symm kernels' pieces: the same per-block
//! signal-pad protocol (release/acquire system-scope CAS, `%globaltimer` timeout, fault word),
//! the same vectorized grid-stride ranges and the same rank-order reduction.
//!
//! Parameters: `(const commlir_symm_desc *desc, uint64_t in_offset, void *out, uint32_t
//! site, uint32_t step)`; the host program launches one step at a time on the comm stream,
//! but for the reduce-scatter's reduction (step G), which runs on the compute stream (see
//! `rt.symm_fused_kernel` for what each step does). Steps are separate launches, not
//! one persistent kernel, so that the events between them can release the compute stream's
//! GEMM of each chunk as soon as that chunk has arrived.
//!
//! Copy engines: steps above G do a step's signalling alone (all-gather G + 1: the start
//! barrier, G + 1 + s: the signals of push s; reduce-scatter G + s: the signals of step s, 2G:
//! the end barrier), so that a copy engine (`symm_peer_copy`, `symm_peer_put`) can move the
//! chunk between two such launches without using an SM.
//!
//! Epilogue (a reduce-scatter fused with the elementwise chain that reads its result,
//! `crate::fusion`): the parameters after `step` are the chain's other inputs, `out` is the
//! chain's result, and step G hands the reduced elements to the [`Epilogue`] as the one-shot
//! all-reduce does; every other step ignores them.
//!
//! Signals: every step that talks to peers does so through the pad slot (block, source) as
//! the barrier does, and every rank issues the same sequence of puts and waits per pair of
//! ranks (all-gather: barrier, barrier; reduce-scatter: one put from q to p at step
//! (p − q) mod G, then the end barrier), so no signal is ever consumed by the wrong wait.

use super::{Env, EpiCall, Epilogue, Gen, Red, Ty, R};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::values::IntValue;
use inkwell::IntPredicate;

/// What a fused pipeline's kernel moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusedSpec {
    /// `all_gather_matmul` or `matmul_reduce_scatter`.
    pub kind: String,
    /// The runtime dtype spelling.
    pub dtype: String,
    /// The group size G.
    pub world: u64,
    /// Segments per shard (all-gather); 1 for the reduce-scatter.
    pub outer: u64,
    /// Elements per segment (all-gather) or per chunk (reduce-scatter).
    pub seg: u64,
    /// `sum` or `avg` (reduce-scatter only).
    pub reduce_op: Option<String>,
}

macro_rules! b {
    ($e:expr) => {
        $e.map_err(|e| e.to_string())?
    };
}

/// Generates the entry `name` of `spec` into `m` (an NVPTX module); with an `epilogue` (a
/// reduce-scatter only), its reduction applies the chain instead of storing (module docs).
pub fn generate<'c>(
    cx: &'c Context,
    m: &Module<'c>,
    name: &str,
    spec: &FusedSpec,
    epilogue: Option<&Epilogue<'c>>,
) -> R<()> {
    let ty =
        Ty::of(&spec.dtype).ok_or_else(|| format!("fused kernels: no dtype {}", spec.dtype))?;
    if !matches!(ty, Ty::Float { .. }) {
        return Err(format!(
            "fused kernels: {} is not a float dtype",
            spec.dtype
        ));
    }
    let red = match (spec.kind.as_str(), spec.reduce_op.as_deref()) {
        ("all_gather_matmul", None) => None,
        ("matmul_reduce_scatter", Some("sum")) => Some(Red::Sum),
        ("matmul_reduce_scatter", Some("avg")) => Some(Red::Avg),
        (k, r) => return Err(format!("fused kernel {k}: bad reduce_op {r:?}")),
    };
    if epilogue.is_some() && red.is_none() {
        return Err("fused kernels: an epilogue needs a reduction".into());
    }
    Gen::new(cx, m, ty, red, spec.world, "fused kernels")?.fused(name, spec, epilogue)
}

impl<'c> Gen<'_, 'c> {
    fn fused(&self, name: &str, spec: &FusedSpec, epi: Option<&Epilogue<'c>>) -> R<()> {
        let g = self.gptr();
        let i32t = self.cx.i32_type();
        let extras = epi.map_or(0, |e| e.extras);
        let mut params: Vec<inkwell::types::BasicMetadataTypeEnum<'c>> = vec![
            g.into(),
            self.cx.i64_type().into(),
            g.into(),
            i32t.into(),
            i32t.into(),
        ];
        params.extend((0..extras).map(|_| inkwell::types::BasicMetadataTypeEnum::from(g)));
        let fty = self.cx.void_type().fn_type(&params, false);
        let f = self.m.add_function(name, fty, Some(Linkage::External));
        f.set_call_conventions(71); // ptx_kernel
        let entry = self.cx.append_basic_block(f, "entry");
        self.b.position_at_end(entry);
        let param = |i: u32| f.get_nth_param(i).ok_or("missing parameter");
        let desc = param(0)?.into_pointer_value();
        let in_offset = param(1)?.into_int_value();
        let out = param(2)?.into_pointer_value();
        let site = param(3)?.into_int_value();
        let step = param(4)?.into_int_value();
        let extra_ptrs = (0..extras as u32)
            .map(|i| Ok(param(5 + i)?.into_pointer_value()))
            .collect::<R<Vec<_>>>()?;
        let step = b!(self.b.build_int_z_extend(step, self.cx.i64_type(), "step"));
        let rank_p = unsafe {
            b!(self
                .b
                .build_in_bounds_gep(self.cx.i8_type(), desc, &[self.i64(144)], "rankp"))
        };
        let rank = b!(self.b.build_load(i32t, rank_p, "rank")).into_int_value();
        let rank = b!(self
            .b
            .build_int_z_extend(rank, self.cx.i64_type(), "rank64"));
        let status = self.desc_u64(desc, self.i64(128), "status")?;
        let env = Env {
            f,
            desc,
            site,
            tid: self.sreg("tid.x")?,
            ntid: self.sreg("ntid.x")?,
            ctaid: self.sreg("ctaid.x")?,
            nctaid: self.sreg("nctaid.x")?,
            rank,
            inputs: Vec::new(),
            out,
            in_offset,
            status: self.to_ptr(status, "statusp")?,
            timeout: self.desc_u64(desc, self.i64(136), "timeout")?,
            failed: b!(self.b.build_alloca(i32t, "failed")),
        };
        let world = self.i64(self.world);
        let last = b!(self
            .b
            .build_int_compare(IntPredicate::EQ, step, world, "last"));
        let fin = self.cx.append_basic_block(f, "final");
        let mid = self.cx.append_basic_block(f, "step");
        match spec.kind.as_str() {
            "all_gather_matmul" => {
                b!(self.b.build_conditional_branch(last, fin, mid));
                // Step G: the end barrier (peers finished reading this rank's shard).
                self.b.position_at_end(fin);
                self.barrier(&env)?;
                b!(self.b.build_return(None));
                // Step 0: the start barrier (every shard is written), then the own shard;
                // step G + 1: the start barrier alone (no reader of the own block);
                // step s: the shard of rank (rank + s) mod G; step G + 1 + s: the signals of
                // a push (this rank's shard is in rank (rank + s)'s pool; rank (rank − s)'s
                // is in this rank's).
                self.b.position_at_end(mid);
                let pushed = b!(self.b.build_int_compare(
                    IntPredicate::UGT,
                    step,
                    self.i64(self.world + 1),
                    "pushed"
                ));
                let signals = self.cx.append_basic_block(f, "push_signals");
                let others = self.cx.append_basic_block(f, "others");
                b!(self.b.build_conditional_branch(pushed, signals, others));
                self.b.position_at_end(signals);
                let s = b!(self.b.build_int_sub(step, self.i64(self.world + 1), "s"));
                self.signal_pair(&env, s)?;
                b!(self.b.build_return(None));
                self.b.position_at_end(others);
                let is = |v: u64, nm: &str| -> R<IntValue<'c>> {
                    Ok(b!(self.b.build_int_compare(
                        IntPredicate::EQ,
                        step,
                        self.i64(v),
                        nm
                    )))
                };
                let only = is(self.world + 1, "only")?;
                let first = b!(self.b.build_or(is(0, "zero")?, only, "first"));
                let start = self.cx.append_basic_block(f, "start");
                let copy = self.cx.append_basic_block(f, "copy");
                let done = self.cx.append_basic_block(f, "start_only");
                b!(self.b.build_conditional_branch(first, start, copy));
                self.b.position_at_end(start);
                self.barrier(&env)?;
                b!(self.b.build_conditional_branch(only, done, copy));
                self.b.position_at_end(done);
                b!(self.b.build_return(None));
                self.b.position_at_end(copy);
                let p = b!(self.b.build_int_add(rank, step, "ps"));
                let p = b!(self.b.build_int_unsigned_rem(p, world, "p"));
                self.gather_block(&env, p, spec.outer, spec.seg)?;
                b!(self.b.build_return(None));
            }
            _ => {
                let esz = self.ty.bytes();
                let chunk_bytes = self.i64(spec.seg * esz);
                // base[rank]: the descriptor's row of this rank.
                let off = b!(self.b.build_int_mul(rank, self.i64(8), "ro"));
                let own = self.desc_u64(desc, off, "own")?;
                let partial = b!(self.b.build_int_add(own, in_offset, "partial"));
                let recv = b!(self.b.build_int_mul(world, chunk_bytes, "recv_off"));
                let recv = b!(self.b.build_int_add(partial, recv, "recv"));
                // Step 2G: the end barrier (every peer pulled its chunks from this rank's
                // partials, and this rank's pulls are complete), on the comm stream; the
                // host program defers the wait for it to the workspace's next reuse.
                let alone = b!(self.b.build_int_compare(
                    IntPredicate::EQ,
                    step,
                    self.i64(2 * self.world),
                    "barrier_alone"
                ));
                let end = self.cx.append_basic_block(f, "end_barrier");
                let not_end = self.cx.append_basic_block(f, "not_end");
                b!(self.b.build_conditional_branch(alone, end, not_end));
                self.b.position_at_end(end);
                self.barrier(&env)?;
                b!(self.b.build_return(None));
                // Step G: the reduction of chunk `rank` in rank order (this rank's own
                // partial for itself, the received ones for the others), on the compute
                // stream after the last pull landed. It reads only this GPU's memory and
                // talks to no peer, so its grid is not bounded by the signal pad.
                self.b.position_at_end(not_end);
                b!(self.b.build_conditional_branch(last, fin, mid));
                self.b.position_at_end(fin);
                let mut srcs = Vec::new();
                for q in 0..self.world {
                    let qv = self.i64(q);
                    let is_me = b!(self.b.build_int_compare(IntPredicate::EQ, qv, rank, "isme"));
                    let o1 = b!(self.b.build_int_mul(rank, chunk_bytes, "o1"));
                    let a1 = b!(self.b.build_int_add(partial, o1, "a1"));
                    let a2 = b!(self
                        .b
                        .build_int_add(recv, self.i64(q * spec.seg * esz), "a2"));
                    let a = b!(self.b.build_select(is_me, a1, a2, "src")).into_int_value();
                    srcs.push(self.to_ptr(a, "srcp")?);
                }
                let red_env = Env {
                    inputs: srcs,
                    ..env.clone_shallow()
                };
                match epi {
                    // The chain of the epilogue, from the reduced elements to `out`.
                    Some(epi) => {
                        let call = EpiCall {
                            epi,
                            extras: extra_ptrs,
                            out,
                        };
                        self.reduce_epilogue(&red_env, self.i64(spec.seg), &call)?;
                    }
                    None => self.reduce_range(
                        &red_env,
                        self.i64(0),
                        self.i64(spec.seg),
                        self.i64(0),
                        &[out],
                    )?,
                }
                b!(self.b.build_return(None));
                // Step s in [1, G): tell rank (rank + s) its chunk is ready, wait for rank
                // (rank − s), then pull that peer's partial for this rank. Step G + s: the
                // signals of step s alone (a copy engine pulls the chunk).
                self.b.position_at_end(mid);
                let signal_only =
                    b!(self
                        .b
                        .build_int_compare(IntPredicate::UGT, step, world, "signal_only"));
                let s_of = b!(self.b.build_int_sub(step, world, "s_of"));
                let step = b!(self.b.build_select(signal_only, s_of, step, "s")).into_int_value();
                let from = self.signal_pair(&env, step)?;
                let pull = self.cx.append_basic_block(f, "pull");
                let signalled = self.cx.append_basic_block(f, "signalled");
                b!(self
                    .b
                    .build_conditional_branch(signal_only, signalled, pull));
                self.b.position_at_end(signalled);
                b!(self.b.build_return(None));
                self.b.position_at_end(pull);
                let fo = b!(self.b.build_int_mul(from, self.i64(8), "fo"));
                let peer = self.desc_u64(desc, fo, "peer")?;
                let src = b!(self.b.build_int_add(peer, in_offset, "src"));
                let o = b!(self.b.build_int_mul(rank, chunk_bytes, "so"));
                let src = b!(self.b.build_int_add(src, o, "src"));
                let src = self.to_ptr(src, "srcp")?;
                let d = b!(self.b.build_int_mul(from, chunk_bytes, "dofs"));
                let dst = b!(self.b.build_int_add(recv, d, "dst"));
                let dst = self.to_ptr(dst, "dstp")?;
                let aligned = self.aligned(&[src, dst], self.i64(0))?;
                self.range(
                    &env,
                    self.i64(0),
                    self.i64(spec.seg),
                    aligned,
                    &mut |i, w| {
                        let v = self.load(src, i, w)?;
                        self.store(dst, i, &v)
                    },
                )?;
                b!(self.b.build_return(None));
            }
        }
        Ok(())
    }

    /// Copies peer `p`'s shard (`outer` segments of `seg` elements at `in_offset` of its
    /// pool) into block `p` of every segment of the gathered buffer (G·`seg` apart).
    fn gather_block(&self, e: &Env<'c>, p: IntValue<'c>, outer: u64, seg: u64) -> R<()> {
        let off = b!(self.b.build_int_mul(p, self.i64(8), "bo"));
        let base = self.desc_u64(e.desc, off, "base")?;
        let src = b!(self.b.build_int_add(base, e.in_offset, "src"));
        let src = self.to_ptr(src, "srcp")?;
        let at = b!(self.b.build_int_mul(p, self.i64(seg), "at"));
        let dst = unsafe {
            b!(self
                .b
                .build_in_bounds_gep(self.storage(), e.out, &[at], "dst"))
        };
        // A vector never straddles two segments when a segment is whole vectors.
        let w = 16 / self.ty.bytes();
        let aligned = if seg.is_multiple_of(w) {
            self.aligned(&[src, dst], self.i64(0))?
        } else {
            self.cx.bool_type().const_zero()
        };
        let total = self.i64(outer * seg);
        self.range(e, self.i64(0), total, aligned, &mut |i, w| {
            let v = self.load(src, i, w)?;
            let j = if outer == 1 {
                i
            } else {
                // Segment o of the shard is at o·G·seg of the gathered buffer.
                let o = b!(self.b.build_int_unsigned_div(i, self.i64(seg), "o"));
                let gap = b!(self
                    .b
                    .build_int_mul(o, self.i64((self.world - 1) * seg), "gap"));
                b!(self.b.build_int_add(i, gap, "j"))
            };
            self.store(dst, j, &v)
        })
    }

    /// Step `s`'s signals: one put to rank (rank + s) mod G and one wait for rank
    /// (rank − s) mod G (returned), per block (thread 0), with the barrier's slots, timeout
    /// and fault word; the block returns on a timeout.
    fn signal_pair(&self, e: &Env<'c>, s: IntValue<'c>) -> R<IntValue<'c>> {
        let world = self.i64(self.world);
        let to = b!(self.b.build_int_add(e.rank, s, "to"));
        let to = b!(self.b.build_int_unsigned_rem(to, world, "to"));
        let from = b!(self.b.build_int_add(e.rank, world, "fr"));
        let from = b!(self.b.build_int_sub(from, s, "fr"));
        let from = b!(self.b.build_int_unsigned_rem(from, world, "from"));
        let failed = e.failed;
        let row = self.signal_row(e)?;
        let lead = b!(self
            .b
            .build_int_compare(IntPredicate::EQ, e.tid, self.i64(0), "lead"));
        let work = self.cx.append_basic_block(e.f, "pair");
        let join = self.cx.append_basic_block(e.f, "paired");
        b!(self.b.build_conditional_branch(lead, work, join));
        self.b.position_at_end(work);
        for (put, peer, pad_of, src) in [(true, to, to, e.rank), (false, from, e.rank, from)] {
            let addr = self.signal_slot(e, row, pad_of, src)?;
            self.spin(e, addr, put, peer, failed)?;
        }
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(join);
        self.quit_if_any_failed(e)?;
        Ok(from)
    }
}

impl<'c> Env<'c> {
    /// The same kernel values with other inputs (the caller sets `inputs`).
    fn clone_shallow(&self) -> Env<'c> {
        Env {
            f: self.f,
            desc: self.desc,
            site: self.site,
            tid: self.tid,
            ntid: self.ntid,
            ctaid: self.ctaid,
            nctaid: self.nctaid,
            rank: self.rank,
            inputs: Vec::new(),
            out: self.out,
            in_offset: self.in_offset,
            status: self.status,
            timeout: self.timeout,
            failed: self.failed,
        }
    }
}
