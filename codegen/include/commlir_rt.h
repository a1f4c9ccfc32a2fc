/* commlir_rt.h: the C ABI between a compiled commlir program (the host code of an artifact)
 * and the runtime that runs it (commlir-run --backend=cuda). See docs/codegen.md.
 *
 * The program calls the runtime only through the table below; every function returns 0 on
 * success and a nonzero runtime-defined code on failure, which commlir_main returns at once.
 * All calls are asynchronous (stream-ordered) unless stated otherwise.
 *
 * Rust mirror: dialects/src/rt/abi.rs (same layout, #[repr(C)]).
 */
#ifndef COMMLIR_RT_H
#define COMMLIR_RT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COMMLIR_RT_ABI_VERSION 7u

/* Streams. */
enum { COMMLIR_STREAM_COMPUTE = 0, COMMLIR_STREAM_COMM = 1 };
/* Pool kinds. */
enum { COMMLIR_POOL_NCCL = 0, COMMLIR_POOL_SYMM_MEM = 1 };
/* dtype: the values of ncclDataType_t. */
enum {
  COMMLIR_I8 = 0, COMMLIR_U8 = 1, COMMLIR_I32 = 2, COMMLIR_U32 = 3, COMMLIR_I64 = 4,
  COMMLIR_U64 = 5, COMMLIR_F16 = 6, COMMLIR_F32 = 7, COMMLIR_F64 = 8, COMMLIR_BF16 = 9
};
/* Reductions: the values of ncclRedOp_t. */
enum { COMMLIR_SUM = 0, COMMLIR_PROD = 1, COMMLIR_MAX = 2, COMMLIR_MIN = 3, COMMLIR_AVG = 4 };
/* Version 6: a reduction code with this bit is NCCL's pre-multiplied sum by +-2^k
 * (ncclRedOpCreatePreMulSum, host scalar): bits 0-7 hold k + 128, bit 9 the sign. */
enum { COMMLIR_PREMUL_SUM_POW2 = 256 };
/* Symmetric-memory collectives (the coll argument of symm_fallback). */
enum {
  COMMLIR_SYMM_ONE_SHOT_ALL_REDUCE = 0, COMMLIR_SYMM_TWO_SHOT_ALL_REDUCE = 1,
  COMMLIR_SYMM_ALL_GATHER = 2, COMMLIR_SYMM_REDUCE_SCATTER = 3
};

#define COMMLIR_SYMM_MAX_PEERS 8
#define COMMLIR_SYMM_MAX_BLOCKS 128
/* The peer descriptor of a peer-mapped symm_mem pool, in device memory, read by the
 * generated symm kernels; their parameters are (const commlir_symm_desc *desc, uint64_t
 * in_offset, void *out, uint32_t site). */
typedef struct commlir_symm_desc {
  uint64_t base[COMMLIR_SYMM_MAX_PEERS];   /* pool base of each group rank, mapped here */
  uint64_t signal[COMMLIR_SYMM_MAX_PEERS]; /* signal pad of each group rank:
                                              uint32_t[COMMLIR_SYMM_MAX_BLOCKS][8] */
  uint64_t status;     /* device address of this rank's fault word (uint32_t, host-mapped) */
  uint64_t timeout_ns; /* barrier timeout (%globaltimer ns); 0 = never */
  uint32_t rank;       /* this rank's index in the group */
  uint32_t world;      /* group size */
} commlir_symm_desc;

typedef struct commlir_rt_api {
  uint32_t abi_version; /* COMMLIR_RT_ABI_VERSION; commlir_main returns -1 on a mismatch */
  uint32_t num_fns;     /* number of function pointers that follow (24 in version 7) */
  /* compute stream, stream-ordered (cudaMallocAsync / cudaFreeAsync) */
  int (*alloc)(void *rt, uint64_t bytes, void **out);
  int (*free)(void *rt, void *ptr);
  /* collective over `group`: ncclMemAlloc + ncclCommRegister (nccl) or a symmetric
   * allocation (symm_mem) of `bytes`; same size and order on every rank */
  int (*pool_alloc)(void *rt, uint32_t kind, uint32_t group, uint64_t bytes, uint64_t alignment,
                    void **out);
  int (*pool_free)(void *rt, void *base);
  /* cuLaunchKernel on the compute stream: kernel = index in the artifact's kernel table,
   * params = cuLaunchKernel's kernelParams (num_params pointers to device pointers) */
  int (*launch)(void *rt, uint32_t kernel, uint32_t grid_x, uint32_t block_x,
                uint32_t shared_bytes, void **params, uint32_t num_params);
  /* cublasGemmStridedBatchedEx, column-major, c = alpha * a.b + beta * c (alpha and beta
   * converted to the compute type; version 5), compute type 32F;
   * trans: 0 = CUBLAS_OP_N, 1 = CUBLAS_OP_T; dtype: the operands' code, and where c has
   * another type (f16/bf16 products kept in f32), that type's code + 1 shifted left by 8 */
  int (*gemm)(void *rt, uint32_t transa, uint32_t transb, int64_t m, int64_t n, int64_t k,
              const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb,
              int64_t stride_b, void *c, int64_t ldc, int64_t stride_c, int64_t batch,
              uint32_t dtype, double alpha, double beta);
  /* NCCL on the comm stream; `group` = index in the artifact's group table */
  int (*all_reduce)(void *rt, uint32_t group, const void *send, void *recv, uint64_t count,
                    uint32_t dtype, uint32_t op);
  int (*all_gather)(void *rt, uint32_t group, const void *send, void *recv,
                    uint64_t send_count, uint32_t dtype);
  int (*reduce_scatter)(void *rt, uint32_t group, const void *send, void *recv,
                        uint64_t recv_count, uint32_t dtype, uint32_t op);
  /* count elements at send, split along dim 0 (row_elems elements per row); splits: NULL for
   * G equal blocks, else G*G row counts, rank-major (send_rows[r*G + j]: rows rank r sends
   * to j; recv_rows[r*G + j]: rows rank r receives from j) */
  int (*all_to_all)(void *rt, uint32_t group, const void *send, void *recv, uint64_t count,
                    uint64_t row_elems, uint32_t dtype, const int64_t *send_rows,
                    const int64_t *recv_rows);
  int (*broadcast)(void *rt, uint32_t group, const void *send, void *recv, uint64_t count,
                   uint32_t dtype, uint32_t root);
  int (*group_start)(void *rt);
  int (*group_end)(void *rt);
  /* compute stream, blocking for the collective: the NCCL form of a symm op, used when the
   * symm_mem pool is not peer-mapped (symm_pool_desc gave NULL). coll: one of
   * COMMLIR_SYMM_*; the input is at pool_base + offset of a symm_mem pool of `group`:
   * ONE_SHOT: count elements reduced into out; TWO_SHOT: in place (out == pool_base + offset),
   * count elements; ALL_GATHER: count elements per rank sent, out holds G*count;
   * REDUCE_SCATTER: count elements per rank received, the input holds G*count.
   * op is ignored by ALL_GATHER. */
  int (*symm_fallback)(void *rt, uint32_t coll, uint32_t group, void *pool_base,
                       uint64_t offset, void *out, uint64_t count, uint32_t dtype, uint32_t op);
  /* events: indices below the artifact's num_events, created by the runtime at load */
  int (*event_record)(void *rt, uint32_t stream, uint32_t event);
  int (*stream_wait)(void *rt, uint32_t stream, uint32_t event);
  /* host only (no stream work, cheap): *desc = the device address of the peer descriptor
   * (commlir_symm_desc) of the symm_mem pool at pool_base, or NULL when its peers are not
   * mapped (then the program calls symm_fallback) */
  int (*symm_pool_desc)(void *rt, void *pool_base, void **desc);
  /* version 3 (the pipelined fused collective-matmul ops) */
  /* cuLaunchKernel on `stream` (COMMLIR_STREAM_*), otherwise exactly `launch` */
  int (*launch_on)(void *rt, uint32_t stream, uint32_t kernel, uint32_t grid_x, uint32_t block_x,
                   uint32_t shared_bytes, void **params, uint32_t num_params);
  /* host only: *rank = this process's rank in `group` (index in the artifact's group table) */
  int (*group_rank)(void *rt, uint32_t group, uint32_t *rank);
  /* version 4 (copy-engine transfers of the fused pipelines): a copy engine's
   * cuMemcpy2DAsync on `stream` of `rows` rows of `row_bytes` bytes, read contiguously from
   * group rank `peer`'s mapping of the peer-mapped symm_mem pool at pool_base (src_offset
   * bytes in) and written to dst, `dst_pitch` bytes apart; no SM does the moving */
  int (*symm_peer_copy)(void *rt, uint32_t stream, void *pool_base, uint32_t peer,
                        uint64_t src_offset, void *dst, uint64_t rows, uint64_t row_bytes,
                        uint64_t dst_pitch);
  /* version 5 (the pushing all-gather; gemm also took alpha and beta) */
  /* cuMemcpyDtoDAsync of `bytes` on `stream`: the all-gather pipeline's NCCL fallback copies
   * its shard into the workspace pool */
  int (*copy_on)(void *rt, uint32_t stream, void *dst, const void *src, uint64_t bytes);
  /* a copy engine's cuMemcpyDtoDAsync on `stream` of `bytes` from local src into group rank
   * `peer`'s mapping of the peer-mapped symm_mem pool at pool_base, dst_offset bytes in: the
   * all-gather pipeline pushes its shard into every peer */
  int (*symm_peer_put)(void *rt, uint32_t stream, void *pool_base, uint32_t peer,
                       uint64_t dst_offset, const void *src, uint64_t bytes);
  /* version 7 (fused attention through cuDNN's graph API, compute stream); contiguous
   * row-major buffers: q batch*heads*q_len*head_dim, k batch*kv_heads*kv_len*head_dim,
   * v batch*kv_heads*kv_len*v_dim, out batch*heads*q_len*v_dim; kv_heads divides heads
   * (query head h reads key/value head h / (heads / kv_heads)); lse: the rows'
   * log-sum-exp, batch*heads*q_len f32, or NULL; causal: 0 or 1 (top-left aligned);
   * dtype: COMMLIR_F16 or COMMLIR_BF16 */
  int (*attention)(void *rt, int64_t batch, int64_t heads, int64_t kv_heads, int64_t q_len,
                   int64_t kv_len, int64_t head_dim, int64_t v_dim, uint32_t dtype,
                   uint32_t causal, double scale, const void *q, const void *k, const void *v,
                   void *out, void *lse);
  /* the gradients dq, dk, dv (shaped as q, k, v) of attention(q, k, v) from its out, the
   * gradient dout of out and the forward's lse; dk and dv summed over the query heads
   * that share a key/value head */
  int (*attention_backward)(void *rt, int64_t batch, int64_t heads, int64_t kv_heads,
                            int64_t q_len, int64_t kv_len, int64_t head_dim, int64_t v_dim,
                            uint32_t dtype, uint32_t causal, double scale, const void *q,
                            const void *k, const void *v, const void *out, const void *dout,
                            const void *lse, void *dq, void *dk, void *dv);
} commlir_rt_api;

/* The entry of a compiled function: args[i] = device pointer of argument i (the caller's
 * buffers); results[i] receives the device pointer of result i (allocated with api->alloc,
 * owned by the caller afterwards, or an argument's pointer when an argument is returned). */
typedef int32_t (*commlir_main_fn)(const commlir_rt_api *api, void *rt, void *const *args,
                                   void **results);

#ifdef __cplusplus
}
#endif
#endif /* COMMLIR_RT_H */
