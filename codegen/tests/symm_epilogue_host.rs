//! One-shot all-reduces with a fused elementwise epilogue, whole programs run on the host:
//! each program is lowered as for the GPU (`coll-to-comm`, `comm-plan-pools`, `comm-to-rt`),
//! its kernels' LLVM IR retargeted to the CPU (one thread of one block, as in
//! `tests/common`), and its `rt` function interpreted by one OS thread per rank: allocations
//! in host memory, every rank's pools and signal pads shared by all threads (peer-mapped, as
//! the descriptor says), launches called through the JIT. The symm kernels run their own
//! barriers on host atomics.
//!
//! Both paths of the host program are run: the fused kernel (the pool is peer-mapped) and the
//! fallback (the all-reduce into a temporary, done here with the sim's `reduce` behind a
//! thread barrier as NCCL would, then the chain's own kernel). Every rank's results must equal
//! the sim's (`commlir-run --backend sim`) byte for byte, for G = 2 and G = 4.

use commlir_codegen::{kernels, lower_to_rt};
use commlir_dialects::rt::abi::{symm_pad_bytes, SymmDesc};
use commlir_dialects::rt::memref_info;
use commlir_dialects::shape::elem_bytes;
use commlir_ir::{Context, Value};
use commlir_runtime::cuda::{tensor_bytes, tensor_from_bytes};
use commlir_runtime::sim::collective::{reduce, ReduceOp};
use commlir_runtime::{inputs, ElemType, Tensor, TensorType};
use inkwell::execution_engine::ExecutionEngine;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Barrier;

mod common;
use common::{jit_kernels, lower, sim_reference, storage, symm_desc, symm_host_ir};

const PIPELINE: &str = "builtin.module(func.func(coll-to-comm,comm-plan-pools))";

/// One step of the interpreted `rt` function; values are slots of a per-rank table.
enum Step {
    Alloc {
        dst: usize,
        bytes: usize,
    },
    PoolView {
        dst: usize,
        pool: usize,
        offset: usize,
    },
    Launch {
        kernel: usize,
        args: Vec<usize>,
    },
    Symm {
        kernel: usize,
        site: u32,
        pool: usize,
        offset: usize,
        out: usize,
        extras: Vec<usize>,
        /// For the fallback: (chain kernel, epilogue_operand, reduced type, reduce op).
        fallback: (usize, usize, TensorType, ReduceOp),
    },
    Return(Vec<(usize, usize)>),
}

/// The lowered entry of `text` as steps, with the pools' sizes and the entry's inputs.
struct Program {
    steps: Vec<Step>,
    pool_bytes: Vec<usize>,
    inputs: Vec<TensorType>,
    num_slots: usize,
}

fn elem_of(dtype: &str) -> ElemType {
    match dtype {
        "bf16" => ElemType::BF16,
        "f16" => ElemType::F16,
        "f32" => ElemType::F32,
        "f64" => ElemType::F64,
        other => panic!("test dtype {other}"),
    }
}

fn elem_size(e: ElemType) -> usize {
    match e {
        ElemType::BF16 | ElemType::F16 => 2,
        ElemType::F32 => 4,
        _ => 8,
    }
}

/// The program and the engine that owns its kernels' code (kept alive while they run).
fn compile(text: &str) -> (Program, ExecutionEngine<'static>) {
    let mut ctx = Context::new();
    let m = lower(&mut ctx, text, PIPELINE);
    let dev = kernels::compile(&ctx, m).unwrap_or_else(|d| panic!("{}", d.message));
    let ee = jit_kernels(&symm_host_ir(&dev.llvm_ir), "kernels");
    let addr = |name: &str| {
        ee.get_function_address(name)
            .unwrap_or_else(|e| panic!("{name}: {e:?}"))
    };
    let sym = |op, attr: &str| {
        ctx.inherent_attr(op, attr)
            .and_then(|a| ctx.attr_as_symbol(a))
            .unwrap_or_else(|| panic!("no '{attr}'"))
            .to_string()
    };
    let int = |op, attr: &str| {
        ctx.inherent_attr(op, attr)
            .and_then(|a| ctx.attr_as_i64(a))
            .unwrap_or_else(|| panic!("no '{attr}'")) as usize
    };
    let s = |op, attr: &str| {
        ctx.inherent_attr(op, attr)
            .and_then(|a| ctx.attr_as_str(a))
            .unwrap_or_else(|| panic!("no '{attr}'"))
            .to_string()
    };

    let body = lower_to_rt::module_block(&ctx, m).unwrap();
    let func = ctx
        .block_ops(body)
        .find(|o| ctx.op_name(*o) == "func.func")
        .unwrap();
    let fbody = ctx.region_blocks(ctx.op_regions(func)[0])[0];
    let mut slots: HashMap<Value, usize> = HashMap::new();
    let mut slot = |v: Value| {
        let n = slots.len();
        *slots.entry(v).or_insert(n)
    };
    let mut inputs = Vec::new();
    for &a in ctx.block_args(fbody) {
        slot(a);
        let (shape, elem) = memref_info(&ctx, ctx.value_type(a)).unwrap();
        inputs.push(TensorType {
            elem: ElemType::from_type(&ctx, elem).unwrap(),
            shape: shape.iter().map(|d| *d as usize).collect(),
        });
    }
    let bytes_of = |v: Value| {
        let (shape, elem) = memref_info(&ctx, ctx.value_type(v)).unwrap();
        shape.iter().product::<i64>() as usize * elem_bytes(&ctx, elem) as usize
    };
    let mut pools: HashMap<Value, usize> = HashMap::new();
    let mut pool_bytes = Vec::new();
    let mut steps = Vec::new();
    for op in ctx.block_ops(fbody) {
        let operand = |i: usize| ctx.operand(op, i);
        match ctx.op_name(op) {
            "rt.pool_alloc" => {
                pools.insert(ctx.result(op, 0), pool_bytes.len());
                pool_bytes.push(int(op, "size"));
            }
            "rt.pool_view" => steps.push(Step::PoolView {
                dst: slot(ctx.result(op, 0)),
                pool: pools[&operand(0)],
                offset: int(op, "offset"),
            }),
            "rt.alloc" => steps.push(Step::Alloc {
                dst: slot(ctx.result(op, 0)),
                bytes: bytes_of(ctx.result(op, 0)),
            }),
            "rt.launch" => steps.push(Step::Launch {
                kernel: addr(&sym(op, "kernel")),
                args: ctx.operands(op).iter().map(|v| slot(*v)).collect(),
            }),
            "rt.symm_collective" => {
                let k = sym(op, "kernel");
                let red = match s(op, "reduce_op").as_str() {
                    "sum" => ReduceOp::Sum,
                    "avg" => ReduceOp::Avg,
                    "max" => ReduceOp::Max,
                    "min" => ReduceOp::Min,
                    _ => ReduceOp::Product,
                };
                assert_eq!(s(op, "coll"), "one_shot_all_reduce");
                let ty = TensorType {
                    elem: elem_of(&s(op, "dtype")),
                    shape: vec![int(op, "count")],
                };
                let chain = ctx
                    .inherent_attr(op, "epilogue")
                    .map(|_| (addr(&sym(op, "epilogue")), int(op, "epilogue_operand")))
                    .unwrap_or((0, usize::MAX));
                steps.push(Step::Symm {
                    kernel: addr(&k),
                    site: dev.kernels.iter().position(|n| *n == k).unwrap() as u32,
                    pool: pools[&operand(0)],
                    offset: int(op, "offset"),
                    out: slot(operand(1)),
                    extras: ctx.operands(op)[2..].iter().map(|v| slot(*v)).collect(),
                    fallback: (chain.0, chain.1, ty, red),
                });
            }
            "func.return" => steps.push(Step::Return(
                ctx.operands(op)
                    .iter()
                    .map(|v| (slot(*v), bytes_of(*v)))
                    .collect(),
            )),
            "rt.free" | "rt.pool_free" | "rt.event_record" | "rt.stream_wait" => {}
            other => panic!("the test interprets no '{other}'"),
        }
    }
    let p = Program {
        steps,
        pool_bytes,
        inputs,
        num_slots: slots.len(),
    };
    (p, ee)
}

type S0 = unsafe extern "C" fn(*const SymmDesc, u64, *mut u8, u32);
type S1 = unsafe extern "C" fn(*const SymmDesc, u64, *mut u8, u32, *mut u8);
type S2 = unsafe extern "C" fn(*const SymmDesc, u64, *mut u8, u32, *mut u8, *mut u8);

/// Runs `p` on `world` ranks (one thread each); `mapped` picks the fused kernels, else the
/// fallback. Returns every rank's result bytes.
fn run(p: &Program, world: usize, mapped: bool) -> Vec<Vec<Vec<u8>>> {
    let pools: Vec<Vec<Vec<u128>>> = p
        .pool_bytes
        .iter()
        .map(|b| (0..world).map(|_| vec![0u128; b.div_ceil(16)]).collect())
        .collect();
    let pads: Vec<Vec<Vec<u128>>> = p
        .pool_bytes
        .iter()
        .map(|_| {
            (0..world)
                .map(|_| common::storage(symm_pad_bytes(world)))
                .collect()
        })
        .collect();
    let status: Vec<AtomicU64> = (0..world).map(|_| AtomicU64::new(0)).collect();
    // descs[pool][rank]
    let descs: Vec<Vec<SymmDesc>> = (0..pools.len())
        .map(|q| {
            (0..world)
                .map(|r| {
                    symm_desc(
                        &status[r] as *const AtomicU64 as u64,
                        20_000_000_000,
                        r,
                        world,
                        |k| (pools[q][k].as_ptr() as u64, pads[q][k].as_ptr() as u64),
                    )
                })
                .collect()
        })
        .collect();
    let bases: Vec<Vec<usize>> = pools
        .iter()
        .map(|q| q.iter().map(|b| b.as_ptr() as usize).collect())
        .collect();
    let barrier = Barrier::new(world);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..world)
            .map(|rank| {
                let (descs, bases, barrier) = (&descs, &bases, &barrier);
                s.spawn(move || {
                    let mut store: Vec<Vec<u128>> = Vec::new();
                    let mut val = vec![0usize; p.num_slots];
                    let alloc = |store: &mut Vec<Vec<u128>>, bytes: usize| {
                        store.push(storage(bytes));
                        store.last_mut().unwrap().as_mut_ptr() as usize
                    };
                    for (i, t) in p.inputs.iter().enumerate() {
                        let b = tensor_bytes(&inputs::generate(t, 0, rank, i));
                        let at = alloc(&mut store, b.len());
                        // SAFETY: the allocation holds `b.len()` bytes.
                        unsafe {
                            std::ptr::copy_nonoverlapping(b.as_ptr(), at as *mut u8, b.len())
                        };
                        val[i] = at;
                    }
                    let ptr = |v: usize| v as *mut u8;
                    for step in &p.steps {
                        match step {
                            Step::Alloc { dst, bytes } => val[*dst] = alloc(&mut store, *bytes),
                            Step::PoolView { dst, pool, offset } => {
                                val[*dst] = bases[*pool][rank] + offset
                            }
                            Step::Launch { kernel, args } => {
                                let a: Vec<*mut u8> = args.iter().map(|x| ptr(val[*x])).collect();
                                // SAFETY: an elementwise kernel over these buffers.
                                unsafe { common::call_kernel(*kernel, &a) }
                            }
                            Step::Symm {
                                kernel,
                                site,
                                pool,
                                offset,
                                out,
                                extras,
                                ..
                            } if mapped => {
                                let d = &descs[*pool][rank] as *const SymmDesc;
                                let (o, e) = (ptr(val[*out]), extras);
                                let off = *offset as u64;
                                // SAFETY: the symm kernel's ABI, with the epilogue's
                                // extra pointers.
                                unsafe {
                                    match e.as_slice() {
                                        [] => std::mem::transmute::<usize, S0>(*kernel)(
                                            d, off, o, *site,
                                        ),
                                        [a] => std::mem::transmute::<usize, S1>(*kernel)(
                                            d,
                                            off,
                                            o,
                                            *site,
                                            ptr(val[*a]),
                                        ),
                                        [a, b] => std::mem::transmute::<usize, S2>(*kernel)(
                                            d,
                                            off,
                                            o,
                                            *site,
                                            ptr(val[*a]),
                                            ptr(val[*b]),
                                        ),
                                        _ => panic!("more extras than the test calls"),
                                    }
                                }
                            }
                            Step::Symm {
                                pool,
                                offset,
                                out,
                                extras,
                                fallback: (chain, at, ty, red),
                                ..
                            } => {
                                // NCCL's all-reduce: every rank's slot, reduced in rank order.
                                barrier.wait();
                                let n = ty.numel() * elem_size(ty.elem);
                                let parts: Vec<Tensor> = (0..world)
                                    .map(|k| {
                                        // SAFETY: peer k's pool holds the slot.
                                        let b = unsafe {
                                            std::slice::from_raw_parts(
                                                (bases[*pool][k] + offset) as *const u8,
                                                n,
                                            )
                                        };
                                        tensor_from_bytes(ty, b)
                                    })
                                    .collect();
                                barrier.wait();
                                let refs: Vec<&Tensor> = parts.iter().collect();
                                let bytes = tensor_bytes(&reduce(*red, &refs));
                                let tmp = alloc(&mut store, bytes.len());
                                // SAFETY: the allocation holds the bytes.
                                unsafe {
                                    std::ptr::copy_nonoverlapping(
                                        bytes.as_ptr(),
                                        tmp as *mut u8,
                                        bytes.len(),
                                    )
                                };
                                if *chain == 0 {
                                    // SAFETY: `out` holds the reduced tensor.
                                    unsafe {
                                        std::ptr::copy_nonoverlapping(
                                            bytes.as_ptr(),
                                            ptr(val[*out]),
                                            bytes.len(),
                                        )
                                    };
                                } else {
                                    let mut a: Vec<*mut u8> =
                                        extras.iter().map(|x| ptr(val[*x])).collect();
                                    a.insert(*at, tmp as *mut u8);
                                    a.push(ptr(val[*out]));
                                    // SAFETY: the chain's kernel over these buffers.
                                    unsafe { common::call_kernel(*chain, &a) }
                                }
                            }
                            Step::Return(rs) => {
                                return rs
                                    .iter()
                                    .map(|(v, n)| {
                                        // SAFETY: a live buffer of `n` bytes.
                                        unsafe {
                                            std::slice::from_raw_parts(ptr(val[*v]), *n).to_vec()
                                        }
                                    })
                                    .collect::<Vec<_>>();
                            }
                        }
                    }
                    panic!("no return");
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Runs `text` (its entry) on the sim and both paths of the compiled program, for G ranks.
fn check(text: &str, world: usize, fused_kernels: usize) {
    let (want, _) = sim_reference(text, world);
    let (p, _ee) = compile(text);
    let fused = p
        .steps
        .iter()
        .filter(|s| matches!(s, Step::Symm { fallback: (c, ..), .. } if *c != 0))
        .count();
    assert_eq!(fused, fused_kernels, "fused all-reduces of\n{text}");
    for mapped in [true, false] {
        let got = run(&p, world, mapped);
        for (r, res) in got.iter().enumerate() {
            assert_eq!(res.len(), want[r].results.len());
            for (i, bytes) in res.iter().enumerate() {
                let w = tensor_bytes(&want[r].results[i]);
                if *bytes != w {
                    let d = bytes.iter().zip(&w).position(|(a, b)| a != b).unwrap_or(0);
                    panic!(
                        "G={world} mapped={mapped} rank {r} result {i}: byte {d} differs\n{text}"
                    );
                }
            }
        }
    }
}

fn residual(dtype: &str, n: usize, world: usize) -> String {
    let t = format!("tensor<{n}x{dtype}>");
    format!(
        "coll.group @tp {{size = {world} : i64, symm_mem}}
func.func @main(%x: {t}, %o: {t}) -> {t} {{
  %a = compute.scale %o {{factor = 0.75 : f64}} : {t}
  %r = symm.one_shot_all_reduce %a {{reduce_op = \"sum\", group = @tp}} : {t}
  %y = compute.add %x, %r : {t}
  return %y : {t}
}}
"
    )
}

#[test]
fn residual_add_bf16_and_f32_matches_the_sim() {
    for world in [2, 4] {
        for dtype in ["bf16", "f32"] {
            // A vector body and a scalar tail.
            check(&residual(dtype, 1003, world), world, 1);
        }
    }
}

#[test]
fn chains_of_several_ops_match_the_sim() {
    for world in [2, 4] {
        for dtype in ["bf16", "f32"] {
            let t = format!("tensor<517x{dtype}>");
            // scale → + bias → relu (the reduced value is argument 0; no transcendental op,
            // whose GPU approximation is not the sim's bit for bit), and a second
            // all-reduce whose chain reads it twice and casts: max(r, b) * r → f32.
            let text = format!(
                "coll.group @tp {{size = {world} : i64, symm_mem}}
func.func @main(%o: {t}, %b: {t}) -> ({t}, tensor<517xf32>) {{
  %a = compute.neg %o : {t}
  %r = symm.one_shot_all_reduce %a {{reduce_op = \"sum\", group = @tp}} : {t}
  %s = compute.scale %r {{factor = 0.5 : f64}} : {t}
  %u = compute.add %s, %b : {t}
  %g = compute.relu %u : {t}
  %c = compute.mul %o, %b : {t}
  %r2 = symm.one_shot_all_reduce %c {{reduce_op = \"max\", group = @tp}} : {t}
  %m = compute.maximum %r2, %b : {t}
  %q = compute.mul %m, %r2 : {t}
  %f = compute.cast %q : ({t}) -> tensor<517xf32>
  return %g, %f : {t}, tensor<517xf32>
}}
"
            );
            check(&text, world, 2);
        }
    }
}

#[test]
fn unfused_readers_still_match_the_sim() {
    // The reduced value is returned as well: no fusion, the plain kernel and the chain.
    let t = "tensor<256xbf16>";
    let text = format!(
        "coll.group @tp {{size = 2 : i64, symm_mem}}
func.func @main(%o: {t}) -> ({t}, {t}) {{
  %a = compute.neg %o : {t}
  %r = symm.one_shot_all_reduce %a {{reduce_op = \"sum\", group = @tp}} : {t}
  %y = compute.relu %r : {t}
  return %y, %r : {t}, {t}
}}
"
    );
    check(&text, 2, 0);
}
