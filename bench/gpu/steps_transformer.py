"""PyTorch baselines of the transformer programs that `gen_transformer` prints
(testgen/src/transformer.rs) and `gen_transformer_nd.py` generalises, op for op, bf16, WORLD
GPUs (default 2), one process per GPU:

- tp: per layer  q = x·Wq; s = softmax(q, 1); o = s·Wo; all_reduce(o); x1 = x + o;
  a = x1·W1; g = gelu_tanh(a); y = g·W2; all_reduce(y); x2 = x1 + y   (Wq, W1 column shards,
  Wo, W2 row shards of the full weights)
- fsdp: per layer the four weights all-gathered from dim-0 shards (each waited right after
  its gather, as the generated program waits), the same block on the full weights without
  all-reduces; then backward stand-in: transpose(x_final) (unused, as in the program) and, for
  the gathered weights in reverse order, dW = 0.5·W reduce-scattered (avg) at once, all
  waited at the end. Results: x_final and the gradient shards.
- tpTdpD (T x D = WORLD): the 2-D program of gen_transformer_nd.py T D: rank r at tp index
  r % T and dp index r // T; the tp block's weights are dim-0 shards over the strided dp group,
  gathered right before use; all-reduces over the consecutive tp group; the fsdp backward over
  the dp group. tp = tp<WORLD>dp1 and fsdp = tp1dp<WORLD> (printed under their old names).

Modes: eager (async collectives, `dist.*(async_op=True)`, waited where the program waits) and
torch.compile (fullgraph) of the same code with functional collectives, three ways:
`compile` with `torch._inductor.config.reorder_for_compute_comm_overlap = True` (the old
anchor); `compile_overlap` with Inductor's aten-level overlap scheduler instead
(`aten_distributed_optimizations.enable_overlap_scheduling = True`); `compile_bucket` with it
plus collective bucketing (`collective_bucketing = True`, `bucket_all_gathers_fx =
bucket_reduce_scatters_fx = "all"`), PyTorch 2.11's strongest configuration.

    python3 bench/gpu/steps_transformer.py LAYERS TOKENS HIDDEN FFN [ITERS] [PROGS] [WORLD]

PROGS: comma-separated tp, fsdp, tpTdpD (default tp,fsdp). Program names printed: tp and fsdp as
`tp4_2048x4096x16384` (LAYERS after the kind), tpTdpD as `tpTdpD_L4_2048x4096x16384`.
Multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1, set before torch is imported).
Prints `mode,program,mean_us,median_us,peak P MiB` lines (rank 0; slowest rank): mean = ITERS
steps back to back timed on the host (the way `commlir-run --bench-iters` times a call), median
= ITERS steps each timed alone between CUDA events (streams synchronized between steps), peak =
`torch.cuda.max_memory_allocated` over the back-to-back steps (largest rank), comparable with
commlir-run's `device memory:` line."""
import os
import re
import statistics
import sys
import time

for _k, _v in (("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NCCL_NVLS_ENABLE", "0"),
               ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
import torch.distributed._functional_collectives as funcol


# The groups of the running program: (tp group or None, dp group or None, dp size).
G = {"tp": None, "dp": None, "d": 1}


def gather(shard):
    if G["dp"] is None:
        return shard
    full = torch.empty(shard.shape[0] * G["d"], shard.shape[1], dtype=shard.dtype, device=shard.device)
    dist.all_gather_into_tensor(full, shard, group=G["dp"], async_op=True).wait()
    return full


def reduce_tp(t):
    if G["tp"] is not None:
        dist.all_reduce(t, group=G["tp"], async_op=True).wait()
    return t


def step_eager(x, *ws):
    full = []
    for l in range(len(ws) // 4):
        wq, wo = gather(ws[4 * l]), gather(ws[4 * l + 1])
        x1 = x + reduce_tp(torch.softmax(x @ wq, dim=1) @ wo)
        w1, w2 = gather(ws[4 * l + 2]), gather(ws[4 * l + 3])
        x = x1 + reduce_tp(F.gelu(x1 @ w1, approximate="tanh") @ w2)
        full += [wq, wo, w1, w2]
    if G["dp"] is None:
        return x
    xt = x.t().contiguous()  # noqa: F841 (the program's unused transpose)
    pending = []
    for w in reversed(full):
        dw = w * 0.5
        g = torch.empty(w.shape[0] // G["d"], w.shape[1], dtype=w.dtype, device=w.device)
        pending.append((g, dist.reduce_scatter_tensor(g, dw, op=dist.ReduceOp.AVG, group=G["dp"], async_op=True)))
    for _, h in pending:
        h.wait()
    return (x, *[g for g, _ in pending])


def step_compile(x, *ws):
    tpg, dpg = G["tp"], G["dp"]

    def ga(s):
        return s if dpg is None else funcol.all_gather_tensor(s, 0, dpg)

    def ar(t):
        return t if tpg is None else funcol.all_reduce(t, "sum", tpg)

    full = []
    for l in range(len(ws) // 4):
        wq, wo = ga(ws[4 * l]), ga(ws[4 * l + 1])
        x1 = x + ar(torch.softmax(x @ wq, dim=1) @ wo)
        w1, w2 = ga(ws[4 * l + 2]), ga(ws[4 * l + 3])
        x = x1 + ar(F.gelu(x1 @ w1, approximate="tanh") @ w2)
        full += [wq, wo, w1, w2]
    if dpg is None:
        return x
    grads = [funcol.reduce_scatter_tensor(w * 0.5, "avg", 0, dpg) for w in reversed(full)]
    return (x, *grads)


def parse_prog(p, world):
    """(tp, dp, printed name prefix) of a PROGS entry."""
    if p == "tp":
        return world, 1, "tp"
    if p == "fsdp":
        return 1, world, "fsdp"
    m = re.fullmatch(r"tp(\d+)dp(\d+)", p)
    if not m or int(m[1]) * int(m[2]) != world:
        raise SystemExit(f"program {p!r}: want tp, fsdp or tpTdpD with T x D = {world}")
    return int(m[1]), int(m[2]), p


def make_groups(t, d, world):
    """Creates (on every rank) the tp and dp families of gen_transformer_nd.py T D and returns
    this rank's (tp group, dp group); None for a size-1 family."""
    tpg = dpg = None
    if t > 1:
        fam = [[k * t + i for i in range(t)] for k in range(d)]
        tpg = dist.group.WORLD if t == world else dist.new_subgroups_by_enumeration(fam)[0]
    if d > 1:
        fam = [[k * t + i for k in range(d)] for i in range(t)]
        dpg = dist.group.WORLD if d == world else dist.new_subgroups_by_enumeration(fam)[0]
    return tpg, dpg


def time_steps(fn, args, iters):
    for _ in range(5):
        fn(*args)
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn(*args)
    torch.cuda.synchronize()
    mean = (time.perf_counter() - t0) / iters
    peak = float(torch.cuda.max_memory_allocated())
    per = []
    for _ in range(iters):
        torch.cuda.synchronize()
        dist.barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*args)
        b.record()
        b.synchronize()
        per.append(a.elapsed_time(b) * 1e-3)
    t = torch.tensor([mean, statistics.median(per), peak], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def worker(rank, world, layers, m, h, f, iters, progs, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    torch.manual_seed(rank)
    bf = dict(dtype=torch.bfloat16, device="cuda")

    def w(r, c):
        return torch.randn(r, c, **bf) / r**0.5

    x = torch.randn(m, h, **bf)
    import torch._inductor.config as ic

    def configure(mode):
        """Inductor's flags of one compile mode (module docs)."""
        opt = ic.aten_distributed_optimizations
        ic.reorder_for_compute_comm_overlap = mode == "compile"
        opt.enable_overlap_scheduling = mode in ("compile_overlap", "compile_bucket")
        opt.collective_bucketing = mode == "compile_bucket"
        ic.bucket_all_gathers_fx = "all" if mode == "compile_bucket" else "none"
        ic.bucket_reduce_scatters_fx = "all" if mode == "compile_bucket" else "none"

    modes = os.environ.get("STEPS_MODES", "eager,compile,compile_overlap,compile_bucket").split(",")
    for p in progs:
        t, d, label = parse_prog(p, world)
        G["tp"], G["dp"] = make_groups(t, d, world)
        G["d"] = d
        name = f"{label}{layers}_{m}x{h}x{f}" if p in ("tp", "fsdp") else f"{label}_L{layers}_{m}x{h}x{f}"
        shapes = [(h // d, h // t), (h // t // d, h), (h // d, f // t), (f // t // d, h)]
        args = (x, *[w(r, c) for _ in range(layers) for (r, c) in shapes])
        for mode in modes:
            torch._dynamo.reset()
            try:
                if mode == "eager":
                    fn = step_eager
                else:
                    configure(mode)
                    fn = torch.compile(step_compile, fullgraph=True)
                mean, med, peak = time_steps(fn, args, iters)
                if rank == 0:
                    print(f"{mode},{name},{mean * 1e6:.1f},{med * 1e6:.1f},peak {peak / 2**20:.1f} MiB", flush=True)
            except Exception as e:  # report, keep going
                if rank == 0:
                    print(f"{mode},{name},failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
        del args
        torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    a = sys.argv[1:]
    layers, m, h, f = (int(v) for v in a[:4])
    iters = int(a[4]) if len(a) > 4 else 50
    progs = a[5].split(",") if len(a) > 5 else ["tp", "fsdp"]
    world = int(a[6]) if len(a) > 6 else 2
    for p in progs:
        parse_prog(p, world)
    mp.spawn(worker, args=(world, layers, m, h, f, iters, progs, 29537), nprocs=world)
