//! Shared by the tests that run code generated for the GPU on the host: parsing, the
//! kernels' LLVM IR retargeted to the host JIT (one thread of one block, which the grid-stride
//! loops make a valid launch), the half-precision libcalls that IR needs, and calling a JIT'd
//! kernel by address.

#![allow(dead_code)]

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::{Context, OpId};
use commlir_runtime::numeric::{bf16_bits, f16_bits, f16_value};
use inkwell::execution_engine::ExecutionEngine;
use inkwell::module::Module;

/// Parses and verifies `text` (panics with the diagnostic and the text otherwise).
pub fn parse(ctx: &mut Context, text: &str) -> OpId {
    commlir_codegen::link();
    let m = parse_source(ctx, "t.mlir", text.as_bytes(), &ParseOptions::default())
        .unwrap_or_else(|d| panic!("{}\n{text}", d.message));
    commlir_ir::verify::verify(ctx, m).unwrap_or_else(|d| panic!("{:?}\n{text}", d[0].message));
    m
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
        let l = line
            .replace("ptx_kernel ", "")
            .replace(" addrspace(1)", "")
            .replace("@llvm.nvvm.read.ptx.sreg.", "@sreg_");
        out.push_str(&l);
        out.push('\n');
    }
    for (name, v) in [("tid.x", 0), ("ctaid.x", 0), ("ntid.x", 1), ("nctaid.x", 1)] {
        out.push_str(&format!(
            "define i32 @sreg_{name}() {{\n  ret i32 {v}\n}}\n"
        ));
    }
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
#[allow(dead_code)]
pub extern "C" fn symm_clock() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    std::thread::yield_now();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}
