//! The generated symmetric-memory kernels run on the host: the kernels' LLVM IR retargeted to
//! the CPU (one thread of one block, as in `tests/common`), one OS thread per simulated rank,
//! every rank's pool and signal pad in host memory shared by all of them, and a host-memory
//! `commlir_symm_desc` per rank. The barriers are the kernels' own (real atomics on host
//! memory), `%globaltimer` is a host clock, and `bar.red.or` of a one-thread block is its
//! operand.
//!
//! Checked: every collective for G = 2 and 4, every reduction and several dtypes (bf16, f16,
//! f32, f64, signed and unsigned integers, i1 as 0/1 bytes), odd element counts, against the
//! sim's `reduce` bit for bit; the same slot used by back-to-back calls with new inputs each
//! time (a missing end barrier lets a fast rank overwrite its input while a peer still reads
//! it); and a rank that never arrives (the others time out, write the fault word naming the
//! peer and the site, and return).

use commlir_codegen::kernels;
use commlir_dialects::rt::abi::{symm_fault_code, symm_pad_bytes, SymmDesc};
use commlir_ir::{Context, Signedness};
use commlir_runtime::numeric::{bf16_bits, f16_bits, f16_value};
use commlir_runtime::sim::collective::{reduce, ReduceOp};
use commlir_runtime::{Data, ElemType, Tensor, TensorType};
use inkwell::execution_engine::ExecutionEngine;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

mod common;

type SymmKernel = unsafe extern "C" fn(*const SymmDesc, u64, *mut u8, u32);

/// The JIT'd kernels of one module.
struct Jit {
    // Kept alive: the kernels' code belongs to the engine.
    _ee: ExecutionEngine<'static>,
    addrs: Vec<usize>,
}

/// Compiles `rt.symm_kernel` declarations (`(coll, count, dtype, reduce_op, world)`) to
/// host code, in order.
fn jit(specs: &[(&str, u64, &str, Option<&str>, u64)]) -> Jit {
    let mut text = String::from("module {\n");
    for (i, (coll, count, dtype, red, world)) in specs.iter().enumerate() {
        let red = red.map_or(String::new(), |r| format!(", reduce_op = \"{r}\""));
        text.push_str(&format!(
            "  rt.symm_kernel @s{i} {{coll = \"{coll}\", count = {count} : i64, dtype = \"{dtype}\"{red}, world = {world} : i64}}\n"
        ));
    }
    text.push_str("}\n");
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, &text);
    let dev = kernels::compile(&ctx, m).unwrap_or_else(|d| panic!("{}", d.message));
    let ee = common::jit_kernels(&common::symm_host_ir(&dev.llvm_ir), "symm");
    let addrs = (0..specs.len())
        .map(|i| ee.get_function_address(&format!("s{i}")).unwrap())
        .collect();
    Jit { _ee: ee, addrs }
}

/// Host memory of one simulated group: per rank a pool, a signal pad, a fault word and an
/// output buffer.
struct Group {
    world: usize,
    pools: Vec<Vec<u128>>,
    pads: Vec<Vec<u128>>,
    status: Vec<AtomicU64>,
    outs: Vec<Vec<u128>>,
}

impl Group {
    fn new(world: usize, pool_bytes: usize, out_bytes: usize) -> Group {
        Group {
            world,
            pools: (0..world).map(|_| common::storage(pool_bytes)).collect(),
            pads: (0..world)
                .map(|_| common::storage(symm_pad_bytes(world)))
                .collect(),
            status: (0..world).map(|_| AtomicU64::new(0)).collect(),
            outs: (0..world).map(|_| common::storage(out_bytes)).collect(),
        }
    }

    fn desc(&self, rank: usize, timeout_ns: u64) -> SymmDesc {
        common::symm_desc(
            &self.status[rank] as *const AtomicU64 as u64,
            timeout_ns,
            rank,
            self.world,
            |p| (self.pools[p].as_ptr() as u64, self.pads[p].as_ptr() as u64),
        )
    }

    /// Runs kernel `addr` on the ranks in `ranks` (one thread each), input at byte
    /// `in_offset` of the pools.
    fn run(&mut self, addr: usize, in_offset: u64, site: u32, ranks: &[usize], timeout_ns: u64) {
        let descs: Vec<SymmDesc> = (0..self.world).map(|r| self.desc(r, timeout_ns)).collect();
        let outs: Vec<usize> = self
            .outs
            .iter_mut()
            .map(|o| o.as_mut_ptr() as usize)
            .collect();
        // SAFETY: `addr` is a symm kernel (desc, in_offset, out, site); every buffer it
        // touches is as large as its compiled-in count needs, and lives through the scope.
        let k: SymmKernel = unsafe { std::mem::transmute::<usize, SymmKernel>(addr) };
        std::thread::scope(|s| {
            for &r in ranks {
                let d = &descs[r];
                let out = outs[r];
                s.spawn(move || unsafe { k(d, in_offset, out as *mut u8, site) });
            }
        });
    }

    fn bytes(buf: &[u128]) -> &[u8] {
        // SAFETY: plain integers, reinterpreted as their bytes.
        unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, buf.len() * 16) }
    }
    fn bytes_mut(buf: &mut [u128]) -> &mut [u8] {
        // SAFETY: as in `bytes`.
        unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u8, buf.len() * 16) }
    }
}

/// A dtype of the tests: the ABI spelling, its sim element type, bytes per element.
#[derive(Clone, Copy)]
struct Dt {
    name: &'static str,
    elem: ElemType,
    size: usize,
    /// i1: the values are 0 and 1 (the kernel sees u8).
    bool: bool,
}

fn dt(name: &'static str) -> Dt {
    let int = |width, signed: bool| ElemType::Int {
        width,
        signedness: if signed {
            Signedness::Signed
        } else {
            Signedness::Unsigned
        },
    };
    let (elem, size, bool) = match name {
        "bf16" => (ElemType::BF16, 2, false),
        "f16" => (ElemType::F16, 2, false),
        "f32" => (ElemType::F32, 4, false),
        "f64" => (ElemType::F64, 8, false),
        "i8" => (int(8, true), 1, false),
        "u8" => (int(8, false), 1, false),
        "i1" => (int(1, false), 1, true),
        "i32" => (int(32, true), 4, false),
        "u32" => (int(32, false), 4, false),
        "i64" => (int(64, true), 8, false),
        "u64" => (int(64, false), 8, false),
        _ => unreachable!("{name}"),
    };
    Dt {
        name: if bool { "u8" } else { name },
        elem,
        size,
        bool,
    }
}

/// Deterministic pseudo-random bits.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Writes `n` random elements of `d` at `out` (bytes).
fn fill(d: Dt, out: &mut [u8], n: usize, seed: &mut u64) {
    for i in 0..n {
        let r = next(seed);
        // Floats: small multiples of 1/8 with random signs, exact in every format, so sums
        // round in bf16/f16 and products grow.
        let f = ((r % 97) as f64 - 48.0) / 8.0;
        let at = &mut out[i * d.size..(i + 1) * d.size];
        match d.elem {
            ElemType::BF16 => at.copy_from_slice(&bf16_bits(f).to_le_bytes()),
            ElemType::F16 => at.copy_from_slice(&f16_bits(f).to_le_bytes()),
            ElemType::F32 => at.copy_from_slice(&(f as f32 + 1.0 / 3.0).to_le_bytes()),
            ElemType::F64 => at.copy_from_slice(&(f + 1.0 / 3.0).to_le_bytes()),
            _ if d.bool => at[0] = (r & 1) as u8,
            _ => at.copy_from_slice(&r.to_le_bytes()[..d.size]),
        }
    }
}

/// Elements of `d` at `bytes` as a sim tensor.
fn tensor(d: Dt, bytes: &[u8], n: usize) -> Tensor {
    let el = |i: usize| &bytes[i * d.size..(i + 1) * d.size];
    let data = match d.elem {
        ElemType::BF16 => Data::F32(
            (0..n)
                .map(|i| f32::from_bits(u32::from(u16::from_le_bytes([el(i)[0], el(i)[1]])) << 16))
                .collect(),
        ),
        ElemType::F16 => Data::F32(
            (0..n)
                .map(|i| f16_value(u16::from_le_bytes([el(i)[0], el(i)[1]])) as f32)
                .collect(),
        ),
        ElemType::F32 => Data::F32(
            (0..n)
                .map(|i| f32::from_le_bytes(el(i).try_into().unwrap()))
                .collect(),
        ),
        ElemType::F64 => Data::F64(
            (0..n)
                .map(|i| f64::from_le_bytes(el(i).try_into().unwrap()))
                .collect(),
        ),
        _ => Data::Int(
            (0..n)
                .map(|i| {
                    let mut b = [0u8; 8];
                    b[..d.size].copy_from_slice(el(i));
                    d.elem.wrap(i64::from_le_bytes(b))
                })
                .collect(),
        ),
    };
    Tensor {
        ty: TensorType {
            elem: d.elem,
            shape: vec![n],
        },
        data,
    }
}

/// A sim tensor as the bytes of `d`.
fn encode(d: Dt, t: &Tensor) -> Vec<u8> {
    let mut out = Vec::new();
    match &t.data {
        Data::F32(v) => {
            for x in v {
                match d.elem {
                    ElemType::BF16 => out.extend(bf16_bits(f64::from(*x)).to_le_bytes()),
                    ElemType::F16 => out.extend(f16_bits(f64::from(*x)).to_le_bytes()),
                    _ => out.extend(x.to_le_bytes()),
                }
            }
        }
        Data::F64(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        Data::Int(v) => v
            .iter()
            .for_each(|x| out.extend(&x.to_le_bytes()[..d.size])),
    }
    out
}

const REDS: [(&str, ReduceOp); 5] = [
    ("sum", ReduceOp::Sum),
    ("avg", ReduceOp::Avg),
    ("max", ReduceOp::Max),
    ("min", ReduceOp::Min),
    ("product", ReduceOp::Product),
];

/// One case: a collective, its per-ABI count, dtype and reduction, on G ranks.
#[derive(Clone, Copy)]
struct Case {
    coll: &'static str,
    count: usize,
    dtype: &'static str,
    red: Option<(&'static str, ReduceOp)>,
    world: usize,
}

impl Case {
    /// Elements of the input slot of each rank.
    fn in_elems(&self) -> usize {
        match self.coll {
            "reduce_scatter" => self.count * self.world,
            _ => self.count,
        }
    }
    fn out_elems(&self) -> usize {
        match self.coll {
            "all_gather" => self.count * self.world,
            _ => self.count,
        }
    }
}

/// Runs `case` `calls` times back to back on the same slot (new inputs each time) and
/// compares every rank's result with the sim after each call.
fn check(jit: &Jit, k: usize, case: Case, calls: usize, seed: u64) {
    let d = dt(case.dtype);
    // The slot at 64 bytes into the pool: the planner's alignment.
    let off = 64usize;
    let mut g = Group::new(
        case.world,
        off + case.in_elems() * d.size,
        case.out_elems() * d.size,
    );
    let mut seed = seed;
    for call in 0..calls {
        for r in 0..case.world {
            let pool = Group::bytes_mut(&mut g.pools[r]);
            fill(d, &mut pool[off..], case.in_elems(), &mut seed);
        }
        let ins: Vec<Tensor> = (0..case.world)
            .map(|r| tensor(d, &Group::bytes(&g.pools[r])[off..], case.in_elems()))
            .collect();
        let ranks: Vec<usize> = (0..case.world).collect();
        g.run(jit.addrs[k], off as u64, k as u32, &ranks, 20_000_000_000);
        for r in 0..case.world {
            assert_eq!(
                g.status[r].load(Ordering::SeqCst),
                0,
                "fault word of rank {r}"
            );
            let want: Vec<u8> = match case.coll {
                "all_gather" => ins.iter().flat_map(|t| encode(d, t)).collect(),
                "reduce_scatter" => {
                    let chunks: Vec<Tensor> = ins
                        .iter()
                        .map(|t| {
                            let b = encode(d, t);
                            tensor(d, &b[r * case.count * d.size..], case.count)
                        })
                        .collect();
                    let parts: Vec<&Tensor> = chunks.iter().collect();
                    encode(d, &reduce(case.red.unwrap().1, &parts))
                }
                _ => {
                    let parts: Vec<&Tensor> = ins.iter().collect();
                    encode(d, &reduce(case.red.unwrap().1, &parts))
                }
            };
            let got = if case.coll == "two_shot_all_reduce" {
                &Group::bytes(&g.pools[r])[off..off + want.len()]
            } else {
                &Group::bytes(&g.outs[r])[..want.len()]
            };
            if got != want.as_slice() {
                let i = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0) / d.size;
                panic!(
                    "{} {} x{} {:?} G={} call {call} rank {r}: element {i} differs: got {:?}, want {:?}",
                    case.coll,
                    case.dtype,
                    case.count,
                    case.red.map(|x| x.0),
                    case.world,
                    &got[i * d.size..(i + 1) * d.size],
                    &want[i * d.size..(i + 1) * d.size]
                );
            }
        }
    }
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for world in [2usize, 4] {
        for dtype in ["bf16", "f16", "f32", "f64", "i32", "u8", "i8", "u64", "i1"] {
            for (count, coll) in [
                (1usize, "one_shot_all_reduce"),
                (37, "one_shot_all_reduce"),
                (1000, "one_shot_all_reduce"),
                (3, "two_shot_all_reduce"),
                (101, "two_shot_all_reduce"),
                (1024, "two_shot_all_reduce"),
                (9, "reduce_scatter"),
                (64, "reduce_scatter"),
            ] {
                for red in REDS {
                    if dtype == "i1" && matches!(red.0, "sum" | "avg") {
                        continue;
                    }
                    v.push(Case {
                        coll,
                        count,
                        dtype,
                        red: Some(red),
                        world,
                    });
                }
            }
            for count in [1usize, 13, 256] {
                v.push(Case {
                    coll: "all_gather",
                    count,
                    dtype,
                    red: None,
                    world,
                });
            }
        }
    }
    v
}

fn jit_cases(cases: &[Case]) -> Jit {
    let specs: Vec<(&str, u64, &str, Option<&str>, u64)> = cases
        .iter()
        .map(|c| {
            (
                c.coll,
                c.count as u64,
                dt(c.dtype).name,
                c.red.map(|r| r.0),
                c.world as u64,
            )
        })
        .collect();
    jit(&specs)
}

#[test]
fn every_collective_reduction_and_dtype_matches_the_sim_bit_for_bit() {
    let cases = cases();
    let jit = jit_cases(&cases);
    for (k, c) in cases.iter().enumerate() {
        check(&jit, k, *c, 1, 0x5eed + k as u64);
    }
}

/// Every rank runs `calls` calls of `case` on one slot on its own thread, writing a fresh
/// input before each call and keeping its result right after, with no join between calls
/// (as a GPU stream runs them); the results must be the sim's for every call.
fn back_to_back(jit: &Jit, k: usize, case: Case, calls: usize) {
    let d = dt(case.dtype);
    let off = 64usize;
    let g = Group::new(
        case.world,
        off + case.in_elems() * d.size,
        case.out_elems() * d.size,
    );
    let input = |call: usize, r: usize| {
        let mut b = vec![0u8; case.in_elems() * d.size];
        let mut seed = (call * 16 + r) as u64 * 0x1000_0001;
        fill(d, &mut b, case.in_elems(), &mut seed);
        b
    };
    let descs: Vec<SymmDesc> = (0..case.world).map(|r| g.desc(r, 20_000_000_000)).collect();
    let pools: Vec<usize> = g.pools.iter().map(|p| p.as_ptr() as usize).collect();
    let outs: Vec<usize> = g.outs.iter().map(|o| o.as_ptr() as usize).collect();
    let want_len = case.out_elems() * d.size;
    // SAFETY: as in `Group::run`.
    let kern: SymmKernel = unsafe { std::mem::transmute::<usize, SymmKernel>(jit.addrs[k]) };
    let results: Vec<Vec<Vec<u8>>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..case.world)
            .map(|r| {
                let (d_r, pool, out) = (&descs[r], pools[r], outs[r]);
                s.spawn(move || {
                    let mut got = Vec::new();
                    for call in 0..calls {
                        // Uneven arrival: some ranks dawdle before writing their input.
                        for _ in 0..((call + r) % 3) * 50 {
                            std::thread::yield_now();
                        }
                        let b = input(call, r);
                        // SAFETY: the pool outlives the scope; this rank alone writes its
                        // slot between its calls (peers read it only inside a call).
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                b.as_ptr(),
                                (pool as *mut u8).add(off),
                                b.len(),
                            );
                            kern(d_r, off as u64, out as *mut u8, k as u32);
                        }
                        let src = if case.coll == "two_shot_all_reduce" {
                            pool + off
                        } else {
                            out
                        };
                        // SAFETY: the result (slot or output) holds `want_len` bytes.
                        got.push(unsafe {
                            std::slice::from_raw_parts(src as *const u8, want_len).to_vec()
                        });
                    }
                    got
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for call in 0..calls {
        let ins: Vec<Tensor> = (0..case.world)
            .map(|r| tensor(d, &input(call, r), case.in_elems()))
            .collect();
        for (r, got) in results.iter().enumerate() {
            let want: Vec<u8> = match case.coll {
                "all_gather" => ins.iter().flat_map(|t| encode(d, t)).collect(),
                "reduce_scatter" => {
                    let chunks: Vec<Tensor> = ins
                        .iter()
                        .map(|t| tensor(d, &encode(d, t)[r * case.count * d.size..], case.count))
                        .collect();
                    let parts: Vec<&Tensor> = chunks.iter().collect();
                    encode(d, &reduce(ReduceOp::Sum, &parts))
                }
                _ => {
                    let parts: Vec<&Tensor> = ins.iter().collect();
                    encode(d, &reduce(ReduceOp::Sum, &parts))
                }
            };
            assert!(
                got[call] == want,
                "{} G={} call {call} rank {r}: result differs from the sim",
                case.coll,
                case.world
            );
        }
    }
    for st in &g.status {
        assert_eq!(st.load(Ordering::SeqCst), 0);
    }
}

#[test]
fn back_to_back_calls_on_one_slot() {
    // A rank that left a call without the end barrier would overwrite its input (or, for
    // the two-shot, read its result) while a peer still reads (or pushes) it; a signal left
    // over by one barrier would let the next one through early.
    let cases: Vec<Case> = [
        ("one_shot_all_reduce", 4099, "f32", 4),
        ("two_shot_all_reduce", 4099, "bf16", 4),
        ("reduce_scatter", 1025, "i32", 2),
        ("all_gather", 1025, "f32", 4),
    ]
    .into_iter()
    .map(|(coll, count, dtype, world)| Case {
        coll,
        count,
        dtype,
        red: (coll != "all_gather").then_some(("sum", ReduceOp::Sum)),
        world,
    })
    .collect();
    let jit = jit_cases(&cases);
    for (k, c) in cases.iter().enumerate() {
        back_to_back(&jit, k, *c, 40);
    }
}

#[test]
fn a_rank_that_never_arrives_times_out_with_the_peer_and_site() {
    let case = Case {
        coll: "one_shot_all_reduce",
        count: 64,
        dtype: "f32",
        red: Some(("sum", ReduceOp::Sum)),
        world: 4,
    };
    let jit = jit_cases(&[case]);
    let mut g = Group::new(4, 64 + 256, 256);
    // Rank 2 never launches; the others must give up after 50 ms.
    let t = Instant::now();
    g.run(jit.addrs[0], 64, 7, &[0, 1, 3], 50_000_000);
    assert!(t.elapsed().as_secs() < 10, "the kernels returned");
    for r in [0usize, 1, 3] {
        let w = g.status[r].load(Ordering::SeqCst) as u32;
        assert_eq!(w, symm_fault_code(2, 7), "rank {r}: {w:#x}");
    }
    assert_eq!(g.status[2].load(Ordering::SeqCst), 0);
}
