//! Checks and times the runtime's cuDNN attention (`runtime/src/cuda/cudnn.rs`) on one GPU,
//! without a compiled program: small shapes (causal or not, grouped-query heads, odd
//! lengths, more keys than queries) forward and backward against an f64 reference on the
//! host, then the large shapes of the attention benchmark timed with CUDA events.
//!
//!     cargo run --release -p commlir-runtime --example cudnn_attention -- [ITERS] [B,HQ,HKV,L,D ...]
//!
//! Prints `check,<shape>,<causal>,<dir>,PASS|FAIL,<worst error>` per case, then
//! `time,<b>x<hq>x<hkv>x<l>x<d>,<causal>,fwd_us=<µs>,bwd_us=<µs>,fwd_tflops=..,bwd_tflops=..`
//! (FLOPs of the visible half for causal, as FlashAttention counts them); exits 1 on a failure.

use commlir_runtime::cuda::cudnn::{Attention, Backward, Forward, Shape};
use commlir_runtime::cuda::ffi::{cu_check, primary_context};
use commlir_runtime::inputs::SplitMix64;
use commlir_runtime::numeric::{bf16_bits, bf16_value};
use cudarc::driver::sys as cu;
use std::ffi::c_void;

const BF16: u32 = 9;

fn dev_alloc(bytes: usize) -> Result<cu::CUdeviceptr, String> {
    let mut p = 0;
    // SAFETY: writes one device pointer.
    cu_check("cuMemAlloc", unsafe {
        cu::cuMemAlloc_v2(&mut p, bytes.max(1))
    })?;
    Ok(p)
}

fn upload(p: cu::CUdeviceptr, h: &[u16]) -> Result<(), String> {
    // SAFETY: `p` holds at least `h.len()` u16.
    cu_check("cuMemcpyHtoD", unsafe {
        cu::cuMemcpyHtoD_v2(p, h.as_ptr() as *const c_void, h.len() * 2)
    })
}

fn download<T: Copy + Default>(p: cu::CUdeviceptr, n: usize) -> Result<Vec<T>, String> {
    let mut h = vec![T::default(); n];
    // SAFETY: `p` holds at least `n` elements of T.
    cu_check("cuMemcpyDtoH", unsafe {
        cu::cuMemcpyDtoH_v2(
            h.as_mut_ptr() as *mut c_void,
            p,
            n * std::mem::size_of::<T>(),
        )
    })?;
    Ok(h)
}

fn random_bf16(n: usize, g: &mut SplitMix64, scale: f64) -> Vec<u16> {
    (0..n)
        .map(|_| {
            let u = (g.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            bf16_bits((2.0 * u - 1.0) * scale)
        })
        .collect()
}

/// Reference attention in f64 on the host: output, lse, and the gradients for `dout`.
struct Reference {
    out: Vec<f64>,
    lse: Vec<f64>,
    dq: Vec<f64>,
    dk: Vec<f64>,
    dv: Vec<f64>,
}

fn reference(
    s: Shape,
    causal: bool,
    scale: f64,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    dout: &[f64],
) -> Reference {
    let (b, hq, hkv, lq, lk, d, dv) = (
        s.b as usize,
        s.hq as usize,
        s.hkv as usize,
        s.lq as usize,
        s.lk as usize,
        s.d as usize,
        s.dv as usize,
    );
    let rep = hq / hkv;
    let mut r = Reference {
        out: vec![0.0; b * hq * lq * dv],
        lse: vec![0.0; b * hq * lq],
        dq: vec![0.0; b * hq * lq * d],
        dk: vec![0.0; b * hkv * lk * d],
        dv: vec![0.0; b * hkv * lk * dv],
    };
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / rep;
            let qo = (bi * hq + h) * lq;
            let ko = (bi * hkv + kh) * lk;
            for i in 0..lq {
                let vis = if causal { (i + 1).min(lk) } else { lk };
                let sc: Vec<f64> = (0..vis)
                    .map(|j| {
                        scale
                            * (0..d)
                                .map(|x| q[(qo + i) * d + x] * k[(ko + j) * d + x])
                                .sum::<f64>()
                    })
                    .collect();
                let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = sc.iter().map(|x| (x - m).exp()).sum();
                let lse = m + z.ln();
                r.lse[qo + i] = lse;
                let p: Vec<f64> = sc.iter().map(|x| (x - lse).exp()).collect();
                for y in 0..dv {
                    r.out[(qo + i) * dv + y] = (0..vis).map(|j| p[j] * v[(ko + j) * dv + y]).sum();
                }
                let delta: f64 = (0..dv)
                    .map(|y| dout[(qo + i) * dv + y] * r.out[(qo + i) * dv + y])
                    .sum();
                for j in 0..vis {
                    let dp: f64 = (0..dv)
                        .map(|y| dout[(qo + i) * dv + y] * v[(ko + j) * dv + y])
                        .sum();
                    let ds = p[j] * (dp - delta) * scale;
                    for x in 0..d {
                        r.dq[(qo + i) * d + x] += ds * k[(ko + j) * d + x];
                        r.dk[(ko + j) * d + x] += ds * q[(qo + i) * d + x];
                    }
                    for y in 0..dv {
                        r.dv[(ko + j) * dv + y] += p[j] * dout[(qo + i) * dv + y];
                    }
                }
            }
        }
    }
    r
}

/// Worst |got − want| relative to the largest |want| (bf16 results: about 2⁻⁸ is one ulp).
fn worst(got: &[f64], want: &[f64]) -> f64 {
    let mag = want.iter().fold(0f64, |a, x| a.max(x.abs())).max(1e-30);
    got.iter()
        .zip(want)
        .fold(0f64, |a, (g, w)| a.max((g - w).abs()))
        / mag
}

struct Bufs {
    q: cu::CUdeviceptr,
    k: cu::CUdeviceptr,
    v: cu::CUdeviceptr,
    o: cu::CUdeviceptr,
    lse: cu::CUdeviceptr,
    dout: cu::CUdeviceptr,
    dq: cu::CUdeviceptr,
    dk: cu::CUdeviceptr,
    dv: cu::CUdeviceptr,
}

fn sizes(s: Shape) -> [usize; 5] {
    let n = |a: i64, b: i64, c: i64, d: i64| (a * b * c * d) as usize;
    [
        n(s.b, s.hq, s.lq, s.d),
        n(s.b, s.hkv, s.lk, s.d),
        n(s.b, s.hkv, s.lk, s.dv),
        n(s.b, s.hq, s.lq, s.dv),
        n(s.b, s.hq, s.lq, 1),
    ]
}

fn alloc_all(s: Shape) -> Result<Bufs, String> {
    let [nq, nk, nv, no, nl] = sizes(s);
    Ok(Bufs {
        q: dev_alloc(nq * 2)?,
        k: dev_alloc(nk * 2)?,
        v: dev_alloc(nv * 2)?,
        o: dev_alloc(no * 2)?,
        lse: dev_alloc(nl * 4)?,
        dout: dev_alloc(no * 2)?,
        dq: dev_alloc(nq * 2)?,
        dk: dev_alloc(nk * 2)?,
        dv: dev_alloc(nv * 2)?,
    })
}

fn free_all(b: &Bufs) {
    for p in [b.q, b.k, b.v, b.o, b.lse, b.dout, b.dq, b.dk, b.dv] {
        // SAFETY: allocated by cuMemAlloc above.
        unsafe { cu::cuMemFree_v2(p) };
    }
}

fn fwd(a: &mut Attention, s: Shape, causal: bool, scale: f64, b: &Bufs) -> Result<(), String> {
    a.forward(
        s,
        BF16,
        causal,
        scale,
        &Forward {
            q: b.q as _,
            k: b.k as _,
            v: b.v as _,
            out: b.o as _,
            lse: b.lse as _,
        },
    )
}

fn bwd(a: &mut Attention, s: Shape, causal: bool, scale: f64, b: &Bufs) -> Result<(), String> {
    a.backward(
        s,
        BF16,
        causal,
        scale,
        &Backward {
            q: b.q as _,
            k: b.k as _,
            v: b.v as _,
            out: b.o as _,
            dout: b.dout as _,
            lse: b.lse as _,
            dq: b.dq as _,
            dk: b.dk as _,
            dv: b.dv as _,
        },
    )
}

fn check(a: &mut Attention, s: Shape, causal: bool, stream: cu::CUstream) -> Result<bool, String> {
    let mut g = SplitMix64::new(7 + s.lq as u64 * 31 + s.hkv as u64);
    let [nq, nk, nv, no, nl] = sizes(s);
    let (q, k, v, dout) = (
        random_bf16(nq, &mut g, 1.0),
        random_bf16(nk, &mut g, 1.0),
        random_bf16(nv, &mut g, 1.0),
        random_bf16(no, &mut g, 1.0),
    );
    let b = alloc_all(s)?;
    upload(b.q, &q)?;
    upload(b.k, &k)?;
    upload(b.v, &v)?;
    upload(b.dout, &dout)?;
    let scale = 1.0 / (s.d as f64).sqrt();
    fwd(a, s, causal, scale, &b)?;
    let f = |x: &[u16]| x.iter().map(|&h| bf16_value(h)).collect::<Vec<f64>>();
    // The backward gets the forward's own (rounded) output, as in training.
    // SAFETY: synchronizes this thread's stream.
    cu_check("cuStreamSynchronize", unsafe {
        cu::cuStreamSynchronize(stream)
    })?;
    let o16: Vec<u16> = download(b.o, no)?;
    bwd(a, s, causal, scale, &b)?;
    cu_check("cuStreamSynchronize", unsafe {
        cu::cuStreamSynchronize(stream)
    })?;
    let lse: Vec<f32> = download(b.lse, nl)?;
    let (dq, dk, dv): (Vec<u16>, Vec<u16>, Vec<u16>) = (
        download(b.dq, nq)?,
        download(b.dk, nk)?,
        download(b.dv, nv)?,
    );
    free_all(&b);
    let r = reference(s, causal, scale, &f(&q), &f(&k), &f(&v), &f(&dout));
    let name = format!("{}x{}x{}x{}x{}x{}", s.b, s.hq, s.hkv, s.lq, s.lk, s.d);
    let lse64: Vec<f64> = lse.iter().map(|&x| x as f64).collect();
    let lse_err = lse64
        .iter()
        .zip(&r.lse)
        .fold(0f64, |a, (g, w)| a.max((g - w).abs()));
    let cases = [
        ("fwd", worst(&f(&o16), &r.out), 0.02),
        ("lse", lse_err, 0.02),
        ("dq", worst(&f(&dq), &r.dq), 0.05),
        ("dk", worst(&f(&dk), &r.dk), 0.05),
        ("dv", worst(&f(&dv), &r.dv), 0.05),
    ];
    let mut ok = true;
    for (what, e, tol) in cases {
        let pass = e.is_finite() && e <= tol;
        ok &= pass;
        println!(
            "check,{name},{},{what},{},{e:.3e}",
            if causal { "causal" } else { "full" },
            if pass { "PASS" } else { "FAIL" }
        );
    }
    Ok(ok)
}

fn time(
    a: &mut Attention,
    s: Shape,
    causal: bool,
    iters: usize,
    stream: cu::CUstream,
) -> Result<(), String> {
    let mut g = SplitMix64::new(11);
    let [nq, nk, nv, no, _] = sizes(s);
    let b = alloc_all(s)?;
    upload(b.q, &random_bf16(nq, &mut g, 1.0))?;
    upload(b.k, &random_bf16(nk, &mut g, 1.0))?;
    upload(b.v, &random_bf16(nv, &mut g, 1.0))?;
    upload(b.dout, &random_bf16(no, &mut g, 1.0))?;
    let scale = 1.0 / (s.d as f64).sqrt();
    let mut ev = [std::ptr::null_mut(); 2];
    for e in &mut ev {
        // SAFETY: creates one event.
        cu_check("cuEventCreate", unsafe { cu::cuEventCreate(e, 0) })?;
    }
    let timed = |f: &mut dyn FnMut() -> Result<(), String>| -> Result<f64, String> {
        for _ in 0..3 {
            f()?;
        }
        // SAFETY: events and stream of this context.
        unsafe {
            cu_check("cuEventRecord", cu::cuEventRecord(ev[0], stream))?;
            for _ in 0..iters {
                f()?;
            }
            cu_check("cuEventRecord", cu::cuEventRecord(ev[1], stream))?;
            cu_check("cuEventSynchronize", cu::cuEventSynchronize(ev[1]))?;
            let mut ms = 0f32;
            cu_check(
                "cuEventElapsedTime",
                cu::cuEventElapsedTime_v2(&mut ms, ev[0], ev[1]),
            )?;
            Ok(ms as f64 * 1000.0 / iters as f64)
        }
    };
    let f_us = timed(&mut || fwd(a, s, causal, scale, &b))?;
    let b_us = timed(&mut || bwd(a, s, causal, scale, &b))?;
    free_all(&b);
    // 4·b·hq·lq·lk·d FLOPs forward (two products), 2.5× that backward; half when causal.
    let flops = 4.0 * (s.b * s.hq * s.lq * s.lk * s.d) as f64 * if causal { 0.5 } else { 1.0 };
    println!(
        "time,{}x{}x{}x{}x{},{},fwd_us={f_us:.1},bwd_us={b_us:.1},fwd_tflops={:.1},bwd_tflops={:.1}",
        s.b,
        s.hq,
        s.hkv,
        s.lq,
        s.d,
        if causal { "causal" } else { "full" },
        flops / f_us * 1e-6,
        2.5 * flops / b_us * 1e-6
    );
    Ok(())
}

fn run() -> Result<bool, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let iters: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(20);
    let big: Vec<Shape> = if args.len() > 1 {
        args[1..]
            .iter()
            .map(|a| {
                let v: Vec<i64> = a.split(',').filter_map(|x| x.parse().ok()).collect();
                if v.len() != 5 {
                    return Err(format!("shape '{a}' is not B,HQ,HKV,L,D"));
                }
                Ok(Shape {
                    b: v[0],
                    hq: v[1],
                    hkv: v[2],
                    lq: v[3],
                    lk: v[3],
                    d: v[4],
                    dv: v[4],
                })
            })
            .collect::<Result<_, _>>()?
    } else {
        [4096, 8192]
            .iter()
            .flat_map(|&l| {
                [
                    Shape {
                        b: 1,
                        hq: 32,
                        hkv: 32,
                        lq: l,
                        lk: l,
                        d: 128,
                        dv: 128,
                    },
                    Shape {
                        b: 1,
                        hq: 32,
                        hkv: 8,
                        lq: l,
                        lk: l,
                        d: 128,
                        dv: 128,
                    },
                ]
            })
            .collect()
    };
    // SAFETY: plain driver initialization on device 0 and a stream of its primary context.
    let stream = unsafe {
        cu_check("cuInit", cu::cuInit(0))?;
        let mut dev = 0;
        cu_check("cuDeviceGet", cu::cuDeviceGet(&mut dev, 0))?;
        primary_context(dev)?;
        let mut s = std::ptr::null_mut();
        cu_check("cuStreamCreate", cu::cuStreamCreate(&mut s, 0))?;
        s
    };
    let mut a = Attention::new(stream)?;
    println!("cudnn,{}", a.version());
    let mut ok = true;
    let small = [
        (
            Shape {
                b: 1,
                hq: 2,
                hkv: 2,
                lq: 128,
                lk: 128,
                d: 64,
                dv: 64,
            },
            [false, true],
        ),
        (
            Shape {
                b: 2,
                hq: 4,
                hkv: 1,
                lq: 64,
                lk: 64,
                d: 128,
                dv: 128,
            },
            [false, true],
        ),
        (
            Shape {
                b: 1,
                hq: 4,
                hkv: 2,
                lq: 77,
                lk: 77,
                d: 64,
                dv: 64,
            },
            [false, true],
        ),
        (
            Shape {
                b: 1,
                hq: 2,
                hkv: 2,
                lq: 64,
                lk: 192,
                d: 32,
                dv: 32,
            },
            [false, false],
        ),
    ];
    for (s, modes) in small {
        for causal in modes {
            match check(&mut a, s, causal, stream) {
                Ok(pass) => ok &= pass,
                Err(e) => {
                    println!("check,{s:?},{causal},ERROR,{e}");
                    ok = false;
                }
            }
        }
    }
    for s in big {
        if let Err(e) = time(&mut a, s, true, iters, stream) {
            println!("time,{s:?},ERROR,{e}");
            ok = false;
        }
    }
    Ok(ok)
}

fn main() {
    match run() {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("cudnn_attention: {e}");
            std::process::exit(1);
        }
    }
}
