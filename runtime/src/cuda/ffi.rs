//! Checked calls into the CUDA driver, cuBLAS and NCCL (all through cudarc's dynamically
//! loaded `sys` bindings): every failure becomes a message naming the API function and the
//! library's own error name and text, e.g.
//! `cuMemAllocAsync failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)`.

use cudarc::cublas::sys as cublas;
use cudarc::driver::sys as cu;
use cudarc::nccl::sys as nccl;
use std::ffi::CStr;

/// A C string from a library, or `fallback` when it returned none.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that lives for the call.
unsafe fn cstr(p: *const std::ffi::c_char, fallback: &str) -> String {
    if p.is_null() {
        fallback.to_string()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Checks a driver call's result.
pub fn cu_check(api: &str, r: cu::CUresult) -> Result<(), String> {
    if r == cu::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let (mut name, mut text) = (std::ptr::null(), std::ptr::null());
    // SAFETY: both functions only write a pointer to a static string.
    let (name, text) = unsafe {
        cu::cuGetErrorName(r, &mut name);
        cu::cuGetErrorString(r, &mut text);
        (cstr(name, &format!("{r:?}")), cstr(text, "unknown error"))
    };
    Err(format!("{api} failed: {name} ({text})"))
}

/// Checks an NCCL call's result; `comm` (may be null) adds NCCL's last error detail.
// `comm` is only handed to `ncclGetLastError`, which accepts any value including null.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn nccl_check(api: &str, r: nccl::ncclResult_t, comm: nccl::ncclComm_t) -> Result<(), String> {
    if r == nccl::ncclResult_t::ncclSuccess {
        return Ok(());
    }
    // SAFETY: NCCL returns static / comm-owned strings.
    let text = unsafe { cstr(nccl::ncclGetErrorString(r), "unknown error") };
    let detail = unsafe { cstr(nccl::ncclGetLastError(comm), "") };
    if detail.is_empty() {
        Err(format!("{api} failed: {r:?} ({text})"))
    } else {
        Err(format!("{api} failed: {r:?} ({text}): {detail}"))
    }
}

/// Checks a cuBLAS call's result.
pub fn cublas_check(api: &str, r: cublas::cublasStatus_t) -> Result<(), String> {
    if r == cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: returns a static string.
    let text = unsafe { cstr(cublas::cublasGetStatusString(r), "unknown error") };
    Err(format!("{api} failed: {r:?} ({text})"))
}

/// Retains device `dev`'s primary context and makes it current on this thread (every rank
/// thread and the single-process modes share the device's one context with cuBLAS and NCCL).
///
/// # Safety
/// `cuInit` must have succeeded; `dev` must be a device handle from `cuDeviceGet`.
pub unsafe fn primary_context(dev: cu::CUdevice) -> Result<cu::CUcontext, String> {
    let mut ctx = std::ptr::null_mut();
    cu_check(
        "cuDevicePrimaryCtxRetain",
        cu::cuDevicePrimaryCtxRetain(&mut ctx, dev),
    )?;
    cu_check("cuCtxSetCurrent", cu::cuCtxSetCurrent(ctx))?;
    Ok(ctx)
}

/// Whether the CUDA driver library can be loaded (no GPU code runs before this is true).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library.
    unsafe { cu::is_culib_present() }
}

/// Checks that cuBLAS and NCCL can be loaded, with a hint where they usually live.
pub fn libraries_present() -> Result<(), String> {
    // SAFETY: only tries to dlopen the libraries.
    if !unsafe { nccl::is_culib_present() } {
        return Err("cannot load NCCL (libnccl.so): put the folder of libnccl.so on LD_LIBRARY_PATH \
                    (PyTorch's wheel has it as nvidia/nccl/lib/libnccl.so.2: link it as libnccl.so; \
                    bench/gpu/env.sh does this)"
            .into());
    }
    if !unsafe { cublas::is_culib_present() } {
        return Err("cannot load cuBLAS (libcublas.so): put the folder of libcublas.so.13 on LD_LIBRARY_PATH \
                    (bench/gpu/env.sh finds it)"
            .into());
    }
    Ok(())
}

/// NCCL's version as `major.minor.patch`.
pub fn nccl_version() -> Result<String, String> {
    let mut v = 0i32;
    // SAFETY: writes one int.
    nccl_check(
        "ncclGetVersion",
        unsafe { nccl::ncclGetVersion(&mut v) },
        std::ptr::null_mut(),
    )?;
    Ok(format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100))
}

/// The NCCL element type of an ABI dtype code (the codes are `ncclDataType_t`'s values).
pub fn nccl_dtype(code: u32) -> Result<nccl::ncclDataType_t, String> {
    use nccl::ncclDataType_t as T;
    Ok(match code {
        0 => T::ncclInt8,
        1 => T::ncclUint8,
        2 => T::ncclInt32,
        3 => T::ncclUint32,
        4 => T::ncclInt64,
        5 => T::ncclUint64,
        6 => T::ncclFloat16,
        7 => T::ncclFloat32,
        8 => T::ncclFloat64,
        9 => T::ncclBfloat16,
        _ => return Err(format!("unknown dtype code {code}")),
    })
}

/// Bytes of one element of an ABI dtype code.
pub fn dtype_bytes(code: u32) -> Result<usize, String> {
    Ok(match code {
        0 | 1 => 1,
        6 | 9 => 2,
        2 | 3 | 7 => 4,
        4 | 5 | 8 => 8,
        _ => return Err(format!("unknown dtype code {code}")),
    })
}

/// `ncclReduceScatter` with its reduction as the C `int` it is. An operator NCCL creates
/// (`ncclRedOpCreatePreMulSum`) is `ncclNumOps` plus an index mangled with the communicator's
/// address, outside the Rust enum's variants, so it must never be held as that enum: these
/// entry points are looked up in the NCCL library cudarc loaded, with `u32` for the operator.
pub type RawReduceScatter = unsafe extern "C" fn(
    *const std::ffi::c_void,
    *mut std::ffi::c_void,
    usize,
    nccl::ncclDataType_t,
    u32,
    nccl::ncclComm_t,
    nccl::cudaStream_t,
) -> nccl::ncclResult_t;
type RawCreatePreMulSum = unsafe extern "C" fn(
    *mut u32,
    *mut std::ffi::c_void,
    nccl::ncclDataType_t,
    nccl::ncclScalarResidence_t,
    nccl::ncclComm_t,
) -> nccl::ncclResult_t;
type RawRedOpDestroy = unsafe extern "C" fn(u32, nccl::ncclComm_t) -> nccl::ncclResult_t;

/// An NCCL entry point of type `F` (one of the `Raw*` types above) by name.
///
/// # Safety
/// `F` must be the entry's C signature.
unsafe fn nccl_symbol<F: Copy>(name: &str) -> Result<F, String> {
    // SAFETY: cudarc's loaded NCCL library; the caller gives the symbol's signature.
    unsafe {
        let lib = nccl::culib();
        lib.get::<F>(name.as_bytes())
            .map(|s| *s)
            .map_err(|e| format!("NCCL has no {name}: {e}"))
    }
}

/// `ncclReduceScatter` taking the operator as an int ([`RawReduceScatter`]).
pub fn raw_reduce_scatter() -> Result<RawReduceScatter, String> {
    static F: std::sync::OnceLock<Result<RawReduceScatter, String>> = std::sync::OnceLock::new();
    // SAFETY: RawReduceScatter is ncclReduceScatter's C signature (ncclRedOp_t is an int).
    F.get_or_init(|| unsafe { nccl_symbol("ncclReduceScatter") })
        .clone()
}

/// Runs `f` with the NCCL reduction operator (as an int) of an ABI reduction code on `comm`:
/// a table code ([`nccl_op`]), or a pre-multiplied sum by ± a power of two
/// (`abi::premul_factor`) that NCCL creates for this one call and that is destroyed as soon
/// as `f` has enqueued it (NCCL allows that once the call that takes it has returned).
///
/// # Safety
/// `comm` must be a live NCCL communicator.
pub unsafe fn with_nccl_op<T>(
    code: u32,
    dtype: u32,
    comm: nccl::ncclComm_t,
    f: impl FnOnce(u32) -> Result<T, String>,
) -> Result<T, String> {
    let Some(factor) = commlir_dialects::rt::abi::premul_factor(code) else {
        return f(nccl_op(code)? as u32);
    };
    // The scalar in the data type, read by NCCL at creation (host immediate).
    let mut scalar = [0u8; 8];
    match dtype {
        7 => scalar[..4].copy_from_slice(&(factor as f32).to_le_bytes()),
        8 => scalar.copy_from_slice(&factor.to_le_bytes()),
        // A power of two is exact in bf16: the top half of its f32 bits.
        9 => scalar[..2].copy_from_slice(&(((factor as f32).to_bits() >> 16) as u16).to_le_bytes()),
        6 => {
            let e = factor.abs().log2() as i32;
            if !(-14..=15).contains(&e) {
                return Err(format!(
                    "pre-multiplied sum by {factor}: outside f16's normal range"
                ));
            }
            let sign = if factor < 0.0 { 0x8000u16 } else { 0 };
            scalar[..2].copy_from_slice(&(sign | (((e + 15) as u16) << 10)).to_le_bytes());
        }
        _ => return Err(format!("pre-multiplied sum of dtype code {dtype}")),
    }
    let dt = nccl_dtype(dtype)?;
    // SAFETY: the Raw* types are these entries' C signatures.
    let (create, destroy) = unsafe {
        (
            nccl_symbol::<RawCreatePreMulSum>("ncclRedOpCreatePreMulSum")?,
            nccl_symbol::<RawRedOpDestroy>("ncclRedOpDestroy")?,
        )
    };
    let mut op: u32 = 0;
    // SAFETY: `op` is 4 writable bytes (NCCL writes an int); the scalar outlives the call.
    let r = unsafe {
        create(
            &mut op,
            scalar.as_mut_ptr().cast(),
            dt,
            nccl::ncclScalarResidence_t::ncclScalarHostImmediate,
            comm,
        )
    };
    nccl_check("ncclRedOpCreatePreMulSum", r, comm)?;
    let out = f(op);
    // SAFETY: `op` was created on `comm` above and the call that took it has returned.
    let r = unsafe { destroy(op, comm) };
    let destroyed = nccl_check("ncclRedOpDestroy", r, comm);
    let out = out?;
    destroyed.map(|()| out)
}

/// The NCCL reduction of an ABI reduction code (the codes are `ncclRedOp_t`'s values).
pub fn nccl_op(code: u32) -> Result<nccl::ncclRedOp_t, String> {
    use nccl::ncclRedOp_t as O;
    Ok(match code {
        0 => O::ncclSum,
        1 => O::ncclProd,
        2 => O::ncclMax,
        3 => O::ncclMin,
        4 => O::ncclAvg,
        _ => return Err(format!("unknown reduction code {code}")),
    })
}
