//! The runtime C ABI in Rust: the mirror of `codegen/include/commlir_rt.h`, same layout.
//!
//! It lives with the `rt` dialect (each `rt` op is one call of this ABI) and imports nothing,
//! so that both the code generator (which emits the host program's indirect calls in
//! [`API_FIELDS`] order) and the CUDA runner (which must not link the code generator, since
//! that links LLVM) use this one definition. `runtime/tests/cuda_abi.rs` checks it against
//! the header: field order, offsets, sizes and the code tables.

use std::ffi::c_void;

/// Bumped on every incompatible change of [`CommlirRtApi`] or of `commlir_main`.
pub const ABI_VERSION: u32 = 7;

/// Stream numbers.
pub const STREAM_COMPUTE: u32 = 0;
pub const STREAM_COMM: u32 = 1;
/// Pool kinds.
pub const POOL_NCCL: u32 = 0;
pub const POOL_SYMM_MEM: u32 = 1;

/// dtype codes: the values of `ncclDataType_t`, by the `rt` dialect's spelling.
pub const DTYPES: &[(&str, u32)] = &[
    ("i8", 0),
    ("u8", 1),
    ("i32", 2),
    ("u32", 3),
    ("i64", 4),
    ("u64", 5),
    ("f16", 6),
    ("f32", 7),
    ("f64", 8),
    ("bf16", 9),
];
/// `gemm`'s dtype argument is the operands' code; when the result has another type (an
/// f16/bf16 product kept in f32), that type's code plus one is stored from this bit up.
pub const GEMM_OUT_SHIFT: u32 = 8;
/// Reduction codes: the values of `ncclRedOp_t`.
pub const REDUCE_OPS: &[(&str, u32)] = &[
    ("sum", 0),
    ("product", 1),
    ("max", 2),
    ("min", 3),
    ("avg", 4),
];

/// A reduction code from this bit up is NCCL's pre-multiplied sum by ± a power of two
/// (`ncclRedOpCreatePreMulSum` with a host scalar): bits 0–7 hold the exponent k + 128, bit 9
/// the sign, so the factor is ±2^k.
pub const PREMUL_SUM_POW2: u32 = 0x100;
const PREMUL_NEGATIVE: u32 = 0x200;

/// The reduction code of a pre-multiplied sum by `factor`, when it is ± a power of two with
/// an exponent in [-128, 127].
pub fn premul_code(factor: f64) -> Option<u32> {
    let e = factor.abs().log2();
    if !factor.is_finite() || factor == 0.0 || e.fract() != 0.0 || !(-128.0..=127.0).contains(&e) {
        return None;
    }
    let sign = if factor < 0.0 { PREMUL_NEGATIVE } else { 0 };
    Some(PREMUL_SUM_POW2 | sign | (e as i32 + 128) as u32)
}

/// The factor of a [`premul_code`], if `code` is one.
pub fn premul_factor(code: u32) -> Option<f64> {
    if code & PREMUL_SUM_POW2 == 0 || code & !(PREMUL_SUM_POW2 | PREMUL_NEGATIVE | 0xff) != 0 {
        return None;
    }
    let f = 2f64.powi((code & 0xff) as i32 - 128);
    Some(if code & PREMUL_NEGATIVE != 0 { -f } else { f })
}

/// The code of a spelling in one of the tables above.
pub fn code(table: &[(&str, u32)], name: &str) -> Option<u32> {
    table.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
}

/// The function-pointer fields of [`CommlirRtApi`], in order (after `abi_version`, `num_fns`).
pub const API_FIELDS: &[&str] = &[
    "alloc",
    "free",
    "pool_alloc",
    "pool_free",
    "launch",
    "gemm",
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "group_start",
    "group_end",
    "symm_fallback",
    "event_record",
    "stream_wait",
    "symm_pool_desc",
    "launch_on",
    "group_rank",
    "symm_peer_copy",
    "copy_on",
    "symm_peer_put",
    "attention",
    "attention_backward",
];

/// Symmetric-memory collectives: the `coll` argument of `symm_fallback`, by the name of
/// the `rt.symm_collective` attribute `coll`.
pub const SYMM_COLLS: &[(&str, u32)] = &[
    ("one_shot_all_reduce", 0),
    ("two_shot_all_reduce", 1),
    ("all_gather", 2),
    ("reduce_scatter", 3),
];

/// Peers a symm descriptor holds (the largest group a symm kernel runs on).
pub const SYMM_MAX_PEERS: usize = 8;
/// The largest grid of a symm kernel: a signal pad has one row of [`SYMM_MAX_PEERS`] slots
/// per block.
pub const SYMM_MAX_BLOCKS: usize = 128;
/// Bytes of a signal pad: `u32[SYMM_MAX_BLOCKS][SYMM_MAX_PEERS]`.
pub const SYMM_SIGNAL_PAD_BYTES: usize = SYMM_MAX_BLOCKS * SYMM_MAX_PEERS * 4;
/// Control words after each rank's signal pad, touched only by that rank's own kernels:
/// `u32 epoch[SYMM_MAX_BLOCKS]`, the LL calls block b of a grid took part in on the pool.
pub const SYMM_CTRL_BYTES: usize = SYMM_MAX_BLOCKS * 4;
/// The largest message of the LL (low-latency) one-shot all-reduce: each rank pushes its
/// input into every peer's LL area as 16-byte lines of 8 data bytes and two copies of the
/// call's epoch flag, and reads the lines that arrived in its own area; no barrier.
pub const SYMM_LL_MAX_BYTES: usize = 1 << 20;
/// Bytes of one LL slot (one source rank, one parity): the lines of the largest message.
pub const SYMM_LL_SLOT_BYTES: usize = 2 * SYMM_LL_MAX_BYTES;

/// Bytes after each rank's pool that its peers map with it: the signal pad, the control
/// words and the LL area (`2 parities × world sources` slots), for a group of `world` ranks.
pub fn symm_pad_bytes(world: usize) -> usize {
    SYMM_SIGNAL_PAD_BYTES + SYMM_CTRL_BYTES + 2 * world * SYMM_LL_SLOT_BYTES
}

/// Whether a one-shot all-reduce of `bytes` per rank takes the LL protocol.
pub fn symm_one_shot_is_ll(bytes: u64) -> bool {
    bytes > 0 && bytes <= SYMM_LL_MAX_BYTES as u64
}

/// The peer descriptor of a peer-mapped `symm_mem` pool (`commlir_symm_desc`), in device
/// memory; the first parameter of every symm kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SymmDesc {
    /// Pool base of each group rank, mapped in this process (index = group rank).
    pub base: [u64; SYMM_MAX_PEERS],
    /// Signal pad of each group rank: `u32[SYMM_MAX_BLOCKS][SYMM_MAX_PEERS]`, followed by
    /// its control words and LL area ([`symm_pad_bytes`]).
    pub signal: [u64; SYMM_MAX_PEERS],
    /// Device address of this rank's fault word (`u32`, host-mapped).
    pub status: u64,
    /// Barrier timeout in `%globaltimer` nanoseconds; 0 = never.
    pub timeout_ns: u64,
    /// This rank's index in the group.
    pub rank: u32,
    /// The group size.
    pub world: u32,
}

/// The fault word a symm kernel's barrier writes on a timeout: `peer` is the group rank that
/// did not arrive, `site` the kernel's index in the artifact's kernel table.
pub fn symm_fault_code(peer: u32, site: u32) -> u32 {
    0x8000_0000 | ((peer & 0x7f) << 24) | (site & 0x00ff_ffff)
}

/// Status: 0 is success, anything else a runtime-defined error code.
pub type Status = i32;
type Rt = *mut c_void;

/// The table of runtime functions a compiled program calls (`commlir_rt_api`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CommlirRtApi {
    pub abi_version: u32,
    /// Number of function pointers that follow (`API_FIELDS.len()`).
    pub num_fns: u32,
    pub alloc: unsafe extern "C" fn(rt: Rt, bytes: u64, out: *mut *mut c_void) -> Status,
    pub free: unsafe extern "C" fn(rt: Rt, ptr: *mut c_void) -> Status,
    pub pool_alloc: unsafe extern "C" fn(
        rt: Rt,
        kind: u32,
        group: u32,
        bytes: u64,
        alignment: u64,
        out: *mut *mut c_void,
    ) -> Status,
    pub pool_free: unsafe extern "C" fn(rt: Rt, base: *mut c_void) -> Status,
    pub launch: unsafe extern "C" fn(
        rt: Rt,
        kernel: u32,
        grid_x: u32,
        block_x: u32,
        shared_bytes: u32,
        params: *mut *mut c_void,
        num_params: u32,
    ) -> Status,
    pub gemm: unsafe extern "C" fn(
        rt: Rt,
        transa: u32,
        transb: u32,
        m: i64,
        n: i64,
        k: i64,
        a: *const c_void,
        lda: i64,
        stride_a: i64,
        b: *const c_void,
        ldb: i64,
        stride_b: i64,
        c: *mut c_void,
        ldc: i64,
        stride_c: i64,
        batch: i64,
        dtype: u32,
        alpha: f64,
        beta: f64,
    ) -> Status,
    pub all_reduce: unsafe extern "C" fn(
        rt: Rt,
        group: u32,
        send: *const c_void,
        recv: *mut c_void,
        count: u64,
        dtype: u32,
        op: u32,
    ) -> Status,
    pub all_gather: unsafe extern "C" fn(
        rt: Rt,
        group: u32,
        send: *const c_void,
        recv: *mut c_void,
        send_count: u64,
        dtype: u32,
    ) -> Status,
    pub reduce_scatter: unsafe extern "C" fn(
        rt: Rt,
        group: u32,
        send: *const c_void,
        recv: *mut c_void,
        recv_count: u64,
        dtype: u32,
        op: u32,
    ) -> Status,
    pub all_to_all: unsafe extern "C" fn(
        rt: Rt,
        group: u32,
        send: *const c_void,
        recv: *mut c_void,
        count: u64,
        row_elems: u64,
        dtype: u32,
        send_rows: *const i64,
        recv_rows: *const i64,
    ) -> Status,
    pub broadcast: unsafe extern "C" fn(
        rt: Rt,
        group: u32,
        send: *const c_void,
        recv: *mut c_void,
        count: u64,
        dtype: u32,
        root: u32,
    ) -> Status,
    pub group_start: unsafe extern "C" fn(rt: Rt) -> Status,
    pub group_end: unsafe extern "C" fn(rt: Rt) -> Status,
    /// The NCCL form of a symm op (compute stream), when the pool is not peer-mapped.
    pub symm_fallback: unsafe extern "C" fn(
        rt: Rt,
        coll: u32,
        group: u32,
        pool_base: *mut c_void,
        offset: u64,
        out: *mut c_void,
        count: u64,
        dtype: u32,
        op: u32,
    ) -> Status,
    pub event_record: unsafe extern "C" fn(rt: Rt, stream: u32, event: u32) -> Status,
    pub stream_wait: unsafe extern "C" fn(rt: Rt, stream: u32, event: u32) -> Status,
    /// The device address of a pool's [`SymmDesc`], or null when its peers are not mapped.
    pub symm_pool_desc:
        unsafe extern "C" fn(rt: Rt, pool_base: *mut c_void, desc: *mut *mut c_void) -> Status,
    /// `launch` on a given stream (version 3): the comm-stream half of a fused pipeline.
    pub launch_on: unsafe extern "C" fn(
        rt: Rt,
        stream: u32,
        kernel: u32,
        grid_x: u32,
        block_x: u32,
        shared_bytes: u32,
        params: *mut *mut c_void,
        num_params: u32,
    ) -> Status,
    /// This process's rank in a group (version 3): a fused pipeline's chunk order is rotated
    /// per rank, and the host program addresses the chunks.
    pub group_rank: unsafe extern "C" fn(rt: Rt, group: u32, rank: *mut u32) -> Status,
    /// A copy engine's strided copy out of a peer's mapping of a symm_mem pool (version 4):
    /// the fused pipelines' transfers without SMs.
    #[allow(clippy::type_complexity)]
    pub symm_peer_copy: unsafe extern "C" fn(
        rt: Rt,
        stream: u32,
        pool_base: *mut c_void,
        peer: u32,
        src_offset: u64,
        dst: *mut c_void,
        rows: u64,
        row_bytes: u64,
        dst_pitch: u64,
    ) -> Status,
    /// A device-to-device copy of `bytes` on `stream` (version 5): the all-gather pipeline's
    /// NCCL fallback copies its shard into the workspace pool.
    pub copy_on: unsafe extern "C" fn(
        rt: Rt,
        stream: u32,
        dst: *mut c_void,
        src: *const c_void,
        bytes: u64,
    ) -> Status,
    /// A copy engine's copy of `bytes` from local `src` into group rank `peer`'s mapping of a
    /// peer-mapped symm_mem pool, `dst_offset` bytes in (version 5): the all-gather pipeline
    /// pushes its shard into every peer, from wherever it is.
    pub symm_peer_put: unsafe extern "C" fn(
        rt: Rt,
        stream: u32,
        pool_base: *mut c_void,
        peer: u32,
        dst_offset: u64,
        src: *const c_void,
        bytes: u64,
    ) -> Status,
    /// Fused attention through cuDNN on the compute stream (version 7): `(batch, heads,
    /// kv_heads, q_len, kv_len, head_dim, v_dim)`, the dtype code, causal (0/1), the scale,
    /// then `q, k, v, out` and `lse` (f32 row log-sum-exp, or null); see `commlir_rt.h`.
    pub attention: unsafe extern "C" fn(
        rt: Rt,
        batch: i64,
        heads: i64,
        kv_heads: i64,
        q_len: i64,
        kv_len: i64,
        head_dim: i64,
        v_dim: i64,
        dtype: u32,
        causal: u32,
        scale: f64,
        q: *const c_void,
        k: *const c_void,
        v: *const c_void,
        out: *mut c_void,
        lse: *mut c_void,
    ) -> Status,
    /// Its gradients (version 7): the same sizes, then `q, k, v, out, dout, lse` and the
    /// results `dq, dk, dv`.
    pub attention_backward: unsafe extern "C" fn(
        rt: Rt,
        batch: i64,
        heads: i64,
        kv_heads: i64,
        q_len: i64,
        kv_len: i64,
        head_dim: i64,
        v_dim: i64,
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
        dv: *mut c_void,
    ) -> Status,
}

/// `int32_t commlir_main(const commlir_rt_api *api, void *rt, void *const *args, void **results)`.
pub type CommlirMain = unsafe extern "C" fn(
    api: *const CommlirRtApi,
    rt: *mut c_void,
    args: *const *mut c_void,
    results: *mut *mut c_void,
) -> Status;

/// The entry symbol of the host shared library.
pub const MAIN_SYMBOL: &str = "commlir_main";
