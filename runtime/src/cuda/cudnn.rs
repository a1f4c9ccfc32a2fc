//! Fused attention through cuDNN's graph API (the backend descriptors of `cudnn_graph.h`),
//! with `libcudnn.so.9` loaded at run time like NCCL and cuBLAS: nothing cuDNN is needed to
//! build, and only a program that calls `attention` or `attention_backward` needs the library.
//!
//! Both directions are the operation graphs that cuDNN's runtime-fusion engines recognize as
//! flash attention (the graphs cuDNN's own frontend builds for its SDPA nodes, which is what
//! PyTorch's cuDNN attention backend runs), expressed directly in backend descriptors:
//!
//! - forward: `S = Q·Kᵀ` (f32), `·scale`, the causal mask (row index ≥ column index, else
//!   −∞), softmax with its statistics (`max`, `exp(S − max)`, `Σ`, `Stats = max + log Σ`,
//!   the probabilities rounded to the element type) and `O = P·V`. `Stats` is the row
//!   log-sum-exp, written when the caller wants it;
//! - backward: `Δ = Σ_d dO∘O` (kept in the workspace), `P = exp(scale·Q·Kᵀ − Stats)` masked,
//!   `dV = Pᵀ·dO`, `dS = P∘(dO·Vᵀ − Δ)·scale`, `dK = dSᵀ·Q`, `dQ = dS·K` accumulated in f32 in
//!   the workspace. With grouped-query attention (fewer key/value heads) dK and dV are
//!   reduced over the query heads that share a key/value head, inside the graph.
//!
//! Building a plan (heuristics, then finalizing engine configurations until one is accepted)
//! takes milliseconds to seconds, so plans are cached per shape; the scale and the mask value
//! are by-value scalars of the variant pack, not part of the plan. Tensors are the program's
//! contiguous row-major `B×H×L×D` buffers.

use super::ffi::cu_check;
use cudarc::driver::sys as cu;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

type Status = i32;
type Desc = *mut c_void;
type Handle = *mut c_void;

// The values of cudnn_graph.h (cuDNN 9) this module uses.
const DT_FLOAT: i32 = 0;
const DT_HALF: i32 = 2;
const DT_INT32: i32 = 4;
const DT_BF16: i32 = 9;
const DT_BOOLEAN: i32 = 11;

const PW_ADD: i32 = 0;
const PW_MUL: i32 = 1;
const PW_DIV: i32 = 6;
const PW_SUB: i32 = 9;
const PW_EXP: i32 = 13;
const PW_LOG: i32 = 15;
const PW_IDENTITY: i32 = 21;
const PW_CMP_GE: i32 = 303;
const PW_GEN_INDEX: i32 = 501;
const PW_BINARY_SELECT: i32 = 601;

const RED_ADD: i32 = 0;
const RED_MAX: i32 = 3;

const T_HANDLE: i32 = 0;
const T_DATA_TYPE: i32 = 1;
const T_BOOLEAN: i32 = 2;
const T_INT64: i32 = 3;
const T_VOID_PTR: i32 = 6;
const T_HEUR_MODE: i32 = 8;
const T_POINTWISE_MODE: i32 = 14;
const T_BACKEND_DESCRIPTOR: i32 = 15;
const T_REDUCTION_OPERATOR: i32 = 18;

const D_POINTWISE: i32 = 0;
const D_ENGINECFG: i32 = 3;
const D_ENGINEHEUR: i32 = 4;
const D_EXECUTION_PLAN: i32 = 5;
const D_OP_POINTWISE: i32 = 13;
const D_OPERATIONGRAPH: i32 = 15;
const D_VARIANT_PACK: i32 = 16;
const D_TENSOR: i32 = 17;
const D_MATMUL: i32 = 18;
const D_OP_MATMUL: i32 = 19;
const D_REDUCTION: i32 = 21;
const D_OP_REDUCTION: i32 = 22;
const D_OP_RESHAPE: i32 = 31;

const A_POINTWISE_MODE: i32 = 0;
const A_POINTWISE_MATH_PREC: i32 = 1;
const A_POINTWISE_AXIS: i32 = 9;
const A_ENGINEHEUR_MODE: i32 = 200;
const A_ENGINEHEUR_OPERATION_GRAPH: i32 = 201;
const A_ENGINEHEUR_RESULTS: i32 = 202;
const A_EXECUTION_PLAN_HANDLE: i32 = 400;
const A_EXECUTION_PLAN_ENGINE_CONFIG: i32 = 401;
const A_EXECUTION_PLAN_WORKSPACE_SIZE: i32 = 402;
const A_OP_POINTWISE_PW_DESCRIPTOR: i32 = 750;
const A_OP_POINTWISE_XDESC: i32 = 751;
const A_OP_POINTWISE_BDESC: i32 = 752;
const A_OP_POINTWISE_YDESC: i32 = 753;
const A_OP_POINTWISE_TDESC: i32 = 758;
const A_OPERATIONGRAPH_HANDLE: i32 = 800;
const A_OPERATIONGRAPH_OPS: i32 = 801;
const A_TENSOR_BYTE_ALIGNMENT: i32 = 900;
const A_TENSOR_DATA_TYPE: i32 = 901;
const A_TENSOR_DIMENSIONS: i32 = 902;
const A_TENSOR_STRIDES: i32 = 903;
const A_TENSOR_UNIQUE_ID: i32 = 906;
const A_TENSOR_IS_VIRTUAL: i32 = 907;
const A_TENSOR_IS_BY_VALUE: i32 = 908;
const A_VARIANT_PACK_UNIQUE_IDS: i32 = 1000;
const A_VARIANT_PACK_DATA_POINTERS: i32 = 1001;
const A_VARIANT_PACK_WORKSPACE: i32 = 1003;
const A_MATMUL_COMP_TYPE: i32 = 1500;
const A_OP_MATMUL_ADESC: i32 = 1520;
const A_OP_MATMUL_BDESC: i32 = 1521;
const A_OP_MATMUL_CDESC: i32 = 1522;
const A_OP_MATMUL_DESC: i32 = 1523;
const A_REDUCTION_OPERATOR: i32 = 1600;
const A_REDUCTION_COMP_TYPE: i32 = 1601;
const A_OP_REDUCTION_XDESC: i32 = 1610;
const A_OP_REDUCTION_YDESC: i32 = 1611;
const A_OP_REDUCTION_DESC: i32 = 1612;
const A_OP_RESHAPE_XDESC: i32 = 2200;
const A_OP_RESHAPE_YDESC: i32 = 2201;

const HEUR_MODE_A: i32 = 3;

/// The cuDNN entry points this module calls, resolved from the loaded library.
struct Api {
    _lib: libloading::Library,
    version: unsafe extern "C" fn() -> usize,
    create: unsafe extern "C" fn(*mut Handle) -> Status,
    destroy: unsafe extern "C" fn(Handle) -> Status,
    set_stream: unsafe extern "C" fn(Handle, *mut c_void) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    last_error: unsafe extern "C" fn(*mut c_char, usize),
    create_desc: unsafe extern "C" fn(i32, *mut Desc) -> Status,
    destroy_desc: unsafe extern "C" fn(Desc) -> Status,
    finalize: unsafe extern "C" fn(Desc) -> Status,
    set_attr: unsafe extern "C" fn(Desc, i32, i32, i64, *const c_void) -> Status,
    get_attr: unsafe extern "C" fn(Desc, i32, i32, i64, *mut i64, *mut c_void) -> Status,
    execute: unsafe extern "C" fn(Handle, Desc, Desc) -> Status,
}

/// Where cuDNN is looked for: the soname first (LD_LIBRARY_PATH, the system), then the
/// unversioned name.
const LIBRARY_NAMES: &[&str] = &["libcudnn.so.9", "libcudnn.so"];

impl Api {
    fn load() -> Result<Api, String> {
        let mut tried = Vec::new();
        for name in LIBRARY_NAMES {
            // SAFETY: loading cuDNN runs its initializers only.
            match unsafe { libloading::Library::new(*name) } {
                Ok(lib) => return Api::resolve(lib),
                Err(e) => tried.push(format!("{name}: {e}")),
            }
        }
        Err(format!(
            "cannot load cuDNN (needed by attention on the GPU): {}; put the folder of \
             libcudnn.so.9 on LD_LIBRARY_PATH (PyTorch's wheel has it in nvidia/cudnn/lib; \
             bench/gpu/env.sh finds it)",
            tried.join("; ")
        ))
    }

    fn resolve(lib: libloading::Library) -> Result<Api, String> {
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol has the C signature of the field it is stored in
                // (cudnn_graph.h).
                *unsafe { lib.get($name) }.map_err(|e| {
                    format!(
                        "cuDNN lacks {}: {e}",
                        String::from_utf8_lossy(&$name[..$name.len() - 1])
                    )
                })?
            };
        }
        Ok(Api {
            version: sym!(b"cudnnGetVersion\0"),
            create: sym!(b"cudnnCreate\0"),
            destroy: sym!(b"cudnnDestroy\0"),
            set_stream: sym!(b"cudnnSetStream\0"),
            error_string: sym!(b"cudnnGetErrorString\0"),
            last_error: sym!(b"cudnnGetLastErrorString\0"),
            create_desc: sym!(b"cudnnBackendCreateDescriptor\0"),
            destroy_desc: sym!(b"cudnnBackendDestroyDescriptor\0"),
            finalize: sym!(b"cudnnBackendFinalize\0"),
            set_attr: sym!(b"cudnnBackendSetAttribute\0"),
            get_attr: sym!(b"cudnnBackendGetAttribute\0"),
            execute: sym!(b"cudnnBackendExecute\0"),
            _lib: lib,
        })
    }

    /// A failed call's message: the API name, cuDNN's status name and its last error text.
    fn check(&self, what: &str, s: Status) -> Result<(), String> {
        if s == 0 {
            return Ok(());
        }
        let mut buf = [0 as c_char; 512];
        // SAFETY: both return or write NUL-terminated strings (the buffer's size is passed).
        let (name, detail) = unsafe {
            let p = (self.error_string)(s);
            (self.last_error)(buf.as_mut_ptr(), buf.len());
            let name = if p.is_null() {
                format!("status {s}")
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            };
            (
                name,
                CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned(),
            )
        };
        if detail.is_empty() {
            Err(format!("{what} failed: {name}"))
        } else {
            Err(format!("{what} failed: {name}: {detail}"))
        }
    }
}

/// One backend descriptor, destroyed with its owner.
struct Owned {
    api: Arc<Api>,
    d: Desc,
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: created by cudnnBackendCreateDescriptor and destroyed once.
        unsafe { (self.api.destroy_desc)(self.d) };
    }
}

impl Owned {
    fn new(api: &Arc<Api>, kind: i32) -> Result<Owned, String> {
        let mut d = std::ptr::null_mut();
        // SAFETY: writes one descriptor handle.
        api.check("cudnnBackendCreateDescriptor", unsafe {
            (api.create_desc)(kind, &mut d)
        })?;
        Ok(Owned {
            api: api.clone(),
            d,
        })
    }
    fn set<T>(&self, attr: i32, ty: i32, vals: &[T]) -> Result<(), String> {
        // SAFETY: `vals` holds `len` elements of the C type `ty` names.
        self.api
            .check(&format!("cudnnBackendSetAttribute({attr})"), unsafe {
                (self.api.set_attr)(self.d, attr, ty, vals.len() as i64, vals.as_ptr() as _)
            })
    }
    fn finalize(&self, what: &str) -> Result<(), String> {
        // SAFETY: a descriptor whose attributes were set above.
        self.api
            .check(&format!("cudnnBackendFinalize({what})"), unsafe {
                (self.api.finalize)(self.d)
            })
    }
}

/// Tensor ids of the variant pack (virtual tensors are numbered from [`FIRST_VIRTUAL`]).
mod uid {
    pub const Q: i64 = 1;
    pub const K: i64 = 2;
    pub const V: i64 = 3;
    pub const O: i64 = 4;
    pub const STATS: i64 = 5;
    pub const SCALE: i64 = 6;
    pub const NEG_INF: i64 = 7;
    pub const DO: i64 = 8;
    pub const DQ: i64 = 9;
    pub const DK: i64 = 10;
    pub const DV: i64 = 11;
    pub const SOFTMAX_SUM: i64 = 12;
    pub const DQ_ACCUM: i64 = 13;
    pub const ONE: i64 = 14;
}
const FIRST_VIRTUAL: i64 = 100;

/// Sizes of one attention call: `q: b×hq×lq×d`, `k: b×hkv×lk×d`, `v: b×hkv×lk×dv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    pub b: i64,
    pub hq: i64,
    pub hkv: i64,
    pub lq: i64,
    pub lk: i64,
    pub d: i64,
    pub dv: i64,
}

impl Shape {
    /// The sizes in the ABI's order: `(batch, heads, kv_heads, q_len, kv_len, head_dim,
    /// v_dim)`.
    pub fn of([b, hq, hkv, lq, lk, d, dv]: [i64; 7]) -> Shape {
        Shape {
            b,
            hq,
            hkv,
            lq,
            lk,
            d,
            dv,
        }
    }

    /// Whether cuDNN's fused attention takes these sizes (what the lowering also checks):
    /// head dims multiples of 8 up to 256, query heads a multiple of the key/value heads.
    pub fn supported(&self) -> Result<(), String> {
        let s = self;
        if [s.b, s.hq, s.hkv, s.lq, s.lk, s.d, s.dv]
            .iter()
            .any(|&x| x <= 0)
        {
            return Err(format!("attention: empty or negative sizes {s:?}"));
        }
        if s.hq % s.hkv != 0 {
            return Err(format!(
                "attention: {} query heads are not a multiple of {} key/value heads",
                s.hq, s.hkv
            ));
        }
        if s.d % 8 != 0 || s.dv % 8 != 0 || s.d > 256 || s.dv > 256 {
            return Err(format!(
                "attention: head dims {} and {} must be multiples of 8 up to 256 for cuDNN",
                s.d, s.dv
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    backward: bool,
    shape: Shape,
    dtype: i32,
    causal: bool,
    lse: bool,
}

/// Contiguous strides of `dims`.
fn contiguous(dims: [i64; 4]) -> [i64; 4] {
    [dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1]
}

/// An operation graph under construction: its tensors and operations.
struct Graph {
    api: Arc<Api>,
    tensors: Vec<Owned>,
    ops: Vec<Owned>,
    next_virtual: i64,
}

/// A tensor of the graph (index into `Graph::tensors`).
#[derive(Clone, Copy)]
struct T(usize);

impl Graph {
    fn new(api: Arc<Api>) -> Graph {
        Graph {
            api,
            tensors: Vec::new(),
            ops: Vec::new(),
            next_virtual: FIRST_VIRTUAL,
        }
    }

    fn tensor(
        &mut self,
        uid: Option<i64>,
        dtype: i32,
        dims: [i64; 4],
        strides: [i64; 4],
        by_value: bool,
    ) -> Result<T, String> {
        let is_virtual = uid.is_none();
        let uid = uid.unwrap_or_else(|| {
            self.next_virtual += 1;
            self.next_virtual
        });
        let t = Owned::new(&self.api, D_TENSOR)?;
        t.set(A_TENSOR_DATA_TYPE, T_DATA_TYPE, &[dtype])?;
        t.set(A_TENSOR_DIMENSIONS, T_INT64, &dims)?;
        t.set(A_TENSOR_STRIDES, T_INT64, &strides)?;
        t.set(A_TENSOR_UNIQUE_ID, T_INT64, &[uid])?;
        t.set(A_TENSOR_BYTE_ALIGNMENT, T_INT64, &[16i64])?;
        t.set(A_TENSOR_IS_VIRTUAL, T_BOOLEAN, &[is_virtual])?;
        if by_value {
            t.set(A_TENSOR_IS_BY_VALUE, T_BOOLEAN, &[true])?;
        }
        t.finalize("tensor")?;
        self.tensors.push(t);
        Ok(T(self.tensors.len() - 1))
    }
    /// A tensor the caller passes (a buffer of the variant pack).
    fn real(
        &mut self,
        uid: i64,
        dtype: i32,
        dims: [i64; 4],
        strides: [i64; 4],
    ) -> Result<T, String> {
        self.tensor(Some(uid), dtype, dims, strides, false)
    }
    /// A caller's contiguous row-major buffer.
    fn packed(&mut self, uid: i64, dtype: i32, dims: [i64; 4]) -> Result<T, String> {
        self.real(uid, dtype, dims, contiguous(dims))
    }
    /// An intermediate cuDNN keeps to itself.
    fn virt(&mut self, dtype: i32, dims: [i64; 4], strides: [i64; 4]) -> Result<T, String> {
        self.tensor(None, dtype, dims, strides, false)
    }
    /// A host scalar of the variant pack.
    fn scalar(&mut self, uid: i64, dtype: i32) -> Result<T, String> {
        self.tensor(Some(uid), dtype, [1; 4], [1; 4], true)
    }
    fn d(&self, t: T) -> Desc {
        self.tensors[t.0].d
    }

    fn pointwise(
        &mut self,
        mode: i32,
        prec: i32,
        axis: Option<i64>,
        (x, b, t): (T, Option<T>, Option<T>),
        y: T,
    ) -> Result<(), String> {
        let pw = Owned::new(&self.api, D_POINTWISE)?;
        pw.set(A_POINTWISE_MODE, T_POINTWISE_MODE, &[mode])?;
        pw.set(A_POINTWISE_MATH_PREC, T_DATA_TYPE, &[prec])?;
        if let Some(a) = axis {
            pw.set(A_POINTWISE_AXIS, T_INT64, &[a])?;
        }
        pw.finalize("pointwise")?;
        let op = Owned::new(&self.api, D_OP_POINTWISE)?;
        op.set(A_OP_POINTWISE_PW_DESCRIPTOR, T_BACKEND_DESCRIPTOR, &[pw.d])?;
        op.set(A_OP_POINTWISE_XDESC, T_BACKEND_DESCRIPTOR, &[self.d(x)])?;
        if let Some(b) = b {
            op.set(A_OP_POINTWISE_BDESC, T_BACKEND_DESCRIPTOR, &[self.d(b)])?;
        }
        if let Some(t) = t {
            op.set(A_OP_POINTWISE_TDESC, T_BACKEND_DESCRIPTOR, &[self.d(t)])?;
        }
        op.set(A_OP_POINTWISE_YDESC, T_BACKEND_DESCRIPTOR, &[self.d(y)])?;
        op.finalize("pointwise operation")?;
        self.ops.push(op);
        Ok(())
    }
    /// `y = x <mode> b` in f32.
    fn binary(&mut self, mode: i32, x: T, b: T, y: T) -> Result<(), String> {
        self.pointwise(mode, DT_FLOAT, None, (x, Some(b), None), y)
    }
    fn unary(&mut self, mode: i32, x: T, y: T) -> Result<(), String> {
        self.pointwise(mode, DT_FLOAT, None, (x, None, None), y)
    }

    fn matmul(&mut self, a: T, b: T, c: T) -> Result<(), String> {
        let mm = Owned::new(&self.api, D_MATMUL)?;
        mm.set(A_MATMUL_COMP_TYPE, T_DATA_TYPE, &[DT_FLOAT])?;
        mm.finalize("matmul")?;
        let op = Owned::new(&self.api, D_OP_MATMUL)?;
        op.set(A_OP_MATMUL_ADESC, T_BACKEND_DESCRIPTOR, &[self.d(a)])?;
        op.set(A_OP_MATMUL_BDESC, T_BACKEND_DESCRIPTOR, &[self.d(b)])?;
        op.set(A_OP_MATMUL_CDESC, T_BACKEND_DESCRIPTOR, &[self.d(c)])?;
        op.set(A_OP_MATMUL_DESC, T_BACKEND_DESCRIPTOR, &[mm.d])?;
        op.finalize("matmul operation")?;
        self.ops.push(op);
        Ok(())
    }

    fn reduction(&mut self, mode: i32, x: T, y: T) -> Result<(), String> {
        let red = Owned::new(&self.api, D_REDUCTION)?;
        red.set(A_REDUCTION_OPERATOR, T_REDUCTION_OPERATOR, &[mode])?;
        red.set(A_REDUCTION_COMP_TYPE, T_DATA_TYPE, &[DT_FLOAT])?;
        red.finalize("reduction")?;
        let op = Owned::new(&self.api, D_OP_REDUCTION)?;
        op.set(A_OP_REDUCTION_XDESC, T_BACKEND_DESCRIPTOR, &[self.d(x)])?;
        op.set(A_OP_REDUCTION_YDESC, T_BACKEND_DESCRIPTOR, &[self.d(y)])?;
        op.set(A_OP_REDUCTION_DESC, T_BACKEND_DESCRIPTOR, &[red.d])?;
        op.finalize("reduction operation")?;
        self.ops.push(op);
        Ok(())
    }

    fn reshape(&mut self, x: T, y: T) -> Result<(), String> {
        let op = Owned::new(&self.api, D_OP_RESHAPE)?;
        op.set(A_OP_RESHAPE_XDESC, T_BACKEND_DESCRIPTOR, &[self.d(x)])?;
        op.set(A_OP_RESHAPE_YDESC, T_BACKEND_DESCRIPTOR, &[self.d(y)])?;
        op.finalize("reshape operation")?;
        self.ops.push(op);
        Ok(())
    }

    /// The causal mask of top-left-aligned scores `s` (keys after the query's row are −∞),
    /// as cuDNN's frontend expresses it: row and column indices, `row ≥ col`, a select.
    fn causal(&mut self, s: T, dims: [i64; 4]) -> Result<T, String> {
        let st = contiguous(dims);
        let row = self.virt(DT_INT32, dims, st)?;
        let col = self.virt(DT_INT32, dims, st)?;
        self.pointwise(PW_GEN_INDEX, DT_FLOAT, Some(2), (s, None, None), row)?;
        self.pointwise(PW_GEN_INDEX, DT_FLOAT, Some(3), (s, None, None), col)?;
        let keep = self.virt(DT_BOOLEAN, dims, st)?;
        self.pointwise(PW_CMP_GE, DT_BOOLEAN, None, (row, Some(col), None), keep)?;
        let neg_inf = self.scalar(uid::NEG_INF, DT_FLOAT)?;
        let out = self.virt(DT_FLOAT, dims, st)?;
        self.pointwise(
            PW_BINARY_SELECT,
            DT_FLOAT,
            None,
            (s, Some(neg_inf), Some(keep)),
            out,
        )?;
        Ok(out)
    }

    /// `scale · q·kᵀ` in f32 (`sd` = `b×hq×lq×lk`), what both directions start from, and the
    /// scale's by-value tensor (the backward scales `dS` by it too).
    fn scaled_scores(&mut self, q: T, kt: T, sd: [i64; 4]) -> Result<(T, T), String> {
        let ss = contiguous(sd);
        let s = self.virt(DT_FLOAT, sd, ss)?;
        self.matmul(q, kt, s)?;
        let scale = self.scalar(uid::SCALE, DT_FLOAT)?;
        let scaled = self.virt(DT_FLOAT, sd, ss)?;
        self.binary(PW_MUL, s, scale, scaled)?;
        Ok((scaled, scale))
    }

    /// The forward graph (module docs).
    fn forward(&mut self, k: &Key) -> Result<(), String> {
        let Shape {
            b,
            hq,
            hkv,
            lq,
            lk,
            d,
            dv,
        } = k.shape;
        let q = self.packed(uid::Q, k.dtype, [b, hq, lq, d])?;
        // Kᵀ: K's buffer with its last two dims swapped.
        let kt = self.real(
            uid::K,
            k.dtype,
            [b, hkv, d, lk],
            [hkv * lk * d, lk * d, 1, d],
        )?;
        let v = self.packed(uid::V, k.dtype, [b, hkv, lk, dv])?;
        let o = self.packed(uid::O, k.dtype, [b, hq, lq, dv])?;
        let sd = [b, hq, lq, lk];
        let ss = contiguous(sd);
        let (mut s1, _) = self.scaled_scores(q, kt, sd)?;
        if k.causal {
            s1 = self.causal(s1, sd)?;
        }
        let rd = [b, hq, lq, 1];
        let rs = [hq * lq, lq, 1, 1];
        let max = self.virt(DT_FLOAT, rd, rs)?;
        self.reduction(RED_MAX, s1, max)?;
        let sub = self.virt(DT_FLOAT, sd, ss)?;
        self.binary(PW_SUB, s1, max, sub)?;
        let e = self.virt(DT_FLOAT, sd, ss)?;
        self.unary(PW_EXP, sub, e)?;
        let sum = self.virt(DT_FLOAT, rd, rs)?;
        self.reduction(RED_ADD, e, sum)?;
        let log = self.virt(DT_FLOAT, rd, rs)?;
        self.unary(PW_LOG, sum, log)?;
        let stats = if k.lse {
            self.real(uid::STATS, DT_FLOAT, rd, rs)?
        } else {
            self.virt(DT_FLOAT, rd, rs)?
        };
        self.binary(PW_ADD, max, log, stats)?;
        // The probabilities in the element type: the second product's A operand.
        let p = self.virt(k.dtype, sd, ss)?;
        self.binary(PW_DIV, e, sum, p)?;
        self.matmul(p, v, o)
    }

    /// The backward graph (module docs); the workspace holds `Δ` and the f32 `dQ`.
    fn backward(&mut self, k: &Key) -> Result<(), String> {
        let Shape {
            b,
            hq,
            hkv,
            lq,
            lk,
            d,
            dv,
        } = k.shape;
        let dt = k.dtype;
        let q = self.packed(uid::Q, dt, [b, hq, lq, d])?;
        let kt = self.real(uid::K, dt, [b, hkv, d, lk], [hkv * lk * d, lk * d, 1, d])?;
        let vt = self.real(
            uid::V,
            dt,
            [b, hkv, dv, lk],
            [hkv * lk * dv, lk * dv, 1, dv],
        )?;
        let o = self.packed(uid::O, dt, [b, hq, lq, dv])?;
        let d_o = self.packed(uid::DO, dt, [b, hq, lq, dv])?;
        let rd = [b, hq, lq, 1];
        let rs = [hq * lq, lq, 1, 1];
        let stats = self.real(uid::STATS, DT_FLOAT, rd, rs)?;
        let dq = self.packed(uid::DQ, dt, [b, hq, lq, d])?;
        let dk = self.packed(uid::DK, dt, [b, hkv, lk, d])?;
        let dvv = self.packed(uid::DV, dt, [b, hkv, lk, dv])?;

        // Δ = Σ_d dO∘O (the frontend's layout for the product), kept in the workspace.
        let prod = self.virt(
            DT_FLOAT,
            [b, hq, lq, dv],
            [hq * lq * dv, lq * dv, hq * dv, 1],
        )?;
        self.binary(PW_MUL, d_o, o, prod)?;
        let red = self.virt(DT_FLOAT, rd, rs)?;
        self.reduction(RED_ADD, prod, red)?;
        let one = self.scalar(uid::ONE, DT_FLOAT)?;
        let delta = self.real(uid::SOFTMAX_SUM, DT_FLOAT, rd, rs)?;
        self.binary(PW_MUL, red, one, delta)?;

        // P = exp(scale·Q·Kᵀ − Stats), masked.
        let sd = [b, hq, lq, lk];
        let ss = contiguous(sd);
        let (s1, scale) = self.scaled_scores(q, kt, sd)?;
        let mut s2 = self.virt(DT_FLOAT, sd, ss)?;
        self.binary(PW_SUB, s1, stats, s2)?;
        if k.causal {
            s2 = self.causal(s2, sd)?;
        }
        let p = self.virt(DT_FLOAT, sd, ss)?;
        self.unary(PW_EXP, s2, p)?;

        // dV = Pᵀ·dO (summed over the query heads of a key/value head).
        let td = [b, hq, lk, lq];
        let ts = [hq * lq * lk, lq * lk, 1, lk];
        let pt = self.virt(dt, td, ts)?;
        self.reshape(p, pt)?;
        self.head_sum_matmul(pt, d_o, dvv, [b, hq, lk, dv], hq != hkv)?;

        // dS = P∘(dO·Vᵀ − Δ)·scale.
        let dp = self.virt(DT_FLOAT, sd, ss)?;
        self.matmul(d_o, vt, dp)?;
        let x = self.virt(DT_FLOAT, sd, ss)?;
        self.binary(PW_SUB, dp, delta, x)?;
        let x2 = self.virt(DT_FLOAT, sd, ss)?;
        self.binary(PW_MUL, x, p, x2)?;
        let ds = self.virt(DT_FLOAT, sd, ss)?;
        self.binary(PW_MUL, x2, scale, ds)?;

        // dK = dSᵀ·Q.
        let dst = self.virt(dt, td, ts)?;
        self.reshape(ds, dst)?;
        self.head_sum_matmul(dst, q, dk, [b, hq, lk, d], hq != hkv)?;

        // dQ = dS·K, accumulated in f32 in the workspace, then converted.
        let kk = self.virt(dt, [b, hkv, lk, d], contiguous([b, hkv, lk, d]))?;
        self.reshape(kt, kk)?;
        let acc = self.packed(uid::DQ_ACCUM, DT_FLOAT, [b, hq, lq, d])?;
        self.matmul(ds, kk, acc)?;
        self.unary(PW_IDENTITY, acc, dq)
    }

    /// `out = a·b`, or with grouped heads the full-head product reduced onto `out`'s heads.
    fn head_sum_matmul(
        &mut self,
        a: T,
        b: T,
        out: T,
        full: [i64; 4],
        grouped: bool,
    ) -> Result<(), String> {
        if !grouped {
            return self.matmul(a, b, out);
        }
        let dt = {
            let mut v = 0i32;
            let mut n = 0i64;
            // SAFETY: reads back the data type set on `out`.
            self.api.check("cudnnBackendGetAttribute", unsafe {
                (self.api.get_attr)(
                    self.d(out),
                    A_TENSOR_DATA_TYPE,
                    T_DATA_TYPE,
                    1,
                    &mut n,
                    &mut v as *mut i32 as _,
                )
            })?;
            v
        };
        let f = self.virt(dt, full, contiguous(full))?;
        self.matmul(a, b, f)?;
        self.reduction(RED_ADD, f, out)
    }

    /// Finalizes the graph and returns the first execution plan cuDNN's heuristics offer
    /// that finalizes, with its workspace size.
    fn plan(self, handle: Handle) -> Result<Plan, String> {
        let api = self.api.clone();
        let api = &api;
        let graph = Owned::new(api, D_OPERATIONGRAPH)?;
        graph.set(A_OPERATIONGRAPH_HANDLE, T_HANDLE, &[handle])?;
        let ops: Vec<Desc> = self.ops.iter().map(|o| o.d).collect();
        graph.set(A_OPERATIONGRAPH_OPS, T_BACKEND_DESCRIPTOR, &ops)?;
        graph.finalize("operation graph")?;
        let heur = Owned::new(api, D_ENGINEHEUR)?;
        heur.set(
            A_ENGINEHEUR_OPERATION_GRAPH,
            T_BACKEND_DESCRIPTOR,
            &[graph.d],
        )?;
        heur.set(A_ENGINEHEUR_MODE, T_HEUR_MODE, &[HEUR_MODE_A])?;
        heur.finalize("engine heuristics")?;
        let mut count = 0i64;
        // SAFETY: a query of the result count (no elements requested).
        api.check("cudnnBackendGetAttribute(heuristic results)", unsafe {
            (api.get_attr)(
                heur.d,
                A_ENGINEHEUR_RESULTS,
                T_BACKEND_DESCRIPTOR,
                0,
                &mut count,
                std::ptr::null_mut(),
            )
        })?;
        let cfgs = (0..count.max(0))
            .map(|_| Owned::new(api, D_ENGINECFG))
            .collect::<Result<Vec<_>, _>>()?;
        let mut raw: Vec<Desc> = cfgs.iter().map(|c| c.d).collect();
        let mut got = 0i64;
        if !raw.is_empty() {
            // SAFETY: fills the `count` created engine-config descriptors.
            api.check("cudnnBackendGetAttribute(heuristic results)", unsafe {
                (api.get_attr)(
                    heur.d,
                    A_ENGINEHEUR_RESULTS,
                    T_BACKEND_DESCRIPTOR,
                    raw.len() as i64,
                    &mut got,
                    raw.as_mut_ptr() as _,
                )
            })?;
        }
        let mut last = String::from("cuDNN's heuristics offered no engine for this graph");
        for cfg in cfgs.iter().take(got.max(0) as usize) {
            let plan = Owned::new(api, D_EXECUTION_PLAN)?;
            plan.set(A_EXECUTION_PLAN_HANDLE, T_HANDLE, &[handle])?;
            plan.set(
                A_EXECUTION_PLAN_ENGINE_CONFIG,
                T_BACKEND_DESCRIPTOR,
                &[cfg.d],
            )?;
            match plan.finalize("execution plan") {
                Ok(()) => {
                    let mut ws = 0i64;
                    let mut n = 0i64;
                    // SAFETY: reads one int64.
                    api.check("cudnnBackendGetAttribute(workspace size)", unsafe {
                        (api.get_attr)(
                            plan.d,
                            A_EXECUTION_PLAN_WORKSPACE_SIZE,
                            T_INT64,
                            1,
                            &mut n,
                            &mut ws as *mut i64 as _,
                        )
                    })?;
                    let keep = Keep {
                        _graph: self,
                        _descs: vec![graph, heur],
                        _cfgs: cfgs,
                    };
                    return Ok(Plan {
                        plan,
                        cudnn_ws: align(ws.max(0) as u64),
                        extra_ws: 0,
                        _keep: keep,
                    });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

/// A finalized execution plan and the workspace it needs (cuDNN's own, then the graph's
/// f32 intermediates: `Δ` and the `dQ` accumulator of the backward).
struct Plan {
    plan: Owned,
    cudnn_ws: u64,
    extra_ws: u64,
    /// Every descriptor the plan was built from, kept as long as the plan (cuDNN's frontend
    /// keeps them too).
    _keep: Keep,
}

struct Keep {
    _graph: Graph,
    _descs: Vec<Owned>,
    _cfgs: Vec<Owned>,
}

/// Bytes between the workspace's regions.
const ALIGN: u64 = 256;

fn align(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

/// One rank's cuDNN: the handle on the compute stream, the plans by shape, and one workspace
/// buffer grown to the largest call (stream-ordered on the compute stream, so consecutive
/// calls may share it).
pub struct Attention {
    plans: HashMap<Key, Plan>,
    api: Arc<Api>,
    handle: Handle,
    stream: cu::CUstream,
    workspace: (cu::CUdeviceptr, u64),
}

// SAFETY: used by one rank thread at a time, like the rank's other handles.
unsafe impl Send for Attention {}

/// The buffers of one forward call (device pointers).
pub struct Forward {
    pub q: *const c_void,
    pub k: *const c_void,
    pub v: *const c_void,
    pub out: *mut c_void,
    /// `b×hq×lq` f32, or null.
    pub lse: *mut c_void,
}

/// The buffers of one backward call (device pointers).
pub struct Backward {
    pub q: *const c_void,
    pub k: *const c_void,
    pub v: *const c_void,
    pub out: *const c_void,
    pub dout: *const c_void,
    pub lse: *const c_void,
    pub dq: *mut c_void,
    pub dk: *mut c_void,
    pub dv: *mut c_void,
}

/// cuDNN's data type for an ABI dtype code.
fn cudnn_dtype(code: u32) -> Result<i32, String> {
    match code {
        6 => Ok(DT_HALF),
        9 => Ok(DT_BF16),
        _ => Err(format!(
            "attention through cuDNN takes f16 or bf16 tensors (dtype code {code})"
        )),
    }
}

impl Attention {
    /// Loads cuDNN and creates a handle on `stream` (the current context's compute stream).
    pub fn new(stream: cu::CUstream) -> Result<Attention, String> {
        let api = Arc::new(Api::load()?);
        // SAFETY: returns a plain number.
        let v = unsafe { (api.version)() };
        if v < 90000 {
            return Err(format!(
                "cuDNN {v} is too old for fused attention through the graph API (9.0 or newer)"
            ));
        }
        let mut handle = std::ptr::null_mut();
        // SAFETY: writes one handle; then binds it to a stream of this context.
        api.check("cudnnCreate", unsafe { (api.create)(&mut handle) })?;
        api.check("cudnnSetStream", unsafe {
            (api.set_stream)(handle, stream as _)
        })?;
        Ok(Attention {
            api,
            handle,
            stream,
            plans: HashMap::new(),
            workspace: (0, 0),
        })
    }

    /// cuDNN's version number (e.g. 91900 for 9.19.0).
    pub fn version(&self) -> usize {
        // SAFETY: returns a plain number.
        unsafe { (self.api.version)() }
    }

    fn plan(&mut self, key: Key) -> Result<&Plan, String> {
        if !self.plans.contains_key(&key) {
            key.shape.supported()?;
            let mut g = Graph::new(self.api.clone());
            if key.backward {
                g.backward(&key)?;
            } else {
                g.forward(&key)?;
            }
            let mut plan = g.plan(self.handle).map_err(|e| {
                format!(
                    "cuDNN attention {} {:?}{}: {e}",
                    if key.backward { "backward" } else { "forward" },
                    key.shape,
                    if key.causal { " causal" } else { "" }
                )
            })?;
            let s = key.shape;
            if key.backward {
                plan.extra_ws = align((s.b * s.hq * s.lq * 4) as u64)
                    + align((s.b * s.hq * s.lq * s.d * 4) as u64);
            }
            self.plans.insert(key, plan);
        }
        Ok(&self.plans[&key])
    }

    /// A workspace of at least `bytes`, grown stream-ordered on the compute stream.
    fn workspace(&mut self, bytes: u64) -> Result<cu::CUdeviceptr, String> {
        if bytes > self.workspace.1 {
            // SAFETY: frees and allocates on this context's compute stream.
            unsafe {
                if self.workspace.0 != 0 {
                    cu_check(
                        "cuMemFreeAsync",
                        cu::cuMemFreeAsync(self.workspace.0, self.stream),
                    )?;
                }
                let mut p = 0;
                cu_check(
                    "cuMemAllocAsync",
                    cu::cuMemAllocAsync(&mut p, bytes as usize, self.stream),
                )?;
                self.workspace = (p, bytes);
            }
        }
        Ok(self.workspace.0)
    }

    fn execute(
        &mut self,
        key: Key,
        uids: &[i64],
        ptrs: &mut Vec<*mut c_void>,
    ) -> Result<(), String> {
        let (plan, cudnn_ws, extra) = {
            let p = self.plan(key)?;
            (p.plan.d, p.cudnn_ws, p.extra_ws)
        };
        let ws = self.workspace((cudnn_ws + extra).max(ALIGN))?;
        let mut uids = uids.to_vec();
        if key.backward {
            // Δ and the dQ accumulator live after cuDNN's own workspace.
            let s = key.shape;
            uids.extend([uid::SOFTMAX_SUM, uid::DQ_ACCUM]);
            ptrs.push((ws + cudnn_ws) as *mut c_void);
            ptrs.push((ws + cudnn_ws + align((s.b * s.hq * s.lq * 4) as u64)) as *mut c_void);
        }
        let api = self.api.clone();
        let pack = Owned::new(&api, D_VARIANT_PACK)?;
        pack.set(A_VARIANT_PACK_UNIQUE_IDS, T_INT64, &uids)?;
        pack.set(A_VARIANT_PACK_DATA_POINTERS, T_VOID_PTR, ptrs)?;
        pack.set(A_VARIANT_PACK_WORKSPACE, T_VOID_PTR, &[ws as *mut c_void])?;
        pack.finalize("variant pack")?;
        // SAFETY: every pointer of the pack is a device buffer of the planned shape or a
        // host scalar that lives until the call returns (by-value scalars are read at once).
        api.check("cudnnBackendExecute", unsafe {
            (api.execute)(self.handle, plan, pack.d)
        })
    }

    /// `out = attention(q, k, v)` (and the row log-sum-exp into `lse` when it is not null),
    /// on the compute stream.
    pub fn forward(
        &mut self,
        shape: Shape,
        dtype: u32,
        causal: bool,
        scale: f64,
        bufs: &Forward,
    ) -> Result<(), String> {
        let key = Key {
            backward: false,
            shape,
            dtype: cudnn_dtype(dtype)?,
            causal,
            lse: !bufs.lse.is_null(),
        };
        let mut scale = scale as f32;
        let mut neg_inf = f32::NEG_INFINITY;
        let mut uids = vec![uid::Q, uid::K, uid::V, uid::O, uid::SCALE];
        let mut ptrs = vec![
            bufs.q as *mut c_void,
            bufs.k as *mut c_void,
            bufs.v as *mut c_void,
            bufs.out,
            &mut scale as *mut f32 as *mut c_void,
        ];
        if causal {
            uids.push(uid::NEG_INF);
            ptrs.push(&mut neg_inf as *mut f32 as *mut c_void);
        }
        if key.lse {
            uids.push(uid::STATS);
            ptrs.push(bufs.lse);
        }
        self.execute(key, &uids, &mut ptrs)
    }

    /// `dq, dk, dv` of `attention(q, k, v)` given its `out`, the gradient `dout` and the
    /// forward's log-sum-exp, on the compute stream.
    pub fn backward(
        &mut self,
        shape: Shape,
        dtype: u32,
        causal: bool,
        scale: f64,
        bufs: &Backward,
    ) -> Result<(), String> {
        let key = Key {
            backward: true,
            shape,
            dtype: cudnn_dtype(dtype)?,
            causal,
            lse: true,
        };
        let mut scale = scale as f32;
        let mut neg_inf = f32::NEG_INFINITY;
        let mut one = 1.0f32;
        let mut uids = vec![
            uid::Q,
            uid::K,
            uid::V,
            uid::O,
            uid::DO,
            uid::STATS,
            uid::DQ,
            uid::DK,
            uid::DV,
            uid::SCALE,
            uid::ONE,
        ];
        let mut ptrs = vec![
            bufs.q as *mut c_void,
            bufs.k as *mut c_void,
            bufs.v as *mut c_void,
            bufs.out as *mut c_void,
            bufs.dout as *mut c_void,
            bufs.lse as *mut c_void,
            bufs.dq,
            bufs.dk,
            bufs.dv,
            &mut scale as *mut f32 as *mut c_void,
            &mut one as *mut f32 as *mut c_void,
        ];
        if causal {
            uids.push(uid::NEG_INF);
            ptrs.push(&mut neg_inf as *mut f32 as *mut c_void);
        }
        self.execute(key, &uids, &mut ptrs)
    }
}

impl Drop for Attention {
    fn drop(&mut self) {
        // SAFETY: the plans and the handle were created here and are destroyed once; the
        // workspace is freed on the stream that used it.
        self.plans.clear();
        unsafe {
            if self.workspace.0 != 0 {
                cu::cuMemFreeAsync(self.workspace.0, self.stream);
            }
            (self.api.destroy)(self.handle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_cudnn_refuses_are_named() {
        let s = Shape {
            b: 1,
            hq: 6,
            hkv: 4,
            lq: 8,
            lk: 8,
            d: 64,
            dv: 64,
        };
        assert!(s.supported().unwrap_err().contains("not a multiple"));
        let s = Shape { hkv: 2, d: 60, ..s };
        assert!(s.supported().unwrap_err().contains("multiples of 8"));
        let s = Shape { d: 128, ..s };
        assert!(s.supported().is_ok());
        assert!(cudnn_dtype(7).is_err() && cudnn_dtype(9).is_ok());
    }

    #[test]
    fn workspace_regions_are_aligned() {
        assert_eq!(align(1), ALIGN);
        assert_eq!(align(ALIGN), ALIGN);
        assert_eq!(align(0), 0);
    }
}
