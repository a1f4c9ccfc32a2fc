//! The ABI's `attention` and `attention_backward` for the mock runtimes of the host tests:
//! what cuDNN computes on the GPU, here the sim's own semantics of `compute.attention` /
//! `compute.attention_backward` (an op built from the call's sizes and run by
//! `sim::compute::execute_all` on the call's buffers), so that a compiled program's results
//! equal the sim's bit for bit when the host program passes the right sizes, flags and
//! buffers. Programs of tests that generate no attention get the `unexpected_*` entries.

use commlir_dialects::rt::abi::{self, Status};
use commlir_ir::Context;
use commlir_runtime::cuda::{tensor_bytes, tensor_from_bytes};
use commlir_runtime::sim::compute::execute_all;
use commlir_runtime::{ElemType, TensorType};
use std::ffi::c_void;

/// The calls made, for tests that check how many attention calls a program issued.
pub static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A buffer of the call: its shape and element type.
type Role<'a> = (&'a [i64], &'a str);

fn tensor_ty(shape: &[i64], elem: &str) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("tensor<{}x{elem}>", dims.join("x"))
}

/// Runs one attention op of the sim on the buffers at `ins` (read) and `outs` (written).
///
/// # Safety
/// Every pointer holds a contiguous tensor of the shape the sizes give.
unsafe fn run(
    backward: bool,
    [b, hq, hkv, lq, lk, d, dv]: [i64; 7],
    dtype: u32,
    causal: bool,
    scale: f64,
    ins: &[*const c_void],
    outs: &[*mut c_void],
) -> Result<(), String> {
    let elem = abi::DTYPES
        .iter()
        .find(|(_, c)| *c == dtype)
        .map(|(n, _)| *n)
        .ok_or_else(|| format!("dtype code {dtype}"))?;
    let (q, k, v, o) = (
        [b, hq, lq, d],
        [b, hkv, lk, d],
        [b, hkv, lk, dv],
        [b, hq, lq, dv],
    );
    let lse = [b, hq, lq];
    let (in_shapes, out_shapes): (Vec<Role>, Vec<Role>) = if backward {
        (
            vec![
                (&q, elem),
                (&k, elem),
                (&v, elem),
                (&o, elem),
                (&o, elem),
                (&lse, "f32"),
            ],
            vec![(&q, elem), (&k, elem), (&v, elem)],
        )
    } else {
        let mut outs_s: Vec<Role> = vec![(&o, elem)];
        if outs.len() == 2 {
            outs_s.push((&lse, "f32"));
        }
        (vec![(&q, elem), (&k, elem), (&v, elem)], outs_s)
    };
    let ty = |s: &[Role]| s.iter().map(|(d, e)| tensor_ty(d, e)).collect::<Vec<_>>();
    let (it, ot) = (ty(&in_shapes), ty(&out_shapes));
    let args: Vec<String> = it
        .iter()
        .enumerate()
        .map(|(i, t)| format!("%a{i}: {t}"))
        .collect();
    let names: Vec<String> = (0..it.len()).map(|i| format!("%a{i}")).collect();
    let res: Vec<String> = (0..ot.len()).map(|i| format!("%r{i}")).collect();
    let mut attrs = format!("scale = {scale:.17e} : f64");
    if causal {
        attrs += ", causal";
    }
    if !backward && outs.len() == 2 {
        attrs += ", with_lse";
    }
    let op = if backward {
        "attention_backward"
    } else {
        "attention"
    };
    let text = format!(
        "func.func @f({}) -> ({}) {{\n  {} = compute.{op} {} {{{attrs}}} : ({}) -> ({})\n  return {} : {}\n}}\n",
        args.join(", "),
        ot.join(", "),
        res.join(", "),
        names.join(", "),
        it.join(", "),
        ot.join(", "),
        res.join(", "),
        ot.join(", "),
    );
    let mut ctx = Context::new();
    let m = super::parse(&mut ctx, &text);
    let top = commlir_codegen::lower_to_rt::module_block(&ctx, m).ok_or("no module body")?;
    let f = ctx.block_ops(top).next().ok_or("no function")?;
    let body = ctx.region_blocks(ctx.op_regions(f)[0])[0];
    let aop = ctx.block_ops(body).next().ok_or("no op")?;
    let tensor_type = |(d, e): &Role| TensorType {
        elem: match *e {
            "f16" => ElemType::F16,
            "bf16" => ElemType::BF16,
            _ => ElemType::F32,
        },
        shape: d.iter().map(|x| *x as usize).collect(),
    };
    let inputs: Vec<_> = in_shapes
        .iter()
        .zip(ins)
        .map(|(s, p)| {
            let t = tensor_type(s);
            let n = t.numel() * t.elem.byte_width();
            tensor_from_bytes(&t, std::slice::from_raw_parts(*p as *const u8, n))
        })
        .collect();
    let refs: Vec<_> = inputs.iter().collect();
    let types: Vec<_> = out_shapes.iter().map(tensor_type).collect();
    let results = execute_all(&ctx, aop, &refs, &types)?.ok_or("the sim has no semantics")?;
    for (r, p) in results.iter().zip(outs) {
        let bytes = tensor_bytes(r);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), *p as *mut u8, bytes.len());
    }
    CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// A status for the host program; a panic (a bad op built from the call) must not unwind
/// through its C frames.
fn report(r: impl FnOnce() -> Result<(), String>) -> Status {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(r))
        .unwrap_or_else(|_| Err("panicked".into()))
    {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("mock attention: {e}");
            1
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn attention(
    _rt: *mut c_void,
    b: i64,
    hq: i64,
    hkv: i64,
    lq: i64,
    lk: i64,
    d: i64,
    dv: i64,
    dtype: u32,
    causal: u32,
    scale: f64,
    q: *const c_void,
    k: *const c_void,
    v: *const c_void,
    out: *mut c_void,
    lse: *mut c_void,
) -> Status {
    let mut outs = vec![out];
    if !lse.is_null() {
        outs.push(lse);
    }
    report(|| {
        run(
            false,
            [b, hq, hkv, lq, lk, d, dv],
            dtype,
            causal != 0,
            scale,
            &[q, k, v],
            &outs,
        )
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn attention_backward(
    _rt: *mut c_void,
    b: i64,
    hq: i64,
    hkv: i64,
    lq: i64,
    lk: i64,
    d: i64,
    dv: i64,
    dtype: u32,
    causal: u32,
    scale: f64,
    q: *const c_void,
    k: *const c_void,
    v: *const c_void,
    out: *const c_void,
    dout: *const c_void,
    lse: *const c_void,
    dq: *mut c_void,
    dk: *mut c_void,
    dv_: *mut c_void,
) -> Status {
    report(|| {
        run(
            true,
            [b, hq, hkv, lq, lk, d, dv],
            dtype,
            causal != 0,
            scale,
            &[q, k, v, out, dout, lse],
            &[dq, dk, dv_],
        )
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn unexpected_attention(
    _rt: *mut c_void,
    _b: i64,
    _hq: i64,
    _hkv: i64,
    _lq: i64,
    _lk: i64,
    _d: i64,
    _dv: i64,
    _dtype: u32,
    _causal: u32,
    _scale: f64,
    _q: *const c_void,
    _k: *const c_void,
    _v: *const c_void,
    _out: *mut c_void,
    _lse: *mut c_void,
) -> Status {
    report(|| Err("attention is not generated by this test's programs".into()))
}

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn unexpected_attention_backward(
    _rt: *mut c_void,
    _b: i64,
    _hq: i64,
    _hkv: i64,
    _lq: i64,
    _lk: i64,
    _d: i64,
    _v_dim: i64,
    _dtype: u32,
    _causal: u32,
    _scale: f64,
    _q: *const c_void,
    _k: *const c_void,
    _v: *const c_void,
    _out: *const c_void,
    _dout: *const c_void,
    _lse: *const c_void,
    _dq: *mut c_void,
    _dk: *mut c_void,
    _dv: *mut c_void,
) -> Status {
    report(|| Err("attention_backward is not generated by this test's programs".into()))
}
