//! Shared by the tests that run code generated for the GPU on the host: parsing, the
//! kernels' LLVM IR retargeted to the host JIT (one thread of one block, which the grid-stride
//! loops make a valid launch), the half-precision libcalls that IR needs, calling a JIT'd
//! kernel by address, and [`kernel_check`], which runs a program's kernels against the sim.

#![allow(dead_code)]

pub mod kernel_check;
pub mod mock_attention;

use commlir_codegen::lower_to_rt;
use commlir_dialects::rt::abi::SymmDesc;
use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::pass::{parse_pipeline, PassManager};
use commlir_ir::{Context, OpId};
use commlir_runtime::cuda::tensor_bytes;
use commlir_runtime::inputs;
use commlir_runtime::numeric::{bf16_bits, f16_bits, f16_value};
use commlir_runtime::sim::{self, SimOptions};
use commlir_runtime::{RankResults, TensorType};
use inkwell::context::Context as LlContext;
use inkwell::execution_engine::ExecutionEngine;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use inkwell::targets::{InitializationConfig, Target};
use inkwell::OptimizationLevel;
use std::ffi::c_void;

/// Parses and verifies `text` (panics with the diagnostic and the text otherwise).
pub fn parse(ctx: &mut Context, text: &str) -> OpId {
    commlir_codegen::link();
    let m = parse_source(ctx, "t.mlir", text.as_bytes(), &ParseOptions::default())
        .unwrap_or_else(|d| panic!("{}\n{text}", d.message));
    commlir_ir::verify::verify(ctx, m).unwrap_or_else(|d| panic!("{:?}\n{text}", d[0].message));
    m
}

/// Parses `text`, runs `pipeline` on it and lowers it to the `rt` dialect (panics with the
/// diagnostic and the text on failure).
pub fn lower(ctx: &mut Context, text: &str, pipeline: &str) -> OpId {
    let m = parse(ctx, text);
    let mut pm = PassManager::from_pipeline(parse_pipeline(pipeline).unwrap());
    pm.run(ctx, m)
        .unwrap_or_else(|d| panic!("{}\n{text}", d[0].message));
    lower_to_rt::lower_module(ctx, m).unwrap_or_else(|d| panic!("{}\n{text}", d.message));
    m
}

/// The sim's results of `text` on `ranks` ranks, and its entry's parameter types.
pub fn sim_reference(text: &str, ranks: usize) -> (Vec<RankResults>, Vec<TensorType>) {
    let mut sctx = Context::new();
    let sm = parse(&mut sctx, text);
    let want = sim::run(
        &sctx,
        sm,
        &SimOptions {
            ranks,
            ..SimOptions::default()
        },
    )
    .unwrap_or_else(|d| panic!("sim: {}\n{text}", d.message));
    let entry = sim::find_entry(&sctx, sm, None).unwrap();
    let (params, _) = commlir_dialects::func::func_signature(&sctx, entry).unwrap();
    let in_types = params
        .iter()
        .map(|t| TensorType::from_type(&sctx, *t).unwrap())
        .collect();
    (want, in_types)
}

/// Zeroed 16-byte-aligned storage of at least `bytes` bytes (at least one word).
pub fn storage(bytes: usize) -> Vec<u128> {
    vec![0u128; bytes.div_ceil(16).max(1)]
}

/// Rank `rank`'s generated inputs of types `in_types` (the runner's argument buffers), and
/// their addresses.
pub fn input_buffers(in_types: &[TensorType], rank: usize) -> (Vec<Vec<u128>>, Vec<*mut c_void>) {
    input_buffers_from(in_types, &vec![rank; in_types.len()])
}

/// [`input_buffers`] with argument i generated as rank `ranks[i]`'s (an argument marked
/// `coll.replicated` takes its subgroup's first member's, as the runner generates it).
#[allow(dead_code)]
pub fn input_buffers_from(
    in_types: &[TensorType],
    ranks: &[usize],
) -> (Vec<Vec<u128>>, Vec<*mut c_void>) {
    let mut store: Vec<Vec<u128>> = in_types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let bytes = tensor_bytes(&inputs::generate(t, 0, ranks[i], i));
            let mut v = storage(bytes.len());
            // SAFETY: the storage holds at least `bytes.len()` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    v.as_mut_ptr() as *mut u8,
                    bytes.len(),
                )
            };
            v
        })
        .collect();
    let ptrs = store
        .iter_mut()
        .map(|v| v.as_mut_ptr() as *mut c_void)
        .collect();
    (store, ptrs)
}

/// Rank `rank`'s descriptor of a symmetric pool over `world` ranks: `peer(p)` is peer `p`'s
/// (pool base, signal pad) address, `status` the address of the rank's fault word.
pub fn symm_desc(
    status: u64,
    timeout_ns: u64,
    rank: usize,
    world: usize,
    peer: impl Fn(usize) -> (u64, u64),
) -> SymmDesc {
    let mut d = SymmDesc {
        status,
        timeout_ns,
        rank: rank as u32,
        world: world as u32,
        ..SymmDesc::default()
    };
    for p in 0..world {
        (d.base[p], d.signal[p]) = peer(p);
    }
    d
}

/// The kernels' LLVM IR for the host: one thread of one block.
pub fn host_ir(ptx_ir: &str) -> String {
    let mut out = String::new();
    for line in ptx_ir.lines() {
        if line.starts_with("target datalayout") || line.starts_with("target triple") {
            continue;
        }
        if line.starts_with("declare") && line.contains("@llvm.nvvm.read.ptx.sreg.") {
            continue;
        }
        if line.starts_with("declare")
            && (line.contains("@llvm.nvvm.shfl.sync.bfly.f32")
                || line.contains("@llvm.nvvm.barrier")
                || line.contains("@llvm.nvvm.ex2.approx.f32")
                || line.contains("@llvm.nvvm.rcp.approx.ftz.f"))
        {
            continue;
        }
        let l = line
            .replace("ptx_kernel ", "")
            .replace(" addrspace(1)", "")
            .replace(" addrspace(3)", "")
            .replace("@llvm.nvvm.read.ptx.sreg.", "@sreg_")
            .replace("@llvm.nvvm.shfl.sync.bfly.f32", "@host_shfl_bfly")
            .replace("@llvm.nvvm.barrier.cta.sync.aligned.all", "@host_bar_sync")
            .replace("@llvm.nvvm.barrier0", "@host_bar0")
            .replace("@llvm.nvvm.ex2.approx.f32", "@host_ex2")
            .replace("@llvm.nvvm.rcp.approx.ftz.f", "@host_rcp");
        out.push_str(&l);
        out.push('\n');
    }
    for (name, v) in [("tid.x", 0), ("ctaid.x", 0), ("ntid.x", 1), ("nctaid.x", 1)] {
        out.push_str(&format!(
            "define i32 @sreg_{name}() {{\n  ret i32 {v}\n}}\n"
        ));
    }
    // One thread: a shuffle's partner lane is past the block (the kernels then use the
    // identity), and a block barrier has nobody to wait for.
    out.push_str(
        "define float @host_shfl_bfly(i32 %m, float %v, i32 %o, i32 %c) {\n  ret float %v\n}\n",
    );
    out.push_str("define void @host_bar_sync(i32 %b) {\n  ret void\n}\n");
    out.push_str("define void @host_bar0() {\n  ret void\n}\n");
    // The GPU's `ex2.approx.f32` (relative error below 2^-22) as the exact 2^x: the fast exp
    // of f16/bf16 results, whose rounding hides the difference almost always.
    out.push_str("declare float @llvm.exp2.f32(float)\ndefine float @host_ex2(float %x) {\n  %r = call float @llvm.exp2.f32(float %x)\n  ret float %r\n}\n");
    // The GPU's `rcp.approx.ftz.f32` (the fast tanh's reciprocal, within 1 ulp) as 1 / x.
    out.push_str(
        "define float @host_rcp(float %x) {\n  %r = fdiv float 1.0, %x\n  ret float %r\n}\n",
    );
    for (name, _, sig) in LIBCALLS {
        out.push_str(&format!("declare {sig}\n").replace("@", &format!("@{name}")));
    }
    out
}

// The x86-64 libcalls LLVM emits for f16/bf16 conversions, which the JIT cannot find in a
// test binary: implemented with the sim's own round-to-nearest-even (half and bfloat travel
// in the low 16 bits of an XMM register, as an f32's bits).
extern "C" fn extendhfsf2(x: f32) -> f32 {
    f16_value(x.to_bits() as u16) as f32
}
extern "C" fn truncsfhf2(x: f32) -> f32 {
    f32::from_bits(u32::from(f16_bits(f64::from(x))))
}
extern "C" fn truncdfhf2(x: f64) -> f32 {
    f32::from_bits(u32::from(f16_bits(x)))
}
extern "C" fn truncsfbf2(x: f32) -> f32 {
    f32::from_bits(u32::from(bf16_bits(f64::from(x))))
}
extern "C" fn truncdfbf2(x: f64) -> f32 {
    f32::from_bits(u32::from(bf16_bits(x)))
}

/// (symbol, implementation, declaration with `@` for the name).
pub const LIBCALLS: [(&str, usize, &str); 5] = [
    ("__extendhfsf2", 0, "float @(float)"),
    ("__truncsfhf2", 1, "float @(float)"),
    ("__truncdfhf2", 2, "float @(double)"),
    ("__truncsfbf2", 3, "float @(float)"),
    ("__truncdfbf2", 4, "float @(double)"),
];

pub fn libcall_addr(i: usize) -> usize {
    match i {
        0 => extendhfsf2 as *const () as usize,
        1 => truncsfhf2 as *const () as usize,
        2 => truncdfhf2 as *const () as usize,
        3 => truncsfbf2 as *const () as usize,
        _ => truncdfbf2 as *const () as usize,
    }
}

/// [`host_ir`] for kernels that synchronise ranks: the block barrier of a one-thread block,
/// and `%globaltimer` read from [`symm_clock`].
pub fn symm_host_ir(ptx_ir: &str) -> String {
    let mut ir = String::new();
    for line in host_ir(ptx_ir).lines() {
        if line.starts_with("declare") && line.contains("@llvm.nvvm.barrier") {
            continue;
        }
        ir.push_str(&line.replace("@llvm.nvvm.barrier.cta.red.or.aligned.all", "@host_bar_or"));
        ir.push('\n');
    }
    ir.push_str("define i1 @host_bar_or(i32 %b, i1 %p) {\n  ret i1 %p\n}\n");
    ir.push_str("declare i64 @symm_clock()\n");
    ir.push_str(
        "define i64 @sreg_globaltimer() {\n  %t = call i64 @symm_clock()\n  ret i64 %t\n}\n",
    );
    ir
}

/// Parses LLVM IR `ir` into a module of `llcx` (panics with the error and the IR).
pub fn load_ir<'c>(llcx: &'c LlContext, ir: &str, name: &str) -> Module<'c> {
    let buf = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), name);
    llcx.create_module_from_ir(buf)
        .unwrap_or_else(|e| panic!("{e}\n{ir}"))
}

/// Maps the libcalls `module` declares, and `symm_clock` where it declares it.
fn map_runtime(ee: &ExecutionEngine, module: &Module) {
    map_libcalls(ee, module);
    if let Some(f) = module.get_function("symm_clock") {
        ee.add_global_mapping(&f, symm_clock as *const () as usize);
    }
}

/// A JIT of kernel IR `ir` alone (from [`symm_host_ir`]), optimised; its context lives as
/// long as the test binary, so the engine can be kept while the kernels run.
pub fn jit_kernels(ir: &str, name: &str) -> ExecutionEngine<'static> {
    Target::initialize_native(&InitializationConfig::default()).unwrap();
    let llcx: &'static LlContext = Box::leak(Box::new(LlContext::create()));
    let module = load_ir(llcx, ir, name);
    let ee = module
        .create_jit_execution_engine(OptimizationLevel::Default)
        .unwrap();
    map_runtime(&ee, &module);
    ee
}

/// A JIT of a compiled program: its host IR `host`, and its kernels' host IR `kernels`.
pub fn jit_program<'c>(llcx: &'c LlContext, host: &str, kernels: &str) -> ExecutionEngine<'c> {
    Target::initialize_native(&InitializationConfig::default()).unwrap();
    let hm = load_ir(llcx, host, "host");
    let km = load_ir(llcx, kernels, "kernels");
    let ee = hm
        .create_jit_execution_engine(OptimizationLevel::None)
        .unwrap();
    ee.add_module(&km).unwrap();
    map_runtime(&ee, &km);
    ee
}

/// Maps the libcalls `module` (from [`host_ir`]) declares to their implementations.
pub fn map_libcalls(ee: &ExecutionEngine, module: &Module) {
    for (name, i, _) in LIBCALLS {
        let f = module.get_function(name).expect("declared libcall");
        ee.add_global_mapping(&f, libcall_addr(i));
    }
}

type K1 = unsafe extern "C" fn(*mut u8);
type K2 = unsafe extern "C" fn(*mut u8, *mut u8);
type K3 = unsafe extern "C" fn(*mut u8, *mut u8, *mut u8);
type K4 = unsafe extern "C" fn(*mut u8, *mut u8, *mut u8, *mut u8);
type K5 = unsafe extern "C" fn(*mut u8, *mut u8, *mut u8, *mut u8, *mut u8);

/// Launches JIT'd kernel `name` on pointer parameters `p`.
pub fn launch(ee: &ExecutionEngine, name: &str, p: &[*mut u8]) {
    let addr = ee
        .get_function_address(name)
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    // SAFETY: every kernel takes one pointer per argument and the result, returns nothing;
    // the buffers are as large as the kernel's compiled-in shapes.
    unsafe { call_kernel(addr, p) }
}

/// Calls the kernel at `addr` with pointer parameters `p`.
///
/// # Safety
/// `addr` is a kernel taking `p.len()` pointers, each to a buffer of the size it expects.
pub unsafe fn call_kernel(addr: usize, p: &[*mut u8]) {
    match p {
        [a] => std::mem::transmute::<usize, K1>(addr)(*a),
        [a, b] => std::mem::transmute::<usize, K2>(addr)(*a, *b),
        [a, b, c] => std::mem::transmute::<usize, K3>(addr)(*a, *b, *c),
        [a, b, c, d] => std::mem::transmute::<usize, K4>(addr)(*a, *b, *c, *d),
        [a, b, c, d, e] => std::mem::transmute::<usize, K5>(addr)(*a, *b, *c, *d, *e),
        _ => panic!("a kernel with {} parameters", p.len()),
    }
}

/// The host's `%globaltimer` for kernels retargeted to the host: nanoseconds since the first
/// call. A kernel reads it on every failed spin of a barrier, so it also yields the thread:
/// with more simulated ranks than cores, a spinning rank would otherwise keep the peer it
/// waits for off the CPU for its whole time slice.
pub extern "C" fn symm_clock() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    std::thread::yield_now();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

/// The kernels `text` launches after `coll-to-comm,comm-plan-pools` and the lowering, in
/// order, named without their `kN_` prefix (`k12_mul_add` → `mul_add`).
pub fn launches(text: &str) -> Vec<String> {
    let mut ctx = Context::new();
    let m = lower(
        &mut ctx,
        text,
        "builtin.module(func.func(coll-to-comm,comm-plan-pools))",
    );
    let b = lower_to_rt::module_block(&ctx, m).unwrap();
    let f = ctx
        .block_ops(b)
        .find(|o| ctx.op_name(*o) == "func.func")
        .unwrap();
    let body = ctx.region_blocks(ctx.op_regions(f)[0])[0];
    ctx.block_ops(body)
        .filter(|o| ctx.op_name(*o) == "rt.launch")
        .map(|o| {
            let k = ctx
                .inherent_attr(o, "kernel")
                .and_then(|a| ctx.attr_as_symbol(a))
                .unwrap();
            k.split_once('_').map_or(k, |(_, n)| n).to_string()
        })
        .collect()
}
