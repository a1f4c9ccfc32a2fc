//! Integer kernels against the sim backend, without a GPU: each program is lowered and its
//! kernels compiled as for the GPU, then the optimized kernel IR is retargeted to the host
//! (the `ptx_kernel` convention and address spaces dropped, the `%tid`/`%ntid`/`%ctaid`/
//! `%nctaid` reads replaced by one thread of one block, which the grid-stride loops make a
//! valid launch) and run by LLVM's JIT on random inputs over the full range of each type.
//! The lowered `rt` program (`rt.alloc`, `rt.launch`, `rt.free`, `return`) is executed by a
//! small host loop; the results must equal the sim's `compute` semantics byte for byte, with
//! 16-byte aligned buffers (the vector paths) and misaligned ones (the scalar fallbacks).
//!
//! What this does not cover: the NVPTX instruction selection of the same IR (the lit tests
//! check the PTX, `commlir-run --backend cuda --check` the GPU).

use commlir_codegen::{kernels, lower_to_rt};
use commlir_ir::pass::{parse_pipeline, PassManager};
use commlir_ir::{Context, OpId, Value};
use commlir_runtime::cuda::{tensor_bytes, tensor_from_bytes};
use commlir_runtime::inputs::SplitMix64;
use commlir_runtime::{Data, Tensor, TensorType};
use inkwell::context::Context as LlContext;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::targets::{InitializationConfig, Target};
use inkwell::OptimizationLevel;
use std::collections::HashMap;

mod common;
use common::{host_ir, launch, map_libcalls, parse};

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
fn check(text: &str, rounds: u64) {
    let mut ctx = Context::new();
    let m = parse(&mut ctx, text);
    let f = entry(&ctx, m);
    let in_types: Vec<TensorType> = args(&ctx, f).iter().map(|v| ty(&ctx, *v)).collect();
    let mut pm = PassManager::from_pipeline(parse_pipeline(PLAN).unwrap());
    pm.run(&mut ctx, m).unwrap();
    let ref_inputs: Vec<Vec<Tensor>> = (0..rounds)
        .map(|r| {
            let mut g = SplitMix64::new(0x1234 + r);
            in_types.iter().map(|t| random_tensor(t, &mut g)).collect()
        })
        .collect();
    // The sim runs the unlowered program: parse it again.
    let mut sctx = Context::new();
    let sm = parse(&mut sctx, text);
    let sf = entry(&sctx, sm);
    lower_to_rt::lower_module(&mut ctx, m).unwrap_or_else(|d| panic!("{}", d.message));
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
                    "rt.free" => {}
                    "func.return" => {
                        for (i, (v, w)) in ctx.operands(op).iter().zip(&want).enumerate() {
                            let got = bufs[v].bytes();
                            let exp = tensor_bytes(w);
                            if got != exp.as_slice() {
                                let gt = tensor_from_bytes(&w.ty, got);
                                let bad = (0..w.numel())
                                    .find(|e| {
                                        let b = w.ty.elem.byte_width();
                                        got[e * b..(e + 1) * b] != exp[e * b..(e + 1) * b]
                                    })
                                    .unwrap();
                                let at: Vec<f64> = inputs
                                    .iter()
                                    .filter(|t| t.numel() == w.numel())
                                    .map(|t| t.data.get_f64(bad, t.ty.elem))
                                    .collect();
                                panic!(
                                    "result {i} ({}) element {bad}, skew {skew}: kernel {}, sim {} (inputs there {at:?})\n{text}",
                                    w.ty,
                                    gt.data.get_f64(bad, w.ty.elem),
                                    w.data.get_f64(bad, w.ty.elem)
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

#[test]
fn arithmetic_wraps_and_compares_by_signedness() {
    for t in [
        "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64", "si32",
    ] {
        check(
            &format!(
                "func.func @f(%a: tensor<67x{t}>, %b: tensor<67x{t}>) -> (tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>) {{
  %0 = compute.add %a, %b : tensor<67x{t}>
  %1 = compute.mul %0, %b : tensor<67x{t}>
  %2 = compute.sub %1, %a : tensor<67x{t}>
  %3 = compute.maximum %a, %b : tensor<67x{t}>
  %4 = compute.minimum %3, %2 : tensor<67x{t}>
  %5 = compute.neg %a : tensor<67x{t}>
  %6 = compute.relu %5 : tensor<67x{t}>
  return %1, %4, %6 : tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>
}}"
            ),
            4,
        );
    }
}

#[test]
fn division_truncates_and_min_by_minus_one_wraps() {
    // Divisors `max(b, 1)` (never zero: the sim rejects that) and their negations, so
    // `MIN / -1` occurs (the special inputs put MIN in `a` and 1 in `b`).
    for t in ["i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"] {
        check(
            &format!(
                "func.func @f(%a: tensor<67x{t}>, %b: tensor<67x{t}>) -> (tensor<67x{t}>, tensor<67x{t}>) {{
  %one = compute.fill {{value = 1.0 : f64}} : tensor<67x{t}>
  %d = compute.maximum %b, %one : tensor<67x{t}>
  %q = compute.div %a, %d : tensor<67x{t}>
  %n = compute.neg %d : tensor<67x{t}>
  %r = compute.div %a, %n : tensor<67x{t}>
  return %q, %r : tensor<67x{t}>, tensor<67x{t}>
}}"
            ),
            4,
        );
    }
}

/// [`check`] of one cast from `from` to `to` (35 elements: no multiple of a vector width).
fn check_cast(from: &str, to: &str) {
    check(
        &format!(
            "func.func @f(%a: tensor<35x{from}>) -> tensor<35x{to}> {{
  %0 = compute.cast %a : (tensor<35x{from}>) -> tensor<35x{to}>
  return %0 : tensor<35x{to}>
}}"
        ),
        3,
    );
}

#[test]
fn casts_between_integers_and_floats() {
    let ints = ["i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"];
    let floats = ["f16", "bf16", "f32", "f64"];
    for a in ints {
        for b in ints.iter().chain(&floats) {
            check_cast(a, b);
        }
    }
    for a in floats {
        for b in ints {
            check_cast(a, b);
        }
    }
}

#[test]
fn fills_reductions_and_data_movement() {
    for t in ["i8", "i32", "i64", "ui16"] {
        check(
            &format!(
                "func.func @f(%a: tensor<6x5x7x{t}>, %b: tensor<6x3x7x{t}>) -> (tensor<6x7x{t}>, tensor<6x5x{t}>, tensor<6x7x5x{t}>, tensor<6x2x7x{t}>, tensor<6x8x7x{t}>, tensor<6x5x7x{t}>) {{
  %0 = compute.reduce_sum %a {{dim = 1 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x7x{t}>
  %1 = compute.reduce_sum %a {{dim = 2 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x5x{t}>
  %2 = compute.transpose %a : (tensor<6x5x7x{t}>) -> tensor<6x7x5x{t}>
  %3 = compute.slice %a {{dim = 1 : i64, start = 2 : i64, size = 2 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x2x7x{t}>
  %4 = compute.concat %a, %b {{dim = 1 : i64}} : (tensor<6x5x7x{t}>, tensor<6x3x7x{t}>) -> tensor<6x8x7x{t}>
  %f = compute.fill {{value = -1.0e30 : f64}} : tensor<6x5x7x{t}>
  %5 = compute.add %a, %f : tensor<6x5x7x{t}>
  return %0, %1, %2, %3, %4, %5 : tensor<6x7x{t}>, tensor<6x5x{t}>, tensor<6x7x5x{t}>, tensor<6x2x7x{t}>, tensor<6x8x7x{t}>, tensor<6x5x7x{t}>
}}"
            ),
            2,
        );
    }
}

#[test]
fn fused_chain_across_types() {
    check(
        "func.func @f(%a: tensor<93xi8>, %b: tensor<93xbf16>, %c: tensor<93xui32>) -> (tensor<93xf32>, tensor<93xi16>) {
  %0 = compute.cast %a : (tensor<93xi8>) -> tensor<93xi32>
  %1 = compute.cast %b : (tensor<93xbf16>) -> tensor<93xi32>
  %2 = compute.mul %0, %1 : tensor<93xi32>
  %3 = compute.cast %c : (tensor<93xui32>) -> tensor<93xi32>
  %4 = compute.add %2, %3 : tensor<93xi32>
  %5 = compute.cast %4 : (tensor<93xi32>) -> tensor<93xbf16>
  %6 = compute.cast %5 : (tensor<93xbf16>) -> tensor<93xf32>
  %7 = compute.cast %4 : (tensor<93xi32>) -> tensor<93xi16>
  return %6, %7 : tensor<93xf32>, tensor<93xi16>
}",
        4,
    );
}

/// The spellings of `i1`: all three hold 0 or 1 (true is 1, not -1) in the sim and are one
/// byte, 0 or 1, in the kernels' buffers.
const BOOLS: [&str; 3] = ["i1", "si1", "ui1"];

#[test]
fn i1_arithmetic_is_mod_2_and_compares_unsigned() {
    // 67 elements: four 16-byte vectors and a scalar tail when aligned, all scalar when not.
    // add/sub are xor, mul and minimum are and, maximum is or, neg and relu are the identity
    // (a signed reading would make 1 the smaller value, -1). The divisor is 1 (the sim
    // rejects a division by zero).
    for t in BOOLS {
        check(
            &format!(
                "func.func @f(%a: tensor<67x{t}>, %b: tensor<67x{t}>, %c: tensor<67x{t}>) -> (tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>) {{
  %0 = compute.add %a, %b : tensor<67x{t}>
  %1 = compute.mul %0, %c : tensor<67x{t}>
  %2 = compute.sub %1, %a : tensor<67x{t}>
  %3 = compute.maximum %a, %b : tensor<67x{t}>
  %4 = compute.minimum %3, %c : tensor<67x{t}>
  %5 = compute.neg %a : tensor<67x{t}>
  %6 = compute.relu %5 : tensor<67x{t}>
  %7 = compute.sub %6, %b : tensor<67x{t}>
  %one = compute.fill {{value = 1.0 : f64}} : tensor<67x{t}>
  %d = compute.maximum %b, %one : tensor<67x{t}>
  %q = compute.div %c, %d : tensor<67x{t}>
  %8 = compute.maximum %a, %c : tensor<67x{t}>
  %9 = compute.minimum %b, %c : tensor<67x{t}>
  return %2, %4, %7, %q, %8, %9 : tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>
}}"
            ),
            4,
        );
    }
}

#[test]
fn i1_casts_to_and_from_every_type() {
    // i1 -> int zero-extends (true is 1), int -> i1 keeps the low bit, i1 -> float is 0.0 /
    // 1.0, float -> i1 truncates toward zero and saturates to [0, 1] with NaN -> 0 (the
    // random floats include 0.5, 0.99, 1, 1.5, -0.5, -1, 2, NaN and +-inf).
    let others = [
        "i1", "si1", "ui1", "i8", "ui8", "i16", "i32", "ui32", "i64", "ui64", "f16", "bf16", "f32",
        "f64",
    ];
    for a in BOOLS {
        for b in others {
            for (x, y) in [(a, b), (b, a)] {
                check_cast(x, y);
            }
        }
    }
}

#[test]
fn i1_fills_reductions_and_data_movement() {
    // Fills convert like casts (0.5 -> 0, 1.5 -> 1, -3 -> 0, 1e30 -> 1); reduce_sum is the
    // parity along a strided and along the contiguous dimension; clone is a plain 16-byte
    // vector copy; transpose/slice/concat move bytes.
    for t in BOOLS {
        check(
            &format!(
                "func.func @f(%a: tensor<6x5x7x{t}>, %b: tensor<6x3x7x{t}>) -> (tensor<6x7x{t}>, tensor<6x5x{t}>, tensor<6x7x5x{t}>, tensor<6x2x7x{t}>, tensor<6x8x7x{t}>, tensor<6x5x7x{t}>, tensor<6x5x7x{t}>, tensor<6x5x7x{t}>, tensor<210x{t}>, tensor<6x5x7x{t}>) {{
  %0 = compute.reduce_sum %a {{dim = 1 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x7x{t}>
  %1 = compute.reduce_sum %a {{dim = 2 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x5x{t}>
  %2 = compute.transpose %a : (tensor<6x5x7x{t}>) -> tensor<6x7x5x{t}>
  %3 = compute.slice %a {{dim = 1 : i64, start = 2 : i64, size = 2 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x2x7x{t}>
  %4 = compute.concat %a, %b {{dim = 1 : i64}} : (tensor<6x5x7x{t}>, tensor<6x3x7x{t}>) -> tensor<6x8x7x{t}>
  %f = compute.fill {{value = 0.5 : f64}} : tensor<6x5x7x{t}>
  %5 = compute.add %a, %f : tensor<6x5x7x{t}>
  %g = compute.fill {{value = 1.5 : f64}} : tensor<6x5x7x{t}>
  %6 = compute.add %a, %g : tensor<6x5x7x{t}>
  %h = compute.fill {{value = -3.0 : f64}} : tensor<6x5x7x{t}>
  %k = compute.fill {{value = 1.0e30 : f64}} : tensor<6x5x7x{t}>
  %7 = compute.maximum %h, %k : tensor<6x5x7x{t}>
  %8 = compute.reshape %a : (tensor<6x5x7x{t}>) -> tensor<210x{t}>
  %9 = compute.clone %a : tensor<6x5x7x{t}>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<6x7x{t}>, tensor<6x5x{t}>, tensor<6x7x5x{t}>, tensor<6x2x7x{t}>, tensor<6x8x7x{t}>, tensor<6x5x7x{t}>, tensor<6x5x7x{t}>, tensor<6x5x7x{t}>, tensor<210x{t}>, tensor<6x5x7x{t}>
}}"
            ),
            2,
        );
    }
    // A long parity (one thread per lane walks 1000 elements) and a plain copy of 16-byte
    // vectors with a tail.
    check(
        "func.func @f(%a: tensor<3x1000xi1>) -> (tensor<3xi1>, tensor<3x1000xi1>) {
  %0 = compute.reduce_sum %a {dim = 1 : i64} : (tensor<3x1000xi1>) -> tensor<3xi1>
  %1 = compute.clone %a : tensor<3x1000xi1>
  return %0, %1 : tensor<3xi1>, tensor<3x1000xi1>
}",
        3,
    );
}

#[test]
fn i1_fused_chain_across_types() {
    // A mask applied to floats, comparisons of floats and integers turned into i1 and
    // combined, and i1 widened back into integer and float arithmetic, in one kernel each.
    check(
        "func.func @f(%x: tensor<93xf32>, %m: tensor<93xi1>, %c: tensor<93xi8>, %h: tensor<93xbf16>, %u: tensor<93xui1>) -> (tensor<93xf32>, tensor<93xi32>, tensor<93xbf16>, tensor<93xf64>) {
  %0 = compute.cast %m : (tensor<93xi1>) -> tensor<93xf32>
  %1 = compute.mul %x, %0 : tensor<93xf32>
  %2 = compute.cast %x : (tensor<93xf32>) -> tensor<93xi1>
  %3 = compute.cast %c : (tensor<93xi8>) -> tensor<93xi1>
  %4 = compute.maximum %2, %3 : tensor<93xi1>
  %5 = compute.minimum %4, %m : tensor<93xi1>
  %6 = compute.cast %5 : (tensor<93xi1>) -> tensor<93xi32>
  %7 = compute.cast %c : (tensor<93xi8>) -> tensor<93xi32>
  %8 = compute.add %6, %7 : tensor<93xi32>
  %9 = compute.cast %h : (tensor<93xbf16>) -> tensor<93xi1>
  %10 = compute.sub %9, %m : tensor<93xi1>
  %11 = compute.cast %10 : (tensor<93xi1>) -> tensor<93xbf16>
  %12 = compute.cast %u : (tensor<93xui1>) -> tensor<93xi8>
  %13 = compute.neg %12 : tensor<93xi8>
  %14 = compute.cast %13 : (tensor<93xi8>) -> tensor<93xf64>
  return %1, %8, %11, %14 : tensor<93xf32>, tensor<93xi32>, tensor<93xbf16>, tensor<93xf64>
}",
        4,
    );
}
