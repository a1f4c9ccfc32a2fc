//! The host program executed on the CPU: generated programs of several functions that call
//! each other (`func.call`) are lowered and compiled as for the GPU; the host program's LLVM IR
//! and the kernels (retargeted to the host, one thread of one block, as in
//! `tests/common`) are JIT-compiled together and `commlir_main` is called with a mock
//! runtime table. The mock allocates host memory, runs kernel launches through the JIT,
//! implements the collectives of a one-rank group (a copy when out of place) and checks the
//! protocol: every `free` and `pool_free` of a live buffer, event indices inside
//! `commlir_num_events`, waits only on recorded events. The results must equal the sim
//! backend's byte for byte, and after the runner's release of the returned allocations
//! nothing may be left live (every call result freed exactly once, no pool left held).
//!
//! Attention goes to the runtime's cuDNN calls (`attention`, `attention_backward`), which the
//! mock carries out with the sim's semantics (`common::mock_attention`).
//!
//! This covers what the lit tests can only show textually: argument and result marshaling of
//! calls, the ownership of call results (including results that alias an argument or repeat a
//! value, which the lowering must copy), callee pools allocated while the caller's are live,
//! and per-module event numbering.

use commlir_codegen::{host, kernels, lower_to_rt};
use commlir_dialects::rt::abi::{self, CommlirMain, CommlirRtApi, Status};
use commlir_ir::Context;
use commlir_runtime::cuda::tensor_bytes;
use commlir_runtime::inputs::SplitMix64;
use inkwell::context::Context as LlContext;
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;

mod common;
use common::{host_ir, input_buffers, jit_program, lower, sim_reference, storage};

const PIPELINE: &str = "builtin.module(func.func(coll-to-comm{one-shot-threshold=0},comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools))";

/// The mock runtime's state (the `rt` pointer of every API call).
#[derive(Default)]
struct Mock {
    /// Kernel entry addresses, by the program's kernel index.
    kernels: Vec<usize>,
    /// Live `alloc` buffers by address (16-byte aligned storage).
    allocs: HashMap<usize, Vec<u128>>,
    /// Live pools by address.
    pools: HashMap<usize, Vec<u128>>,
    /// Freed storage, kept so that a stale pointer never aliases a new buffer.
    graveyard: Vec<Vec<u128>>,
    num_events: u32,
    recorded: HashSet<u32>,
    /// The first protocol violation.
    error: Option<String>,
}

impl Mock {
    fn fail(&mut self, m: String) -> Status {
        self.error.get_or_insert(m);
        1
    }
    fn buffer(bytes: u64) -> (usize, Vec<u128>) {
        let mut v = storage(bytes as usize);
        (v.as_mut_ptr() as usize, v)
    }
}

fn mock<'a>(rt: *mut c_void) -> &'a mut Mock {
    // SAFETY: every API call gets the `Mock` the test passed to `commlir_main`.
    unsafe { &mut *(rt as *mut Mock) }
}

/// A fresh buffer of `bytes`, live in `m.allocs` (`pool` false) or `m.pools`.
unsafe fn take(m: &mut Mock, pool: bool, bytes: u64, out: *mut *mut c_void) -> Status {
    let (p, v) = Mock::buffer(bytes);
    if pool { &mut m.pools } else { &mut m.allocs }.insert(p, v);
    *out = p as *mut c_void;
    0
}

/// Releases live buffer `p` of `m.allocs` (`pool` false) or `m.pools`; anything else is a
/// protocol violation (a double free, or a pointer the runtime never returned).
fn give(m: &mut Mock, pool: bool, p: *mut c_void) -> Status {
    match if pool { &mut m.pools } else { &mut m.allocs }.remove(&(p as usize)) {
        Some(v) => {
            m.graveyard.push(v);
            0
        }
        None => m.fail(format!(
            "{} of {p:?}, not live",
            if pool { "pool_free" } else { "free" }
        )),
    }
}

unsafe extern "C" fn m_alloc(rt: *mut c_void, bytes: u64, out: *mut *mut c_void) -> Status {
    take(mock(rt), false, bytes, out)
}
unsafe extern "C" fn m_free(rt: *mut c_void, p: *mut c_void) -> Status {
    give(mock(rt), false, p)
}
unsafe extern "C" fn m_pool_alloc(
    rt: *mut c_void,
    _kind: u32,
    _group: u32,
    bytes: u64,
    _alignment: u64,
    out: *mut *mut c_void,
) -> Status {
    take(mock(rt), true, bytes, out)
}
unsafe extern "C" fn m_pool_free(rt: *mut c_void, p: *mut c_void) -> Status {
    give(mock(rt), true, p)
}

unsafe extern "C" fn m_launch(
    rt: *mut c_void,
    kernel: u32,
    _grid: u32,
    _block: u32,
    _shared: u32,
    params: *mut *mut c_void,
    n: u32,
) -> Status {
    let m = mock(rt);
    let Some(&addr) = m.kernels.get(kernel as usize) else {
        return m.fail(format!("launch of kernel {kernel}, which does not exist"));
    };
    // kernelParams: pointers to the argument values (device pointers).
    let p: Vec<*mut u8> = (0..n as usize)
        .map(|i| *(*params.add(i) as *const *mut u8))
        .collect();
    common::call_kernel(addr, &p);
    0
}

fn dtype_bytes(dtype: u32) -> Option<usize> {
    let name = abi::DTYPES.iter().find(|(_, c)| *c == dtype)?.0;
    Some(match name {
        "i8" | "u8" => 1,
        "f16" | "bf16" => 2,
        "i32" | "u32" | "f32" => 4,
        _ => 8,
    })
}

/// A collective over a group of one rank: its result is its input.
unsafe fn one_rank(
    rt: *mut c_void,
    send: *const c_void,
    recv: *mut c_void,
    count: u64,
    dtype: u32,
) -> Status {
    let Some(b) = dtype_bytes(dtype) else {
        return mock(rt).fail(format!("unknown dtype {dtype}"));
    };
    if !std::ptr::eq(send, recv) {
        std::ptr::copy(send as *const u8, recv as *mut u8, count as usize * b);
    }
    0
}
unsafe extern "C" fn m_all_reduce(
    rt: *mut c_void,
    _group: u32,
    send: *const c_void,
    recv: *mut c_void,
    count: u64,
    dtype: u32,
    _op: u32,
) -> Status {
    one_rank(rt, send, recv, count, dtype)
}
unsafe extern "C" fn m_all_gather(
    rt: *mut c_void,
    _group: u32,
    send: *const c_void,
    recv: *mut c_void,
    count: u64,
    dtype: u32,
) -> Status {
    one_rank(rt, send, recv, count, dtype)
}
unsafe extern "C" fn m_all_to_all(
    rt: *mut c_void,
    _g: u32,
    _s: *const c_void,
    _r: *mut c_void,
    _c: u64,
    _re: u64,
    _d: u32,
    _sr: *const i64,
    _rr: *const i64,
) -> Status {
    mock(rt).fail("all_to_all is not generated".into())
}
unsafe extern "C" fn m_gemm(
    rt: *mut c_void,
    _ta: u32,
    _tb: u32,
    _m: i64,
    _n: i64,
    _k: i64,
    _a: *const c_void,
    _lda: i64,
    _sa: i64,
    _b: *const c_void,
    _ldb: i64,
    _sb: i64,
    _c: *mut c_void,
    _ldc: i64,
    _sc: i64,
    _batch: i64,
    _d: u32,
    _alpha: f64,
    _beta: f64,
) -> Status {
    mock(rt).fail("gemm is not generated".into())
}
unsafe extern "C" fn m_group(_rt: *mut c_void) -> Status {
    0
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn m_symm_fallback(
    rt: *mut c_void,
    _coll: u32,
    _g: u32,
    _pool: *mut c_void,
    _off: u64,
    _out: *mut c_void,
    _count: u64,
    _d: u32,
    _op: u32,
) -> Status {
    mock(rt).fail("symm collectives are not generated".into())
}
unsafe extern "C" fn m_symm_pool_desc(
    rt: *mut c_void,
    _pool: *mut c_void,
    _desc: *mut *mut c_void,
) -> Status {
    mock(rt).fail("symm collectives are not generated".into())
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn m_launch_on(
    rt: *mut c_void,
    _stream: u32,
    _kernel: u32,
    _grid: u32,
    _block: u32,
    _shared: u32,
    _params: *mut *mut c_void,
    _n: u32,
) -> Status {
    mock(rt).fail("fused collective-matmul ops are not generated".into())
}
unsafe extern "C" fn m_group_rank(rt: *mut c_void, _g: u32, _rank: *mut u32) -> Status {
    mock(rt).fail("fused collective-matmul ops are not generated".into())
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn m_symm_peer_copy(
    rt: *mut c_void,
    _stream: u32,
    _pool: *mut c_void,
    _peer: u32,
    _src_offset: u64,
    _dst: *mut c_void,
    _rows: u64,
    _row_bytes: u64,
    _dst_pitch: u64,
) -> Status {
    mock(rt).fail("fused collective-matmul ops are not generated".into())
}
unsafe extern "C" fn m_copy_on(
    rt: *mut c_void,
    _stream: u32,
    _dst: *mut c_void,
    _src: *const c_void,
    _bytes: u64,
) -> Status {
    mock(rt).fail("fused collective-matmul ops are not generated".into())
}
unsafe extern "C" fn m_symm_peer_put(
    rt: *mut c_void,
    _stream: u32,
    _pool: *mut c_void,
    _peer: u32,
    _dst_offset: u64,
    _src: *const c_void,
    _bytes: u64,
) -> Status {
    mock(rt).fail("fused collective-matmul ops are not generated".into())
}
unsafe extern "C" fn m_event_record(rt: *mut c_void, _stream: u32, e: u32) -> Status {
    let m = mock(rt);
    if e >= m.num_events {
        return m.fail(format!("event_record of event {e} of {}", m.num_events));
    }
    m.recorded.insert(e);
    0
}
unsafe extern "C" fn m_stream_wait(rt: *mut c_void, _stream: u32, e: u32) -> Status {
    let m = mock(rt);
    if !m.recorded.contains(&e) {
        return m.fail(format!("stream_wait on event {e}, never recorded"));
    }
    0
}

static API: CommlirRtApi = CommlirRtApi {
    abi_version: abi::ABI_VERSION,
    num_fns: abi::API_FIELDS.len() as u32,
    alloc: m_alloc,
    free: m_free,
    pool_alloc: m_pool_alloc,
    pool_free: m_pool_free,
    launch: m_launch,
    gemm: m_gemm,
    all_reduce: m_all_reduce,
    all_gather: m_all_gather,
    reduce_scatter: m_all_reduce,
    all_to_all: m_all_to_all,
    broadcast: m_all_reduce,
    group_start: m_group,
    group_end: m_group,
    symm_fallback: m_symm_fallback,
    event_record: m_event_record,
    stream_wait: m_stream_wait,
    symm_pool_desc: m_symm_pool_desc,
    launch_on: m_launch_on,
    group_rank: m_group_rank,
    symm_peer_copy: m_symm_peer_copy,
    copy_on: m_copy_on,
    symm_peer_put: m_symm_peer_put,
    attention: common::mock_attention::attention,
    attention_backward: common::mock_attention::attention_backward,
};

const T: &str = "tensor<4x16xf32>";

/// A random program of `nf` functions over one tensor type: function `i` calls only
/// functions `j > i` (so the call graph is acyclic), mixes elementwise ops, calls (results
/// used, unused and passed on) and all-reduces over a one-rank group, and returns a random
/// pick of its values, arguments and repeats included.
fn generate(seed: u64) -> String {
    let mut g = SplitMix64::new(seed);
    let mut pick = |n: usize| (g.next_u64() % n as u64) as usize;
    let nf = 2 + pick(3);
    let arity: Vec<usize> = (0..nf).map(|_| 1 + pick(3)).collect();
    let nres: Vec<usize> = (0..nf)
        .map(|i| if i == 0 { 1 + pick(2) } else { 1 + pick(3) })
        .collect();
    let mut out = String::from("coll.group @g {size = 1 : i64}\n");
    for f in 0..nf {
        let args: Vec<String> = (0..arity[f]).map(|a| format!("%a{a}")).collect();
        let mut vals = args.clone();
        let sig: Vec<String> = args.iter().map(|a| format!("{a}: {T}")).collect();
        let res_tys = vec![T; nres[f]].join(", ");
        let vis = if f == 0 { "" } else { "private " };
        let name = if f == 0 {
            "main".to_string()
        } else {
            format!("f{f}")
        };
        out += &format!(
            "func.func {vis}@{name}({}) -> ({res_tys}) {{\n",
            sig.join(", ")
        );
        let mut pending: Vec<(String, String)> = Vec::new();
        for k in 0..3 + pick(6) {
            let v = format!("%v{k}");
            match pick(10) {
                0..=3 => {
                    let op = ["add", "mul", "sub", "maximum"][pick(4)];
                    let (x, y) = (&vals[pick(vals.len())], &vals[pick(vals.len())]);
                    out += &format!("  {v} = compute.{op} {x}, {y} : {T}\n");
                    vals.push(v);
                }
                4 | 5 => {
                    let op = ["relu", "neg"][pick(2)];
                    let x = &vals[pick(vals.len())];
                    out += &format!("  {v} = compute.{op} {x} : {T}\n");
                    vals.push(v);
                }
                6 | 7 if f + 1 < nf => {
                    let c = f + 1 + pick(nf - f - 1);
                    let a: Vec<String> = (0..arity[c])
                        .map(|_| vals[pick(vals.len())].clone())
                        .collect();
                    let ins = vec![T; arity[c]].join(", ");
                    let outs = vec![T; nres[c]].join(", ");
                    out += &format!(
                        "  {v}:{} = func.call @f{c}({}) : ({ins}) -> ({outs})\n",
                        nres[c],
                        a.join(", ")
                    );
                    // Some results are never read.
                    for r in 0..nres[c] {
                        if pick(4) != 0 {
                            vals.push(format!("{v}#{r}"));
                        }
                    }
                }
                _ => {
                    let x = &vals[pick(vals.len())];
                    let op = ["sum", "max"][pick(2)];
                    out += &format!(
                        "  {v}r = coll.all_reduce {x} {{reduce_op = \"{op}\", group = @g}} : {T}\n"
                    );
                    // Waited at once or at the end (in flight across later calls).
                    if pick(2) == 0 {
                        out += &format!("  {v} = coll.wait_tensor {v}r : {T}\n");
                        vals.push(v);
                    } else {
                        pending.push((format!("{v}r"), v));
                    }
                }
            }
        }
        for (r, v) in pending {
            out += &format!("  {v} = coll.wait_tensor {r} : {T}\n");
            vals.push(v);
        }
        let rets: Vec<String> = (0..nres[f])
            .map(|_| vals[pick(vals.len())].clone())
            .collect();
        out += &format!("  return {} : {res_tys}\n}}\n", rets.join(", "));
    }
    out
}

/// Runs `text` on the sim (one rank) and as the compiled host program; compares.
fn check(text: &str) {
    let (want, in_types) = sim_reference(text, 1);
    let want = &want[0].results;

    let mut ctx = Context::new();
    let m = lower(&mut ctx, text, PIPELINE);
    let dev = kernels::compile(&ctx, m).unwrap_or_else(|d| panic!("{}\n{text}", d.message));
    let hc = host::compile(&ctx, m, &dev, None, false)
        .unwrap_or_else(|d| panic!("{}\n{text}", d.message));
    assert!(hc.entry == "main" || hc.entry == "f0", "{}", hc.entry);

    let llcx = LlContext::create();
    let ee = jit_program(&llcx, &hc.llvm_ir, &host_ir(&dev.llvm_ir));
    let mut rt = Mock {
        kernels: dev
            .kernels
            .iter()
            .map(|k| {
                ee.get_function_address(k)
                    .unwrap_or_else(|e| panic!("{k}: {e:?}"))
            })
            .collect(),
        num_events: hc.num_events,
        ..Mock::default()
    };
    // The caller's (runner's) argument buffers.
    let (_arg_store, args) = input_buffers(&in_types, 0);
    let mut results: Vec<*mut c_void> = vec![std::ptr::null_mut(); want.len()];
    let main = ee.get_function_address(abi::MAIN_SYMBOL).unwrap();
    // SAFETY: `commlir_main` has the `CommlirMain` signature; the argument buffers have the
    // entry's types, `results` one slot per result, and `rt` is the `Mock` the table expects.
    let status = unsafe {
        std::mem::transmute::<usize, CommlirMain>(main)(
            &API,
            &mut rt as *mut Mock as *mut c_void,
            args.as_ptr(),
            results.as_mut_ptr(),
        )
    };
    assert_eq!(status, 0, "{:?}\n{text}", rt.error);
    assert!(rt.error.is_none(), "{:?}\n{text}", rt.error);
    for (i, (p, w)) in results.iter().zip(want).enumerate() {
        let exp = tensor_bytes(w);
        // SAFETY: result `i` is a buffer of its type's size (an allocation, a pool slot or
        // an argument).
        let got = unsafe { std::slice::from_raw_parts(*p as *const u8, exp.len()) };
        assert_eq!(
            got,
            exp.as_slice(),
            "result {i} differs from the sim\n{text}"
        );
    }
    // The runner's release: its own allocations among the results, each once.
    let mut released = HashSet::new();
    for p in &results {
        if released.insert(*p as usize) {
            if let Some(v) = rt.allocs.remove(&(*p as usize)) {
                rt.graveyard.push(v);
            }
        }
    }
    assert!(
        rt.allocs.is_empty(),
        "{} allocations leaked\n{text}",
        rt.allocs.len()
    );
    assert!(
        rt.pools.is_empty(),
        "{} pools never freed\n{text}",
        rt.pools.len()
    );
}

#[test]
fn generated_programs_with_calls_match_the_sim() {
    let mut calls = 0;
    for seed in 0..40 {
        let text = generate(seed);
        calls += text.matches("func.call").count();
        check(&text);
    }
    // The generator must actually exercise calls.
    assert!(calls > 40, "only {calls} calls generated");
}

#[test]
fn results_aliasing_arguments_and_each_other_are_copied_for_the_caller() {
    check(&format!(
        "coll.group @g {{size = 1 : i64}}
func.func private @id(%a: {T}, %b: {T}) -> ({T}, {T}, {T}, {T}) {{
  %r = coll.all_reduce %b {{reduce_op = \"sum\", group = @g}} : {T}
  %w = coll.wait_tensor %r : {T}
  return %a, %a, %w, %b : {T}, {T}, {T}, {T}
}}
func.func @main(%x: {T}, %y: {T}) -> ({T}, {T}) {{
  %p:4 = func.call @id(%x, %y) : ({T}, {T}) -> ({T}, {T}, {T}, {T})
  %q = compute.add %p#0, %p#1 : {T}
  %s = compute.mul %q, %p#2 : {T}
  return %s, %p#3 : {T}, {T}
}}
"
    ));
}

#[test]
fn the_deepest_call_chain_allowed_runs_on_a_rank_threads_stack() {
    // comm-to-rt admits chains of up to MAX_CALL_DEPTH functions, each a native frame of the
    // host program; the runner's rank threads have 256 MiB stacks (runtime/src/cuda/mod.rs).
    let n = lower_to_rt::MAX_CALL_DEPTH;
    let mut text = String::new();
    for i in 0..n - 1 {
        text += &format!(
            "func.func @f{i}(%x: {T}) -> {T} {{\n  %y = func.call @f{}(%x) : ({T}) -> {T}\n  return %y : {T}\n}}\n",
            i + 1
        );
    }
    text += &format!(
        "func.func private @f{}(%x: {T}) -> {T} {{\n  %y = compute.relu %x : {T}\n  return %y : {T}\n}}\n",
        n - 1
    );
    let t = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || check(&text))
        .unwrap();
    t.join().unwrap();
}

#[test]
fn model_ops_run_through_the_host_program() {
    // A kernel without inputs (iota: its launch passes only the result buffer), gathers,
    // a fused mask and the f64 sin/log helpers, driven by the host program and a call.
    check(
        "coll.group @g {size = 1 : i64}
func.func private @mask(%s: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %q = compute.iota {dim = 0 : i64} : tensor<4x16xi32>
  %k = compute.iota {dim = 1 : i64} : tensor<4x16xi32>
  %c = compute.compare %k, %q {predicate = \"le\"} : (tensor<4x16xi32>, tensor<4x16xi32>) -> tensor<4x16xi1>
  %n = compute.fill {value = -1.0e4 : f64} : tensor<4x16xf32>
  %m = compute.select %c, %s, %n : (tensor<4x16xi1>, tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %m : tensor<4x16xf32>
}
func.func @main(%a: tensor<4x16xf32>, %r: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<16x4xf32>, tensor<4xf32>) {
  %b = compute.broadcast %r : (tensor<16xf32>) -> tensor<4x16xf32>
  %x = compute.mul %a, %b : tensor<4x16xf32>
  %m = func.call @mask(%x) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %s = compute.sin %m : tensor<4x16xf32>
  %p = compute.permute %s {perm = array<i64: 1, 0>} : (tensor<4x16xf32>) -> tensor<16x4xf32>
  %mx = compute.reduce_max %m {dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<4xf32>
  %e = compute.sigmoid %mx : tensor<4xf32>
  %l = compute.log %e : tensor<4xf32>
  return %m, %p, %l : tensor<4x16xf32>, tensor<16x4xf32>, tensor<4xf32>
}",
    );
}

#[test]
fn attention_calls_pass_sizes_flags_and_buffers_the_sim_agrees_with() {
    // A training step's attention: grouped-query heads (4 over 2), causal, the forward's
    // log-sum-exp kept for the backward, glue around both, and the backward in a callee.
    let before = common::mock_attention::CALLS.load(std::sync::atomic::Ordering::Relaxed);
    let q = "tensor<2x4x24x16xbf16>";
    let kv = "tensor<2x2x24x16xbf16>";
    let lse = "tensor<2x4x24xf32>";
    check(&format!(
        "coll.group @g {{size = 1 : i64}}
func.func private @grad(%q: {q}, %k: {kv}, %v: {kv}, %o: {q}, %do: {q}, %l: {lse}) -> ({q}, {kv}, {kv}) {{
  %dq, %dk, %dv = compute.attention_backward %q, %k, %v, %o, %do, %l {{causal, scale = 0.25 : f64}} : ({q}, {kv}, {kv}, {q}, {q}, {lse}) -> ({q}, {kv}, {kv})
  return %dq, %dk, %dv : {q}, {kv}, {kv}
}}
func.func @main(%x: {q}, %k: {kv}, %v: {kv}, %g: {q}) -> ({q}, {lse}, {q}, {kv}, {kv}) {{
  %q = compute.mul %x, %x : {q}
  %o, %l = compute.attention %q, %k, %v {{causal, scale = 0.25 : f64, with_lse}} : ({q}, {kv}, {kv}) -> ({q}, {lse})
  %r = compute.add %o, %x : {q}
  %dq, %dk, %dv = func.call @grad(%q, %k, %v, %o, %g, %l) : ({q}, {kv}, {kv}, {q}, {q}, {lse}) -> ({q}, {kv}, {kv})
  return %r, %l, %dq, %dk, %dv : {q}, {lse}, {q}, {kv}, {kv}
}}
"
    ));
    // A plain f16 forward (no log-sum-exp: a null pointer) of odd length, rank 3.
    let t = "tensor<3x13x8xf16>";
    check(&format!(
        "coll.group @g {{size = 1 : i64}}
func.func @main(%q: {t}, %k: {t}, %v: {t}) -> {t} {{
  %o = compute.attention %q, %k, %v {{scale = 0.3 : f64}} : {t}
  return %o : {t}
}}
"
    ));
    let after = common::mock_attention::CALLS.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        after - before,
        3,
        "every attention must be one runtime call"
    );
}
