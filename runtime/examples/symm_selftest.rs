//! Runs the symm collective kernels of a compiled artifact with G *virtual ranks on one GPU*:
//! G input buffers, G signal pads and G descriptors in one device's memory, each rank's
//! kernel launched on its own stream so that all of them run concurrently and meet at their
//! barriers, exactly as the kernels of G GPUs meet over NVLink (the peer loads and stores,
//! the release/acquire system-scope atomics and the barrier protocol are the same; only the
//! link is local memory). Every kernel's result is compared bit for bit with the sim's
//! reduction (`sim::collective::reduce`), then back-to-back calls are timed, and a missing
//! peer must end in the fault word, not a hang.
//!
//! It checks kernels on a machine with one GPU; what it times is not NVLink.
//!
//!     cargo run --release -p commlir-runtime --example symm_selftest -- ARTIFACT [ITERS]
//!
//! Prints one line per kernel: `selftest,<kernel>,<coll>,<dtype>,<count>,<op>,G=<g>,PASS|FAIL
//! ...,<us per call>`, then the fault check, and exits 1 on any failure.

use commlir_runtime::cuda::{abi, artifact, ffi, tensor_bytes};
use commlir_runtime::inputs;
use commlir_runtime::sim::collective::{reduce, ReduceOp};
use commlir_runtime::tensor::Tensor;
use cudarc::driver::sys as cu;
use std::collections::HashMap;
use std::ffi::{c_void, CString};

/// `key = value` pairs of the attribute dictionary on an `rt` line (values unquoted, the
/// `: i64` suffix dropped).
fn attrs(line: &str) -> HashMap<String, String> {
    let (Some(a), Some(b)) = (line.find('{'), line.rfind('}')) else {
        return HashMap::new();
    };
    line[a + 1..b]
        .split(", ")
        .filter_map(|kv| kv.split_once(" = "))
        .map(|(k, v)| {
            let v = v.split(" : ").next().unwrap_or(v);
            (
                k.trim().to_string(),
                v.trim_matches('"').trim_start_matches('@').to_string(),
            )
        })
        .collect()
}

struct Kernel {
    name: String,
    coll: String,
    count: usize,
    dtype: String,
    op: Option<String>,
    world: usize,
    grid: u32,
    block: u32,
}

fn kernels(rt: &str) -> Vec<Kernel> {
    let mut shapes: HashMap<String, (u32, u32)> = HashMap::new();
    // Plain collectives only: a fused epilogue takes more parameters (its chain's operands).
    for l in rt
        .lines()
        .filter(|l| l.contains("rt.symm_collective") && !l.contains("epilogue"))
    {
        let a = attrs(l);
        if let (Some(k), Some(g), Some(b)) = (a.get("kernel"), a.get("grid"), a.get("block")) {
            shapes.insert(k.clone(), (g.parse().unwrap_or(1), b.parse().unwrap_or(32)));
        }
    }
    let mut out = Vec::new();
    for l in rt.lines().filter(|l| l.contains("rt.symm_kernel @")) {
        let Some(name) = l
            .split('@')
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
        else {
            continue;
        };
        let a = attrs(l);
        let Some(&(grid, block)) = shapes.get(name) else {
            continue;
        };
        let coll = a.get("coll").cloned().unwrap_or_default();
        if !abi::SYMM_COLLS.iter().any(|(c, _)| *c == coll) {
            continue;
        }
        out.push(Kernel {
            name: name.to_string(),
            coll,
            count: a.get("count").and_then(|c| c.parse().ok()).unwrap_or(0),
            dtype: a.get("dtype").cloned().unwrap_or_default(),
            op: a.get("reduce_op").cloned(),
            world: a.get("world").and_then(|c| c.parse().ok()).unwrap_or(2),
            grid,
            block,
        });
    }
    out
}

fn check(what: &str, r: cu::CUresult) -> Result<(), String> {
    ffi::cu_check(what, r)
}

/// One virtual rank's device memory.
struct Rank {
    base: u64,
    pad: u64,
    out: u64,
    desc: u64,
    stream: cu::CUstream,
}

fn main() {
    match run() {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

fn run() -> Result<bool, String> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: symm_selftest ARTIFACT [ITERS]")?;
    let iters: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200);
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let art = artifact::parse(&bytes)?;
    let ks = kernels(&art.rt_ir);
    if ks.is_empty() {
        return Err(format!(
            "{path}: no symm kernels in the artifact's rt program"
        ));
    }
    let mut ok = true;
    // SAFETY: plain driver calls on handles created here, one thread, device 0.
    unsafe {
        check("cuInit", cu::cuInit(0))?;
        let mut dev = 0;
        check("cuDeviceGet", cu::cuDeviceGet(&mut dev, 0))?;
        let mut ctx = std::ptr::null_mut();
        check(
            "cuDevicePrimaryCtxRetain",
            cu::cuDevicePrimaryCtxRetain(&mut ctx, dev),
        )?;
        check("cuCtxSetCurrent", cu::cuCtxSetCurrent(ctx))?;
        let mut module = std::ptr::null_mut();
        check(
            "cuModuleLoadData",
            cu::cuModuleLoadData(&mut module, art.ptx.as_ptr() as *const c_void),
        )?;
        let mut fault_host: *mut c_void = std::ptr::null_mut();
        check(
            "cuMemHostAlloc",
            cu::cuMemHostAlloc(&mut fault_host, 4096, cu::CU_MEMHOSTALLOC_DEVICEMAP),
        )?;
        std::ptr::write_bytes(fault_host as *mut u8, 0, 4096);
        let mut fault_dev: cu::CUdeviceptr = 0;
        check(
            "cuMemHostGetDevicePointer",
            cu::cuMemHostGetDevicePointer_v2(&mut fault_dev, fault_host, 0),
        )?;
        let faults = fault_host as *mut u32;
        for (site, k) in ks.iter().enumerate() {
            let cname = CString::new(k.name.clone()).map_err(|e| e.to_string())?;
            let mut f = std::ptr::null_mut();
            check(
                "cuModuleGetFunction",
                cu::cuModuleGetFunction(&mut f, module, cname.as_ptr()),
            )?;
            let g = k.world;
            let dt = match k.dtype.strip_prefix('u') {
                Some(w) => format!("ui{w}"),
                None => k.dtype.clone(),
            };
            let (in_n, out_n) = match k.coll.as_str() {
                "all_gather" => (k.count, k.count * g),
                "reduce_scatter" => (k.count * g, k.count),
                _ => (k.count, k.count),
            };
            let ty = artifact::parse_type(&format!("tensor<{in_n}x{dt}>"))?;
            let esz = ty.elem.byte_width();
            let inputs: Vec<Tensor> = (0..g).map(|r| inputs::generate(&ty, 7, r, 0)).collect();
            let expect: Vec<Vec<u8>> = match k.coll.as_str() {
                "all_gather" => {
                    let all: Vec<u8> = inputs.iter().flat_map(tensor_bytes).collect();
                    vec![all; g]
                }
                _ => {
                    let op = ReduceOp::parse(k.op.as_deref().unwrap_or("sum"))
                        .ok_or("unknown reduce op")?;
                    let parts: Vec<&Tensor> = inputs.iter().collect();
                    let full = tensor_bytes(&reduce(op, &parts));
                    if k.coll == "reduce_scatter" {
                        (0..g)
                            .map(|r| full[r * out_n * esz..(r + 1) * out_n * esz].to_vec())
                            .collect()
                    } else {
                        vec![full; g]
                    }
                }
            };
            let in_bytes = in_n * esz;
            let mut ranks = Vec::new();
            for t in &inputs {
                let mut rk = Rank {
                    base: 0,
                    pad: 0,
                    out: 0,
                    desc: 0,
                    stream: std::ptr::null_mut(),
                };
                check(
                    "cuMemAlloc",
                    cu::cuMemAlloc_v2(&mut rk.base, in_bytes.max(16) + 256),
                )?;
                let b = tensor_bytes(t);
                check(
                    "cuMemcpyHtoD",
                    cu::cuMemcpyHtoD_v2(rk.base, b.as_ptr() as *const c_void, b.len()),
                )?;
                let pad_bytes = abi::symm_pad_bytes(g);
                check("cuMemAlloc", cu::cuMemAlloc_v2(&mut rk.pad, pad_bytes))?;
                check("cuMemsetD8", cu::cuMemsetD8_v2(rk.pad, 0, pad_bytes))?;
                rk.out = if k.coll == "two_shot_all_reduce" {
                    rk.base
                } else {
                    let mut o = 0;
                    check(
                        "cuMemAlloc",
                        cu::cuMemAlloc_v2(&mut o, (out_n * esz).max(16)),
                    )?;
                    o
                };
                check(
                    "cuStreamCreate",
                    cu::cuStreamCreate(
                        &mut rk.stream,
                        cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                    ),
                )?;
                ranks.push(rk);
            }
            let descs: Vec<abi::SymmDesc> = (0..g)
                .map(|r| {
                    let mut d = abi::SymmDesc {
                        status: fault_dev + 4 * r as u64,
                        timeout_ns: 5_000_000_000,
                        rank: r as u32,
                        world: g as u32,
                        ..abi::SymmDesc::default()
                    };
                    for (p, rk) in ranks.iter().enumerate() {
                        d.base[p] = rk.base;
                        d.signal[p] = rk.pad;
                    }
                    d
                })
                .collect();
            for (rk, d) in ranks.iter_mut().zip(&descs) {
                check(
                    "cuMemAlloc",
                    cu::cuMemAlloc_v2(&mut rk.desc, std::mem::size_of::<abi::SymmDesc>()),
                )?;
                check(
                    "cuMemcpyHtoD",
                    cu::cuMemcpyHtoD_v2(
                        rk.desc,
                        d as *const abi::SymmDesc as *const c_void,
                        std::mem::size_of::<abi::SymmDesc>(),
                    ),
                )?;
            }
            check("cuCtxSynchronize", cu::cuCtxSynchronize())?;
            let launch = |rk: &Rank| -> Result<(), String> {
                let (mut d, mut off, mut out, mut s) = (rk.desc, 0u64, rk.out, site as u32);
                let mut params = [
                    &mut d as *mut u64 as *mut c_void,
                    &mut off as *mut u64 as *mut c_void,
                    &mut out as *mut u64 as *mut c_void,
                    &mut s as *mut u32 as *mut c_void,
                ];
                check(
                    "cuLaunchKernel",
                    cu::cuLaunchKernel(
                        f,
                        k.grid,
                        1,
                        1,
                        k.block,
                        1,
                        1,
                        0,
                        rk.stream,
                        params.as_mut_ptr(),
                        std::ptr::null_mut(),
                    ),
                )
            };
            for rk in &ranks {
                launch(rk)?;
            }
            check("cuCtxSynchronize", cu::cuCtxSynchronize())?;
            let mut pass = true;
            let mut detail = String::new();
            for (r, rk) in ranks.iter().enumerate() {
                let mut got = vec![0u8; expect[r].len()];
                check(
                    "cuMemcpyDtoH",
                    cu::cuMemcpyDtoH_v2(got.as_mut_ptr() as *mut c_void, rk.out, got.len()),
                )?;
                if got != expect[r] {
                    pass = false;
                    let bad = got
                        .chunks(esz)
                        .zip(expect[r].chunks(esz))
                        .position(|(a, b)| a != b)
                        .unwrap_or(0);
                    detail = format!(" rank {r}: first differing element {bad}");
                }
                if *faults.add(r) != 0 {
                    pass = false;
                    detail = format!(" rank {r}: fault word {:#x}", *faults.add(r));
                }
            }
            // Back-to-back calls, events around them on every stream.
            let mut us = 0f64;
            if pass && iters > 0 {
                let mut evs = Vec::new();
                for rk in &ranks {
                    let (mut a, mut b) = (std::ptr::null_mut(), std::ptr::null_mut());
                    check("cuEventCreate", cu::cuEventCreate(&mut a, 0))?;
                    check("cuEventCreate", cu::cuEventCreate(&mut b, 0))?;
                    check("cuEventRecord", cu::cuEventRecord(a, rk.stream))?;
                    evs.push((a, b));
                }
                for _ in 0..iters {
                    for rk in &ranks {
                        launch(rk)?;
                    }
                }
                for (rk, (_, b)) in ranks.iter().zip(&evs) {
                    check("cuEventRecord", cu::cuEventRecord(*b, rk.stream))?;
                }
                check("cuCtxSynchronize", cu::cuCtxSynchronize())?;
                for (a, b) in &evs {
                    let mut ms = 0f32;
                    check(
                        "cuEventElapsedTime",
                        cu::cuEventElapsedTime_v2(&mut ms, *a, *b),
                    )?;
                    us = us.max(f64::from(ms) * 1e3 / iters as f64);
                }
                for r in 0..g {
                    if *faults.add(r) != 0 {
                        pass = false;
                        detail = format!(
                            " rank {r}: fault word {:#x} after back-to-back calls",
                            *faults.add(r)
                        );
                    }
                }
            }
            ok &= pass;
            println!(
                "selftest,{},{},{},{},{},G={g},{}{detail},{us:.2}",
                k.name,
                k.coll,
                k.dtype,
                k.count,
                k.op.as_deref().unwrap_or("-"),
                if pass { "PASS" } else { "FAIL" }
            );
            // A missing peer: rank 0 alone, a short timeout; its fault word must name peer 1.
            if site == 0 && g > 1 {
                let mut d = descs[0];
                d.timeout_ns = 200_000_000;
                d.status = fault_dev + 4 * 64;
                check(
                    "cuMemcpyHtoD",
                    cu::cuMemcpyHtoD_v2(
                        ranks[0].desc,
                        &d as *const abi::SymmDesc as *const c_void,
                        std::mem::size_of::<abi::SymmDesc>(),
                    ),
                )?;
                let t0 = std::time::Instant::now();
                launch(&ranks[0])?;
                check("cuCtxSynchronize", cu::cuCtxSynchronize())?;
                // Any of the missing peers may be the one reported (each is waited for by
                // its own thread; the last to time out writes the word).
                let w = *faults.add(64);
                let good = (1..g as u32).any(|p| w == abi::symm_fault_code(p, site as u32));
                ok &= good;
                println!(
                    "selftest,fault,{},rank 0 alone: fault word {w:#x} (a peer in 1..{g}, site {site}) after {:.2} s,{}",
                    k.name,
                    t0.elapsed().as_secs_f64(),
                    if good { "PASS" } else { "FAIL" }
                );
            }
            for rk in ranks {
                cu::cuStreamDestroy_v2(rk.stream);
                if rk.out != rk.base {
                    cu::cuMemFree_v2(rk.out);
                }
                cu::cuMemFree_v2(rk.base);
                cu::cuMemFree_v2(rk.pad);
                cu::cuMemFree_v2(rk.desc);
            }
        }
    }
    Ok(ok)
}
