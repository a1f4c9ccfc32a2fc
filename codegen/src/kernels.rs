//! NVPTX kernels: every `rt.kernel` of a module becomes one `ptx_kernel` entry of one LLVM
//! module (`nvptx64-nvidia-cuda`, `sm_90`, PTX ISA 8.0), verified, optimized and turned into
//! PTX by LLVM's NVPTX target machine.
//!
//! Conventions (what the runner relies on, see docs/codegen.md):
//! - the entry is named like the kernel symbol; its parameters are one `ptr addrspace(1)` per
//!   kernel argument, then one for the result, nothing else (shapes are compiled in);
//! - data-movement kernels run one thread per output element in a grid-stride loop, so any
//!   grid is correct; fused elementwise kernels and plain copies move one 16-byte vector per
//!   thread and iteration when every pointer is 16-byte aligned (scalar tail, scalar fallback),
//!   and `rt.launch` sizes them by vectors; a view (broadcast, slice, permute, transpose, and
//!   their compositions) absorbed into a fused kernel is read from its operand at each
//!   element's source index ([`index_map`]: a vector, one shared or one per-lane load by
//!   [`Access`]), and a concat in a chain picks its operand by the element's coordinate
//!   (`fused`); a reduction fused with the chains around it is one block per row (`rows`);
//!   softmax and reduce_sum along a contiguous last dimension
//!   (f16/bf16/f32) run one block per row (rows grid-stride over blocks), threads striding over
//!   the row (16-byte vectors when the row length is a multiple of the vector width and the
//!   buffers are aligned; a softmax row of at most 8 vectors per thread stays in registers, so
//!   it is read once) and a warp-shuffle + shared-memory block reduction, accumulated in f32 —
//!   the sum order differs from the sim backend's, so results agree within `--check`'s
//!   tolerance, not bit for bit; other reductions (f64, or a strided dimension) run one thread per reduced lane
//!   and walk it in order, which reproduces the sim backend's summation order exactly.
//!
//! Arithmetic follows the sim backend (`runtime/src/numeric.rs`): f16/bf16/f32 are computed
//! in f32, f64 in f64, and every op's result is rounded to its element type (round to nearest
//! even, hardware `cvt.rn`), including the intermediates of a fused chain. No fast-math flags
//! are set, so LLVM neither contracts `a*b+c` into an FMA nor reassociates. NVPTX has no libm
//! (`llvm.exp` and `llvm.tanh` fail instruction selection), so `exp` and `tanh` are generated
//! here as range reduction + polynomial (within ~2 ulp of f32; f64 results use f64
//! polynomials); `sigmoid` (like `silu`) is built on that `exp`. `sin`, `cos` and `log` are
//! evaluated in f64 for every float type (range reduction + polynomial, a few f64 ulp) and
//! rounded to f32 first, so f16/bf16/f32 results round as the sim's f32 libm values do except
//! in double-rounding ties. A module with the unit attribute `commlir.approx_tanh` opts
//! bf16-result tanh/gelu into the hardware `tanh.approx.f32` (error below bf16's rounding per
//! op).
//!
//! Integer tensors (1/8/16/32/64 bits) compute at their own width with the sim's semantics,
//! bit for bit: wrapping arithmetic, signed or unsigned compares and division by the type
//! (`MIN / -1` wraps; division by zero, a sim error, yields 0), casts that extend by the
//! source's signedness, int→float through f64, saturating float→int (NaN → 0), wrapping
//! `reduce_sum` one thread per lane, and data movement by element size. `i1` (any signedness
//! spelling) is stored as one byte holding 0 or 1 (as `torch.bool`), computed as LLVM `i1`
//! and read unsigned, so the same code gives the sim's mod-2 arithmetic (add/sub = xor,
//! mul = and, max = or, min = and). [`int_op_support`] says which ops; `comm-to-rt` rejects
//! the others with that diagnostic.

use crate::lower_to_rt::module_block;
use commlir_dialects::shape::value_tensor;
use commlir_ir::{
    Context as IrContext, Diagnostic, FloatKind, OpId, Signedness, Type, TypeKind, Value,
};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::types::{BasicTypeEnum, FloatType, VectorType};
use inkwell::values::{
    BasicValue, BasicValueEnum, FloatValue, FunctionValue, IntValue, PointerValue,
};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate, OptimizationLevel};
use std::collections::HashMap;

/// The device triple.
pub const TRIPLE: &str = "nvptx64-nvidia-cuda";
/// The GPU architecture (H100/H200).
pub const CPU: &str = "sm_90";
/// PTX ISA 8.0 (CUDA 12.0 and later load it).
pub const FEATURES: &str = "+ptx80";
/// LLVM's calling convention number of `ptx_kernel`.
const PTX_KERNEL_CC: u32 = 71;

/// The compiled kernels of a module.
#[derive(Clone, Debug, Default)]
pub struct DeviceCode {
    /// The verified, optimized LLVM IR.
    pub llvm_ir: String,
    /// The PTX text.
    pub ptx: String,
    /// Entry names, in module order (the kernel index of `rt.launch` in the host ABI).
    pub kernels: Vec<String>,
}

/// An element type as kernels see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Elem {
    F16,
    BF16,
    F32,
    F64,
}

impl Elem {
    fn of(ctx: &IrContext, t: Type) -> Option<Elem> {
        match ctx.type_kind(t) {
            TypeKind::Float(FloatKind::F16) => Some(Elem::F16),
            TypeKind::Float(FloatKind::BF16) => Some(Elem::BF16),
            TypeKind::Float(FloatKind::F32) => Some(Elem::F32),
            TypeKind::Float(FloatKind::F64) => Some(Elem::F64),
            _ => None,
        }
    }
    fn bits(self) -> u32 {
        match self {
            Elem::F16 | Elem::BF16 => 16,
            Elem::F32 => 32,
            Elem::F64 => 64,
        }
    }
}

/// An integer element type as kernels see it: `bits` ∈ {1, 8, 16, 32, 64}. The sim backend
/// holds integers as `i64`, sign-extended for signless and `si*` types and zero-extended for
/// `ui*` types (`ElemType::wrap`), so `signed` decides how values extend, compare and
/// divide. `ui64` is held as its bit pattern there, and the sim reads it as unsigned
/// (`ElemType::is_u64`), as the kernels do. `i1` is held as 0 or 1 whatever its spelling
/// (`i1`, `si1`, `ui1`), so it is always unsigned here; it is stored as a byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct IntElem {
    bits: u32,
    signed: bool,
}

impl IntElem {
    fn of(ctx: &IrContext, t: Type) -> Option<IntElem> {
        match ctx.type_kind(t) {
            TypeKind::Integer { width, signedness } if matches!(width, 1 | 8 | 16 | 32 | 64) => {
                Some(IntElem {
                    bits: *width,
                    // The sim's i1 is 0 or 1 (true is 1, not -1) for every spelling.
                    signed: *width != 1 && *signedness != Signedness::Unsigned,
                })
            }
            _ => None,
        }
    }

    /// Bits of one stored element: a byte for `i1` (0 or 1, as `torch.bool`), else the width.
    fn storage_bits(self) -> u32 {
        self.bits.max(8)
    }

    /// The sim's `float_to_int` bounds: the type's range as `f64` (`[0, 1]` for `i1`).
    fn range(self) -> (f64, f64) {
        if self.signed {
            let h = 2f64.powi(self.bits as i32 - 1);
            (-h, h - 1.0)
        } else {
            (0.0, 2f64.powi(self.bits as i32) - 1.0)
        }
    }

    /// A float constant as the sim converts it (`compute.fill`): truncated toward zero,
    /// saturated to the type's range, NaN → 0; returned as the type's bit pattern.
    fn element_of_f64(self, v: f64) -> u64 {
        if v.is_nan() {
            return 0;
        }
        let (lo, hi) = self.range();
        let v = v.trunc().clamp(lo, hi);
        if self.bits == 64 && !self.signed {
            return v as u64;
        }
        // The low `bits` bits of the clamped value are the element.
        let x = v as i64;
        let mask = if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        };
        x as u64 & mask
    }
}

/// Any element type a kernel handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Float(Elem),
    Int(IntElem),
}

impl Kind {
    fn of(ctx: &IrContext, t: Type) -> Option<Kind> {
        Elem::of(ctx, t)
            .map(Kind::Float)
            .or_else(|| IntElem::of(ctx, t).map(Kind::Int))
    }
    /// Bits of one stored element (what data movement copies and vectors hold).
    fn bits(self) -> u32 {
        match self {
            Kind::Float(e) => e.bits(),
            Kind::Int(i) => i.storage_bits(),
        }
    }
}

/// Compute ops a kernel evaluates on integer tensors, with the sim's semantics: two's
/// complement wrapping `add`/`sub`/`mul`/`neg`, `div` truncating toward zero (signed or
/// unsigned by the type), `maximum`/`minimum`/`relu`/`reduce_max`/`compare` comparing by the
/// type's signedness, `reduce_sum` wrapping, `select`, `iota`, `cast` and `fill`, and data
/// movement (including `broadcast` and `permute`). `Err` names why not: the
/// float-only ops (the sim has no integer semantics for them; matmul has no cuBLAS integer
/// path here).
pub fn int_op_support(name: &str, ty: &str) -> Result<(), String> {
    let short = name.trim_start_matches("compute.");
    match short {
        "add" | "sub" | "mul" | "neg" | "clone" | "reshape" | "cast" | "fill" | "reduce_sum"
        | "transpose" | "slice" | "concat" => Ok(()),
        // compare's result (and select's condition) is i1; both, like reduce_max, iota and
        // the data movement ops, also take integer data.
        "compare" | "select" | "reduce_max" | "iota" | "broadcast" | "permute" => Ok(()),
        _ if name.starts_with("rt.") => Ok(()),
        "div" | "maximum" | "minimum" | "relu" => Ok(()),
        _ => Err(format!(
            "kernels support {name} on f16, bf16, f32 and f64 tensors only, not {ty}"
        )),
    }
}

/// Initializes LLVM's NVPTX target once (idempotent).
pub fn init_nvptx() {
    Target::initialize_nvptx(&InitializationConfig::default());
}

/// The NVPTX target machine (`sm_90`, PTX 8.0).
pub fn nvptx_machine() -> Result<TargetMachine, String> {
    init_nvptx();
    let triple = TargetTriple::create(TRIPLE);
    let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
    target
        .create_target_machine(
            &triple,
            CPU,
            FEATURES,
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| "cannot create the NVPTX target machine".to_string())
}

/// Compiles every `rt.kernel` of `module` to PTX.
pub fn compile(ctx: &IrContext, module: OpId) -> Result<DeviceCode, Diagnostic> {
    let llcx = Context::create();
    let lm = llcx.create_module("commlir_kernels");
    let tm = nvptx_machine().map_err(|e| ctx.op_error(module, e))?;
    lm.set_triple(&tm.get_triple());
    lm.set_data_layout(&tm.get_target_data().get_data_layout());
    let mut g = Gen::new(&llcx, &lm);
    g.approx_tanh = ctx.get_attr(module, APPROX_TANH_ATTR).is_some();
    let mut names = Vec::new();
    if let Some(body) = module_block(ctx, module) {
        for op in ctx.block_ops(body) {
            match ctx.op_name(op) {
                "rt.kernel" => {
                    let name = ctx.symbol_name(op).unwrap_or("").to_string();
                    g.kernel(ctx, op, &name)?;
                    names.push(name);
                }
                "rt.symm_fused_kernel" => {
                    let name = ctx.symbol_name(op).unwrap_or("").to_string();
                    let spec = fused_spec(ctx, op)?;
                    let epi = g.epilogue_of(ctx, module, op, &name, &spec.dtype)?;
                    crate::symm_kernels::fused::generate(&llcx, &lm, &name, &spec, epi.as_ref())
                        .map_err(|m| ctx.op_error(op, m))?;
                    names.push(name);
                }
                "rt.symm_kernel" => {
                    let name = ctx.symbol_name(op).unwrap_or("").to_string();
                    let spec = symm_spec(ctx, op)?;
                    let epi = g.epilogue_of(ctx, module, op, &name, &spec.dtype)?;
                    crate::symm_kernels::generate(&llcx, &lm, &name, &spec, epi.as_ref())
                        .map_err(|m| ctx.op_error(op, m))?;
                    names.push(name);
                }
                _ => {}
            }
        }
    }
    lm.verify()
        .map_err(|e| ctx.op_error(module, format!("LLVM verifier (kernels): {e}")))?;
    let opts = inkwell::passes::PassBuilderOptions::create();
    lm.run_passes("default<O2>", &tm, opts)
        .map_err(|e| ctx.op_error(module, format!("LLVM optimizer: {e}")))?;
    lm.verify()
        .map_err(|e| ctx.op_error(module, format!("LLVM verifier (optimized kernels): {e}")))?;
    let llvm_ir = lm.print_to_string().to_string();
    let ptx = if names.is_empty() {
        String::new()
    } else {
        let buf = tm
            .write_to_memory_buffer(&lm, FileType::Assembly)
            .map_err(|e| ctx.op_error(module, format!("NVPTX code generation: {e}")))?;
        String::from_utf8_lossy(buf.as_slice()).into_owned()
    };
    Ok(DeviceCode {
        llvm_ir,
        ptx,
        kernels: names,
    })
}

/// The string and unsigned attributes of an `rt.symm_kernel` or `rt.symm_fused_kernel`, and
/// the error for a missing one.
struct SpecAttrs<'a> {
    ctx: &'a IrContext,
    op: OpId,
    name: &'static str,
}

impl SpecAttrs<'_> {
    fn str(&self, n: &str) -> Option<String> {
        self.ctx
            .inherent_attr(self.op, n)
            .and_then(|a| self.ctx.attr_as_str(a))
            .map(str::to_string)
    }

    fn u64(&self, n: &str) -> Option<u64> {
        self.ctx
            .inherent_attr(self.op, n)
            .and_then(|a| self.ctx.attr_as_i64(a))
            .and_then(|v| u64::try_from(v).ok())
    }

    fn missing(&self, n: &str) -> Diagnostic {
        self.ctx
            .op_error(self.op, format!("{} requires '{n}'", self.name))
    }

    fn req_str(&self, n: &str) -> Result<String, Diagnostic> {
        self.str(n).ok_or_else(|| self.missing(n))
    }

    fn req_u64(&self, n: &str) -> Result<u64, Diagnostic> {
        self.u64(n).ok_or_else(|| self.missing(n))
    }
}

/// The compile-time parameters of an `rt.symm_fused_kernel`.
fn fused_spec(
    ctx: &IrContext,
    op: OpId,
) -> Result<crate::symm_kernels::fused::FusedSpec, Diagnostic> {
    let a = SpecAttrs {
        ctx,
        op,
        name: "rt.symm_fused_kernel",
    };
    Ok(crate::symm_kernels::fused::FusedSpec {
        kind: a.req_str("kind")?,
        dtype: a.req_str("dtype")?,
        world: a.req_u64("world")?,
        outer: a.req_u64("outer")?,
        seg: a.req_u64("seg")?,
        reduce_op: a.str("reduce_op"),
    })
}

/// The compile-time parameters of an `rt.symm_kernel`.
fn symm_spec(ctx: &IrContext, op: OpId) -> Result<crate::symm_kernels::SymmSpec, Diagnostic> {
    let a = SpecAttrs {
        ctx,
        op,
        name: "rt.symm_kernel",
    };
    Ok(crate::symm_kernels::SymmSpec {
        coll: a.req_str("coll")?,
        count: a.req_u64("count")?,
        dtype: a.req_str("dtype")?,
        reduce_op: a.str("reduce_op"),
        world: a.req_u64("world")?,
    })
}

type R<T> = Result<T, String>;

/// `?` for inkwell's builder errors.
macro_rules! b {
    ($e:expr) => {
        $e.map_err(|e| e.to_string())?
    };
}

/// The declaration of LLVM intrinsic `name` in `m`, specialized to `tys` where it is
/// overloaded (shared with the `symm` kernels).
pub(crate) fn declare_intrinsic<'c>(
    m: &Module<'c>,
    name: &str,
    tys: &[BasicTypeEnum<'c>],
) -> R<FunctionValue<'c>> {
    let i = Intrinsic::find(name).ok_or_else(|| format!("no intrinsic {name}"))?;
    i.get_declaration(m, if i.is_overloaded() { tys } else { &[] })
        .ok_or_else(|| format!("cannot declare {name}"))
}

/// Emits `for (i = start; i < end; i += step) body(i)` (unsigned compare) at `b`'s insert
/// point in `f` (shared with the `symm` kernels).
pub(crate) fn counted_loop<'c>(
    cx: &'c Context,
    b: &Builder<'c>,
    f: FunctionValue<'c>,
    start: IntValue<'c>,
    end: IntValue<'c>,
    step: IntValue<'c>,
    body: &mut dyn FnMut(IntValue<'c>) -> R<()>,
) -> R<()> {
    let pre = b.get_insert_block().ok_or("no insert block")?;
    let head = cx.append_basic_block(f, "head");
    let bb = cx.append_basic_block(f, "body");
    let exit = cx.append_basic_block(f, "exit");
    b!(b.build_unconditional_branch(head));
    b.position_at_end(head);
    let i = b!(b.build_phi(cx.i64_type(), "i"));
    i.add_incoming(&[(&start, pre)]);
    let iv = i.as_basic_value().into_int_value();
    let c = b!(b.build_int_compare(IntPredicate::ULT, iv, end, "c"));
    b!(b.build_conditional_branch(c, bb, exit));
    b.position_at_end(bb);
    body(iv)?;
    let next = b!(b.build_int_add(iv, step, "next"));
    let latch = b.get_insert_block().ok_or("no insert block")?;
    i.add_incoming(&[(&next, latch)]);
    b!(b.build_unconditional_branch(head));
    b.position_at_end(exit);
    Ok(())
}

/// The kernel generator: one LLVM module, helpers (`exp`, `tanh`) emitted once.
struct Gen<'a, 'c> {
    cx: &'c Context,
    m: &'a Module<'c>,
    b: Builder<'c>,
    helpers: HashMap<&'static str, FunctionValue<'c>>,
    /// bf16 tanh/gelu through the hardware `tanh.approx.f32` (the module's opt-in
    /// [`APPROX_TANH_ATTR`]).
    approx_tanh: bool,
}

/// A unit attribute on the module that opts bf16 tanh/gelu into the hardware approximation:
/// 3.6x faster gelu on H200, but its rounding differs from the sim backend's in a few
/// elements, enough for a deep bf16 network to drift past `--check`'s tolerance (see
/// docs/benchmarks.md, *GPU: correctness*).
pub const APPROX_TANH_ATTR: &str = "commlir.approx_tanh";

impl<'a, 'c> Gen<'a, 'c> {
    fn new(cx: &'c Context, m: &'a Module<'c>) -> Self {
        Gen {
            cx,
            m,
            b: cx.create_builder(),
            helpers: HashMap::new(),
            approx_tanh: false,
        }
    }

    fn i64(&self, v: u64) -> IntValue<'c> {
        self.cx.i64_type().const_int(v, false)
    }

    /// The type values of `e` are computed in.
    fn compute_ty(&self, e: Elem) -> FloatType<'c> {
        if e == Elem::F64 {
            self.cx.f64_type()
        } else {
            self.cx.f32_type()
        }
    }

    /// The type `e` is stored as.
    fn storage_ty(&self, e: Elem) -> FloatType<'c> {
        match e {
            Elem::F16 => self.cx.f16_type(),
            Elem::BF16 => self.cx.bf16_type(),
            Elem::F32 => self.cx.f32_type(),
            Elem::F64 => self.cx.f64_type(),
        }
    }

    fn intrinsic(&self, name: &str, ty: BasicTypeEnum<'c>) -> R<FunctionValue<'c>> {
        declare_intrinsic(self.m, name, &[ty])
    }

    fn call_f(&self, f: FunctionValue<'c>, args: &[FloatValue<'c>]) -> R<FloatValue<'c>> {
        let a: Vec<_> = args.iter().map(|v| (*v).into()).collect();
        let c = b!(self.b.build_call(f, &a, "call"));
        c.try_as_basic_value()
            .basic()
            .map(|v| v.into_float_value())
            .ok_or_else(|| "call without value".to_string())
    }

    fn sreg(&self, name: &str) -> R<IntValue<'c>> {
        let f = self.intrinsic(name, self.cx.i32_type().into())?;
        let c = b!(self.b.build_call(f, &[], "sreg"));
        let v = c
            .try_as_basic_value()
            .basic()
            .ok_or("sreg without value")?
            .into_int_value();
        Ok(b!(self.b.build_int_z_extend(
            v,
            self.cx.i64_type(),
            "sreg64"
        )))
    }

    /// Loads element `idx` of `ptr` (elements of `e`) as a compute value.
    fn load(&self, e: Elem, ptr: PointerValue<'c>, idx: IntValue<'c>) -> R<FloatValue<'c>> {
        let st = self.storage_ty(e);
        let p = unsafe { b!(self.b.build_in_bounds_gep(st, ptr, &[idx], "p")) };
        let v = b!(self.b.build_load(st, p, "ld")).into_float_value();
        let ct = self.compute_ty(e);
        if st == ct {
            Ok(v)
        } else {
            Ok(b!(self.b.build_float_ext(v, ct, "ext")))
        }
    }

    /// Stores compute value `v` (any float type) as element `idx` of `e`, rounding once.
    fn store(&self, e: Elem, ptr: PointerValue<'c>, idx: IntValue<'c>, v: FloatValue<'c>) -> R<()> {
        let st = self.storage_ty(e);
        let v = self.convert(v, st)?;
        let p = unsafe { b!(self.b.build_in_bounds_gep(st, ptr, &[idx], "p")) };
        b!(self.b.build_store(p, v));
        Ok(())
    }

    /// `v` converted to float type `t` (one rounding when narrowing).
    fn convert(&self, v: FloatValue<'c>, t: FloatType<'c>) -> R<FloatValue<'c>> {
        let from = v.get_type();
        if from == t {
            return Ok(v);
        }
        let wf = float_width(self.cx, from);
        let wt = float_width(self.cx, t);
        if wt == wf {
            // f16 ↔ bf16: through f32, which holds both exactly.
            let wide = b!(self.b.build_float_ext(v, self.cx.f32_type(), "ext"));
            return Ok(b!(self.b.build_float_trunc(wide, t, "trunc")));
        }
        if wt > wf {
            Ok(b!(self.b.build_float_ext(v, t, "ext")))
        } else {
            Ok(b!(self.b.build_float_trunc(v, t, "trunc")))
        }
    }

    /// Rounds `v` to `e` and returns it in `e`'s compute type (the per-result rounding).
    fn round(&self, e: Elem, v: FloatValue<'c>) -> R<FloatValue<'c>> {
        let narrow = self.convert(v, self.storage_ty(e))?;
        self.convert(narrow, self.compute_ty(e))
    }

    /// Emits `for (i = global thread id; i < n; i += grid size) body(i)`.
    fn grid_loop(
        &self,
        f: FunctionValue<'c>,
        n: u64,
        mut body: impl FnMut(&Self, IntValue<'c>) -> R<()>,
    ) -> R<()> {
        let tid = self.sreg("llvm.nvvm.read.ptx.sreg.tid.x")?;
        let ctaid = self.sreg("llvm.nvvm.read.ptx.sreg.ctaid.x")?;
        let ntid = self.sreg("llvm.nvvm.read.ptx.sreg.ntid.x")?;
        let nctaid = self.sreg("llvm.nvvm.read.ptx.sreg.nctaid.x")?;
        let base = b!(self.b.build_int_mul(ctaid, ntid, "base"));
        let start = b!(self.b.build_int_add(base, tid, "start"));
        let stride = b!(self.b.build_int_mul(nctaid, ntid, "stride"));
        self.counted(f, start, self.i64(n), stride, |g, i| body(g, i))
    }

    /// The index of the first element of reduction lane `lane` of a tensor viewed as
    /// `outer × len × inner` (the lanes are the `outer · inner` positions off the reduced
    /// dimension): `(lane / inner) · len · inner + lane % inner`.
    fn lane_base(&self, lane: IntValue<'c>, len: u64, inner: u64) -> R<IntValue<'c>> {
        let o = b!(self
            .b
            .build_int_unsigned_div(lane, self.i64(inner.max(1)), "o"));
        let inn = b!(self
            .b
            .build_int_unsigned_rem(lane, self.i64(inner.max(1)), "in"));
        let base = b!(self.b.build_int_mul(o, self.i64(len * inner), "b"));
        Ok(b!(self.b.build_int_add(base, inn, "b")))
    }

    /// Element `k` of the lane starting at `base` ([`Self::lane_base`]): `base + k · inner`.
    fn lane_at(&self, base: IntValue<'c>, k: IntValue<'c>, inner: u64) -> R<IntValue<'c>> {
        let s = b!(self.b.build_int_mul(k, self.i64(inner), "s"));
        Ok(b!(self.b.build_int_add(base, s, "at")))
    }

    /// Emits `for (i = start; i < end; i += step) body(i)` (unsigned compare).
    fn counted(
        &self,
        f: FunctionValue<'c>,
        start: IntValue<'c>,
        end: IntValue<'c>,
        step: IntValue<'c>,
        mut body: impl FnMut(&Self, IntValue<'c>) -> R<()>,
    ) -> R<()> {
        counted_loop(self.cx, &self.b, f, start, end, step, &mut |i| {
            body(self, i)
        })
    }

    /// Emits `acc = init; for k in 0..n { acc = body(k, acc) }` and returns the final `acc`.
    fn fold<V>(
        &self,
        f: FunctionValue<'c>,
        n: u64,
        init: V,
        mut body: impl FnMut(&Self, IntValue<'c>, V) -> R<V>,
    ) -> R<V>
    where
        V: BasicValue<'c> + TryFrom<BasicValueEnum<'c>> + Copy,
    {
        let pre = self.b.get_insert_block().ok_or("no insert block")?;
        let head = self.cx.append_basic_block(f, "fhead");
        let bb = self.cx.append_basic_block(f, "fbody");
        let exit = self.cx.append_basic_block(f, "fexit");
        b!(self.b.build_unconditional_branch(head));
        self.b.position_at_end(head);
        let k = b!(self.b.build_phi(self.cx.i64_type(), "k"));
        let acc = b!(self
            .b
            .build_phi(init.as_basic_value_enum().get_type(), "acc"));
        k.add_incoming(&[(&self.i64(0), pre)]);
        acc.add_incoming(&[(&init, pre)]);
        let kv = k.as_basic_value().into_int_value();
        let av = V::try_from(acc.as_basic_value()).map_err(|_| "fold accumulator type")?;
        let c = b!(self
            .b
            .build_int_compare(IntPredicate::ULT, kv, self.i64(n), "c"));
        b!(self.b.build_conditional_branch(c, bb, exit));
        self.b.position_at_end(bb);
        let nacc = body(self, kv, av)?;
        let next = b!(self.b.build_int_add(kv, self.i64(1), "knext"));
        let latch = self.b.get_insert_block().ok_or("no insert block")?;
        k.add_incoming(&[(&next, latch)]);
        acc.add_incoming(&[(&nacc, latch)]);
        b!(self.b.build_unconditional_branch(head));
        self.b.position_at_end(exit);
        Ok(av)
    }

    /// Generates one kernel entry.
    fn kernel(&mut self, ctx: &IrContext, op: OpId, name: &str) -> Result<(), Diagnostic> {
        let e = |m: String| ctx.op_error(op, m);
        let body = ctx
            .op_regions(op)
            .first()
            .and_then(|r| ctx.region_blocks(*r).first().copied())
            .ok_or_else(|| e("kernel without body".into()))?;
        let args = ctx.block_args(body).to_vec();
        let ops: Vec<OpId> = ctx.block_ops(body).collect();
        let (last, inner) = ops.split_last().ok_or_else(|| e("empty kernel".into()))?;
        let result = *ctx
            .operands(*last)
            .first()
            .ok_or_else(|| e("rt.yield without value".into()))?;
        let ptr = self.cx.ptr_type(AddressSpace::from(1u16));
        let params: Vec<_> = (0..=args.len()).map(|_| ptr.into()).collect();
        let fty = self.cx.void_type().fn_type(&params, false);
        let f = self.m.add_function(name, fty, None);
        f.set_call_conventions(PTX_KERNEL_CC);
        for (i, p) in f.get_param_iter().enumerate() {
            p.set_name(&format!("p{i}"));
            // Buffers never alias within a launch (inputs are distinct buffers or the same one
            // read twice; the result is a fresh buffer or slot), which lets LLVM use ld.global.nc.
            let noalias = self.cx.create_enum_attribute(
                inkwell::attributes::Attribute::get_named_enum_kind_id("noalias"),
                0,
            );
            if i == args.len() {
                f.add_attribute(inkwell::attributes::AttributeLoc::Param(i as u32), noalias);
            }
        }
        let entry = self.cx.append_basic_block(f, "entry");
        self.b.position_at_end(entry);
        let gen = match inner {
            [single] if is_plain_copy(ctx, *single, &args) => {
                self.kind_of(ctx, result).and_then(|(k, shape)| {
                    self.copy(f, k.bits(), shape.iter().product::<i64>().max(0) as u64)
                })
            }
            [single]
                if crate::fusion::is_standalone_kernel(ctx.op_name(*single))
                    || ctx.op_name(*single).starts_with("rt.") =>
            {
                self.standalone(ctx, f, *single, &args)
            }
            _ if inner.iter().any(|o| {
                matches!(ctx.op_name(*o), "compute.reduce_sum" | "compute.reduce_max")
            }) =>
            {
                self.row_fused(ctx, f, inner, &args, result)
            }
            _ => self.fused(ctx, f, inner, &args, result),
        };
        gen.and_then(|()| {
            self.b.build_return(None).map_err(|e| e.to_string())?;
            Ok(())
        })
        .map_err(|m| {
            let at = inner.first().copied().unwrap_or(op);
            ctx.op_error(at, format!("kernel @{name}: {m}"))
        })
    }

    /// The integer type of `bits` (data movement copies bits; integer elements). `i1` values
    /// compute as LLVM `i1`; their bytes are [`IntElem::storage_bits`] wide.
    fn int_ty(&self, bits: u32) -> inkwell::types::IntType<'c> {
        match bits {
            1 => self.cx.bool_type(),
            8 => self.cx.i8_type(),
            16 => self.cx.i16_type(),
            32 => self.cx.i32_type(),
            _ => self.cx.i64_type(),
        }
    }

    fn param(&self, f: FunctionValue<'c>, i: usize) -> R<PointerValue<'c>> {
        Ok(f.get_nth_param(i as u32)
            .ok_or("missing parameter")?
            .into_pointer_value())
    }

    fn kind_of(&self, ctx: &IrContext, v: Value) -> R<(Kind, Vec<i64>)> {
        let t = value_tensor(ctx, v).ok_or("expects tensors")?;
        let k = Kind::of(ctx, t.elem).ok_or(
            "element type must be f16, bf16, f32, f64 or an integer of 1, 8, 16, 32 or 64 bits",
        )?;
        Ok((k, t.shape))
    }

    /// The type `k` is stored as.
    fn storage_any(&self, k: Kind) -> BasicTypeEnum<'c> {
        match k {
            Kind::Float(e) => self.storage_ty(e).into(),
            Kind::Int(i) => self.int_ty(i.storage_bits()).into(),
        }
    }

    /// A vector of `w` stored elements of `k`.
    fn vec_ty(&self, k: Kind, w: u32) -> VectorType<'c> {
        match k {
            Kind::Float(e) => self.storage_ty(e).vec_type(w),
            Kind::Int(i) => self.int_ty(i.storage_bits()).vec_type(w),
        }
    }

    /// A stored integer element (`i8` for `i1`) as its compute value: an `i1` byte holds 0
    /// or 1 (its load carries `!range [0, 2)`, see [`Self::bool_range`]), read as
    /// `byte != 0`. Not a `trunc`, which means the same on such bytes: LLVM folds a `trunc` of
    /// a vector's lane into a `<128 x i1>` load, which NVPTX splits into 16 byte loads.
    /// Other widths compute as stored.
    fn int_load_value(&self, i: IntElem, v: IntValue<'c>) -> R<IntValue<'c>> {
        if i.bits == 1 {
            let zero = v.get_type().const_zero();
            Ok(b!(self.b.build_int_compare(
                IntPredicate::NE,
                v,
                zero,
                "bit"
            )))
        } else {
            Ok(v)
        }
    }

    /// Marks load `v` of `i1` bytes (scalar or vector) with `!range [0, 2)`: every `i1`
    /// buffer holds 0 or 1 (the runner's inputs, every kernel's stores, NCCL's max / min /
    /// product of such bytes), which lets LLVM compute on the bytes themselves (`or.b32` of
    /// four lanes for a maximum) instead of testing each for zero and rebuilding it.
    fn bool_range(&self, i: IntElem, v: BasicValueEnum<'c>) -> R<()> {
        if i.bits != 1 {
            return Ok(());
        }
        let ins = v
            .as_instruction_value()
            .ok_or("a load that is not an instruction")?;
        let i8t = self.cx.i8_type();
        let range = self
            .cx
            .metadata_node(&[i8t.const_zero().into(), i8t.const_int(2, false).into()]);
        ins.set_metadata(range, self.cx.get_kind_id("range"))
            .map_err(|e| e.to_string())
    }

    /// An integer compute value as stored: an `i1` becomes the byte 0 or 1.
    fn int_store_value(&self, i: IntElem, v: IntValue<'c>) -> R<IntValue<'c>> {
        if i.bits == 1 {
            Ok(b!(self.b.build_int_z_extend(v, self.cx.i8_type(), "byte")))
        } else {
            Ok(v)
        }
    }

    /// Loads element `idx` of `ptr` as a compute value (floats widened, integers as stored,
    /// `i1` bytes as `i1`).
    fn load_any(&self, k: Kind, ptr: PointerValue<'c>, idx: IntValue<'c>) -> R<BasicValueEnum<'c>> {
        match k {
            Kind::Float(e) => Ok(self.load(e, ptr, idx)?.into()),
            Kind::Int(i) => {
                let it = self.int_ty(i.storage_bits());
                let p = unsafe { b!(self.b.build_in_bounds_gep(it, ptr, &[idx], "p")) };
                let v = b!(self.b.build_load(it, p, "ld"));
                self.bool_range(i, v)?;
                Ok(self.int_load_value(i, v.into_int_value())?.into())
            }
        }
    }

    /// Stores compute value `v` as element `idx` of `ptr` (floats rounded once).
    fn store_any(
        &self,
        k: Kind,
        ptr: PointerValue<'c>,
        idx: IntValue<'c>,
        v: BasicValueEnum<'c>,
    ) -> R<()> {
        match k {
            Kind::Float(e) => self.store(e, ptr, idx, v.into_float_value()),
            Kind::Int(i) => {
                let it = self.int_ty(i.storage_bits());
                let v = self.int_store_value(i, v.into_int_value())?;
                let p = unsafe { b!(self.b.build_in_bounds_gep(it, ptr, &[idx], "p")) };
                b!(self.b.build_store(p, v));
                Ok(())
            }
        }
    }

    /// The index `Σ j_d · stride_d` of the element a gather reads for element `j` of its result,
    /// the result's dims given outer to inner as `(extent, source stride)` (see [`collapse`]):
    /// `j` is peeled from the innermost dim by constant divisions, up to the outermost dim with
    /// a non-zero stride (none: index 0).
    fn strided_index(&self, j: IntValue<'c>, dims: &[(u64, u64)]) -> R<IntValue<'c>> {
        let Some(outer) = dims.iter().position(|d| d.1 != 0) else {
            return Ok(self.i64(0));
        };
        let mut rest = j;
        let mut src: Option<IntValue<'c>> = None;
        for d in (outer..dims.len()).rev() {
            let (size, stride) = dims[d];
            let idx = if d == 0 {
                rest
            } else {
                b!(self
                    .b
                    .build_int_unsigned_rem(rest, self.i64(size.max(1)), "jd"))
            };
            if stride != 0 {
                let term = if stride == 1 {
                    idx
                } else {
                    b!(self.b.build_int_mul(idx, self.i64(stride), "t"))
                };
                src = Some(match src {
                    Some(s) => b!(self.b.build_int_add(s, term, "src")),
                    None => term,
                });
            }
            if d > outer {
                rest = b!(self
                    .b
                    .build_int_unsigned_div(rest, self.i64(size.max(1)), "j"));
            }
        }
        Ok(src.unwrap_or_else(|| self.i64(0)))
    }

    /// The epilogue that kernel op `op` (named `name`, of element type `dtype`) names in its
    /// `epilogue` attribute, if any ([`Self::epilogue`]).
    fn epilogue_of(
        &mut self,
        ctx: &IrContext,
        module: OpId,
        op: OpId,
        name: &str,
        dtype: &str,
    ) -> Result<Option<crate::symm_kernels::Epilogue<'c>>, Diagnostic> {
        match ctx
            .inherent_attr(op, "epilogue")
            .and_then(|a| ctx.attr_as_symbol(a))
        {
            Some(chain) => Ok(Some(self.epilogue(ctx, module, op, chain, name, dtype)?)),
            None => Ok(None),
        }
    }

    /// The epilogue of the fused symm kernel `name` (an `rt.symm_kernel`, or the reduction of
    /// an `rt.symm_fused_kernel`) of element type `dtype`: the chain of `rt.kernel @chain`
    /// applied to the reduced value, as two internal, always-inlined functions the kernel calls
    /// where it would store the reduced elements (`crate::symm_kernels::Epilogue`). Their
    /// parameters: the element index, the reduced value as stored (one element, or a vector
    /// of `16 / element size` elements from that index), the chain's other inputs, the
    /// result. The chain computes exactly as in [`Self::elementwise`]: the reduced value is
    /// read like a loaded element (it is already rounded to its type), every op's result is
    /// rounded.
    fn epilogue(
        &mut self,
        ctx: &IrContext,
        module: OpId,
        op: OpId,
        chain: &str,
        name: &str,
        dtype: &str,
    ) -> Result<crate::symm_kernels::Epilogue<'c>, Diagnostic> {
        let e = |m: String| ctx.op_error(op, m);
        let kop = module_block(ctx, module)
            .and_then(|b| {
                ctx.block_ops(b)
                    .find(|o| ctx.op_name(*o) == "rt.kernel" && ctx.symbol_name(*o) == Some(chain))
            })
            .ok_or_else(|| {
                e(format!(
                    "epilogue @{chain} is not an rt.kernel of the module"
                ))
            })?;
        let operand = ctx
            .inherent_attr(op, "epilogue_operand")
            .and_then(|a| ctx.attr_as_i64(a))
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| e(format!("{} requires 'epilogue_operand'", ctx.op_name(op))))?;
        let body = ctx
            .op_regions(kop)
            .first()
            .and_then(|r| ctx.region_blocks(*r).first().copied())
            .ok_or_else(|| e(format!("epilogue @{chain} has no body")))?;
        let args = ctx.block_args(body).to_vec();
        let ops: Vec<OpId> = ctx.block_ops(body).collect();
        let (last, inner) = ops
            .split_last()
            .ok_or_else(|| e(format!("epilogue @{chain} is empty")))?;
        let result = *ctx
            .operands(*last)
            .first()
            .ok_or_else(|| e("rt.yield without value".into()))?;
        let width = (16 / crate::symm_kernels::dtype_bytes(dtype).max(1)) as u32;
        let gen = |g: &mut Self, vector: bool| -> R<FunctionValue<'c>> {
            g.epilogue_fn(ctx, name, inner, &args, result, operand, width, vector)
        };
        let built = gen(self, false).and_then(|scalar| Ok((scalar, gen(self, true)?)));
        let (scalar, vector) = built.map_err(|m| {
            let at = inner.first().copied().unwrap_or(op);
            ctx.op_error(at, format!("epilogue of @{name}: {m}"))
        })?;
        Ok(crate::symm_kernels::Epilogue {
            scalar,
            vector,
            extras: args.len().saturating_sub(1),
        })
    }

    /// One epilogue function (see [`Self::epilogue`]): `vector` handles `width` elements.
    #[allow(clippy::too_many_arguments)]
    fn epilogue_fn(
        &mut self,
        ctx: &IrContext,
        name: &str,
        ops: &[OpId],
        args: &[Value],
        result: Value,
        operand: usize,
        width: u32,
        vector: bool,
    ) -> R<FunctionValue<'c>> {
        for &op in ops {
            if !crate::fusion::is_elementwise(ctx.op_name(op)) {
                return Err(format!(
                    "'{}' cannot be part of an epilogue",
                    ctx.op_name(op)
                ));
            }
        }
        let reduced = *args.get(operand).ok_or("'epilogue_operand' out of range")?;
        let (rk, _) = self.kind_of(ctx, reduced)?;
        let (re, _) = self.kind_of(ctx, result)?;
        if transcendental_used(ctx, ops) {
            self.helper_exp()?;
            self.helper_tanh()?;
            self.helper_exp_fast()?;
            self.helper_tanh_fast()?;
            self.helper_tanh64()?;
            self.helper_sincos64(false)?;
            self.helper_sincos64(true)?;
            self.helper_log64()?;
        }
        let ptr = self.cx.ptr_type(AddressSpace::from(1u16));
        let x_ty: BasicTypeEnum<'c> = if vector {
            self.vec_ty(rk, width).into()
        } else {
            self.storage_any(rk)
        };
        let mut params = vec![self.cx.i64_type().into(), x_ty.into()];
        params.extend((0..args.len()).map(|_| inkwell::types::BasicMetadataTypeEnum::from(ptr)));
        let fty = self.cx.void_type().fn_type(&params, false);
        let suffix = if vector { "epilogue_vec" } else { "epilogue" };
        let f = self
            .m
            .add_function(&format!("{name}.{suffix}"), fty, Some(Linkage::Internal));
        let inline = self.cx.create_enum_attribute(
            inkwell::attributes::Attribute::get_named_enum_kind_id("alwaysinline"),
            0,
        );
        f.add_attribute(inkwell::attributes::AttributeLoc::Function, inline);
        let entry = self.cx.append_basic_block(f, "entry");
        self.b.position_at_end(entry);
        let idx = f
            .get_nth_param(0)
            .ok_or("missing parameter")?
            .into_int_value();
        let x = f.get_nth_param(1).ok_or("missing parameter")?;
        // Kernel argument k → parameter: the reduced value is parameter 1, the others follow.
        let param_of = |k: usize| if k < operand { k + 2 } else { k + 1 };
        let out = self.param(f, args.len() + 1)?;
        let as_compute = |g: &Self, k: Kind, v: BasicValueEnum<'c>| -> R<BasicValueEnum<'c>> {
            match k {
                Kind::Float(e) => Ok(g.convert(v.into_float_value(), g.compute_ty(e))?.into()),
                Kind::Int(i) => Ok(g.int_load_value(i, v.into_int_value())?.into()),
            }
        };
        if !vector {
            let v = self.chain(ctx, ops, args, result, &mut |g, k, e| {
                if k == operand {
                    as_compute(g, e, x)
                } else {
                    g.load_any(e, g.param(f, param_of(k))?, idx)
                }
            })?;
            self.store_any(re, out, idx, v)?;
        } else {
            // The caller checked every pointer for 16-byte alignment and passes an index that
            // is a multiple of `width`, so a vector of `width` elements of `k` is aligned to
            // its size, up to 16 bytes.
            let align =
                |k: Kind| (u64::from(width) * u64::from(k.bits().max(8)) / 8).min(16) as u32;
            let xv = x.into_vector_value();
            let mut loaded: HashMap<usize, inkwell::values::VectorValue<'c>> = HashMap::new();
            let mut acc = self.vec_ty(re, width).get_poison();
            for l in 0..width {
                let lane = self.cx.i32_type().const_int(u64::from(l), false);
                let v = self.chain(ctx, ops, args, result, &mut |g, k, e| {
                    let vec = if k == operand {
                        xv
                    } else if let Some(v) = loaded.get(&k) {
                        *v
                    } else {
                        let p = unsafe {
                            b!(g.b.build_in_bounds_gep(
                                g.storage_any(e),
                                g.param(f, param_of(k))?,
                                &[idx],
                                "vp"
                            ))
                        };
                        let v = b!(g.b.build_load(g.vec_ty(e, width), p, "vld"));
                        if let Some(ins) = v.as_instruction_value() {
                            ins.set_alignment(align(e)).map_err(|e| e.to_string())?;
                        }
                        if let Kind::Int(i) = e {
                            g.bool_range(i, v)?;
                        }
                        let v = v.into_vector_value();
                        loaded.insert(k, v);
                        v
                    };
                    let lx = b!(g.b.build_extract_element(vec, lane, "x"));
                    as_compute(g, e, lx)
                })?;
                let v: BasicValueEnum<'c> = match re {
                    Kind::Float(e) => self
                        .convert(v.into_float_value(), self.storage_ty(e))?
                        .into(),
                    Kind::Int(i) => self.int_store_value(i, v.into_int_value())?.into(),
                };
                acc = b!(self.b.build_insert_element(acc, v, lane, "acc"));
            }
            let p = unsafe {
                b!(self
                    .b
                    .build_in_bounds_gep(self.storage_any(re), out, &[idx], "vo"))
            };
            let st = b!(self.b.build_store(p, acc));
            st.set_alignment(align(re)).map_err(|e| e.to_string())?;
        }
        b!(self.b.build_return(None));
        Ok(f)
    }

    /// The global thread index and the grid's thread count (`ctaid·ntid + tid`, `nctaid·ntid`).
    fn thread_range(&self) -> R<(IntValue<'c>, IntValue<'c>)> {
        let t = self.sreg("llvm.nvvm.read.ptx.sreg.tid.x")?;
        let c = self.sreg("llvm.nvvm.read.ptx.sreg.ctaid.x")?;
        let nt = self.sreg("llvm.nvvm.read.ptx.sreg.ntid.x")?;
        let nc = self.sreg("llvm.nvvm.read.ptx.sreg.nctaid.x")?;
        let base = b!(self.b.build_int_mul(c, nt, "base"));
        let gid = b!(self.b.build_int_add(base, t, "gid"));
        let stride = b!(self.b.build_int_mul(nc, nt, "stride"));
        Ok((gid, stride))
    }

    /// One element of a fused chain: `load(k, e)` reads the element of `srcs[k]` (the values
    /// the chain loads: kernel arguments, absorbed broadcasts' results; element type `e`) as a
    /// compute value, once per value; every op's result is rounded to its element type.
    /// Returns the result's value (rounded, in its compute type).
    fn chain(
        &self,
        ctx: &IrContext,
        ops: &[OpId],
        srcs: &[Value],
        result: Value,
        load: &mut dyn FnMut(&Self, usize, Kind) -> R<BasicValueEnum<'c>>,
    ) -> R<BasicValueEnum<'c>> {
        let mut vals: HashMap<Value, BasicValueEnum<'c>> = HashMap::new();
        for &op in ops {
            let mut ins = Vec::new();
            for &v in ctx.operands(op) {
                if let Some(x) = vals.get(&v) {
                    ins.push(*x);
                } else {
                    let k = srcs
                        .iter()
                        .position(|a| *a == v)
                        .ok_or("operand not in kernel")?;
                    let (e, _) = self.kind_of(ctx, v)?;
                    let x = load(self, k, e)?;
                    vals.insert(v, x);
                    ins.push(x);
                }
            }
            let v = self.apply_op(ctx, op, &ins)?;
            vals.insert(ctx.result(op, 0), v);
        }
        vals.get(&result)
            .copied()
            .ok_or_else(|| "result not computed".to_string())
    }

    /// Elementwise op `op` of a chain on its operands' compute values; the result is rounded
    /// to its element type (in its compute type).
    fn apply_op(
        &self,
        ctx: &IrContext,
        op: OpId,
        ins: &[BasicValueEnum<'c>],
    ) -> R<BasicValueEnum<'c>> {
        let (k, _) = self.kind_of(ctx, ctx.result(op, 0))?;
        Ok(match k {
            Kind::Float(e) => {
                let v = match ins.first() {
                    // An integer → float cast: exactly in f64 (the sim's `int_to_f64`).
                    Some(BasicValueEnum::IntValue(x)) if ctx.op_name(op) == "compute.cast" => {
                        let (Kind::Int(from), _) = self.kind_of(ctx, ctx.operand(op, 0))? else {
                            return Err("integer operand of a float kernel".into());
                        };
                        self.int_to_f64(*x, from)?
                    }
                    // select's condition is the one integer operand of a float op.
                    Some(BasicValueEnum::IntValue(cond)) if ctx.op_name(op) == "compute.select" => {
                        let value = |i: usize| match ins.get(i) {
                            Some(BasicValueEnum::FloatValue(v)) => Ok(*v),
                            _ => Err("select between non-float values".to_string()),
                        };
                        b!(self.b.build_select(*cond, value(1)?, value(2)?, "sel"))
                            .into_float_value()
                    }
                    _ => {
                        let fins = ins
                            .iter()
                            .map(|x| match x {
                                BasicValueEnum::FloatValue(v) => Ok(*v),
                                _ => Err("integer operand of a float op".to_string()),
                            })
                            .collect::<R<Vec<_>>>()?;
                        self.scalar_op(ctx, op, e, &fins)?
                    }
                };
                // One rounding to the result type (from f64 for a cast of an integer).
                self.round(e, v)?.into()
            }
            Kind::Int(t) => {
                let from = ctx
                    .operands(op)
                    .first()
                    .and_then(|v| self.kind_of(ctx, *v).ok())
                    .map(|(k, _)| k);
                self.int_op(ctx, op, t, from, ins)?.into()
            }
        })
    }

    /// One elementwise op on compute values; the result is in `e`'s compute type, unrounded.
    fn scalar_op(
        &self,
        ctx: &IrContext,
        op: OpId,
        e: Elem,
        ins: &[FloatValue<'c>],
    ) -> R<FloatValue<'c>> {
        let ct = self.compute_ty(e);
        let name = ctx.op_name(op).trim_start_matches("compute.");
        let arg = |i: usize| -> R<FloatValue<'c>> {
            let v = *ins.get(i).ok_or("missing operand")?;
            self.convert(v, ct)
        };
        let c = |x: f64| ct.const_float(x);
        Ok(match name {
            "add" => b!(self.b.build_float_add(arg(0)?, arg(1)?, "add")),
            "sub" => b!(self.b.build_float_sub(arg(0)?, arg(1)?, "sub")),
            "mul" => b!(self.b.build_float_mul(arg(0)?, arg(1)?, "mul")),
            "div" => b!(self.b.build_float_div(arg(0)?, arg(1)?, "div")),
            "maximum" => self.call_f(
                self.intrinsic("llvm.maximum", ct.into())?,
                &[arg(0)?, arg(1)?],
            )?,
            "minimum" => self.call_f(
                self.intrinsic("llvm.minimum", ct.into())?,
                &[arg(0)?, arg(1)?],
            )?,
            "neg" => b!(self.b.build_float_neg(arg(0)?, "neg")),
            "relu" => {
                // `x < 0 ? 0 : x` keeps NaN (a max would hide it), as the sim backend does.
                let x = arg(0)?;
                let lt = b!(self
                    .b
                    .build_float_compare(FloatPredicate::OLT, x, c(0.0), "lt"));
                b!(self.b.build_select(lt, c(0.0), x, "relu")).into_float_value()
            }
            "exp" => self.call_f(self.helpers[exp_helper(e)], &[arg(0)?])?,
            "tanh" => self.tanh(e, arg(0)?)?,
            "sqrt" => self.call_f(self.intrinsic("llvm.sqrt", ct.into())?, &[arg(0)?])?,
            "rsqrt" => {
                let s = self.call_f(self.intrinsic("llvm.sqrt", ct.into())?, &[arg(0)?])?;
                b!(self.b.build_float_div(c(1.0), s, "rsqrt"))
            }
            "gelu" => {
                // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), evaluated in the sim's order.
                let x = arg(0)?;
                let x3 = b!(self.b.build_float_mul(c(0.044_715), x, "t"));
                let x3 = b!(self.b.build_float_mul(x3, x, "t"));
                let x3 = b!(self.b.build_float_mul(x3, x, "t"));
                let inner = b!(self.b.build_float_add(x, x3, "t"));
                let k = if e == Elem::F64 {
                    (2.0 / std::f64::consts::PI).sqrt()
                } else {
                    f64::from(0.797_884_6f32)
                };
                let inner = b!(self.b.build_float_mul(c(k), inner, "t"));
                let t = self.tanh(e, inner)?;
                let one_t = b!(self.b.build_float_add(c(1.0), t, "t"));
                let hx = b!(self.b.build_float_mul(c(0.5), x, "t"));
                b!(self.b.build_float_mul(hx, one_t, "gelu"))
            }
            "silu" => {
                let x = arg(0)?;
                let nx = b!(self.b.build_float_neg(x, "nx"));
                let ex = self.call_f(self.helpers[exp_helper(e)], &[nx])?;
                let d = b!(self.b.build_float_add(c(1.0), ex, "d"));
                b!(self.b.build_float_div(x, d, "silu"))
            }
            "sigmoid" => {
                // 1 / (1 + e^-x), in the sim's order.
                let nx = b!(self.b.build_float_neg(arg(0)?, "nx"));
                let ex = self.call_f(self.helpers[exp_helper(e)], &[nx])?;
                let d = b!(self.b.build_float_add(c(1.0), ex, "d"));
                b!(self.b.build_float_div(c(1.0), d, "sigmoid"))
            }
            "sin" | "cos" | "log" => {
                // Evaluated in f64 (the helpers are accurate to a few f64 ulp) and rounded to
                // the compute type first: f16/bf16/f32 then round like the sim's f32 libm
                // result, which is itself rounded to the element type afterwards.
                let x = self.convert(arg(0)?, self.cx.f64_type())?;
                let key = match name {
                    "sin" => "sin64",
                    "cos" => "cos64",
                    _ => "log64",
                };
                let y = self.call_f(self.helpers[key], &[x])?;
                self.convert(y, ct)?
            }
            "scale" => {
                let factor = ctx
                    .inherent_attr(op, "factor")
                    .and_then(|a| ctx.attr_as_f64(a))
                    .ok_or("requires 'factor'")?;
                // The sim multiplies by the factor rounded to f32 for f16/bf16/f32.
                let factor = if e == Elem::F64 {
                    factor
                } else {
                    f64::from(factor as f32)
                };
                b!(self.b.build_float_mul(arg(0)?, c(factor), "scale"))
            }
            "fill" => {
                let v = ctx
                    .inherent_attr(op, "value")
                    .and_then(|a| ctx.attr_as_f64(a))
                    .ok_or("requires 'value'")?;
                // Rounded once from f64 by the caller's per-result rounding.
                self.cx.f64_type().const_float(v)
            }
            "clone" | "reshape" => arg(0)?,
            // The caller's rounding converts to the result type with a single rounding.
            "cast" => *ins.first().ok_or("missing operand")?,
            other => return Err(format!("no kernel code for compute.{other}")),
        })
    }

    /// Integer `v` of type `from` as an f64 value: `sitofp` / `uitofp` by the
    /// sim's representation (ui* zero-extended, the others sign-extended), rounding to
    /// nearest even only for 64-bit values beyond 2^53, as the sim's `as f64` does.
    fn int_to_f64(&self, v: IntValue<'c>, from: IntElem) -> R<FloatValue<'c>> {
        let t = self.cx.f64_type();
        Ok(if from.signed {
            b!(self.b.build_signed_int_to_float(v, t, "itof"))
        } else {
            b!(self.b.build_unsigned_int_to_float(v, t, "itof"))
        })
    }

    /// One elementwise op with integer result `t` on compute values (integers as stored,
    /// floats in their compute type); `from` is the first operand's element type. The
    /// result is already the element (two's complement at `t.bits`, as the sim's `wrap`).
    fn int_op(
        &self,
        ctx: &IrContext,
        op: OpId,
        t: IntElem,
        from: Option<Kind>,
        ins: &[BasicValueEnum<'c>],
    ) -> R<IntValue<'c>> {
        let it = self.int_ty(t.bits);
        let name = ctx.op_name(op);
        int_op_support(name, &int_name(t))?;
        let short = name.trim_start_matches("compute.");
        let arg = |i: usize| -> R<IntValue<'c>> {
            match ins.get(i) {
                Some(BasicValueEnum::IntValue(v)) => Ok(*v),
                _ => Err(format!("{name}: expects integer operands")),
            }
        };
        let zero = it.const_zero();
        let cmp = |p: IntPredicate, a: IntValue<'c>, b: IntValue<'c>| -> R<IntValue<'c>> {
            let c = b!(self.b.build_int_compare(p, a, b, "c"));
            Ok(b!(self.b.build_select(c, a, b, "sel")).into_int_value())
        };
        let (gt, lt) = if t.signed {
            (IntPredicate::SGT, IntPredicate::SLT)
        } else {
            (IntPredicate::UGT, IntPredicate::ULT)
        };
        if short == "compare" {
            return self.compare(ctx, op, from, ins);
        }
        Ok(match short {
            // No nsw/nuw flags: overflow wraps, as the sim's `wrapping_*` then `wrap`.
            "add" => b!(self.b.build_int_add(arg(0)?, arg(1)?, "add")),
            "sub" => b!(self.b.build_int_sub(arg(0)?, arg(1)?, "sub")),
            "mul" => b!(self.b.build_int_mul(arg(0)?, arg(1)?, "mul")),
            "neg" => b!(self.b.build_int_sub(zero, arg(0)?, "neg")),
            "maximum" => cmp(gt, arg(0)?, arg(1)?)?,
            "minimum" => cmp(lt, arg(0)?, arg(1)?)?,
            "relu" if t.signed => cmp(gt, arg(0)?, zero)?,
            "relu" => arg(0)?,
            "div" => {
                // The sim rejects a division by zero; here it yields 0 instead of undefined
                // behaviour. MIN / -1 wraps to MIN (the sim's i64 `wrapping_div`, then
                // `wrap`), which `sdiv` leaves undefined: it is computed as `0 - a`.
                let (a, b) = (arg(0)?, arg(1)?);
                let one = it.const_int(1, false);
                let is0 = b!(self.b.build_int_compare(IntPredicate::EQ, b, zero, "z"));
                if t.signed {
                    let m1 = it.const_all_ones();
                    let ism1 = b!(self.b.build_int_compare(IntPredicate::EQ, b, m1, "m1"));
                    let odd = b!(self.b.build_or(is0, ism1, "odd"));
                    let d = b!(self.b.build_select(odd, one, b, "d")).into_int_value();
                    let q = b!(self.b.build_int_signed_div(a, d, "q"));
                    let na = b!(self.b.build_int_sub(zero, a, "na"));
                    let q = b!(self.b.build_select(ism1, na, q, "q")).into_int_value();
                    b!(self.b.build_select(is0, zero, q, "div")).into_int_value()
                } else {
                    let d = b!(self.b.build_select(is0, one, b, "d")).into_int_value();
                    let q = b!(self.b.build_int_unsigned_div(a, d, "q"));
                    b!(self.b.build_select(is0, zero, q, "div")).into_int_value()
                }
            }
            "fill" => {
                let v = ctx
                    .inherent_attr(op, "value")
                    .and_then(|a| ctx.attr_as_f64(a))
                    .ok_or("requires 'value'")?;
                it.const_int(t.element_of_f64(v), false)
            }
            "clone" | "reshape" => arg(0)?,
            "select" => b!(self.b.build_select(arg(0)?, arg(1)?, arg(2)?, "sel")).into_int_value(),
            "cast" => match (from, ins.first()) {
                (Some(Kind::Int(f)), Some(BasicValueEnum::IntValue(x))) => {
                    // Extend by the source's representation, or keep the low bits.
                    if t.bits == 1 && f.bits > 1 {
                        // The low bit as `(x & 1) != 0`: a `trunc` to i1 of a vector's lane
                        // becomes a `<128 x i1>` load, 16 byte loads on NVPTX (see
                        // `int_load_value`); this form stays one `and.b32` per 4 bytes.
                        let one = x.get_type().const_int(1, false);
                        let low = b!(self.b.build_and(*x, one, "low"));
                        let z = x.get_type().const_zero();
                        b!(self.b.build_int_compare(IntPredicate::NE, low, z, "bit"))
                    } else if f.bits < t.bits && f.signed {
                        b!(self.b.build_int_s_extend(*x, it, "sext"))
                    } else if f.bits < t.bits {
                        b!(self.b.build_int_z_extend(*x, it, "zext"))
                    } else if f.bits > t.bits {
                        b!(self.b.build_int_truncate(*x, it, "trunc"))
                    } else {
                        *x
                    }
                }
                (Some(Kind::Float(_)), Some(BasicValueEnum::FloatValue(x))) => {
                    self.float_to_int(*x, t)?
                }
                _ => return Err("cast of an unexpected operand".into()),
            },
            other => return Err(format!("no kernel code for compute.{other} on integers")),
        })
    }

    /// `compute.compare` of two compute values of element type `from`, as an `i1`: floats
    /// by the ordered predicates (false when either is NaN) except `ne`, which is unordered
    /// (true for NaN), as the sim's `PartialOrd`; integers by the type's signedness (`i1`
    /// and `ui*` unsigned, as the sim's storage orders them).
    fn compare(
        &self,
        ctx: &IrContext,
        op: OpId,
        from: Option<Kind>,
        ins: &[BasicValueEnum<'c>],
    ) -> R<IntValue<'c>> {
        let pred = ctx
            .inherent_attr(op, "predicate")
            .and_then(|a| ctx.attr_as_str(a))
            .ok_or("requires 'predicate'")?;
        match (from, ins) {
            (
                Some(Kind::Float(_)),
                [BasicValueEnum::FloatValue(a), BasicValueEnum::FloatValue(b)],
            ) => {
                let p = match pred {
                    "eq" => FloatPredicate::OEQ,
                    "ne" => FloatPredicate::UNE,
                    "lt" => FloatPredicate::OLT,
                    "le" => FloatPredicate::OLE,
                    "gt" => FloatPredicate::OGT,
                    "ge" => FloatPredicate::OGE,
                    other => return Err(format!("unknown predicate \"{other}\"")),
                };
                Ok(b!(self.b.build_float_compare(p, *a, *b, "cmp")))
            }
            (Some(Kind::Int(t)), [BasicValueEnum::IntValue(a), BasicValueEnum::IntValue(b)]) => {
                let (lt, le, gt, ge) = if t.signed {
                    (
                        IntPredicate::SLT,
                        IntPredicate::SLE,
                        IntPredicate::SGT,
                        IntPredicate::SGE,
                    )
                } else {
                    (
                        IntPredicate::ULT,
                        IntPredicate::ULE,
                        IntPredicate::UGT,
                        IntPredicate::UGE,
                    )
                };
                let p = match pred {
                    "eq" => IntPredicate::EQ,
                    "ne" => IntPredicate::NE,
                    "lt" => lt,
                    "le" => le,
                    "gt" => gt,
                    "ge" => ge,
                    other => return Err(format!("unknown predicate \"{other}\"")),
                };
                Ok(b!(self.b.build_int_compare(p, *a, *b, "cmp")))
            }
            _ => Err("compare of unexpected operands".into()),
        }
    }

    /// The sim's `float_to_int`: truncation toward zero, saturated to the type's range, NaN
    /// → 0 (`llvm.fpto[su]i.sat`, exact for every f16/bf16/f32/f64 input). For `i1` that is
    /// `x >= 1` (ordered, so NaN → 0; +inf → 1; everything below 1, negatives included, → 0).
    fn float_to_int(&self, x: FloatValue<'c>, t: IntElem) -> R<IntValue<'c>> {
        if t.bits == 1 {
            let one = x.get_type().const_float(1.0);
            return Ok(b!(self.b.build_float_compare(
                FloatPredicate::OGE,
                x,
                one,
                "ftob"
            )));
        }
        let it = self.int_ty(t.bits);
        let name = if t.signed {
            "llvm.fptosi.sat"
        } else {
            "llvm.fptoui.sat"
        };
        let i = Intrinsic::find(name).ok_or_else(|| format!("no intrinsic {name}"))?;
        let d = i
            .get_declaration(self.m, &[it.into(), x.get_type().into()])
            .ok_or_else(|| format!("cannot declare {name}"))?;
        let c = b!(self.b.build_call(d, &[x.into()], "ftoi"));
        Ok(c.try_as_basic_value()
            .basic()
            .ok_or("call without value")?
            .into_int_value())
    }

    /// tanh of an f32 compute value whose op result is `e`: for bf16 results, when the module
    /// opts in, the hardware approximation (`llvm.tanh` with `afn`, which NVPTX selects as
    /// `tanh.approx.f32`, max relative error 2^-10.987); otherwise `__commlir_tanhf_fast`
    /// for bf16/f16 results and the accurate `__commlir_tanhf` for f32.
    fn tanh(&self, e: Elem, x: FloatValue<'c>) -> R<FloatValue<'c>> {
        if e != Elem::BF16 || !self.approx_tanh {
            let key = match e {
                Elem::F64 => "tanh64",
                e if narrow(e) => "tanh_fast",
                _ => "tanh",
            };
            return self.call_f(self.helpers[key], &[x]);
        }
        let t = self.call_f(self.intrinsic("llvm.tanh", x.get_type().into())?, &[x])?;
        t.as_instruction_value()
            .ok_or("tanh is not an instruction")?
            .set_fast_math_flags(inkwell::values::FastMathFlags::ApproxFunc)
            .map_err(|e| e.to_string())?;
        Ok(t)
    }

    /// softmax, reduce_sum, reduce_max, transpose, permute, broadcast, slice, concat, iota.
    fn standalone(
        &mut self,
        ctx: &IrContext,
        f: FunctionValue<'c>,
        op: OpId,
        args: &[Value],
    ) -> R<()> {
        let name = ctx.op_name(op).trim_start_matches("compute.");
        if name == "rt.attention_softmax" {
            return self.attention_softmax(ctx, f, op, args);
        }
        if name == "rt.flash_attention" {
            return self.flash_attention(ctx, f, op, args);
        }
        if name.starts_with("rt.") {
            return self.chunks(ctx, f, op, args);
        }
        if name == "softmax" {
            self.helper_exp()?;
            self.helper_exp_fast()?;
            self.helper_exp64()?;
            self.b
                .position_at_end(f.get_first_basic_block().ok_or("no entry")?);
        }
        if name == "iota" {
            return self.iota(ctx, f, op, args);
        }
        let (ik, ishape) = self.kind_of(ctx, ctx.operand(op, 0))?;
        let (ok, oshape) = self.kind_of(ctx, ctx.result(op, 0))?;
        let out = self.param(f, args.len())?;
        let input = |i: usize| -> R<PointerValue<'c>> {
            let v = ctx.operand(op, i);
            let k = args
                .iter()
                .position(|a| *a == v)
                .ok_or("operand not in kernel")?;
            self.param(f, k)
        };
        let dim = ctx
            .inherent_attr(op, "dim")
            .and_then(|a| ctx.attr_as_i64(a))
            .unwrap_or(0)
            .max(0) as usize;
        let prod = |s: &[i64]| s.iter().product::<i64>().max(0) as u64;
        let onumel = prod(&oshape);
        match name {
            "reduce_sum" if matches!(ik, Kind::Int(_)) => {
                // One thread per lane, in order; wrapping adds at the element's width equal
                // the sim's i64 `wrapping_add` followed by `wrap`, in any order.
                let (Kind::Int(t), true) = (ik, ik == ok) else {
                    return Err("reduce_sum must keep its integer element type".into());
                };
                let it = self.int_ty(t.bits);
                let outer = prod(&ishape[..dim]);
                let len = ishape[dim].max(0) as u64;
                let inner = prod(&ishape[dim + 1..]);
                let x = input(0)?;
                self.grid_loop(f, outer * inner, |g, l| {
                    let base = g.lane_base(l, len, inner)?;
                    let sum = g.fold(f, len, it.const_zero(), |g, k, acc| {
                        let v = g
                            .load_any(ik, x, g.lane_at(base, k, inner)?)?
                            .into_int_value();
                        Ok(b!(g.b.build_int_add(acc, v, "acc")))
                    })?;
                    g.store_any(ok, out, l, sum.into())
                })
            }
            "softmax" | "reduce_sum" => {
                let (Kind::Float(ie), Kind::Float(oe)) = (ik, ok) else {
                    return Err(format!(
                        "compute.{name} supports f16, bf16, f32 and f64 tensors only"
                    ));
                };
                let outer = prod(&ishape[..dim]);
                let len = ishape[dim].max(0) as u64;
                let inner = prod(&ishape[dim + 1..]);
                let x = input(0)?;
                let ct = self.compute_ty(ie);
                if inner == 1 && ct == self.cx.f32_type() {
                    return self.row_block(
                        f,
                        name == "softmax",
                        None,
                        (ie, x),
                        (oe, out),
                        outer,
                        len,
                    );
                }
                self.grid_loop(f, outer * inner, |g, l| {
                    let base = g.lane_base(l, len, inner)?;
                    let at = |g: &Self, k: IntValue<'c>| g.lane_at(base, k, inner);
                    if name == "reduce_sum" {
                        let sum = g.fold(f, len, ct.const_float(0.0), |g, k, acc| {
                            let v = g.load(ie, x, at(g, k)?)?;
                            Ok(b!(g.b.build_float_add(acc, v, "acc")))
                        })?;
                        return g.store(oe, out, l, sum);
                    }
                    let maxf = g.intrinsic("llvm.maximum", ct.into())?;
                    let m = g.fold(f, len, ct.const_float(f64::NEG_INFINITY), |g, k, acc| {
                        let v = g.load(ie, x, at(g, k)?)?;
                        g.call_f(maxf, &[acc, v])
                    })?;
                    let exp = g.helpers[exp_helper(oe)];
                    let sum = g.fold(f, len, ct.const_float(0.0), |g, k, acc| {
                        let v = g.load(ie, x, at(g, k)?)?;
                        let d = b!(g.b.build_float_sub(v, m, "d"));
                        let ev = g.call_f(exp, &[d])?;
                        Ok(b!(g.b.build_float_add(acc, ev, "acc")))
                    })?;
                    let quot = g.quotient_by(oe, sum)?;
                    g.counted(f, g.i64(0), g.i64(len), g.i64(1), |g, k| {
                        let idx = at(g, k)?;
                        let v = g.load(ie, x, idx)?;
                        let d = b!(g.b.build_float_sub(v, m, "d"));
                        let ev = g.call_f(exp, &[d])?;
                        let q = quot(g, ev)?;
                        g.store(oe, out, idx, q)
                    })
                })
            }
            "reduce_max" => {
                // One thread per lane, folding from the lane's first element (the verifier
                // rejects an empty dim): the maximum is exact, so any order gives the sim's
                // result; floats by `llvm.maximum` (NaN-propagating, as `compute.maximum`).
                if ik != ok {
                    return Err("reduce_max must keep its element type".into());
                }
                let outer = prod(&ishape[..dim]);
                let len = ishape[dim].max(0) as u64;
                let inner = prod(&ishape[dim + 1..]);
                let x = input(0)?;
                self.grid_loop(f, outer * inner, |g, l| {
                    let base = g.lane_base(l, len, inner)?;
                    let first = g.load_any(ik, x, base)?;
                    let at = |g: &Self, k: IntValue<'c>| g.lane_at(base, k, inner);
                    let m: BasicValueEnum<'c> = match ik {
                        Kind::Float(e) => {
                            let maxf = g.intrinsic("llvm.maximum", g.compute_ty(e).into())?;
                            g.fold(f, len, first.into_float_value(), |g, k, acc| {
                                let v = g.load(e, x, at(g, k)?)?;
                                g.call_f(maxf, &[acc, v])
                            })?
                            .into()
                        }
                        Kind::Int(t) => {
                            let gt = if t.signed {
                                IntPredicate::SGT
                            } else {
                                IntPredicate::UGT
                            };
                            g.fold(f, len, first.into_int_value(), |g, k, acc| {
                                let v = g.load_any(ik, x, at(g, k)?)?.into_int_value();
                                let c = b!(g.b.build_int_compare(gt, v, acc, "gt"));
                                Ok(b!(g.b.build_select(c, v, acc, "max")).into_int_value())
                            })?
                            .into()
                        }
                    };
                    g.store_any(ok, out, l, m)
                })
            }
            "broadcast" | "permute" => {
                // Both gather: out[j] = in[Σ_d j_d · src_stride[d]] over the result's dims,
                // with stride 0 where broadcast repeats a dim (added, or of size 1); the dims
                // are collapsed first (fewer divisions, same index).
                let dims = if name == "permute" {
                    let mut in_strides = vec![1u64; ishape.len()];
                    for d in (0..ishape.len().saturating_sub(1)).rev() {
                        in_strides[d] = in_strides[d + 1] * ishape[d + 1].max(0) as u64;
                    }
                    let perm = ctx
                        .inherent_attr(op, "perm")
                        .and_then(|a| ctx.attr_as_i64_array(a))
                        .ok_or("requires 'perm'")?;
                    let src_strides: Vec<u64> = perm
                        .iter()
                        .map(|&p| {
                            usize::try_from(p)
                                .ok()
                                .and_then(|p| in_strides.get(p).copied())
                        })
                        .collect::<Option<_>>()
                        .filter(|s: &Vec<u64>| s.len() == oshape.len())
                        .ok_or("'perm' is not a permutation of the operand's dims")?;
                    collapse(
                        oshape
                            .iter()
                            .zip(src_strides)
                            .map(|(&size, st)| (size.max(0) as u64, st))
                            .collect(),
                    )
                } else {
                    BroadcastIndex::new(&ishape, &oshape)?.dims
                };
                let x = input(0)?;
                let it = self.int_ty(ik.bits());
                // Whole 16-byte vectors when the innermost dim stays innermost, read in order
                // ([`movement_vector_width`]), and both buffers are 16-byte aligned (a runtime
                // test: a pool view may sit at any offset).
                let w = movement_vector_width(ctx, op);
                let mut done_bb = None;
                if w > 1 {
                    let i64t = self.cx.i64_type();
                    let xi = b!(self.b.build_ptr_to_int(x, i64t, "xi"));
                    let oi = b!(self.b.build_ptr_to_int(out, i64t, "oi"));
                    let low = b!(self.b.build_or(xi, oi, "low"));
                    let low = b!(self.b.build_and(low, self.i64(VECTOR_BYTES - 1), "low"));
                    let aligned =
                        b!(self
                            .b
                            .build_int_compare(IntPredicate::EQ, low, self.i64(0), "al"));
                    let vec_bb = self.cx.append_basic_block(f, "mvec");
                    let sc = self.cx.append_basic_block(f, "mscalar");
                    let done = self.cx.append_basic_block(f, "mdone");
                    b!(self.b.build_conditional_branch(aligned, vec_bb, sc));
                    self.b.position_at_end(vec_bb);
                    self.grid_loop(f, onumel / w, |g, v| {
                        let j = b!(g.b.build_int_mul(v, g.i64(w), "j"));
                        let src = g.strided_index(j, &dims)?;
                        let sp = unsafe { b!(g.b.build_in_bounds_gep(it, x, &[src], "sp")) };
                        let dp = unsafe { b!(g.b.build_in_bounds_gep(it, out, &[j], "dp")) };
                        g.copy16(sp, dp)
                    })?;
                    b!(self.b.build_unconditional_branch(done));
                    self.b.position_at_end(sc);
                    done_bb = Some(done);
                }
                self.grid_loop(f, onumel, |g, j| {
                    // Shapes are constants, so the divisions are by constants
                    // (multiplications after LLVM's lowering).
                    let src = g.strided_index(j, &dims)?;
                    g.copy_elem(it, x, src, out, j)
                })?;
                if let Some(done) = done_bb {
                    b!(self.b.build_unconditional_branch(done));
                    self.b.position_at_end(done);
                }
                Ok(())
            }
            "transpose" => {
                // out[..., r, c] = in[..., c, r]; out is N×M for an M×N input.
                let r = ishape.len();
                let (mm, nn) = (ishape[r - 2].max(0) as u64, ishape[r - 1].max(0) as u64);
                let x = input(0)?;
                let it = self.int_ty(ik.bits());
                self.grid_loop(f, onumel, |g, j| {
                    let per = g.i64((mm * nn).max(1));
                    let bt = b!(g.b.build_int_unsigned_div(j, per, "b"));
                    let rem = b!(g.b.build_int_unsigned_rem(j, per, "r"));
                    let row = b!(g.b.build_int_unsigned_div(rem, g.i64(mm.max(1)), "row"));
                    let col = b!(g.b.build_int_unsigned_rem(rem, g.i64(mm.max(1)), "col"));
                    let src = b!(g.b.build_int_mul(bt, per, "s"));
                    let cn = b!(g.b.build_int_mul(col, g.i64(nn), "s"));
                    let src = b!(g.b.build_int_add(src, cn, "s"));
                    let src = b!(g.b.build_int_add(src, row, "s"));
                    g.copy_elem(it, x, src, out, j)
                })
            }
            "slice" => {
                let start = ctx
                    .inherent_attr(op, "start")
                    .and_then(|a| ctx.attr_as_i64(a))
                    .ok_or("requires 'start'")?
                    .max(0) as u64;
                let size = oshape[dim].max(0) as u64;
                let isz = ishape[dim].max(0) as u64;
                let inner = prod(&ishape[dim + 1..]);
                let x = input(0)?;
                let it = self.int_ty(ik.bits());
                self.grid_loop(f, onumel, |g, j| {
                    let blk = g.i64((size * inner).max(1));
                    let o = b!(g.b.build_int_unsigned_div(j, blk, "o"));
                    let rem = b!(g.b.build_int_unsigned_rem(j, blk, "r"));
                    let src = b!(g.b.build_int_mul(o, g.i64(isz * inner), "s"));
                    let src = b!(g.b.build_int_add(src, g.i64(start * inner), "s"));
                    let src = b!(g.b.build_int_add(src, rem, "s"));
                    g.copy_elem(it, x, src, out, j)
                })
            }
            "concat" => {
                let total = oshape[dim].max(0) as u64;
                let inner = prod(&oshape[dim + 1..]);
                let mut parts = Vec::new();
                let mut off = 0u64;
                for i in 0..ctx.operands(op).len() {
                    let (_, s) = self.kind_of(ctx, ctx.operand(op, i))?;
                    let d = s[dim].max(0) as u64;
                    parts.push((input(i)?, off, d));
                    off += d;
                }
                let it = self.int_ty(ok.bits());
                self.grid_loop(f, onumel, |g, j| {
                    let blk = g.i64((total * inner).max(1));
                    let o = b!(g.b.build_int_unsigned_div(j, blk, "o"));
                    let rem = b!(g.b.build_int_unsigned_rem(j, blk, "r"));
                    let d = b!(g.b.build_int_unsigned_div(rem, g.i64(inner.max(1)), "d"));
                    let inn = b!(g.b.build_int_unsigned_rem(rem, g.i64(inner.max(1)), "in"));
                    // Select the source part by d's range, from the last part down.
                    let mut sel: Option<(PointerValue<'c>, IntValue<'c>)> = None;
                    for &(p, start, len) in parts.iter().rev() {
                        let local = b!(g.b.build_int_sub(d, g.i64(start), "l"));
                        let idx = b!(g.b.build_int_mul(o, g.i64(len * inner), "i"));
                        let li = b!(g.b.build_int_mul(local, g.i64(inner), "i"));
                        let idx = b!(g.b.build_int_add(idx, li, "i"));
                        let idx = b!(g.b.build_int_add(idx, inn, "i"));
                        sel = Some(match sel {
                            None => (p, idx),
                            Some((sp, si)) => {
                                let lt = b!(g.b.build_int_compare(
                                    IntPredicate::ULT,
                                    d,
                                    g.i64(start + len),
                                    "lt"
                                ));
                                let pp = b!(g.b.build_select(lt, p, sp, "pp")).into_pointer_value();
                                let ii = b!(g.b.build_select(lt, idx, si, "ii")).into_int_value();
                                (pp, ii)
                            }
                        });
                    }
                    let (p, idx) = sel.ok_or("concat without operands")?;
                    g.copy_elem(it, p, idx, out, j)
                })
            }
            other => Err(format!("no kernel code for compute.{other}")),
        }
    }

    /// `compute.iota`: one thread per element, the element's index along `dim`
    /// (`(j / inner) mod len`), converted as the sim does: exactly to f64, then rounded once
    /// to a float element type; wrapped to an integer one (the low bits of the index).
    fn iota(&self, ctx: &IrContext, f: FunctionValue<'c>, op: OpId, args: &[Value]) -> R<()> {
        let (ok, oshape) = self.kind_of(ctx, ctx.result(op, 0))?;
        let dim = ctx
            .inherent_attr(op, "dim")
            .and_then(|a| ctx.attr_as_i64(a))
            .and_then(|d| usize::try_from(d).ok())
            .filter(|d| *d < oshape.len())
            .ok_or("requires 'dim' within the result's rank")?;
        let prod = |s: &[i64]| s.iter().product::<i64>().max(0) as u64;
        let len = oshape[dim].max(1) as u64;
        let inner = prod(&oshape[dim + 1..]).max(1);
        let out = self.param(f, args.len())?;
        self.grid_loop(f, prod(&oshape), |g, j| {
            let k = b!(g.b.build_int_unsigned_div(j, g.i64(inner), "k"));
            let k = b!(g.b.build_int_unsigned_rem(k, g.i64(len), "k"));
            let v: BasicValueEnum<'c> = match ok {
                Kind::Float(_) => {
                    b!(g.b.build_unsigned_int_to_float(k, g.cx.f64_type(), "kf")).into()
                }
                Kind::Int(t) if t.bits < 64 => {
                    b!(g.b.build_int_truncate(k, g.int_ty(t.bits), "kt")).into()
                }
                Kind::Int(_) => k.into(),
            };
            g.store_any(ok, out, j, v)
        })
    }

    /// softmax / reduce_sum along a contiguous last dimension, one block per row (rows
    /// grid-stride over blocks, so any grid is correct): each thread strides over the row with
    /// step `ntid`, accumulating in f32; the block combines the per-thread partials with
    /// butterfly warp shuffles, then the per-warp partials through shared memory, in warp
    /// order, so every thread ends with the same value. The block must be a multiple of 32
    /// threads, at most 1024 (`rt.launch` uses 256). The summation order differs from the sim
    /// backend's in-order walk (results agree within `--check`'s tolerance, not bit for bit).
    ///
    /// Vectorized when the row length is a multiple of `w` (16 bytes of the input: 8 × f16/bf16,
    /// 4 × f32; softmax also needs its result type to equal the input's) and the input and
    /// output pointers are 16-byte aligned (runtime test; every row base then is): thread `t`
    /// owns the `w`-element vectors `t, t + ntid, …` and folds each vector's lanes in order.
    /// A softmax row of at most [`ROW_REG_VECTORS`] vectors per thread (at 256 threads: 2048
    /// bf16 = one vector per thread) is loaded once and kept in registers (max, exp-sum and the
    /// quotients from the same values); a longer row streams it three times with vector loads.
    /// Otherwise the scalar loop (thread `t` owns elements `t, t + ntid, …`). Only the sum's
    /// association differs between the vector and scalar partitions (max is exact, exp and the
    /// division are per element and identical): at 2048 / 256 both add 8 terms per thread, then
    /// the same 5-step shuffle tree and warp-order walk, so the error bound is the same.
    #[allow(clippy::too_many_arguments)]
    fn row_block(
        &mut self,
        f: FunctionValue<'c>,
        softmax: bool,
        attn: Option<AttnRow>,
        (ie, x): (Elem, PointerValue<'c>),
        (oe, out): (Elem, PointerValue<'c>),
        rows: u64,
        len: u64,
    ) -> R<()> {
        let ct = self.cx.f32_type();
        let smem = self.shared_partials()?;
        let tid = self.sreg("llvm.nvvm.read.ptx.sreg.tid.x")?;
        let ntid = self.sreg("llvm.nvvm.read.ptx.sreg.ntid.x")?;
        let ctaid = self.sreg("llvm.nvvm.read.ptx.sreg.ctaid.x")?;
        let nctaid = self.sreg("llvm.nvvm.read.ptx.sreg.nctaid.x")?;
        let lane = b!(self.b.build_and(tid, self.i64(31), "lane"));
        let warp = b!(self.b.build_right_shift(tid, self.i64(5), false, "warp"));
        let nwarps = b!(self.b.build_int_add(ntid, self.i64(31), "nw"));
        let nwarps = b!(self.b.build_right_shift(nwarps, self.i64(5), false, "nw"));
        let shfl = Intrinsic::find("llvm.nvvm.shfl.sync.bfly.f32")
            .ok_or("no llvm.nvvm.shfl.sync.bfly.f32")?
            .get_declaration(self.m, &[])
            .ok_or("cannot declare shfl")?;
        let maxf = self.intrinsic("llvm.maximum", ct.into())?;
        let exp = if softmax {
            self.helper_exp()?;
            self.helper_exp_fast()?;
            Some(self.helpers[exp_helper(oe)])
        } else {
            None
        };
        // 16-byte vectors of the input: 8 × f16/bf16, 4 × f32 (softmax writes the same type).
        let w = VECTOR_BYTES * 8 / u64::from(ie.bits());
        let nvec = len / w;
        // Attention stores its f16/bf16 probabilities `w` to a (narrower) vector too.
        let vector = len.is_multiple_of(w) && nvec > 0 && (!softmax || oe == ie || attn.is_some());
        // Attention scores: scaled, and with a causal mask the keys after the row's query
        // position (`row mod q_len`) read as -inf, so they weigh exactly 0.
        let adjust = |g: &Self,
                      qpos: Option<IntValue<'c>>,
                      col: IntValue<'c>,
                      v: FloatValue<'c>|
         -> R<FloatValue<'c>> {
            let Some(a) = attn else { return Ok(v) };
            let sv = b!(g.b.build_float_mul(v, ct.const_float(a.scale), "sc"));
            let Some(qp) = qpos else { return Ok(sv) };
            let masked = b!(g.b.build_int_compare(IntPredicate::UGT, col, qp, "mask"));
            Ok(b!(g
                .b
                .build_select(masked, ct.const_float(f64::NEG_INFINITY), sv, "m"))
            .into_float_value())
        };
        // Element `k` of the row at `base`; the `w` elements of vector `vi`.
        let load1 = |g: &Self,
                     base: IntValue<'c>,
                     qpos: Option<IntValue<'c>>,
                     k: IntValue<'c>|
         -> R<FloatValue<'c>> {
            let idx = b!(g.b.build_int_add(base, k, "at"));
            let v = g.load(ie, x, idx)?;
            adjust(g, qpos, k, v)
        };
        let loadw = |g: &Self,
                     base: IntValue<'c>,
                     qpos: Option<IntValue<'c>>,
                     vi: IntValue<'c>|
         -> R<(IntValue<'c>, Vec<FloatValue<'c>>)> {
            let col = b!(g.b.build_int_mul(vi, g.i64(w), "vf"));
            let first = b!(g.b.build_int_add(base, col, "at"));
            let mut out = Vec::new();
            for (l, v) in g.load_vec(ie, x, first, w as u32)?.into_iter().enumerate() {
                let c = if attn.is_some() {
                    b!(g.b.build_int_add(col, g.i64(l as u64), "col"))
                } else {
                    col
                };
                out.push(adjust(g, qpos, c, v)?);
            }
            Ok((first, out))
        };
        // Vectors per thread that keep a softmax row in registers at `rt.launch`'s block
        // (0: the row is too long, stream it three times).
        let regs = nvec.div_ceil(crate::lower_to_rt::BLOCK as u64);
        let regs = if regs <= ROW_REG_VECTORS { regs } else { 0 };
        // Block-wide combine of one f32 per thread; every thread gets the result.
        let reduce = |g: &Self, v: FloatValue<'c>, max: bool| -> R<FloatValue<'c>> {
            let comb = |g: &Self, a: FloatValue<'c>, b: FloatValue<'c>| -> R<FloatValue<'c>> {
                if max {
                    g.call_f(maxf, &[a, b])
                } else {
                    Ok(b!(g.b.build_float_add(a, b, "r")))
                }
            };
            let mut v = v;
            let identity = if max {
                ct.const_float(f64::NEG_INFINITY)
            } else {
                ct.const_float(0.0)
            };
            for off in [16u64, 8, 4, 2, 1] {
                let mut o = g.shfl_bfly(shfl, v, off)?;
                if attn.is_some() {
                    // A partner lane past the block's last thread holds nothing (a block
                    // that is not a whole number of warps, such as the host tests' single
                    // thread): it contributes the identity.
                    let src = b!(g.b.build_xor(tid, g.i64(off), "src"));
                    let live = b!(g.b.build_int_compare(IntPredicate::ULT, src, ntid, "live"));
                    o = b!(g.b.build_select(live, o, identity, "lv")).into_float_value();
                }
                v = comb(g, v, o)?;
            }
            let wr = g.cx.append_basic_block(f, "wr");
            let join = g.cx.append_basic_block(f, "join");
            let is0 =
                b!(g.b.build_int_compare(IntPredicate::EQ, lane, g.i64(0), "l0"));
            b!(g.b.build_conditional_branch(is0, wr, join));
            g.b.position_at_end(wr);
            let p = unsafe { b!(g.b.build_in_bounds_gep(ct, smem, &[warp], "sp")) };
            b!(g.b.build_store(p, v));
            b!(g.b.build_unconditional_branch(join));
            g.b.position_at_end(join);
            g.barrier()?;
            let init = if max {
                ct.const_float(f64::NEG_INFINITY)
            } else {
                ct.const_float(0.0)
            };
            let pre = g.b.get_insert_block().ok_or("no insert block")?;
            let head = g.cx.append_basic_block(f, "whead");
            let bb = g.cx.append_basic_block(f, "wbody");
            let exit = g.cx.append_basic_block(f, "wexit");
            b!(g.b.build_unconditional_branch(head));
            g.b.position_at_end(head);
            let w = b!(g.b.build_phi(g.cx.i64_type(), "w"));
            let acc = b!(g.b.build_phi(ct, "wacc"));
            w.add_incoming(&[(&g.i64(0), pre)]);
            acc.add_incoming(&[(&init, pre)]);
            let wv = w.as_basic_value().into_int_value();
            let av = acc.as_basic_value().into_float_value();
            let c = b!(g.b.build_int_compare(IntPredicate::ULT, wv, nwarps, "c"));
            b!(g.b.build_conditional_branch(c, bb, exit));
            g.b.position_at_end(bb);
            let p = unsafe { b!(g.b.build_in_bounds_gep(ct, smem, &[wv], "sp")) };
            let pv = b!(g.b.build_load(ct, p, "pv")).into_float_value();
            let nacc = comb(g, av, pv)?;
            let next = b!(g.b.build_int_add(wv, g.i64(1), "wn"));
            w.add_incoming(&[(&next, bb)]);
            acc.add_incoming(&[(&nacc, bb)]);
            b!(g.b.build_unconditional_branch(head));
            g.b.position_at_end(exit);
            // The partials are reused by the next reduction.
            g.barrier()?;
            Ok(av)
        };
        // Per-thread strided fold over the row: scalar, elements `tid, tid + ntid, …`; vector
        // (`vec`), the `w`-element vectors `tid, tid + ntid, …`, each vector's lanes in order.
        let local = |g: &Self,
                     base: IntValue<'c>,
                     qpos: Option<IntValue<'c>>,
                     vec: bool,
                     init: FloatValue<'c>,
                     body: &dyn Fn(&Self, FloatValue<'c>, FloatValue<'c>) -> R<FloatValue<'c>>|
         -> R<FloatValue<'c>> {
            let pre = g.b.get_insert_block().ok_or("no insert block")?;
            let head = g.cx.append_basic_block(f, "lhead");
            let bb = g.cx.append_basic_block(f, "lbody");
            let exit = g.cx.append_basic_block(f, "lexit");
            b!(g.b.build_unconditional_branch(head));
            g.b.position_at_end(head);
            let k = b!(g.b.build_phi(g.cx.i64_type(), "k"));
            let acc = b!(g.b.build_phi(ct, "acc"));
            k.add_incoming(&[(&tid, pre)]);
            acc.add_incoming(&[(&init, pre)]);
            let kv = k.as_basic_value().into_int_value();
            let av = acc.as_basic_value().into_float_value();
            let limit = g.i64(if vec { nvec } else { len });
            // Causal: nothing past the row's query position is read (it is masked).
            let limit = match qpos {
                Some(qp) => {
                    let seen = if vec {
                        let q = b!(g.b.build_int_unsigned_div(qp, g.i64(w), "qv"));
                        b!(g.b.build_int_add(q, g.i64(1), "seen"))
                    } else {
                        b!(g.b.build_int_add(qp, g.i64(1), "seen"))
                    };
                    let lt = b!(g.b.build_int_compare(IntPredicate::ULT, seen, limit, "lt"));
                    b!(g.b.build_select(lt, seen, limit, "lim")).into_int_value()
                }
                None => limit,
            };
            let c = b!(g.b.build_int_compare(IntPredicate::ULT, kv, limit, "c"));
            b!(g.b.build_conditional_branch(c, bb, exit));
            g.b.position_at_end(bb);
            let mut nacc = av;
            if vec {
                for v in loadw(g, base, qpos, kv)?.1 {
                    nacc = body(g, nacc, v)?;
                }
            } else {
                let v = load1(g, base, qpos, kv)?;
                nacc = body(g, av, v)?;
            }
            let next = b!(g.b.build_int_add(kv, ntid, "kn"));
            let latch = g.b.get_insert_block().ok_or("no insert block")?;
            k.add_incoming(&[(&next, latch)]);
            acc.add_incoming(&[(&nacc, latch)]);
            b!(g.b.build_unconditional_branch(head));
            g.b.position_at_end(exit);
            Ok(av)
        };
        let select = |g: &Self,
                      c: IntValue<'c>,
                      a: FloatValue<'c>,
                      b: FloatValue<'c>|
         -> R<FloatValue<'c>> {
            Ok(b!(g.b.build_select(c, a, b, "sel")).into_float_value())
        };
        // `if c { body }`.
        let when = |g: &Self, c: IntValue<'c>, body: &dyn Fn(&Self) -> R<()>| -> R<()> {
            let then = g.cx.append_basic_block(f, "then");
            let join = g.cx.append_basic_block(f, "then.j");
            b!(g.b.build_conditional_branch(c, then, join));
            g.b.position_at_end(then);
            body(g)?;
            b!(g.b.build_unconditional_branch(join));
            g.b.position_at_end(join);
            Ok(())
        };
        // One row. `vec`: 16-byte vector loads/stores (the caller checked alignment and
        // `len mod w == 0`); `regs`: softmax keeps the row in registers, `regs` vectors per
        // thread (the caller checked `nvec ≤ regs · ntid`), so global memory is read once.
        let row_body = |g: &Self, row: IntValue<'c>, vec: bool, regs: u64| -> R<()> {
            let base = b!(g.b.build_int_mul(row, g.i64(len), "base"));
            let qpos = match attn.and_then(|a| a.causal_q_len) {
                Some(ql) => Some(b!(g.b.build_int_unsigned_rem(row, g.i64(ql), "qpos"))),
                None => None,
            };
            let Some(exp) = exp else {
                let s = local(g, base, qpos, vec, ct.const_float(0.0), &|g, a, v| {
                    Ok(b!(g.b.build_float_add(a, v, "acc")))
                })?;
                let s = reduce(g, s, false)?;
                let t0 = b!(g.b.build_int_compare(IntPredicate::EQ, tid, g.i64(0), "t0"));
                return when(g, t0, &|g| g.store(oe, out, row, s));
            };
            if regs > 0 {
                // Vector j of this thread is `tid + j·ntid`; an index past the row is clamped
                // to the last vector (an in-bounds load) and masked out of the folds by a
                // select, so the fold order equals the streaming path's.
                let mut slots = Vec::new();
                for j in 0..regs {
                    let jn = b!(g.b.build_int_mul(ntid, g.i64(j), "jn"));
                    let vi = b!(g.b.build_int_add(tid, jn, "vi"));
                    let valid =
                        b!(g.b.build_int_compare(IntPredicate::ULT, vi, g.i64(nvec), "ok"));
                    let vi =
                        b!(g.b.build_select(valid, vi, g.i64(nvec - 1), "vc")).into_int_value();
                    let Some(qp) = qpos else {
                        let (first, lanes) = loadw(g, base, qpos, vi)?;
                        slots.push((valid, first, lanes));
                        continue;
                    };
                    // Causal: a vector wholly past the query position is not read (vector 0
                    // is, a cached load); its lanes are -inf, so it stores zeros.
                    let lo = b!(g.b.build_int_mul(vi, g.i64(w), "lo"));
                    let live = b!(g.b.build_int_compare(IntPredicate::ULE, lo, qp, "live"));
                    let src = b!(g.b.build_select(live, vi, g.i64(0), "src")).into_int_value();
                    let (_, lanes) = loadw(g, base, qpos, src)?;
                    let neg = ct.const_float(f64::NEG_INFINITY);
                    let mut masked = Vec::new();
                    for v in lanes {
                        masked.push(b!(g.b.build_select(live, v, neg, "lv")).into_float_value());
                    }
                    let first = b!(g.b.build_int_add(base, lo, "at"));
                    slots.push((valid, first, masked));
                }
                let mut m = ct.const_float(f64::NEG_INFINITY);
                for (valid, _, lanes) in &slots {
                    for &v in lanes {
                        let n = g.call_f(maxf, &[m, v])?;
                        m = select(g, *valid, n, m)?;
                    }
                }
                let m = reduce(g, m, true)?;
                let mut s = ct.const_float(0.0);
                let mut exps = Vec::new();
                for (valid, _, lanes) in &slots {
                    let mut es = Vec::new();
                    for &v in lanes {
                        let d = b!(g.b.build_float_sub(v, m, "d"));
                        let ev = g.call_f(exp, &[d])?;
                        let n = b!(g.b.build_float_add(s, ev, "acc"));
                        s = select(g, *valid, n, s)?;
                        es.push(ev);
                    }
                    exps.push(es);
                }
                let s = reduce(g, s, false)?;
                let quot = g.quotient_by(oe, s)?;
                for ((valid, first, _), es) in slots.iter().zip(&exps) {
                    when(g, *valid, &|g| {
                        let mut q = Vec::new();
                        for &ev in es {
                            q.push(quot(g, ev)?);
                        }
                        g.store_vec(oe, out, *first, &q)
                    })?;
                }
                return Ok(());
            }
            let m = local(
                g,
                base,
                qpos,
                vec,
                ct.const_float(f64::NEG_INFINITY),
                &|g, a, v| g.call_f(maxf, &[a, v]),
            )?;
            let m = reduce(g, m, true)?;
            let s = local(g, base, qpos, vec, ct.const_float(0.0), &|g, a, v| {
                let d = b!(g.b.build_float_sub(v, m, "d"));
                let ev = g.call_f(exp, &[d])?;
                Ok(b!(g.b.build_float_add(a, ev, "acc")))
            })?;
            let s = reduce(g, s, false)?;
            let by_sum = g.quotient_by(oe, s)?;
            let quot = |g: &Self, v: FloatValue<'c>| -> R<FloatValue<'c>> {
                let d = b!(g.b.build_float_sub(v, m, "d"));
                let ev = g.call_f(exp, &[d])?;
                by_sum(g, ev)
            };
            if vec {
                return g.counted(f, tid, g.i64(nvec), ntid, |g, k| {
                    let (first, lanes) = loadw(g, base, qpos, k)?;
                    let mut q = Vec::new();
                    for v in lanes {
                        q.push(quot(g, v)?);
                    }
                    g.store_vec(oe, out, first, &q)
                });
            }
            g.counted(f, tid, g.i64(len), ntid, |g, k| {
                let idx = b!(g.b.build_int_add(base, k, "at"));
                let v = load1(g, base, qpos, k)?;
                g.store(oe, out, idx, quot(g, v)?)
            })
        };
        let rows_loop = |g: &Self, vec: bool, regs: u64| -> R<()> {
            g.counted(f, ctaid, g.i64(rows), nctaid, |g, row| {
                row_body(g, row, vec, regs)
            })
        };
        if !vector {
            return rows_loop(self, false, 0);
        }
        // Vectors when the row bases are 16-byte aligned: `len` is a multiple of `w`, so the
        // buffers' base pointers decide (a pool view may sit at any offset).
        let i64t = self.cx.i64_type();
        let mut low = b!(self.b.build_ptr_to_int(x, i64t, "pi"));
        if softmax {
            let po = b!(self.b.build_ptr_to_int(out, i64t, "pi"));
            low = b!(self.b.build_or(low, po, "low"));
        }
        let low = b!(self.b.build_and(low, self.i64(VECTOR_BYTES - 1), "low"));
        let aligned = b!(self
            .b
            .build_int_compare(IntPredicate::EQ, low, self.i64(0), "aligned"));
        let vec_bb = self.cx.append_basic_block(f, "rvec");
        let sc_bb = self.cx.append_basic_block(f, "rscalar");
        let done = self.cx.append_basic_block(f, "rdone");
        b!(self.b.build_conditional_branch(aligned, vec_bb, sc_bb));
        self.b.position_at_end(vec_bb);
        if softmax && regs > 0 {
            // The row fits in `regs` vectors per thread (always at `rt.launch`'s block).
            let cap = b!(self.b.build_int_mul(ntid, self.i64(regs), "cap"));
            let fits = b!(self
                .b
                .build_int_compare(IntPredicate::ULE, self.i64(nvec), cap, "fits"));
            let reg_bb = self.cx.append_basic_block(f, "rregs");
            let st_bb = self.cx.append_basic_block(f, "rstream");
            b!(self.b.build_conditional_branch(fits, reg_bb, st_bb));
            self.b.position_at_end(reg_bb);
            rows_loop(self, true, regs)?;
            b!(self.b.build_unconditional_branch(done));
            self.b.position_at_end(st_bb);
        }
        rows_loop(self, true, 0)?;
        b!(self.b.build_unconditional_branch(done));
        self.b.position_at_end(sc_bb);
        rows_loop(self, false, 0)?;
        b!(self.b.build_unconditional_branch(done));
        self.b.position_at_end(done);
        Ok(())
    }

    /// Loads the `w` elements `ptr[first..first + w]` of `e` with one 16-byte-aligned vector
    /// load (`first` a multiple of `w`, `ptr` 16-byte aligned) and returns them as compute
    /// values, lane by lane.
    fn load_vec(
        &self,
        e: Elem,
        ptr: PointerValue<'c>,
        first: IntValue<'c>,
        w: u32,
    ) -> R<Vec<FloatValue<'c>>> {
        let st = self.storage_ty(e);
        let p = unsafe { b!(self.b.build_in_bounds_gep(st, ptr, &[first], "vp")) };
        let v = b!(self.b.build_load(st.vec_type(w), p, "vld"));
        if let Some(ins) = v.as_instruction_value() {
            ins.set_alignment(VECTOR_BYTES as u32)
                .map_err(|e| e.to_string())?;
        }
        let v = v.into_vector_value();
        (0..w)
            .map(|l| {
                let lane = self.cx.i32_type().const_int(u64::from(l), false);
                let x = b!(self.b.build_extract_element(v, lane, "x")).into_float_value();
                self.convert(x, self.compute_ty(e))
            })
            .collect()
    }

    /// Stores `vals` (compute values, each rounded once to `e`) as `ptr[first..]` with one
    /// 16-byte-aligned vector store.
    fn store_vec(
        &self,
        e: Elem,
        ptr: PointerValue<'c>,
        first: IntValue<'c>,
        vals: &[FloatValue<'c>],
    ) -> R<()> {
        let st = self.storage_ty(e);
        let mut acc = st.vec_type(vals.len() as u32).get_poison();
        for (l, v) in vals.iter().enumerate() {
            let lane = self.cx.i32_type().const_int(l as u64, false);
            let v = self.convert(*v, st)?;
            acc = b!(self.b.build_insert_element(acc, v, lane, "acc"));
        }
        let p = unsafe { b!(self.b.build_in_bounds_gep(st, ptr, &[first], "vo")) };
        let s = b!(self.b.build_store(p, acc));
        // 16 bytes, or fewer where narrower results are stored (attention probabilities).
        let bytes = vals.len() as u64 * u64::from(float_width(self.cx, st)) / 8;
        s.set_alignment(bytes.min(VECTOR_BYTES) as u32)
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// The module's `[32 x float]` shared-memory scratch for block reductions.
    fn shared_partials(&self) -> R<PointerValue<'c>> {
        const NAME: &str = "__commlir_partials";
        if let Some(g) = self.m.get_global(NAME) {
            return Ok(g.as_pointer_value());
        }
        let ty = self.cx.f32_type().array_type(32);
        let g = self.m.add_global(ty, Some(AddressSpace::from(3u16)), NAME);
        g.set_linkage(Linkage::Internal);
        g.set_initializer(&ty.get_poison());
        g.set_alignment(4);
        Ok(g.as_pointer_value())
    }

    /// `bar.sync 0`.
    fn barrier(&self) -> R<()> {
        if let Some(i) = Intrinsic::find("llvm.nvvm.barrier0") {
            let d = i
                .get_declaration(self.m, &[])
                .ok_or("cannot declare barrier")?;
            b!(self.b.build_call(d, &[], ""));
            return Ok(());
        }
        let i = Intrinsic::find("llvm.nvvm.barrier.cta.sync.aligned.all")
            .ok_or("no barrier intrinsic")?;
        let d = i
            .get_declaration(self.m, &[])
            .ok_or("cannot declare barrier")?;
        b!(self
            .b
            .build_call(d, &[self.cx.i32_type().const_zero().into()], ""));
        Ok(())
    }

    /// `rt.pack_chunks` / `rt.unpack_chunks`: pure index permutations, one thread per output
    /// element, source index by mixed-radix arithmetic on compile-time shapes.
    /// `rt.attention_softmax`: the softmax row kernel with the scores scaled and, causal, the
    /// keys after each row's query position masked.
    fn attention_softmax(
        &mut self,
        ctx: &IrContext,
        f: FunctionValue<'c>,
        op: OpId,
        args: &[Value],
    ) -> R<()> {
        let (Kind::Float(ie), ishape) = self.kind_of(ctx, ctx.operand(op, 0))? else {
            return Err("attention scores must be floating-point".into());
        };
        let (Kind::Float(oe), _) = self.kind_of(ctx, ctx.result(op, 0))? else {
            return Err("attention probabilities must be floating-point".into());
        };
        if self.compute_ty(ie) != self.cx.f32_type() {
            return Err("attention kernels take f32 scores (f16, bf16 or f32 attention)".into());
        }
        let [rows, len] = ishape[..] else {
            return Err("attention scores must be a matrix".into());
        };
        let scale = ctx
            .inherent_attr(op, "scale")
            .and_then(|a| ctx.attr_as_f64(a))
            .ok_or("requires 'scale'")?;
        let q_len = ctx
            .inherent_attr(op, "q_len")
            .and_then(|a| ctx.attr_as_i64(a))
            .filter(|q| *q > 0)
            .ok_or("requires a positive 'q_len'")?;
        let attn = AttnRow {
            // The sim multiplies by the f32 value of the scale.
            scale: f64::from(scale as f32),
            causal_q_len: ctx
                .inherent_attr(op, "causal")
                .is_some()
                .then_some(q_len as u64),
        };
        // The exp helpers are functions of their own: define them before the kernel's body.
        self.helper_exp()?;
        self.helper_exp_fast()?;
        self.b
            .position_at_end(f.get_first_basic_block().ok_or("no entry")?);
        let x = self.param(f, 0)?;
        let out = self.param(f, args.len())?;
        self.row_block(
            f,
            true,
            Some(attn),
            (ie, x),
            (oe, out),
            rows.max(0) as u64,
            len.max(0) as u64,
        )
    }

    fn chunks(&mut self, ctx: &IrContext, f: FunctionValue<'c>, op: OpId, args: &[Value]) -> R<()> {
        let (e, ishape) = self.kind_of(ctx, ctx.operand(op, 0))?;
        let (_, oshape) = self.kind_of(ctx, ctx.result(op, 0))?;
        let dim = ctx
            .inherent_attr(op, "dim")
            .and_then(|a| ctx.attr_as_i64(a))
            .ok_or("requires 'dim'")?
            .max(0) as usize;
        let pack = ctx.op_name(op) == "rt.pack_chunks";
        let x = self.param(
            f,
            args.iter()
                .position(|a| *a == ctx.operand(op, 0))
                .ok_or("operand not in kernel")?,
        )?;
        let out = self.param(f, args.len())?;
        let it = self.int_ty(e.bits());
        let n: i64 = oshape.iter().product();
        let u = |v: i64| v.max(0) as u64;
        // The chunk shape: the packed layout is [G, chunk...].
        let chunk: Vec<i64> = if pack {
            oshape[1..].to_vec()
        } else {
            ishape[1..].to_vec()
        };
        let chunk_numel: u64 = chunk.iter().map(|d| u(*d)).product();
        let strides = |shape: &[i64]| -> Vec<u64> {
            let mut s = vec![1u64; shape.len()];
            for i in (0..shape.len().saturating_sub(1)).rev() {
                s[i] = s[i + 1] * u(shape[i + 1]);
            }
            s
        };
        let cstr = strides(&chunk);
        // Strides of the unpacked side (the input of pack, the result of unpack).
        let fstr = if pack {
            strides(&ishape)
        } else {
            strides(&oshape)
        };
        let cd = u(chunk[dim]);
        self.grid_loop(f, u(n), |gb, j| {
            if pack {
                // j = (blk, c...) in [G, chunk]; source coordinate c[dim] += blk·cd.
                let blk = b!(gb
                    .b
                    .build_int_unsigned_div(j, gb.i64(chunk_numel.max(1)), "blk"));
                let mut rem = b!(gb
                    .b
                    .build_int_unsigned_rem(j, gb.i64(chunk_numel.max(1)), "rem"));
                let mut src = gb.i64(0);
                for (k, s) in cstr.iter().enumerate() {
                    let c = b!(gb.b.build_int_unsigned_div(rem, gb.i64(*s), "c"));
                    rem = b!(gb.b.build_int_unsigned_rem(rem, gb.i64(*s), "r"));
                    let c = if k == dim {
                        let off = b!(gb.b.build_int_mul(blk, gb.i64(cd), "off"));
                        b!(gb.b.build_int_add(c, off, "c"))
                    } else {
                        c
                    };
                    let t = b!(gb.b.build_int_mul(c, gb.i64(fstr[k]), "t"));
                    src = b!(gb.b.build_int_add(src, t, "src"));
                }
                gb.copy_elem(it, x, src, out, j)
            } else {
                // j = coordinates o of the result; block = o[dim] / cd, c[dim] = o[dim] % cd.
                let mut rem = j;
                let mut src = gb.i64(0);
                for (k, s) in fstr.iter().enumerate() {
                    let c = b!(gb.b.build_int_unsigned_div(rem, gb.i64(*s), "o"));
                    rem = b!(gb.b.build_int_unsigned_rem(rem, gb.i64(*s), "r"));
                    let c = if k == dim {
                        let blk = b!(gb.b.build_int_unsigned_div(c, gb.i64(cd.max(1)), "blk"));
                        let base = b!(gb.b.build_int_mul(blk, gb.i64(chunk_numel), "base"));
                        src = b!(gb.b.build_int_add(src, base, "src"));
                        b!(gb.b.build_int_unsigned_rem(c, gb.i64(cd.max(1)), "c"))
                    } else {
                        c
                    };
                    let t = b!(gb.b.build_int_mul(c, gb.i64(cstr[k]), "t"));
                    src = b!(gb.b.build_int_add(src, t, "src"));
                }
                gb.copy_elem(it, x, src, out, j)
            }
        })
    }

    /// A plain copy of `n` elements of `e` (param 0 to param 1), bits unchanged: when both
    /// pointers are 16-byte aligned, a grid-stride loop of 16-byte vector loads and stores
    /// (`ld.global.v4.u32` / `st.global.v4.u32`) and a grid-stride tail of single elements;
    /// otherwise one element per iteration. Any grid is correct; `rt.launch` sizes it for
    /// one 16-byte vector per thread ([`COPY_VECTOR_BYTES`]).
    fn copy(&self, f: FunctionValue<'c>, bits: u32, n: u64) -> R<()> {
        let (src, dst) = (self.param(f, 0)?, self.param(f, 1)?);
        let it = self.int_ty(bits);
        let per = COPY_VECTOR_BYTES / (u64::from(bits) / 8);
        let nv = n / per;
        let i64t = self.cx.i64_type();
        let si = b!(self.b.build_ptr_to_int(src, i64t, "si"));
        let di = b!(self.b.build_ptr_to_int(dst, i64t, "di"));
        let or = b!(self.b.build_or(si, di, "or"));
        let low = b!(self.b.build_and(or, self.i64(COPY_VECTOR_BYTES - 1), "low"));
        let aligned = b!(self
            .b
            .build_int_compare(IntPredicate::EQ, low, self.i64(0), "aligned"));
        let vec_bb = self.cx.append_basic_block(f, "vec");
        let sc_bb = self.cx.append_basic_block(f, "scalar");
        let done = self.cx.append_basic_block(f, "done");
        b!(self.b.build_conditional_branch(aligned, vec_bb, sc_bb));
        let tid = |g: &Self| -> R<(IntValue<'c>, IntValue<'c>)> {
            let t = g.sreg("llvm.nvvm.read.ptx.sreg.tid.x")?;
            let c = g.sreg("llvm.nvvm.read.ptx.sreg.ctaid.x")?;
            let nt = g.sreg("llvm.nvvm.read.ptx.sreg.ntid.x")?;
            let nc = g.sreg("llvm.nvvm.read.ptx.sreg.nctaid.x")?;
            let base = b!(g.b.build_int_mul(c, nt, "base"));
            let gid = b!(g.b.build_int_add(base, t, "gid"));
            let stride = b!(g.b.build_int_mul(nc, nt, "stride"));
            Ok((gid, stride))
        };
        let scalar = |g: &Self, gid: IntValue<'c>, stride: IntValue<'c>, from: u64| -> R<()> {
            let start = b!(g.b.build_int_add(gid, g.i64(from), "start"));
            g.counted(f, start, g.i64(n), stride, |g, i| {
                g.copy_elem(it, src, i, dst, i)
            })
        };
        // Aligned: 16-byte vectors, then the tail.
        self.b.position_at_end(vec_bb);
        let (gid, stride) = tid(self)?;
        let vt = self.cx.i32_type().vec_type(4);
        self.counted(f, gid, self.i64(nv), stride, |g, i| {
            let sp = unsafe { b!(g.b.build_in_bounds_gep(vt, src, &[i], "vsp")) };
            let dp = unsafe { b!(g.b.build_in_bounds_gep(vt, dst, &[i], "vdp")) };
            g.copy16(sp, dp)
        })?;
        if nv * per < n {
            scalar(self, gid, stride, nv * per)?;
        }
        b!(self.b.build_unconditional_branch(done));
        // Unaligned: element by element.
        self.b.position_at_end(sc_bb);
        let (gid, stride) = tid(self)?;
        scalar(self, gid, stride, 0)?;
        b!(self.b.build_unconditional_branch(done));
        self.b.position_at_end(done);
        Ok(())
    }

    /// Copies one element's bits (data movement never converts, so NaN payloads survive).
    /// Copies the 16 bytes at `sp` to `dp` (both 16-byte aligned) with one vector load and
    /// one vector store.
    fn copy16(&self, sp: PointerValue<'c>, dp: PointerValue<'c>) -> R<()> {
        let vt = self.cx.i32_type().vec_type(4);
        let v = b!(self.b.build_load(vt, sp, "v16"));
        if let Some(ins) = v.as_instruction_value() {
            ins.set_alignment(VECTOR_BYTES as u32)
                .map_err(|e| e.to_string())?;
        }
        let st = b!(self.b.build_store(dp, v));
        st.set_alignment(VECTOR_BYTES as u32)
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// `shfl.sync.bfly` of `v` with the lane `off` away (`shfl` the f32 intrinsic), full warp.
    fn shfl_bfly(&self, shfl: FunctionValue<'c>, v: FloatValue<'c>, off: u64) -> R<FloatValue<'c>> {
        let i32t = self.cx.i32_type();
        let c = b!(self.b.build_call(
            shfl,
            &[
                i32t.const_int(0xffff_ffff, false).into(),
                v.into(),
                i32t.const_int(off, false).into(),
                i32t.const_int(31, false).into(),
            ],
            "sh"
        ));
        Ok(c.try_as_basic_value()
            .basic()
            .ok_or("shfl without value")?
            .into_float_value())
    }

    fn copy_elem(
        &self,
        it: inkwell::types::IntType<'c>,
        src: PointerValue<'c>,
        si: IntValue<'c>,
        dst: PointerValue<'c>,
        di: IntValue<'c>,
    ) -> R<()> {
        let sp = unsafe { b!(self.b.build_in_bounds_gep(it, src, &[si], "sp")) };
        let v = b!(self.b.build_load(it, sp, "v"));
        let dp = unsafe { b!(self.b.build_in_bounds_gep(it, dst, &[di], "dp")) };
        b!(self.b.build_store(dp, v));
        Ok(())
    }

    /// exp's range reduction for `x` in the type of `k`: `x` clamped to `[k.lo, k.hi]` (so `n`
    /// stays small; out-of-range inputs are fixed up by [`Self::exp_fixup`]), `n = rint(x·log2 e)`
    /// and `r = x − n·ln2` in two FMAs, ln2 split in a part whose product with `n` is exact
    /// and the rest, so |r| ≤ ln2/2. Returns `(n, r)`.
    fn exp_reduce(&self, x: FloatValue<'c>, k: &ExpRange) -> R<(FloatValue<'c>, FloatValue<'c>)> {
        let t = x.get_type();
        let c = |v: f64| t.const_float(v);
        let fma = self.intrinsic("llvm.fma", t.into())?;
        let minf = self.intrinsic("llvm.minnum", t.into())?;
        let maxf = self.intrinsic("llvm.maxnum", t.into())?;
        let rint = self.intrinsic("llvm.rint", t.into())?;
        let xc = self.call_f(maxf, &[x, c(k.lo)])?;
        let xc = self.call_f(minf, &[xc, c(k.hi)])?;
        let xl = b!(self
            .b
            .build_float_mul(xc, c(std::f64::consts::LOG2_E), "xl"));
        let n = self.call_f(rint, &[xl])?;
        let r = self.call_f(fma, &[n, c(-k.ln2_hi), xc])?;
        let r = self.call_f(fma, &[n, c(-k.ln2_lo), r])?;
        Ok((n, r))
    }

    /// `p · 2^n` by `llvm.ldexp` (`n` a whole float value).
    fn ldexp(&self, p: FloatValue<'c>, n: FloatValue<'c>) -> R<FloatValue<'c>> {
        let i32t = self.cx.i32_type();
        let ldexp = Intrinsic::find("llvm.ldexp")
            .ok_or("no llvm.ldexp")?
            .get_declaration(self.m, &[p.get_type().into(), i32t.into()])
            .ok_or("cannot declare llvm.ldexp")?;
        let ni = b!(self.b.build_float_to_signed_int(n, i32t, "ni"));
        let call = b!(self.b.build_call(ldexp, &[p.into(), ni.into()], "y"));
        Ok(call
            .try_as_basic_value()
            .basic()
            .ok_or("ldexp without value")?
            .into_float_value())
    }

    /// exp's result `y` for input `x`: +inf above `k.overflow`, 0 below `k.underflow` (where
    /// the clamped reduction no longer stands for `x`).
    fn exp_fixup(&self, x: FloatValue<'c>, y: FloatValue<'c>, k: &ExpRange) -> R<FloatValue<'c>> {
        let c = |v: f64| x.get_type().const_float(v);
        let big = b!(self
            .b
            .build_float_compare(FloatPredicate::OGT, x, c(k.overflow), "big"));
        let y = b!(self.b.build_select(big, c(f64::INFINITY), y, "y")).into_float_value();
        let small = b!(self
            .b
            .build_float_compare(FloatPredicate::OLT, x, c(k.underflow), "small"));
        Ok(b!(self.b.build_select(small, c(0.0), y, "y")).into_float_value())
    }

    /// tanh's odd Taylor polynomial in f32 for |x| < 0.25:
    /// `x + x³·(−1/3 + x²·(2/15 + x²·(−17/315 + x²·62/2835)))`.
    fn tanh_small_f32(&self, x: FloatValue<'c>) -> R<FloatValue<'c>> {
        let t = x.get_type();
        let c = |v: f64| t.const_float(v);
        let fma = self.intrinsic("llvm.fma", t.into())?;
        let x2 = b!(self.b.build_float_mul(x, x, "x2"));
        let mut p = c(62.0 / 2835.0);
        for coef in [-17.0 / 315.0, 2.0 / 15.0, -1.0 / 3.0] {
            p = self.call_f(fma, &[p, x2, c(coef)])?;
        }
        let x3 = b!(self.b.build_float_mul(x2, x, "x3"));
        self.call_f(fma, &[x3, p, x])
    }

    /// `float __commlir_expf(float)`: exp by range reduction `x = n·ln2 + r`, |r| ≤ ln2/2,
    /// a degree-7 Taylor polynomial for e^r (error < 1e-8 relative) and scaling by 2^n.
    fn helper_exp(&mut self) -> R<FunctionValue<'c>> {
        self.unary_f32_helper("exp", "__commlir_expf", |g, x| {
            let t = g.cx.f32_type();
            let c = |v: f64| t.const_float(v);
            let fma = g.intrinsic("llvm.fma", t.into())?;
            let (n, r) = g.exp_reduce(x, &EXP_F32)?;
            let mut p = c(1.0 / 5040.0);
            for coef in [
                1.0 / 720.0,
                1.0 / 120.0,
                1.0 / 24.0,
                1.0 / 6.0,
                0.5,
                1.0,
                1.0,
            ] {
                p = g.call_f(fma, &[p, r, c(coef)])?;
            }
            let y = g.ldexp(p, n)?;
            g.exp_fixup(x, y, &EXP_F32)
        })
    }

    /// `float __commlir_tanhf(float)`: an odd Taylor polynomial below |x| = 0.25, else
    /// `sign(x)·(1 − 2/(e^{2|x|} + 1))`, which saturates to ±1 for large |x|.
    fn helper_tanh(&mut self) -> R<FunctionValue<'c>> {
        let exp = self.helper_exp()?;
        self.unary_f32_helper("tanh", "__commlir_tanhf", |g, x| {
            let t = g.cx.f32_type();
            let c = |v: f64| t.const_float(v);
            let fabs = g.intrinsic("llvm.fabs", t.into())?;
            let copysign = g.intrinsic("llvm.copysign", t.into())?;
            let a = g.call_f(fabs, &[x])?;
            let small = g.tanh_small_f32(x)?;
            let two_a = b!(g.b.build_float_mul(a, c(2.0), "2a"));
            let e2 = g.call_f(exp, &[two_a])?;
            let d = b!(g.b.build_float_add(e2, c(1.0), "d"));
            let q = b!(g.b.build_float_div(c(2.0), d, "q"));
            let big = b!(g.b.build_float_sub(c(1.0), q, "big"));
            let big = g.call_f(copysign, &[big, x])?;
            let is_small =
                b!(g.b.build_float_compare(FloatPredicate::OLT, a, c(0.25), "s"));
            let y = b!(g.b.build_select(is_small, small, big, "y")).into_float_value();
            Ok(y)
        })
    }

    /// `float __commlir_expf_fast(float)`, the exp of narrow (bf16/f16) results: the same
    /// range reduction as `__commlir_expf` (`x = n·ln2 + r`, |r| ≤ ln2/2, exact in two FMAs),
    /// then `e^r = 2^(r·log2 e)` by the hardware `ex2.approx.f32` (max relative error 2^-22)
    /// instead of the degree-7 polynomial, and the scaling by `2^n` as two exact multiplies by
    /// powers of two built from their bits (`n = h + l`, both in [-75, 64], so the first
    /// product stays normal and only the second rounds, as `ldexp` would). About 2^-21
    /// relative in all: far below half an ulp of bf16 (2^-9) or f16 (2^-12), so it rounds to
    /// the same narrow value as an exact exp except within 2^-21 of a rounding boundary.
    fn helper_exp_fast(&mut self) -> R<FunctionValue<'c>> {
        self.unary_f32_helper("exp_fast", "__commlir_expf_fast", |g, x| {
            let t = g.cx.f32_type();
            let i32t = g.cx.i32_type();
            let c = |v: f64| t.const_float(v);
            let ex2 = g.intrinsic("llvm.nvvm.ex2.approx", t.into())?;
            let (n, r) = g.exp_reduce(x, &EXP_F32)?;
            let rl = b!(g.b.build_float_mul(r, c(std::f64::consts::LOG2_E), "rl"));
            let p = g.call_f(ex2, &[rl])?;
            let ni = b!(g.b.build_float_to_signed_int(n, i32t, "ni"));
            let h =
                b!(g.b.build_right_shift(ni, i32t.const_int(1, false), true, "h"));
            let l = b!(g.b.build_int_sub(ni, h, "l"));
            let pow2 = |g: &Self, k: IntValue<'c>| -> R<FloatValue<'c>> {
                let biased = b!(g.b.build_int_add(k, i32t.const_int(127, false), "eb"));
                let bits =
                    b!(g.b.build_left_shift(biased, i32t.const_int(23, false), "eb"));
                Ok(b!(g.b.build_bit_cast(bits, t, "p2")).into_float_value())
            };
            let (sh, sl) = (pow2(g, h)?, pow2(g, l)?);
            let y = b!(g.b.build_float_mul(p, sh, "y"));
            let y = b!(g.b.build_float_mul(y, sl, "y"));
            g.exp_fixup(x, y, &EXP_F32)
        })
    }

    /// `float __commlir_tanhf_fast(float)`, the tanh of narrow (bf16/f16) results: the odd
    /// polynomial of `__commlir_tanhf` below |x| = 0.25, else
    /// `sign(x)·(1 − 2·rcp(2^(2|x|·log2 e) + 1))` with the hardware `ex2.approx.f32` and
    /// `rcp.approx.ftz.f32` (no range reduction: an error in `2|x|·log2 e` scales `e^{2|x|}`,
    /// whose weight in the result shrinks as fast as it grows). At most ~2^-20 relative (worst
    /// just above 0.25, where `1 − q` cancels), against 2^-9 for half an ulp of bf16;
    /// saturates to ±1 (`ex2` gives +inf, `rcp` of it 0).
    fn helper_tanh_fast(&mut self) -> R<FunctionValue<'c>> {
        self.unary_f32_helper("tanh_fast", "__commlir_tanhf_fast", |g, x| {
            let t = g.cx.f32_type();
            let c = |v: f64| t.const_float(v);
            let fma = g.intrinsic("llvm.fma", t.into())?;
            let fabs = g.intrinsic("llvm.fabs", t.into())?;
            let copysign = g.intrinsic("llvm.copysign", t.into())?;
            let ex2 = g.intrinsic("llvm.nvvm.ex2.approx", t.into())?;
            let rcp = g.intrinsic("llvm.nvvm.rcp.approx.ftz.f", t.into())?;
            let a = g.call_f(fabs, &[x])?;
            let small = g.tanh_small_f32(x)?;
            let k =
                b!(g.b.build_float_mul(a, c(2.0 * std::f64::consts::LOG2_E), "k"));
            let e2 = g.call_f(ex2, &[k])?;
            let d = b!(g.b.build_float_add(e2, c(1.0), "d"));
            let r = g.call_f(rcp, &[d])?;
            let big = g.call_f(fma, &[r, c(-2.0), c(1.0)])?;
            let big = g.call_f(copysign, &[big, x])?;
            let is_small =
                b!(g.b.build_float_compare(FloatPredicate::OLT, a, c(0.25), "s"));
            let y = b!(g.b.build_select(is_small, small, big, "y")).into_float_value();
            Ok(y)
        })
    }

    /// `double __commlir_exp(double)`, for f64 results: `x = n·ln2 + r` with fdlibm's split of
    /// ln2 (`n·ln2_hi` exact for |n| < 2^11), |r| ≤ ln2/2, a degree-13 Taylor polynomial for
    /// e^r (truncation below 5e-18 relative), `ldexp`; ±inf / 0 outside the finite range.
    fn helper_exp64(&mut self) -> R<FunctionValue<'c>> {
        let t = self.cx.f64_type();
        self.unary_helper("exp64", "__commlir_exp", t, |g, x| {
            let c = |v: f64| t.const_float(v);
            let fma = g.intrinsic("llvm.fma", t.into())?;
            let (n, r) = g.exp_reduce(x, &EXP_F64)?;
            // 1/13!, 1/12!, ..., 1/1!, 1/0!
            let mut fact = [1.0f64; 14];
            for k in 1..14 {
                fact[k] = fact[k - 1] * k as f64;
            }
            let mut p = c(1.0 / fact[13]);
            for k in (0..13).rev() {
                p = g.call_f(fma, &[p, r, c(1.0 / fact[k])])?;
            }
            let y = g.ldexp(p, n)?;
            g.exp_fixup(x, y, &EXP_F64)
        })
    }

    /// `double __commlir_tanh(double)`, for f64 results: below |x| = 0.25,
    /// `m / (m + 2)` with `m = e^{2|x|} − 1` from its Taylor series (degree 16 in `2|x|`, no
    /// cancellation); else `1 − 2/(e^{2|x|} + 1)` through `__commlir_exp`; the sign of `x`.
    fn helper_tanh64(&mut self) -> R<FunctionValue<'c>> {
        let exp = self.helper_exp64()?;
        let t = self.cx.f64_type();
        self.unary_helper("tanh64", "__commlir_tanh", t, |g, x| {
            let c = |v: f64| t.const_float(v);
            let fma = g.intrinsic("llvm.fma", t.into())?;
            let fabs = g.intrinsic("llvm.fabs", t.into())?;
            let copysign = g.intrinsic("llvm.copysign", t.into())?;
            let a = g.call_f(fabs, &[x])?;
            let y = b!(g.b.build_float_mul(a, c(2.0), "y"));
            // e^y − 1 = y·(1 + y/2! + y²/3! + … + y^15/16!)
            let mut fact = [1.0f64; 17];
            for k in 1..17 {
                fact[k] = fact[k - 1] * k as f64;
            }
            let mut p = c(1.0 / fact[16]);
            for k in (1..16).rev() {
                p = g.call_f(fma, &[p, y, c(1.0 / fact[k])])?;
            }
            let m = b!(g.b.build_float_mul(y, p, "m"));
            let m2 = b!(g.b.build_float_add(m, c(2.0), "m2"));
            let small = b!(g.b.build_float_div(m, m2, "small"));
            let e2 = g.call_f(exp, &[y])?;
            let d = b!(g.b.build_float_add(e2, c(1.0), "d"));
            let q = b!(g.b.build_float_div(c(2.0), d, "q"));
            let big = b!(g.b.build_float_sub(c(1.0), q, "big"));
            let is_small =
                b!(g.b.build_float_compare(FloatPredicate::OLT, a, c(0.25), "s"));
            let v = b!(g.b.build_select(is_small, small, big, "v")).into_float_value();
            g.call_f(copysign, &[v, x])
        })
    }

    /// `double __commlir_sin(double)` (`cos`: `__commlir_cos`), used for every float type
    /// (f16/bf16/f32 results round the f64 value): `x = n·π/2 + r` with fdlibm's three-part
    /// π/2 (`r` by FMAs, each product exact, so the reduction stays accurate far beyond the
    /// arguments a rotary embedding produces: its error grows like `|n|·2^-53·6e-11`, below
    /// one f64 ulp of `r` for `|x|` up to about 10^6 and below an f32 ulp up to about 10^12),
    /// |r| ≤ π/4, Taylor polynomials for sin r (to r^17) and cos r (to r^18) whose
    /// truncation is below 1e-19, and the quadrant `n mod 4` picking ±sin r or ±cos r
    /// (cos x = sin(x + π/2): quadrant + 1). ±inf give NaN (the reduction's `inf − inf`);
    /// sin keeps the sign of a zero.
    fn helper_sincos64(&mut self, cos: bool) -> R<FunctionValue<'c>> {
        let t = self.cx.f64_type();
        let (key, name) = if cos {
            ("cos64", "__commlir_cos")
        } else {
            ("sin64", "__commlir_sin")
        };
        self.unary_helper(key, name, t, |g, x| {
            let c = |v: f64| t.const_float(v);
            let i64t = g.cx.i64_type();
            let fma = g.intrinsic("llvm.fma", t.into())?;
            let rint = g.intrinsic("llvm.rint", t.into())?;
            let n = b!(g.b.build_float_mul(x, c(std::f64::consts::FRAC_2_PI), "xn"));
            let n = g.call_f(rint, &[n])?;
            let mut r = x;
            for part in [PIO2_1, PIO2_2, PIO2_3] {
                let neg = b!(g.b.build_float_neg(n, "nn"));
                r = g.call_f(fma, &[neg, c(part), r])?;
            }
            let r2 = b!(g.b.build_float_mul(r, r, "r2"));
            // sin r = r + r·r²·(−1/3! + r²·(1/5! − …)), cos r = 1 + r²·(−1/2! + r²·(1/4! − …)).
            let mut fact = [1.0f64; 19];
            for k in 1..19 {
                fact[k] = fact[k - 1] * k as f64;
            }
            let sign = |k: usize| if (k / 2).is_multiple_of(2) { 1.0 } else { -1.0 };
            let mut ps = c(sign(17) / fact[17]);
            for k in [15, 13, 11, 9, 7, 5, 3] {
                ps = g.call_f(fma, &[ps, r2, c(sign(k) / fact[k])])?;
            }
            let r3 = b!(g.b.build_float_mul(r, r2, "r3"));
            let sin_r = g.call_f(fma, &[r3, ps, r])?;
            let mut pc = c(sign(18) / fact[18]);
            for k in [16, 14, 12, 10, 8, 6, 4, 2] {
                pc = g.call_f(fma, &[pc, r2, c(sign(k) / fact[k])])?;
            }
            let cos_r = g.call_f(fma, &[r2, pc, c(1.0)])?;
            // The quadrant: `fptosi.sat` is defined for every input (NaN → 0), and only the
            // low two bits matter, which two's complement keeps for negative `n`.
            let sat = Intrinsic::find("llvm.fptosi.sat")
                .ok_or("no llvm.fptosi.sat")?
                .get_declaration(g.m, &[i64t.into(), t.into()])
                .ok_or("cannot declare llvm.fptosi.sat")?;
            let q = b!(g.b.build_call(sat, &[n.into()], "q"))
                .try_as_basic_value()
                .basic()
                .ok_or("fptosi.sat without value")?
                .into_int_value();
            let q = if cos {
                b!(g.b.build_int_add(q, i64t.const_int(1, false), "q"))
            } else {
                q
            };
            let odd = b!(g.b.build_and(q, i64t.const_int(1, false), "odd"));
            let odd =
                b!(g.b.build_int_compare(IntPredicate::NE, odd, i64t.const_zero(), "odd"));
            let v = b!(g.b.build_select(odd, cos_r, sin_r, "v")).into_float_value();
            let neg = b!(g.b.build_and(q, i64t.const_int(2, false), "neg"));
            let neg =
                b!(g.b.build_int_compare(IntPredicate::NE, neg, i64t.const_zero(), "neg"));
            let nv = b!(g.b.build_float_neg(v, "nv"));
            let y = b!(g.b.build_select(neg, nv, v, "y")).into_float_value();
            if cos {
                return Ok(y);
            }
            // sin(−0) = −0, which the reduction loses (−n·π/2 + x is +0 for n = x = −0).
            let zero =
                b!(g.b.build_float_compare(FloatPredicate::OEQ, x, c(0.0), "zero"));
            Ok(b!(g.b.build_select(zero, x, y, "y")).into_float_value())
        })
    }

    /// `double __commlir_log(double)`, used for every float type: `x = 2^k·m` with
    /// `m ∈ [√½, √2)` from the bits (subnormals scaled by 2^54 first), `f = m − 1` (exact),
    /// `s = f/(2 + f)`, `log m = 2s·(1 + s²/3 + s⁴/5 + … + s²⁴/25)` (|s| < 0.172, truncation
    /// below 1e-20 relative), plus `k·ln2` in two parts; 0 → −inf, negatives → NaN, +inf →
    /// +inf.
    fn helper_log64(&mut self) -> R<FunctionValue<'c>> {
        let t = self.cx.f64_type();
        self.unary_helper("log64", "__commlir_log", t, |g, x| {
            let c = |v: f64| t.const_float(v);
            let i64t = g.cx.i64_type();
            let ci = |v: u64| i64t.const_int(v, false);
            let fma = g.intrinsic("llvm.fma", t.into())?;
            let tiny =
                b!(g.b.build_float_compare(FloatPredicate::OLT, x, c(f64::MIN_POSITIVE), "tiny"));
            let scaled = b!(g.b.build_float_mul(x, c(2f64.powi(54)), "xs"));
            let xs = b!(g.b.build_select(tiny, scaled, x, "xs")).into_float_value();
            let adj = b!(g.b.build_select(tiny, c(-54.0), c(0.0), "adj")).into_float_value();
            let bits = b!(g.b.build_bit_cast(xs, i64t, "bits")).into_int_value();
            let ex = b!(g.b.build_right_shift(bits, ci(52), false, "ex"));
            let ex = b!(g.b.build_and(ex, ci(0x7ff), "ex"));
            let ex = b!(g.b.build_int_sub(ex, ci(1023), "ex"));
            let mb = b!(g.b.build_and(bits, ci(0x000f_ffff_ffff_ffff), "mb"));
            let mb = b!(g.b.build_or(mb, ci(0x3ff0_0000_0000_0000), "mb"));
            let m = b!(g.b.build_bit_cast(mb, t, "m")).into_float_value();
            let big = b!(g.b.build_float_compare(
                FloatPredicate::OGT,
                m,
                c(std::f64::consts::SQRT_2),
                "big"
            ));
            let mh = b!(g.b.build_float_mul(m, c(0.5), "mh"));
            let m = b!(g.b.build_select(big, mh, m, "m")).into_float_value();
            let k = b!(g.b.build_signed_int_to_float(ex, t, "k"));
            let k = b!(g.b.build_float_add(k, adj, "k"));
            let k1 = b!(g.b.build_float_add(k, c(1.0), "k1"));
            let k = b!(g.b.build_select(big, k1, k, "k")).into_float_value();
            let f = b!(g.b.build_float_sub(m, c(1.0), "f"));
            let d = b!(g.b.build_float_add(f, c(2.0), "d"));
            let s = b!(g.b.build_float_div(f, d, "s"));
            let z = b!(g.b.build_float_mul(s, s, "z"));
            let mut p = c(1.0 / 25.0);
            for j in (1..12).rev() {
                p = g.call_f(fma, &[p, z, c(1.0 / (2 * j + 1) as f64)])?;
            }
            // log m = 2s + 2s·z·p
            let s2 = b!(g.b.build_float_mul(s, c(2.0), "s2"));
            let zp = b!(g.b.build_float_mul(z, p, "zp"));
            let lm = g.call_f(fma, &[s2, zp, s2])?;
            let lo = g.call_f(fma, &[k, c(LN2_LO), lm])?;
            let y = g.call_f(fma, &[k, c(LN2_HI), lo])?;
            let zero =
                b!(g.b.build_float_compare(FloatPredicate::OEQ, x, c(0.0), "zero"));
            let y = b!(g.b.build_select(zero, c(f64::NEG_INFINITY), y, "y")).into_float_value();
            let neg =
                b!(g.b.build_float_compare(FloatPredicate::OLT, x, c(0.0), "neg"));
            let y = b!(g.b.build_select(neg, c(f64::NAN), y, "y")).into_float_value();
            let inf =
                b!(g.b.build_float_compare(FloatPredicate::OEQ, x, c(f64::INFINITY), "inf"));
            Ok(b!(g.b.build_select(inf, x, y, "y")).into_float_value())
        })
    }

    /// Divides by `s` for a softmax writing `oe`: narrow (bf16/f16) results multiply by one
    /// correctly rounded reciprocal per row (`1/s`, `rcp.rn.f32`, computed here) — at most
    /// 1.5 ulp of f32 instead of 0.5, invisible after rounding to 8 or 11 bits, and one
    /// multiply per element instead of a `div.rn.f32` sequence; f32 results divide exactly.
    #[allow(clippy::type_complexity)]
    fn quotient_by(
        &self,
        oe: Elem,
        s: FloatValue<'c>,
    ) -> R<Box<dyn Fn(&Self, FloatValue<'c>) -> R<FloatValue<'c>> + 'c>> {
        if narrow(oe) {
            let inv = b!(self
                .b
                .build_float_div(s.get_type().const_float(1.0), s, "inv"));
            Ok(Box::new(move |g: &Self, v| {
                Ok(b!(g.b.build_float_mul(v, inv, "q")))
            }))
        } else {
            Ok(Box::new(move |g: &Self, v| {
                Ok(b!(g.b.build_float_div(v, s, "q")))
            }))
        }
    }

    /// Defines (once, memoized under `key`) the internal `float name(float)` whose body
    /// `body` builds from its parameter; NaN inputs are returned unchanged.
    fn unary_f32_helper(
        &mut self,
        key: &'static str,
        name: &str,
        body: impl FnOnce(&mut Self, FloatValue<'c>) -> R<FloatValue<'c>>,
    ) -> R<FunctionValue<'c>> {
        let t = self.cx.f32_type();
        self.unary_helper(key, name, t, body)
    }

    /// [`Self::unary_f32_helper`] for any float type `t`.
    fn unary_helper(
        &mut self,
        key: &'static str,
        name: &str,
        t: FloatType<'c>,
        body: impl FnOnce(&mut Self, FloatValue<'c>) -> R<FloatValue<'c>>,
    ) -> R<FunctionValue<'c>> {
        if let Some(f) = self.helpers.get(key) {
            return Ok(*f);
        }
        let f = self
            .m
            .add_function(name, t.fn_type(&[t.into()], false), Some(Linkage::Internal));
        let saved = self.b.get_insert_block();
        let entry = self.cx.append_basic_block(f, "entry");
        self.b.position_at_end(entry);
        let x = f.get_first_param().ok_or("no param")?.into_float_value();
        let y = body(self, x)?;
        let nan = b!(self.b.build_float_compare(FloatPredicate::UNO, x, x, "nan"));
        let y = b!(self.b.build_select(nan, x, y, "y")).into_float_value();
        b!(self.b.build_return(Some(&y)));
        if let Some(bb) = saved {
            self.b.position_at_end(bb);
        }
        self.helpers.insert(key, f);
        Ok(f)
    }
}

/// The constants of exp's range reduction (`Gen::exp_reduce`) in one float type.
struct ExpRange {
    /// Inputs are clamped to `[lo, hi]` before the reduction.
    lo: f64,
    hi: f64,
    /// ln2 = ln2_hi + ln2_lo, `n·ln2_hi` exact for every `n` the clamp allows.
    ln2_hi: f64,
    ln2_lo: f64,
    /// Above `overflow` the result is +inf, below `underflow` 0.
    overflow: f64,
    underflow: f64,
}

const EXP_F32: ExpRange = ExpRange {
    lo: -104.0,
    hi: 89.0,
    ln2_hi: 0.693_145_751_953_125,
    ln2_lo: 1.428_606_765_330_187e-6,
    overflow: 88.8,
    underflow: -103.9,
};

/// fdlibm's split of ln2.
const EXP_F64: ExpRange = ExpRange {
    lo: -746.0,
    hi: 710.0,
    ln2_hi: f64::from_bits(0x3fe6_2e42_fee0_0000),
    ln2_lo: f64::from_bits(0x3dea_39ef_3579_3c76),
    overflow: 709.79,
    underflow: -745.2,
};

/// fdlibm's π/2 in three parts of 33, 33 and 53 bits: `n·PIO2_1` and `n·PIO2_2` are exact
/// for |n| < 2^20, and the three sum to π/2 within 1e-37.
const PIO2_1: f64 = f64::from_bits(0x3ff9_21fb_5440_0000);
const PIO2_2: f64 = f64::from_bits(0x3dd0_b461_1a60_0000);
const PIO2_3: f64 = f64::from_bits(0x3ba3_198a_2e03_7073);
/// fdlibm's ln2 split: `k·LN2_HI` is exact for every exponent `k` of an f64.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);

/// Whether `e` is a narrow float (bf16, f16): its kernels use the `_fast` transcendental
/// helpers, accurate to about 2^-20 relative, where an f32 result needs the accurate ones.
fn narrow(e: Elem) -> bool {
    matches!(e, Elem::BF16 | Elem::F16)
}

/// The exp helper for an op whose result is `e`.
fn exp_helper(e: Elem) -> &'static str {
    match e {
        Elem::F64 => "exp64",
        e if narrow(e) => "exp_fast",
        _ => "exp",
    }
}

/// Bytes of one vector access (`ld.global.v4.b32` / `st.global.v4.b32`).
pub const VECTOR_BYTES: u64 = 16;

/// Bytes one thread of a plain copy kernel moves per iteration (16-byte vector accesses).
pub const COPY_VECTOR_BYTES: u64 = VECTOR_BYTES;
/// The most 16-byte vectors per thread a block-per-row softmax keeps in registers (64 bf16 or
/// 32 f32 values per thread: rows up to 16384 bf16 / 8192 f32 elements at 256 threads).
pub const ROW_REG_VECTORS: u64 = 8;

/// What `rt.attention_softmax` adds to a softmax row ([`Gen::row_block`]).
#[derive(Clone, Copy)]
struct AttnRow {
    /// Factor of every score.
    scale: f64,
    /// Causal: rows per head (the query position is `row mod q_len`).
    causal_q_len: Option<u64>,
}

/// Elements one thread of a fused elementwise kernel over `ops` handles per iteration of its
/// vector loop: one 16-byte vector of the narrowest element type the chain reads or writes
/// (16 for i8, 8 for f16/bf16/i16, 4 for f32/i32, 2 for f64/i64). `rt.launch` sizes the
/// grid by `numel / width`.
///
/// A concat in the chain selects its operand once per vector, so each operand's range must
/// start and end on a vector boundary (`start · inner` and the result's `total · inner`
/// multiples of the width, `inner` the elements per step along its dim); otherwise the width
/// is 1 and the kernel runs its scalar loop only (`kernels::fused`).
pub fn elementwise_vector_width(ctx: &IrContext, ops: &[OpId]) -> u64 {
    let mut bits = 64;
    for &op in ops {
        let vals = ctx.operands(op).iter().copied().chain([ctx.result(op, 0)]);
        for v in vals {
            if let Some(e) = value_tensor(ctx, v).and_then(|t| Kind::of(ctx, t.elem)) {
                bits = bits.min(e.bits());
            }
        }
    }
    let w = VECTOR_BYTES * 8 / u64::from(bits);
    let concat_aligned = ops
        .iter()
        .filter(|o| ctx.op_name(**o) == "compute.concat")
        .all(|&op| {
            let dim = ctx
                .inherent_attr(op, "dim")
                .and_then(|a| ctx.attr_as_i64(a))
                .unwrap_or(0)
                .max(0) as usize;
            let Some(r) = value_tensor(ctx, ctx.result(op, 0)) else {
                return false;
            };
            let inner = r
                .shape
                .get(dim + 1..)
                .map_or(1, |s| s.iter().product::<i64>()) as u64;
            let mut at = 0u64;
            for &x in ctx.operands(op) {
                if !(at * inner).is_multiple_of(w) {
                    return false;
                }
                at += value_tensor(ctx, x).map_or(0, |t| t.shape.get(dim).copied().unwrap_or(0))
                    as u64;
            }
            (at * inner).is_multiple_of(w)
        });
    if concat_aligned {
        w
    } else {
        1
    }
}

/// Elements a thread of a `compute.permute` or `compute.broadcast` kernel moves at once: a
/// 16-byte vector when the innermost dim stays the innermost one, unbroadcast (so each
/// vector's elements are adjacent in the source too) and a whole number of vectors long, else
/// 1.
pub fn movement_vector_width(ctx: &IrContext, op: OpId) -> u64 {
    let name = ctx.op_name(op);
    let (Some(i), Some(o)) = (
        value_tensor(ctx, ctx.operand(op, 0)),
        value_tensor(ctx, ctx.result(op, 0)),
    ) else {
        return 1;
    };
    let bytes = commlir_dialects::shape::elem_bytes(ctx, o.elem).max(1) as u64;
    let w = VECTOR_BYTES / bytes;
    let (Some(&last_in), Some(&last_out)) = (i.shape.last(), o.shape.last()) else {
        return 1;
    };
    let inner_kept = match name {
        "compute.permute" => ctx
            .inherent_attr(op, "perm")
            .and_then(|a| ctx.attr_as_i64_array(a))
            .is_some_and(|p| p.last().copied() == Some(p.len() as i64 - 1)),
        "compute.broadcast" => last_in == last_out,
        _ => false,
    };
    if inner_kept && w > 1 && last_out > 0 && (last_out as u64).is_multiple_of(w) {
        w
    } else {
        1
    }
}

/// Whether `compute.softmax` / `compute.reduce_sum` `op` runs one block per row (a contiguous
/// last reduced dimension, f16/bf16/f32 input): `rt.launch` then sizes the grid by rows.
pub fn is_row_block(ctx: &IrContext, op: OpId) -> bool {
    let Some(t) = value_tensor(ctx, ctx.operand(op, 0)) else {
        return false;
    };
    let dim = ctx
        .inherent_attr(op, "dim")
        .and_then(|a| ctx.attr_as_i64(a))
        .unwrap_or(0)
        .max(0) as usize;
    let last = t.shape[dim + 1..].iter().product::<i64>() == 1;
    last && matches!(
        Elem::of(ctx, t.elem),
        Some(Elem::F16 | Elem::BF16 | Elem::F32)
    )
}

/// The rows of a fused row kernel (`kernels::rows`: a reduction with the chains around it), which
/// runs one block per row: `None` for any other group of ops.
pub fn fused_row_count(ctx: &IrContext, ops: &[OpId]) -> Option<u64> {
    if ops.len() < 2 {
        return None;
    }
    let rd = ops.iter().find(|o| {
        matches!(
            ctx.op_name(**o),
            "compute.reduce_sum" | "compute.reduce_max"
        )
    })?;
    let t = value_tensor(ctx, ctx.operand(*rd, 0))?;
    let len = (*t.shape.last()?).max(1);
    Some((t.numel() / len).max(0) as u64)
}

/// Whether a kernel's single op is a plain copy of its single argument (`compute.clone`, or
/// `compute.reshape`, which keeps the element order): same element type and element count.
pub fn is_plain_copy(ctx: &IrContext, op: OpId, args: &[Value]) -> bool {
    if !matches!(ctx.op_name(op), "compute.clone" | "compute.reshape") {
        return false;
    }
    let x = match ctx.operands(op) {
        [x] => *x,
        _ => return false,
    };
    if args.len() != 1 || args[0] != x {
        return false;
    }
    match (value_tensor(ctx, x), value_tensor(ctx, ctx.result(op, 0))) {
        (Some(a), Some(r)) => {
            a.elem == r.elem && a.numel() == r.numel() && Kind::of(ctx, a.elem).is_some()
        }
        _ => false,
    }
}

fn transcendental_used(ctx: &IrContext, ops: &[OpId]) -> bool {
    ops.iter().any(|o| {
        matches!(
            ctx.op_name(*o),
            "compute.exp"
                | "compute.tanh"
                | "compute.gelu"
                | "compute.silu"
                | "compute.sigmoid"
                | "compute.sin"
                | "compute.cos"
                | "compute.log"
        )
    })
}

fn float_width(cx: &Context, t: FloatType<'_>) -> u32 {
    if t == cx.f16_type() || t == cx.bf16_type() {
        16
    } else if t == cx.f32_type() {
        32
    } else {
        64
    }
}

/// The MLIR spelling of an integer element type (for diagnostics; `i1` for every spelling).
fn int_name(t: IntElem) -> String {
    let prefix = if t.signed || t.bits == 1 { "i" } else { "ui" };
    format!("{prefix}{}", t.bits)
}

mod flash;
mod fused;
pub mod index_map;
mod rows;
pub use flash::FLASH_BLOCK;
pub use index_map::{collapse, Access, BroadcastIndex, IndexMap, StridedIndex, ViewIndex};
