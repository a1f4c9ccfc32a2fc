//! The symmetric-memory collective kernels: every `rt.symm_kernel` becomes one `ptx_kernel`
//! entry of the kernels' module (same kernel table as `rt.kernel`), generated here and
//! specialized at compile time on the collective, the element count, the dtype, the
//! reduction and the group size G.
//!
//! ABI (codegen/include/commlir_rt.h): the parameters are `(const commlir_symm_desc *desc,
//! uint64_t in_offset, void *out, uint32_t site)`; peer p's input is at
//! `desc->base[p] + in_offset`.
//!
//! Every kernel is: start barrier; data movement; end barrier. The barrier is per block
//! (block b of every rank meets block b of every peer; the grid is a compile-time constant of
//! the launch, so every rank runs the same blocks): for every peer p (threads striding over
//! the peers, thread p on the GPU), a *put* spins `cmpxchg release` (system scope) of
//! `signal[p][b*8 + rank]` from 0 to 1, then a *wait* spins `cmpxchg acquire` of
//! `signal[rank][b*8 + p]` from 1 to 0; then `bar.red.or` joins the block. The start barrier
//! guarantees that every peer's input is written (its earlier stream work is done); the end
//! barrier that every peer has finished reading this rank's input (so the slot may be reused
//! by the next op) and, for the two-shot all-reduce, that every push into this rank's buffer
//! has landed (the release of the put orders the block's stores, which `bar.sync` made
//! visible to the putting thread, before the signal). Puts always precede waits, so no
//! signal is consumed by the wrong barrier: a put cannot complete before the peer consumed
//! the previous one.
//!
//! Timeout: while spinning, `%globaltimer` is compared with the spin's start; past
//! `desc->timeout_ns` (when nonzero) the thread exchanges
//! `0x80000000 | peer << 24 | site` into `*desc->status` and the whole block returns (the
//! `bar.red.or` of the failure flag).
//!
//! Data: grid-stride loops over 16-byte vectors when every address is 16-byte aligned
//! (checked at run time; `comm-plan-pools` aligns slots to 64 bytes), then a scalar tail;
//! else scalar. Reductions fold the ranks in rank order `r0 ∘ r1 ∘ …` in f32 for
//! f16/bf16/f32 and f64 for f64 (max/min propagate the first NaN, like the sim), divide by G
//! for avg in that precision and round once to the element type (nearest even); integers
//! wrap, avg divides the wrapped sum (signed or unsigned by the dtype). `i1` travels as `u8`
//! bytes 0/1, where unsigned max/min/product are or/and/and. This is
//! `runtime/src/sim/collective.rs::reduce` bit for bit.

pub mod fused;

use crate::abi;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValue, BasicValueEnum, FunctionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, AtomicOrdering, AtomicRMWBinOp, FloatPredicate, IntPredicate};

/// Threads per block of the largest launches.
pub const MAX_BLOCK: u64 = 512;
/// The largest grid a symm kernel is launched with: enough blocks to keep NVLink busy at
/// 16 MiB (more only add barrier traffic: every block signals every peer).
pub const MAX_GRID: u64 = 64;
/// 16-byte vectors each thread moves per grid-stride iteration, at the grid's target size.
const VECTORS_PER_THREAD: u64 = 2;

/// The launch of a symm kernel: `(grid, block)`, from the bytes one rank moves. A tiny
/// message gets one block of a warp or more; the grid grows with the size, one block per
/// `MAX_BLOCK * VECTORS_PER_THREAD` vectors (16 KiB), up to [`MAX_GRID`].
pub fn launch_shape(coll: &str, count: i64, elem_bytes: u64, world: u64) -> (u64, u64) {
    let count = count.max(0) as u64;
    let elems = match coll {
        // Each rank reduces and pushes one chunk.
        "two_shot_all_reduce" => count.div_ceil(world.max(1)),
        // Each rank gathers G blocks.
        "all_gather" => count.saturating_mul(world),
        _ => count,
    };
    let vectors = elems.saturating_mul(elem_bytes).div_ceil(16).max(1);
    let block = vectors.next_multiple_of(32).clamp(32, MAX_BLOCK);
    let grid = vectors
        .div_ceil(MAX_BLOCK * VECTORS_PER_THREAD)
        .clamp(1, MAX_GRID);
    (grid, block)
}

/// What a symm kernel computes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymmSpec {
    /// `one_shot_all_reduce`, `two_shot_all_reduce`, `all_gather` or `reduce_scatter`.
    pub coll: String,
    /// Elements, as `rt.symm_kernel`'s `count`.
    pub count: u64,
    /// The runtime dtype spelling (`abi::DTYPES`).
    pub dtype: String,
    /// The reduction (`abi::REDUCE_OPS`), none for the all-gather.
    pub reduce_op: Option<String>,
    /// The group size G.
    pub world: u64,
}

/// How elements are stored and combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    /// Storage bits (16, 16 bf, 32, 64) and whether it is bf16.
    Float {
        bits: u32,
        bf16: bool,
    },
    Int {
        bits: u32,
        signed: bool,
    },
}

impl Ty {
    fn of(dtype: &str) -> Option<Ty> {
        Some(match dtype {
            "f16" => Ty::Float {
                bits: 16,
                bf16: false,
            },
            "bf16" => Ty::Float {
                bits: 16,
                bf16: true,
            },
            "f32" => Ty::Float {
                bits: 32,
                bf16: false,
            },
            "f64" => Ty::Float {
                bits: 64,
                bf16: false,
            },
            "i8" | "u8" | "i32" | "u32" | "i64" | "u64" => Ty::Int {
                bits: dtype[1..].parse().ok()?,
                signed: dtype.starts_with('i'),
            },
            _ => return None,
        })
    }
    fn bytes(self) -> u64 {
        match self {
            Ty::Float { bits, .. } | Ty::Int { bits, .. } => u64::from(bits / 8),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Red {
    Sum,
    Avg,
    Product,
    Max,
    Min,
}

type R<T> = Result<T, String>;

macro_rules! b {
    ($e:expr) => {
        $e.map_err(|e| e.to_string())?
    };
}

/// Generates the entry `name` of `spec` into `m` (an NVPTX module).
pub fn generate<'c>(cx: &'c Context, m: &Module<'c>, name: &str, spec: &SymmSpec) -> R<()> {
    let ty = Ty::of(&spec.dtype).ok_or_else(|| format!("symm kernels: no dtype {}", spec.dtype))?;
    let red = match (spec.coll.as_str(), spec.reduce_op.as_deref()) {
        ("all_gather", None) => None,
        ("all_gather", Some(_)) => return Err("symm all_gather takes no reduce_op".into()),
        (_, Some("sum")) => Some(Red::Sum),
        (_, Some("avg")) => Some(Red::Avg),
        (_, Some("product")) => Some(Red::Product),
        (_, Some("max")) => Some(Red::Max),
        (_, Some("min")) => Some(Red::Min),
        (c, r) => return Err(format!("symm kernel {c}: bad reduce_op {r:?}")),
    };
    if !(1..=abi::SYMM_MAX_PEERS as u64).contains(&spec.world) {
        return Err(format!(
            "symm kernels: group size {} not in [1, 8]",
            spec.world
        ));
    }
    let g = Gen {
        cx,
        m,
        b: cx.create_builder(),
        ty,
        red,
        world: spec.world,
    };
    g.kernel(name, spec)
}

struct Gen<'a, 'c> {
    cx: &'c Context,
    m: &'a Module<'c>,
    b: Builder<'c>,
    ty: Ty,
    red: Option<Red>,
    world: u64,
}

/// Per-kernel values loaded at entry.
struct Env<'c> {
    f: FunctionValue<'c>,
    desc: PointerValue<'c>,
    site: IntValue<'c>,
    tid: IntValue<'c>,
    ntid: IntValue<'c>,
    ctaid: IntValue<'c>,
    nctaid: IntValue<'c>,
    rank: IntValue<'c>,
    /// `base[p] + in_offset` for every p < G.
    inputs: Vec<PointerValue<'c>>,
    out: PointerValue<'c>,
    in_offset: IntValue<'c>,
    status: PointerValue<'c>,
    timeout: IntValue<'c>,
    /// Entry-block slot of a barrier's failure flag.
    failed: PointerValue<'c>,
}

impl<'a, 'c> Gen<'a, 'c> {
    fn gptr(&self) -> inkwell::types::PointerType<'c> {
        self.cx.ptr_type(AddressSpace::from(1u16))
    }
    fn i64(&self, v: u64) -> IntValue<'c> {
        self.cx.i64_type().const_int(v, false)
    }
    fn i32(&self, v: u64) -> IntValue<'c> {
        self.cx.i32_type().const_int(v, false)
    }

    fn intrinsic(&self, name: &str, tys: &[BasicTypeEnum<'c>]) -> R<FunctionValue<'c>> {
        let i = Intrinsic::find(name).ok_or_else(|| format!("no intrinsic {name}"))?;
        i.get_declaration(self.m, if i.is_overloaded() { tys } else { &[] })
            .ok_or_else(|| format!("cannot declare {name}"))
    }

    fn call(&self, name: &str, args: &[BasicValueEnum<'c>]) -> R<BasicValueEnum<'c>> {
        let f = self.intrinsic(name, &[])?;
        let a: Vec<_> = args.iter().map(|v| (*v).into()).collect();
        b!(self.b.build_call(f, &a, "i"))
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| format!("{name} has no value"))
    }

    fn sreg(&self, name: &str) -> R<IntValue<'c>> {
        let v = self
            .call(&format!("llvm.nvvm.read.ptx.sreg.{name}"), &[])?
            .into_int_value();
        Ok(b!(self.b.build_int_z_extend(v, self.cx.i64_type(), name)))
    }

    /// A u64 field of the descriptor at byte offset `off` (a runtime i64).
    fn desc_u64(&self, desc: PointerValue<'c>, off: IntValue<'c>, nm: &str) -> R<IntValue<'c>> {
        let p = unsafe {
            b!(self
                .b
                .build_in_bounds_gep(self.cx.i8_type(), desc, &[off], nm))
        };
        let v = b!(self.b.build_load(self.cx.i64_type(), p, nm));
        v.as_instruction_value()
            .map(|i| i.set_alignment(8))
            .transpose()
            .map_err(|e| e.to_string())?;
        Ok(v.into_int_value())
    }

    fn to_ptr(&self, v: IntValue<'c>, nm: &str) -> R<PointerValue<'c>> {
        Ok(b!(self.b.build_int_to_ptr(v, self.gptr(), nm)))
    }

    fn kernel(&self, name: &str, spec: &SymmSpec) -> R<()> {
        let g = self.gptr();
        let fty = self.cx.void_type().fn_type(
            &[
                g.into(),
                self.cx.i64_type().into(),
                g.into(),
                self.cx.i32_type().into(),
            ],
            false,
        );
        let f = self.m.add_function(name, fty, Some(Linkage::External));
        f.set_call_conventions(71); // ptx_kernel
        let entry = self.cx.append_basic_block(f, "entry");
        self.b.position_at_end(entry);
        let param = |i: u32| f.get_nth_param(i).ok_or("missing parameter");
        let desc = param(0)?.into_pointer_value();
        let in_offset = param(1)?.into_int_value();
        let out = param(2)?.into_pointer_value();
        let site = param(3)?.into_int_value();
        let mut inputs = Vec::new();
        for p in 0..self.world {
            let base = self.desc_u64(desc, self.i64(8 * p), "base")?;
            let a = b!(self.b.build_int_add(base, in_offset, "in"));
            inputs.push(self.to_ptr(a, "inp")?);
        }
        let rank_p = unsafe {
            b!(self
                .b
                .build_in_bounds_gep(self.cx.i8_type(), desc, &[self.i64(144)], "rankp"))
        };
        let rank = b!(self.b.build_load(self.cx.i32_type(), rank_p, "rank")).into_int_value();
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
            inputs,
            out,
            in_offset,
            status: self.to_ptr(status, "statusp")?,
            timeout: self.desc_u64(desc, self.i64(136), "timeout")?,
            failed: b!(self.b.build_alloca(self.cx.i32_type(), "failed")),
        };
        self.barrier(&env)?;
        match spec.coll.as_str() {
            "one_shot_all_reduce" => {
                let n = self.i64(spec.count);
                self.reduce_range(&env, self.i64(0), n, self.i64(0), &[out])?;
            }
            "reduce_scatter" => {
                let c = self.i64(spec.count);
                let lo = b!(self.b.build_int_mul(rank, c, "lo"));
                let hi = b!(self.b.build_int_add(lo, c, "hi"));
                self.reduce_range(&env, lo, hi, lo, &[out])?;
            }
            "two_shot_all_reduce" => {
                // Chunk = ceil(n / G) rounded up to whole vectors; the last chunks may be
                // short or empty.
                let w = 16 / self.ty.bytes();
                let chunk = spec.count.div_ceil(self.world).next_multiple_of(w);
                let n = self.i64(spec.count);
                let lo = b!(self.b.build_int_mul(rank, self.i64(chunk), "lo"));
                let lo = self.umin(lo, n)?;
                let hi = b!(self.b.build_int_add(lo, self.i64(chunk), "hi"));
                let hi = self.umin(hi, n)?;
                let dests = env.inputs.clone();
                self.reduce_range(&env, lo, hi, self.i64(0), &dests)?;
            }
            "all_gather" => self.gather(&env, spec.count)?,
            c => return Err(format!("symm kernels: unknown collective {c}")),
        }
        self.barrier(&env)?;
        b!(self.b.build_return(None));
        Ok(())
    }

    fn umin(&self, a: IntValue<'c>, b: IntValue<'c>) -> R<IntValue<'c>> {
        let c = b!(self.b.build_int_compare(IntPredicate::ULT, a, b, "lt"));
        Ok(b!(self.b.build_select(c, a, b, "min")).into_int_value())
    }

    /// `for (i = start; i < end; i += step) body(i)`.
    fn counted(
        &self,
        f: FunctionValue<'c>,
        start: IntValue<'c>,
        end: IntValue<'c>,
        step: IntValue<'c>,
        body: &mut dyn FnMut(IntValue<'c>) -> R<()>,
    ) -> R<()> {
        let pre = self.b.get_insert_block().ok_or("no insert block")?;
        let head = self.cx.append_basic_block(f, "head");
        let bb = self.cx.append_basic_block(f, "body");
        let exit = self.cx.append_basic_block(f, "exit");
        b!(self.b.build_unconditional_branch(head));
        self.b.position_at_end(head);
        let i = b!(self.b.build_phi(self.cx.i64_type(), "i"));
        i.add_incoming(&[(&start, pre)]);
        let iv = i.as_basic_value().into_int_value();
        let c = b!(self.b.build_int_compare(IntPredicate::ULT, iv, end, "c"));
        b!(self.b.build_conditional_branch(c, bb, exit));
        self.b.position_at_end(bb);
        body(iv)?;
        let next = b!(self.b.build_int_add(iv, step, "next"));
        let latch = self.b.get_insert_block().ok_or("no insert block")?;
        i.add_incoming(&[(&next, latch)]);
        b!(self.b.build_unconditional_branch(head));
        self.b.position_at_end(exit);
        Ok(())
    }

    /// The per-block barrier with every peer (module docs); the block returns when any of
    /// its spins timed out.
    fn barrier(&self, e: &Env<'c>) -> R<()> {
        let i32t = self.cx.i32_type();
        let failed = e.failed;
        b!(self.b.build_store(failed, self.i32(0)));
        let world = self.i64(self.world);
        // Slot (block b, source s) of a pad: u32 index b*8 + s.
        let row = b!(self
            .b
            .build_int_mul(e.ctaid, self.i64(abi::SYMM_MAX_PEERS as u64), "row"));
        for put in [true, false] {
            self.counted(e.f, e.tid, world, e.ntid, &mut |p| {
                let is_me = b!(self.b.build_int_compare(IntPredicate::EQ, p, e.rank, "me"));
                let skip = self.cx.append_basic_block(e.f, "skip");
                let work = self.cx.append_basic_block(e.f, "sig");
                b!(self.b.build_conditional_branch(is_me, skip, work));
                self.b.position_at_end(work);
                let (pad_of, src) = if put { (p, e.rank) } else { (e.rank, p) };
                let off = b!(self.b.build_int_mul(pad_of, self.i64(8), "o"));
                let off = b!(self.b.build_int_add(off, self.i64(64), "o"));
                let pad = self.desc_u64(e.desc, off, "pad")?;
                let slot = b!(self.b.build_int_add(row, src, "slot"));
                let slot = b!(self.b.build_int_mul(slot, self.i64(4), "slotb"));
                let addr = b!(self.b.build_int_add(pad, slot, "addr"));
                let addr = self.to_ptr(addr, "sigp")?;
                self.spin(e, addr, put, p, failed)?;
                b!(self.b.build_unconditional_branch(skip));
                self.b.position_at_end(skip);
                Ok(())
            })?;
        }
        let fv = b!(self.b.build_load(i32t, failed, "f")).into_int_value();
        let fb = b!(self
            .b
            .build_int_compare(IntPredicate::NE, fv, self.i32(0), "fb"));
        let any = self
            .call(
                "llvm.nvvm.barrier.cta.red.or.aligned.all",
                &[self.i32(0).into(), fb.into()],
            )?
            .into_int_value();
        let quit = self.cx.append_basic_block(e.f, "timed_out");
        let go = self.cx.append_basic_block(e.f, "go");
        b!(self.b.build_conditional_branch(any, quit, go));
        self.b.position_at_end(quit);
        b!(self.b.build_return(None));
        self.b.position_at_end(go);
        Ok(())
    }

    /// Spins on one signal slot: a put (`cmpxchg 0 → 1`, release) or a wait (`1 → 0`,
    /// acquire), both at system scope; on a timeout writes the fault word and sets `failed`.
    fn spin(
        &self,
        e: &Env<'c>,
        addr: PointerValue<'c>,
        put: bool,
        peer: IntValue<'c>,
        failed: PointerValue<'c>,
    ) -> R<()> {
        let i32t = self.cx.i32_type();
        let t0 = self.sreg_u64("globaltimer")?;
        let head = self
            .cx
            .append_basic_block(e.f, if put { "put" } else { "wait" });
        let check = self.cx.append_basic_block(e.f, "clock");
        let fault = self.cx.append_basic_block(e.f, "fault");
        let done = self.cx.append_basic_block(e.f, "signalled");
        b!(self.b.build_unconditional_branch(head));
        self.b.position_at_end(head);
        let (from, to, ok, fail) = if put {
            (0, 1, AtomicOrdering::Release, AtomicOrdering::Monotonic)
        } else {
            (1, 0, AtomicOrdering::Acquire, AtomicOrdering::Acquire)
        };
        let x = b!(self
            .b
            .build_cmpxchg(addr, self.i32(from), self.i32(to), ok, fail));
        let swapped = b!(self.b.build_extract_value(x, 1, "ok")).into_int_value();
        b!(self.b.build_conditional_branch(swapped, done, check));
        self.b.position_at_end(check);
        let now = self.sreg_u64("globaltimer")?;
        let dt = b!(self.b.build_int_sub(now, t0, "dt"));
        let armed = b!(self
            .b
            .build_int_compare(IntPredicate::NE, e.timeout, self.i64(0), "armed"));
        let late = b!(self
            .b
            .build_int_compare(IntPredicate::UGT, dt, e.timeout, "late"));
        let out = b!(self.b.build_and(armed, late, "out"));
        b!(self.b.build_conditional_branch(out, fault, head));
        self.b.position_at_end(fault);
        let peer32 = b!(self.b.build_int_truncate(peer, i32t, "peer"));
        let hi = b!(self.b.build_left_shift(peer32, self.i32(24), "hi"));
        let lo = b!(self.b.build_and(e.site, self.i32(0x00ff_ffff), "lo"));
        let code = b!(self.b.build_or(hi, lo, "code"));
        let code = b!(self.b.build_or(code, self.i32(0x8000_0000), "code"));
        b!(self.b.build_atomicrmw(
            AtomicRMWBinOp::Xchg,
            e.status,
            code,
            // Relaxed: the word is all the watchdog reads, and it orders nothing else (NVPTX
            // emits `atom.global.exch` for any ordering of an exchange).
            AtomicOrdering::Monotonic
        ));
        b!(self.b.build_store(failed, self.i32(1)));
        b!(self.b.build_unconditional_branch(done));
        self.b.position_at_end(done);
        Ok(())
    }

    fn sreg_u64(&self, name: &str) -> R<IntValue<'c>> {
        Ok(self
            .call(&format!("llvm.nvvm.read.ptx.sreg.{name}"), &[])?
            .into_int_value())
    }

    /// Whether every address `ptrs` plus byte offset `extra` is 16-byte aligned.
    fn aligned(&self, ptrs: &[PointerValue<'c>], extra: IntValue<'c>) -> R<IntValue<'c>> {
        let mut acc = extra;
        for p in ptrs {
            let v = b!(self.b.build_ptr_to_int(*p, self.cx.i64_type(), "pv"));
            acc = b!(self.b.build_or(acc, v, "al"));
        }
        let low = b!(self.b.build_and(acc, self.i64(15), "low"));
        Ok(b!(self.b.build_int_compare(
            IntPredicate::EQ,
            low,
            self.i64(0),
            "aligned"
        )))
    }

    /// Runs `body(index, width)` over elements `[lo, hi)` grid-stride: by 16-byte vectors
    /// (then a scalar tail) when `aligned`, else element by element.
    fn range(
        &self,
        e: &Env<'c>,
        lo: IntValue<'c>,
        hi: IntValue<'c>,
        aligned: IntValue<'c>,
        body: &mut dyn FnMut(IntValue<'c>, u32) -> R<()>,
    ) -> R<()> {
        let w = 16 / self.ty.bytes();
        let start = b!(self.b.build_int_mul(e.ctaid, e.ntid, "s"));
        let start = b!(self.b.build_int_add(start, e.tid, "s"));
        let stride = b!(self.b.build_int_mul(e.nctaid, e.ntid, "stride"));
        let vec_bb = self.cx.append_basic_block(e.f, "vec");
        let scalar_bb = self.cx.append_basic_block(e.f, "scalar");
        let join = self.cx.append_basic_block(e.f, "ranged");
        b!(self.b.build_conditional_branch(aligned, vec_bb, scalar_bb));
        // Vector path: [lo, lo + nv*w) by vectors, then the tail by elements.
        self.b.position_at_end(vec_bb);
        let len = b!(self.b.build_int_sub(hi, lo, "len"));
        let nv = b!(self.b.build_int_unsigned_div(len, self.i64(w), "nv"));
        self.counted(e.f, start, nv, stride, &mut |j| {
            let i = b!(self.b.build_int_mul(j, self.i64(w), "vi"));
            let i = b!(self.b.build_int_add(lo, i, "vi"));
            body(i, w as u32)
        })?;
        let tail = b!(self.b.build_int_mul(nv, self.i64(w), "t"));
        let tail = b!(self.b.build_int_add(lo, tail, "t"));
        let ts = b!(self.b.build_int_add(tail, start, "ts"));
        self.counted(e.f, ts, hi, stride, &mut |i| body(i, 1))?;
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(scalar_bb);
        let ss = b!(self.b.build_int_add(lo, start, "ss"));
        self.counted(e.f, ss, hi, stride, &mut |i| body(i, 1))?;
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(join);
        Ok(())
    }

    fn storage(&self) -> BasicTypeEnum<'c> {
        match self.ty {
            Ty::Float {
                bits: 16,
                bf16: true,
            } => self.cx.bf16_type().into(),
            Ty::Float { bits: 16, .. } => self.cx.f16_type().into(),
            Ty::Float { bits: 32, .. } => self.cx.f32_type().into(),
            Ty::Float { .. } => self.cx.f64_type().into(),
            Ty::Int { bits: 8, .. } => self.cx.i8_type().into(),
            Ty::Int { bits: 32, .. } => self.cx.i32_type().into(),
            Ty::Int { .. } => self.cx.i64_type().into(),
        }
    }

    /// `width` elements of `ptr` from element `idx`, as storage lanes.
    fn load(
        &self,
        ptr: PointerValue<'c>,
        idx: IntValue<'c>,
        width: u32,
    ) -> R<Vec<BasicValueEnum<'c>>> {
        let st = self.storage();
        let p = unsafe { b!(self.b.build_in_bounds_gep(st, ptr, &[idx], "p")) };
        if width == 1 {
            let v = b!(self.b.build_load(st, p, "ld"));
            return Ok(vec![v]);
        }
        let vt = vec_of(st, width)?;
        let v = b!(self.b.build_load(vt, p, "vld"));
        v.as_instruction_value()
            .map(|i| i.set_alignment(16))
            .transpose()
            .map_err(|e| e.to_string())?;
        let v = v.into_vector_value();
        (0..width)
            .map(|k| {
                Ok(b!(self.b.build_extract_element(
                    v,
                    self.i32(u64::from(k)),
                    "lane"
                )))
            })
            .collect()
    }

    /// Stores storage lanes at element `idx` of `ptr` (one vector store when several).
    fn store(
        &self,
        ptr: PointerValue<'c>,
        idx: IntValue<'c>,
        lanes: &[BasicValueEnum<'c>],
    ) -> R<()> {
        let st = self.storage();
        let p = unsafe { b!(self.b.build_in_bounds_gep(st, ptr, &[idx], "p")) };
        if lanes.len() == 1 {
            b!(self.b.build_store(p, lanes[0]));
            return Ok(());
        }
        let vt = vec_of(st, lanes.len() as u32)?;
        let mut v = vt.get_undef();
        for (k, l) in lanes.iter().enumerate() {
            v = b!(self
                .b
                .build_insert_element(v, *l, self.i32(k as u64), "ins"));
        }
        let s = b!(self.b.build_store(p, v));
        s.set_alignment(16).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// A storage lane → the compute value (f32 / f64 / the integer itself).
    fn widen(&self, v: BasicValueEnum<'c>) -> R<BasicValueEnum<'c>> {
        Ok(match self.ty {
            Ty::Float { bits: 16, .. } => {
                b!(self
                    .b
                    .build_float_ext(v.into_float_value(), self.cx.f32_type(), "ext"))
                .into()
            }
            _ => v,
        })
    }

    /// One step of the rank-order fold.
    fn combine(&self, a: BasicValueEnum<'c>, x: BasicValueEnum<'c>) -> R<BasicValueEnum<'c>> {
        let red = self.red.ok_or("reduction without reduce_op")?;
        Ok(match self.ty {
            Ty::Float { .. } => {
                let (a, x) = (a.into_float_value(), x.into_float_value());
                match red {
                    Red::Sum | Red::Avg => b!(self.b.build_float_add(a, x, "add")).into(),
                    Red::Product => b!(self.b.build_float_mul(a, x, "mul")).into(),
                    Red::Max | Red::Min => {
                        // The sim's fmax/fmin: the first NaN wins, else x when strictly
                        // greater (smaller), else a (so max(0.0, -0.0) is 0.0).
                        let p = if red == Red::Max {
                            FloatPredicate::OGT
                        } else {
                            FloatPredicate::OLT
                        };
                        let better = b!(self.b.build_float_compare(p, x, a, "better"));
                        let t = b!(self.b.build_select(better, x, a, "t"));
                        let xn = b!(self.b.build_float_compare(FloatPredicate::UNO, x, x, "xn"));
                        let t = b!(self.b.build_select(xn, x.into(), t, "t"));
                        let an = b!(self.b.build_float_compare(FloatPredicate::UNO, a, a, "an"));
                        b!(self.b.build_select(an, a.into(), t, "t"))
                    }
                }
            }
            Ty::Int { signed, .. } => {
                let (a, x) = (a.into_int_value(), x.into_int_value());
                match red {
                    Red::Sum | Red::Avg => b!(self.b.build_int_add(a, x, "add")).into(),
                    Red::Product => b!(self.b.build_int_mul(a, x, "mul")).into(),
                    Red::Max | Red::Min => {
                        let p = match (red == Red::Max, signed) {
                            (true, true) => IntPredicate::SGT,
                            (true, false) => IntPredicate::UGT,
                            (false, true) => IntPredicate::SLT,
                            (false, false) => IntPredicate::ULT,
                        };
                        let better = b!(self.b.build_int_compare(p, x, a, "better"));
                        b!(self.b.build_select(better, x, a, "t"))
                    }
                }
            }
        })
    }

    /// The folded value → the stored lane: avg divides by G, then one rounding.
    fn finish(&self, a: BasicValueEnum<'c>) -> R<BasicValueEnum<'c>> {
        let avg = self.red == Some(Red::Avg);
        Ok(match self.ty {
            Ty::Float { bits, .. } => {
                let mut v = a.into_float_value();
                if avg {
                    let g = v.get_type().const_float(self.world as f64);
                    v = b!(self.b.build_float_div(v, g, "avg"));
                }
                if bits == 16 {
                    let st = self.storage().into_float_type();
                    b!(self.b.build_float_trunc(v, st, "rn")).into()
                } else {
                    v.into()
                }
            }
            Ty::Int { signed, .. } => {
                let v = a.into_int_value();
                if avg {
                    let g = v.get_type().const_int(self.world, false);
                    if signed {
                        b!(self.b.build_int_signed_div(v, g, "avg")).into()
                    } else {
                        b!(self.b.build_int_unsigned_div(v, g, "avg")).into()
                    }
                } else {
                    v.into()
                }
            }
        })
    }

    /// Reduces elements `[lo, hi)` of every rank's input in rank order and stores them at
    /// `index - shift` of every destination.
    fn reduce_range(
        &self,
        e: &Env<'c>,
        lo: IntValue<'c>,
        hi: IntValue<'c>,
        shift: IntValue<'c>,
        dests: &[PointerValue<'c>],
    ) -> R<()> {
        let mut ptrs = e.inputs.clone();
        ptrs.extend_from_slice(dests);
        let lo_b = b!(self.b.build_int_mul(lo, self.i64(self.ty.bytes()), "lob"));
        let sh_b = b!(self
            .b
            .build_int_mul(shift, self.i64(self.ty.bytes()), "shb"));
        let extra = b!(self.b.build_or(lo_b, sh_b, "ex"));
        let aligned = self.aligned(&ptrs, extra)?;
        self.range(e, lo, hi, aligned, &mut |i, w| {
            let mut acc: Vec<BasicValueEnum<'c>> = self
                .load(e.inputs[0], i, w)?
                .into_iter()
                .map(|v| self.widen(v))
                .collect::<R<_>>()?;
            for p in &e.inputs[1..] {
                let xs = self.load(*p, i, w)?;
                for (a, x) in acc.iter_mut().zip(xs) {
                    *a = self.combine(*a, self.widen(x)?)?;
                }
            }
            let lanes: Vec<BasicValueEnum<'c>> =
                acc.into_iter().map(|a| self.finish(a)).collect::<R<_>>()?;
            let o = b!(self.b.build_int_sub(i, shift, "oi"));
            for d in dests {
                self.store(*d, o, &lanes)?;
            }
            Ok(())
        })
    }

    /// All-gather: block p of `out` ← peer p's input, peers visited from this rank on, so
    /// that the ranks read different peers at a time.
    fn gather(&self, e: &Env<'c>, count: u64) -> R<()> {
        let world = self.i64(self.world);
        self.counted(e.f, self.i64(0), world, self.i64(1), &mut |j| {
            let p = b!(self.b.build_int_add(e.rank, j, "pj"));
            let p = b!(self.b.build_int_unsigned_rem(p, world, "p"));
            let off = b!(self.b.build_int_mul(p, self.i64(8), "bo"));
            let base = self.desc_u64(e.desc, off, "base")?;
            let src = b!(self.b.build_int_add(base, e.in_offset, "src"));
            let src = self.to_ptr(src, "srcp")?;
            let at = b!(self.b.build_int_mul(p, self.i64(count), "at"));
            let dst = unsafe {
                b!(self
                    .b
                    .build_in_bounds_gep(self.storage(), e.out, &[at], "dst"))
            };
            let aligned = self.aligned(&[src, dst], self.i64(0))?;
            self.range(e, self.i64(0), self.i64(count), aligned, &mut |i, w| {
                let v = self.load(src, i, w)?;
                self.store(dst, i, &v)
            })
        })
    }
}

fn vec_of(t: BasicTypeEnum<'_>, n: u32) -> R<inkwell::types::VectorType<'_>> {
    match t {
        BasicTypeEnum::FloatType(f) => Ok(f.vec_type(n)),
        BasicTypeEnum::IntType(i) => Ok(i.vec_type(n)),
        _ => Err("symm kernels: vectors of numbers only".into()),
    }
}
