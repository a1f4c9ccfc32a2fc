//! The kernels of a program against the sim backend, without a GPU: the program is lowered
//! and its kernels compiled as for the GPU, then the optimized kernel IR is retargeted to the
//! host (see [`super::host_ir`]) and run by LLVM's JIT on random inputs over the full range of
//! each type (NaN, infinities and every integer bit pattern included). The lowered `rt`
//! program (`rt.alloc`, `rt.launch`, `rt.free`, `return`) is executed by a small host loop;
//! the results must equal the sim's `compute` semantics byte for byte ([`check`]) or within a
//! few ulp for transcendental functions ([`check_within`]), with 16-byte aligned buffers (the
//! vector paths) and misaligned ones (the scalar fallbacks).

use super::{host_ir, launch, map_libcalls, parse};
use commlir_codegen::{kernels, lower_to_rt};
use commlir_ir::pass::{parse_pipeline, PassManager};
use commlir_ir::{Context, OpId, Value};
use commlir_runtime::cuda::check::ulp;
use commlir_runtime::cuda::{tensor_bytes, tensor_from_bytes};
use commlir_runtime::inputs::SplitMix64;
use commlir_runtime::numeric::{bf16_bits, f16_bits, f16_value};
use commlir_runtime::{Data, ElemType, Tensor, TensorType};
use inkwell::context::Context as LlContext;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::targets::{InitializationConfig, Target};
use inkwell::OptimizationLevel;
use std::collections::HashMap;

const PLAN: &str = "builtin.module(func.func(coll-to-comm,comm-plan-pools))";

fn entry(ctx: &Context, m: OpId) -> OpId {
    let b = lower_to_rt::module_block(ctx, m).unwrap();
    ctx.block_ops(b)
        .find(|o| ctx.op_name(*o) == "func.func")
        .expect("a function")
}

fn body(ctx: &Context, f: OpId) -> Vec<OpId> {
    let b = ctx.region_blocks(ctx.op_regions(f)[0])[0];
    ctx.block_ops(b).collect()
}

fn args(ctx: &Context, f: OpId) -> Vec<Value> {
    let b = ctx.region_blocks(ctx.op_regions(f)[0])[0];
    ctx.block_args(b).to_vec()
}

fn ty(ctx: &Context, v: Value) -> TensorType {
    TensorType::from_type(ctx, ctx.value_type(v)).expect("a static tensor")
}

/// Whether `t` holds `i1` elements (one byte each, 0 or 1).
fn is_bool(t: &TensorType) -> bool {
    matches!(t.elem, commlir_runtime::ElemType::Int { width: 1, .. })
}

/// Random inputs over the whole range: random bytes decoded as the element type (every bit
/// pattern of an integer; floats of every magnitude, NaN and infinities included). An `i1`
/// byte is 0 or 1, its only valid values (the kernels may assume it).
fn random_tensor(t: &TensorType, g: &mut SplitMix64) -> Tensor {
    let n = t.numel() * t.elem.byte_width();
    let mask = if is_bool(t) { 1 } else { 0xff };
    let bytes: Vec<u8> = (0..n).map(|_| g.next_u64() as u8 & mask).collect();
    let mut x = tensor_from_bytes(t, &bytes);
    // Integers: a few small values, -1 and the extremes, which random bits rarely give.
    if let Data::Int(v) = &mut x.data {
        let specials = [0i64, 1, -1, 2, 3, -7, i64::MIN, i64::MAX];
        for (i, e) in v.iter_mut().enumerate() {
            if i % 3 == 0 {
                *e = t.elem.wrap(specials[(i / 3) % specials.len()]);
            }
        }
    }
    // Floats: every fourth element near the integer conversions' edges (truncation toward
    // zero, 0/1 for i1, 8-bit saturation), which random bits almost never give.
    let specials = [
        0.0,
        -0.0,
        0.5,
        0.99,
        1.0,
        1.5,
        -0.5,
        -1.0,
        2.0,
        255.5,
        -128.5,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    let pick = |i: usize| {
        i.is_multiple_of(4)
            .then(|| specials[(i / 4) % specials.len()])
    };
    match &mut x.data {
        Data::F32(v) => v.iter_mut().enumerate().for_each(|(i, e)| {
            if let Some(s) = pick(i) {
                *e = t.elem.round_from_f64(s);
            }
        }),
        Data::F64(v) => v.iter_mut().enumerate().for_each(|(i, e)| {
            if let Some(s) = pick(i) {
                *e = s;
            }
        }),
        Data::Int(_) => {}
    }
    x
}

/// The sim's results of `f` (its `compute` ops in order) on `inputs`.
fn sim(ctx: &Context, f: OpId, inputs: &[Tensor]) -> Vec<Tensor> {
    let mut vals: HashMap<Value, Tensor> = args(ctx, f)
        .into_iter()
        .zip(inputs.iter().cloned())
        .collect();
    for op in body(ctx, f) {
        if ctx.op_name(op) == "func.return" {
            return ctx.operands(op).iter().map(|v| vals[v].clone()).collect();
        }
        let ins: Vec<&Tensor> = ctx.operands(op).iter().map(|v| &vals[v]).collect();
        let r = ctx.result(op, 0);
        let out = commlir_runtime::sim::compute::execute(ctx, op, &ins, &ty(ctx, r))
            .unwrap_or_else(|e| panic!("sim: {} {e}", ctx.op_name(op)))
            .expect("a compute op");
        vals.insert(r, out);
    }
    panic!("no return")
}

/// A host buffer whose data starts `skew` bytes past a 16-byte boundary.
struct Buf {
    store: Vec<u128>,
    skew: usize,
    len: usize,
}

impl Buf {
    fn new(len: usize, skew: usize) -> Buf {
        Buf {
            store: vec![0u128; (len + skew).div_ceil(16) + 1],
            skew,
            len,
        }
    }
    fn ptr(&mut self) -> *mut u8 {
        // SAFETY: `skew + len` bytes fit in the store.
        unsafe { (self.store.as_mut_ptr() as *mut u8).add(self.skew) }
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: as above; u128 storage is plain bytes.
        unsafe {
            std::slice::from_raw_parts((self.store.as_ptr() as *const u8).add(self.skew), self.len)
        }
    }
}

/// Runs `text` (function `@f`, compute ops only) on the sim and through the host-compiled
/// kernels on `rounds` random inputs, aligned and misaligned; the results must be identical.
pub fn check(text: &str, rounds: u64) {
    run(text, Inputs::Random(rounds), None);
}

/// [`check_within`] on the given input sets (one tensor per parameter each) rather than
/// random bits: for ops whose results are only meaningful on tame inputs (attention).
pub fn check_inputs_within(text: &str, sets: Vec<Vec<Tensor>>, ulps: u32) {
    run(text, Inputs::Given(sets), Some(ulps));
}

/// Where the inputs come from.
enum Inputs {
    /// `n` rounds of random bytes over each type's whole range.
    Random(u64),
    /// These sets.
    Given(Vec<Vec<Tensor>>),
}

/// The element of `dtype` (an `rt` ABI code) at `p`, as f64.
///
/// # Safety
/// `p` points to one element of that type.
unsafe fn read_elem(p: *const u8, dtype: u32) -> f64 {
    match dtype {
        7 => f64::from(f32::from_le_bytes(*(p as *const [u8; 4]))),
        8 => f64::from_le_bytes(*(p as *const [u8; 8])),
        9 => f64::from(f32::from_bits(
            u32::from(u16::from_le_bytes(*(p as *const [u8; 2]))) << 16,
        )),
        6 => f16_value(u16::from_le_bytes(*(p as *const [u8; 2]))),
        d => panic!("gemm dtype {d}"),
    }
}

/// Stores `x` (already rounded to the type) as an element of `dtype` at `p`.
///
/// # Safety
/// `p` has room for one element of that type.
unsafe fn write_elem(p: *mut u8, dtype: u32, x: f64) {
    match dtype {
        7 => *(p as *mut [u8; 4]) = (x as f32).to_le_bytes(),
        8 => *(p as *mut [u8; 8]) = x.to_le_bytes(),
        9 => *(p as *mut [u8; 2]) = bf16_bits(x).to_le_bytes(),
        6 => *(p as *mut [u8; 2]) = f16_bits(x).to_le_bytes(),
        d => panic!("gemm dtype {d}"),
    }
}

/// `rt.gemm` on the host, exactly as cuBLAS is asked (column-major, strided-batched,
/// `transa`/`transb`, byte offsets, `out_dtype`), each product accumulated in ascending `k`
/// in f32 (f64 for f64) like the sim's matmul, without fused multiply-adds.
fn host_gemm(ctx: &Context, op: OpId, bufs: &mut HashMap<Value, Buf>) {
    let i = |n: &str| {
        ctx.inherent_attr(op, n)
            .and_then(|a| ctx.attr_as_i64(a))
            .unwrap_or(0) as usize
    };
    let code = |n: &str| {
        ctx.inherent_attr(op, n)
            .and_then(|a| ctx.attr_as_str(a))
            .map(|d| commlir_dialects::rt::abi::code(commlir_dialects::rt::abi::DTYPES, d).unwrap())
    };
    let dt = code("dtype").expect("dtype");
    let ot = code("out_dtype").unwrap_or(dt);
    let (eb, ob) = (
        [0, 0, 0, 0, 0, 0, 2, 4, 8, 2][dt as usize],
        [0, 0, 0, 0, 0, 0, 2, 4, 8, 2][ot as usize],
    );
    let (m, n, k) = (i("m"), i("n"), i("k"));
    let (ta, tb) = (i("transa") == 1, i("transb") == 1);
    let (lda, ldb, ldc) = (i("lda"), i("ldb"), i("ldc"));
    let ops = ctx.operands(op).to_vec();
    let base = |bufs: &mut HashMap<Value, Buf>, v: Value, off: usize| unsafe {
        bufs.get_mut(&v).expect("a buffer").ptr().add(off)
    };
    let (pa, pb, pc) = (
        base(bufs, ops[0], i("offset_a")),
        base(bufs, ops[1], i("offset_b")),
        base(bufs, ops[2], i("offset_c")),
    );
    let f64_math = dt == 8;
    for bi in 0..i("batch") {
        for col in 0..n {
            for row in 0..m {
                let (mut acc32, mut acc64) = (0f32, 0f64);
                for l in 0..k {
                    let ai = if ta { l + row * lda } else { row + l * lda };
                    let bj = if tb { col + l * ldb } else { l + col * ldb };
                    // SAFETY: the lowering computed these offsets inside the buffers.
                    let (x, y) = unsafe {
                        (
                            read_elem(pa.add((bi * i("stride_a") + ai) * eb), dt),
                            read_elem(pb.add((bi * i("stride_b") + bj) * eb), dt),
                        )
                    };
                    if f64_math {
                        acc64 += x * y;
                    } else {
                        acc32 += x as f32 * y as f32;
                    }
                }
                let out = if f64_math { acc64 } else { f64::from(acc32) };
                let elem = match ot {
                    9 => ElemType::BF16,
                    6 => ElemType::F16,
                    _ => ElemType::F32,
                };
                let out = if ot == 8 {
                    out
                } else {
                    f64::from(elem.round(out as f32))
                };
                // SAFETY: as above.
                unsafe { write_elem(pc.add((bi * i("stride_c") + row + col * ldc) * ob), ot, out) };
            }
        }
    }
}

/// [`check`] for float results that may differ by up to `ulps` units in the last place (an
/// accurate polynomial against libm), integers still identical. With `ulps = 0` the values
/// must be equal but a NaN may carry another payload (`llvm.maximum` returns a canonical NaN
/// where the sim passes its operand's on).
pub fn check_within(text: &str, rounds: u64, ulps: u32) {
    run(text, Inputs::Random(rounds), Some(ulps));
}

/// Whether kernel element `got` is within `ulps` units in the last place (of `elem`, at the
/// sim's value `want`) of the sim's: NaN matches NaN, infinities and zeros (with their sign)
/// must be equal.
fn close(got: f64, want: f64, elem: ElemType, ulps: u32) -> bool {
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    if got.to_bits() == want.to_bits() {
        return true;
    }
    if ulps == 0 || !want.is_finite() || want == 0.0 {
        // Exactly representable (and 0 is only right as 0): anything else is an error.
        return false;
    }
    (got - want).abs() <= f64::from(ulps) * ulp(want, elem)
}

/// [`check`] (`ulps` none: identical bytes) or [`check_within`].
fn run(text: &str, inputs: Inputs, ulps: Option<u32>) {
    let mut ctx = Context::new();
    let m = parse(&mut ctx, text);
    let f = entry(&ctx, m);
    let in_types: Vec<TensorType> = args(&ctx, f).iter().map(|v| ty(&ctx, *v)).collect();
    let mut pm = PassManager::from_pipeline(parse_pipeline(PLAN).unwrap());
    pm.run(&mut ctx, m).unwrap();
    let ref_inputs: Vec<Vec<Tensor>> = match inputs {
        Inputs::Random(rounds) => (0..rounds)
            .map(|r| {
                let mut g = SplitMix64::new(0x1234 + r);
                in_types.iter().map(|t| random_tensor(t, &mut g)).collect()
            })
            .collect(),
        Inputs::Given(sets) => sets,
    };
    // The sim runs the unlowered program: parse it again.
    let mut sctx = Context::new();
    let sm = parse(&mut sctx, text);
    let sf = entry(&sctx, sm);
    // The kernels themselves run here: attention takes commlir's own kernels, not cuDNN.
    let opts = lower_to_rt::LowerOptions {
        attention: lower_to_rt::AttentionLowering::Generated,
    };
    lower_to_rt::lower_module_with(&mut ctx, m, opts).unwrap_or_else(|d| panic!("{}", d.message));
    let dev = kernels::compile(&ctx, m).unwrap_or_else(|d| panic!("{}", d.message));
    Target::initialize_native(&InitializationConfig::default()).unwrap();
    let llcx = LlContext::create();
    let ir = host_ir(&dev.llvm_ir);
    let buf = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "kernels");
    let lm = llcx
        .create_module_from_ir(buf)
        .unwrap_or_else(|e| panic!("{e}\n{ir}"));
    let ee = lm
        .create_jit_execution_engine(OptimizationLevel::None)
        .unwrap();
    map_libcalls(&ee, &lm);
    let f = entry(&ctx, m);
    for inputs in &ref_inputs {
        let want = sim(&sctx, sf, inputs);
        for skew in [0usize, 1] {
            let mut bufs: HashMap<Value, Buf> = HashMap::new();
            for (a, t) in args(&ctx, f).into_iter().zip(inputs) {
                let bytes = tensor_bytes(t);
                let mut b = Buf::new(bytes.len(), skew * t.ty.elem.byte_width());
                let p = b.ptr();
                // SAFETY: the buffer holds `bytes.len()` bytes at `p`.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
                bufs.insert(a, b);
            }
            for op in body(&ctx, f) {
                match ctx.op_name(op) {
                    "rt.alloc" => {
                        let r = ctx.result(op, 0);
                        let commlir_ir::TypeKind::MemRef { shape, elem, .. } =
                            ctx.type_kind(ctx.value_type(r))
                        else {
                            panic!("rt.alloc of a non-memref");
                        };
                        let eb = commlir_dialects::shape::elem_bytes(&ctx, *elem) as usize;
                        let n = shape.iter().product::<i64>() as usize;
                        bufs.insert(r, Buf::new(n * eb, skew * eb));
                    }
                    "rt.launch" => {
                        let k = ctx
                            .inherent_attr(op, "kernel")
                            .and_then(|a| ctx.attr_as_symbol(a))
                            .expect("kernel")
                            .to_string();
                        let ps: Vec<*mut u8> = ctx
                            .operands(op)
                            .iter()
                            .map(|v| bufs.get_mut(v).expect("a buffer").ptr())
                            .collect();
                        launch(&ee, &k, &ps);
                    }
                    "rt.gemm" => host_gemm(&ctx, op, &mut bufs),
                    "rt.view" => {
                        // The same bytes under another type: a copy of the buffer, valid
                        // since nothing writes a viewed allocation after its view is made.
                        let src = &bufs[&ctx.operand(op, 0)];
                        let mut b = Buf::new(src.len, src.skew);
                        let bytes = src.bytes().to_vec();
                        // SAFETY: `b` holds `bytes.len()` bytes.
                        unsafe {
                            std::ptr::copy_nonoverlapping(bytes.as_ptr(), b.ptr(), bytes.len())
                        };
                        bufs.insert(ctx.result(op, 0), b);
                    }
                    "rt.free" => {}
                    "func.return" => {
                        for (i, (v, w)) in ctx.operands(op).iter().zip(&want).enumerate() {
                            let got = bufs[v].bytes();
                            let exp = tensor_bytes(w);
                            let near = ulps.is_some() && w.ty.elem.is_float() && {
                                let gt = tensor_from_bytes(&w.ty, got);
                                (0..w.numel()).all(|e| {
                                    close(
                                        gt.data.get_f64(e, w.ty.elem),
                                        w.data.get_f64(e, w.ty.elem),
                                        w.ty.elem,
                                        ulps.unwrap_or(0),
                                    )
                                })
                            };
                            if got != exp.as_slice() && !near {
                                let gt = tensor_from_bytes(&w.ty, got);
                                let bad = (0..w.numel())
                                    .find(|&e| {
                                        let b = w.ty.elem.byte_width();
                                        let (x, y) = (
                                            gt.data.get_f64(e, w.ty.elem),
                                            w.data.get_f64(e, w.ty.elem),
                                        );
                                        got[e * b..(e + 1) * b] != exp[e * b..(e + 1) * b]
                                            && !ulps.is_some_and(|u| close(x, y, w.ty.elem, u))
                                    })
                                    .unwrap();
                                let at: Vec<f64> = inputs
                                    .iter()
                                    .filter(|t| t.numel() == w.numel())
                                    .map(|t| t.data.get_f64(bad, t.ty.elem))
                                    .collect();
                                let bw = w.ty.elem.byte_width();
                                panic!(
                                    "result {i} ({}) element {bad}, skew {skew}: kernel {} (bytes {:02x?}), sim {} (bytes {:02x?}) (inputs there {at:?})\n{text}",
                                    w.ty,
                                    gt.data.get_f64(bad, w.ty.elem),
                                    &got[bad * bw..(bad + 1) * bw],
                                    w.data.get_f64(bad, w.ty.elem),
                                    &exp[bad * bw..(bad + 1) * bw]
                                );
                            }
                        }
                    }
                    other => panic!("unexpected {other} in the lowered program"),
                }
            }
        }
    }
}
