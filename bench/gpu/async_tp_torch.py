"""PyTorch's references for the async tensor parallelism benchmark (bench/gpu/run_async_tp.sh),
2 GPUs, one process per GPU (torch.multiprocessing), bf16.

micro: at tokens x hidden x ffn T x H x F, A row-sharded (T/2 rows per rank):
  all-gather side (ag): torch.ops.symm_mem.fused_all_gather_matmul of the A shard (T/2 x H, in
    symmetric memory: symm_mem.empty + rendezvous) with the local column shard B (H x F/2);
    the unfused sequence (NCCL all_gather_into_tensor, then mm); the matmul alone (T x H . H x F/2);
  reduce-scatter side (rs): torch.ops.symm_mem.fused_matmul_reduce_scatter of (T x F/2) .
    (F/2 x H), sum over scatter dim 0; mm then NCCL reduce_scatter_tensor; the matmul alone.
  Each as CALLS back-to-back calls captured in one CUDA graph, replayed REPLAYS times (events
  around the back-to-back calls without a graph where capture fails, or with --events);
  prints the median microseconds per call, slowest rank:
      torch,<side>,<T>x<H>x<F>,<variant>,<us>,<graph|events>
steps: the 4-layer TP transformer of gen_transformer (testgen/src/transformer.rs), per layer
    q = x.Wq; s = softmax(q, 1); o = s.Wo; all_reduce(o); x1 = x + o;
    a = x1.W1; g = gelu_tanh(a); y = g.W2; all_reduce(y); x2 = x1 + y
  (Wq, W1 column shards, Wo, W2 row shards; x replicated), timed as bench/gpu/steps_transformer.py
  times it, in modes
    eager           async collectives waited at once (as the generated program waits);
    compile         torch.compile (fullgraph) with functional collectives and
                    reorder_for_compute_comm_overlap = True;
    compile_sp      torch.compile of the same model written sequence-parallel (x sliced to the
                    rank's rows; all_gather_tensor before the column-parallel matmuls,
                    reduce_scatter_tensor after the row-parallel ones, the residual adds on the
                    shards, the result gathered at the end);
    compile_sp_mptp the same with torch._inductor.config._micro_pipeline_tp = True (Inductor's
                    async-TP pass: fused_all_gather_matmul / fused_matmul_reduce_scatter);
  prints `MODE,tp<L>_<T>x<H>x<F>,mean_us,median_us` (slowest rank), the number of fused ops
  Inductor emitted (`fused,compile_sp_mptp,ag=N,rs=M`) and each mode's largest relative
  difference from eager (`diff,MODE,...`).

    python3 bench/gpu/async_tp_torch.py micro [--events] [TxHxF ...]
    python3 bench/gpu/async_tp_torch.py steps LAYERS TOKENS HIDDEN FFN [ITERS] [MODES]

Multicast stays off: TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1.
"""

import os
import re
import statistics
import sys
import time

for k, v in (("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NCCL_NVLS_ENABLE", "0"),
             ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[k] = v

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.multiprocessing as mp
import torch.nn.functional as F

CALLS = 20
REPLAYS = 20
WARMUP = 5
SHAPES = ["2048x4096x16384", "8192x4096x16384", "8192x8192x28672"]
MODES = ["eager", "compile", "compile_sp", "compile_sp_mptp"]


def init(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    import torch.distributed._symmetric_memory as symm_mem
    group = dist.group.WORLD.group_name
    try:
        symm_mem.enable_symm_mem_for_group(group)
    except Exception:  # newer releases need no opt-in
        pass
    return symm_mem, group


def slowest(v):
    t = torch.tensor([v], device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


# ---------------------------------------------------------------------------------------------
# micro


def timed_graph(fn, stream):
    """Median microseconds per call of CALLS calls of fn captured in one graph."""
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        for _ in range(CALLS):
            fn()
    g.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(REPLAYS):
        dist.barrier()
        torch.cuda.synchronize()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3 / CALLS)
    del g
    return statistics.median(out)


def timed_events(fn):
    """Median microseconds per call of CALLS back-to-back calls between two events."""
    out = []
    for _ in range(REPLAYS):
        dist.barrier()
        torch.cuda.synchronize()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(CALLS):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3 / CALLS)
    return statistics.median(out)


def timed(fn, stream, events):
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    if not events:
        try:
            with torch.cuda.stream(stream):
                return timed_graph(fn, stream), "graph"
        except Exception as e:  # capture failed: time without a graph
            torch.cuda.synchronize()
            if dist.get_rank() == 0:
                print(f"# graph capture failed ({type(e).__name__}: {str(e)[:200]}), events instead",
                      flush=True)
    return timed_events(fn), "events"


def micro_worker(rank, world, shapes, events, port):
    symm_mem, group = init(rank, world, port)
    bf = dict(dtype=torch.bfloat16, device="cuda")
    stream = torch.cuda.Stream()
    torch.manual_seed(rank)
    for shape in shapes:
        t, h, f = (int(v) for v in shape.split("x"))
        t2, f2 = t // world, f // world
        res = []
        # all-gather side
        a_sh = symm_mem.empty(t2, h, **bf)
        symm_mem.rendezvous(a_sh, group)
        a_sh.copy_(torch.randn(t2, h, **bf))
        b = torch.randn(h, f2, **bf) / h**0.5
        a_full = torch.empty(t, h, **bf)
        y = torch.empty(t, f2, **bf)

        def ag_fused():
            torch.ops.symm_mem.fused_all_gather_matmul(a_sh, [b], 0, group)

        def ag_unfused():
            dist.all_gather_into_tensor(a_full, a_sh)
            torch.mm(a_full, b, out=y)

        def ag_mm():
            torch.mm(a_full, b, out=y)

        for name, fn in (("mm", ag_mm), ("unfused", ag_unfused), ("fused", ag_fused)):
            try:
                us, how = timed(fn, stream, events)
                res.append(("ag", name, slowest(us), how))
            except Exception as e:  # report, keep going
                res.append(("ag", name, float("nan"), f"failed: {type(e).__name__}: {str(e)[:200]}"))
        del a_sh, b, a_full, y
        torch.cuda.empty_cache()
        # reduce-scatter side
        a = torch.randn(t, f2, **bf)
        b = torch.randn(f2, h, **bf) / f**0.5
        p = torch.empty(t, h, **bf)
        out = torch.empty(t2, h, **bf)

        def rs_fused():
            torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, group)

        def rs_unfused():
            torch.mm(a, b, out=p)
            dist.reduce_scatter_tensor(out, p)

        def rs_mm():
            torch.mm(a, b, out=p)

        for name, fn in (("mm", rs_mm), ("unfused", rs_unfused), ("fused", rs_fused)):
            try:
                us, how = timed(fn, stream, events)
                res.append(("rs", name, slowest(us), how))
            except Exception as e:
                res.append(("rs", name, float("nan"), f"failed: {type(e).__name__}: {str(e)[:200]}"))
        del a, b, p, out
        torch.cuda.empty_cache()
        if rank == 0:
            for side, name, us, how in res:
                print(f"torch,{side},{shape},{name},{us:.1f},{how}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------
# steps


def tp_eager(x, *ws):
    for l in range(len(ws) // 4):
        wq, wo, w1, w2 = ws[4 * l : 4 * l + 4]
        o = torch.softmax(x @ wq, dim=1) @ wo
        dist.all_reduce(o, async_op=True).wait()
        x1 = x + o
        y = F.gelu(x1 @ w1, approximate="tanh") @ w2
        dist.all_reduce(y, async_op=True).wait()
        x = x1 + y
    return x


def tp_compile(x, *ws):
    g = dist.group.WORLD
    for l in range(len(ws) // 4):
        wq, wo, w1, w2 = ws[4 * l : 4 * l + 4]
        o = funcol.all_reduce(torch.softmax(x @ wq, dim=1) @ wo, "sum", g)
        x1 = x + o
        y = funcol.all_reduce(F.gelu(x1 @ w1, approximate="tanh") @ w2, "sum", g)
        x = x1 + y
    return x


def make_tp_sp(rank, world):
    """The TP model in sequence-parallel form (Megatron-SP): activations between the blocks
    live as row shards; all_gather before each column-parallel matmul, reduce_scatter after
    each row-parallel one. A new function object per call so that each torch.compile is its own."""

    def tp_sp(x, *ws):
        g = dist.group.WORLD
        xs = x.chunk(world, 0)[rank]  # x is replicated: slice this rank's rows, no communication
        for l in range(len(ws) // 4):
            wq, wo, w1, w2 = ws[4 * l : 4 * l + 4]
            xg = funcol.all_gather_tensor(xs, 0, g)
            o = funcol.reduce_scatter_tensor(torch.softmax(xg @ wq, dim=1) @ wo, "sum", 0, g)
            x1 = xs + o
            x1g = funcol.all_gather_tensor(x1, 0, g)
            y = funcol.reduce_scatter_tensor(F.gelu(x1g @ w1, approximate="tanh") @ w2, "sum", 0, g)
            xs = x1 + y
        return funcol.all_gather_tensor(xs, 0, g)  # the program returns the full activations

    return tp_sp


def time_steps(fn, args, iters):
    """(mean, median) seconds per step, slowest rank: mean of ITERS steps back to back timed on
    the host (as commlir-run --bench-iters times a call), median of ITERS steps each between
    CUDA events (streams synchronized between steps)."""
    for _ in range(5):
        fn(*args)
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn(*args)
    torch.cuda.synchronize()
    mean = (time.perf_counter() - t0) / iters
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
    t = torch.tensor([mean, statistics.median(per)], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def count_fused(fn, args):
    """Runs fn once through run_and_get_code; how many fused async-TP ops Inductor emitted."""
    from torch._inductor.utils import run_and_get_code
    _, codes = run_and_get_code(fn, *args)
    src = "\n".join(codes)
    return (len(re.findall(r"symm_mem\.fused_all_gather_matmul(\.default)?\(", src)),
            len(re.findall(r"symm_mem\.fused_matmul_reduce_scatter(\.default)?\(", src)))


def steps_worker(rank, world, layers, m, h, f, iters, modes, port):
    init(rank, world, port)
    import torch._dynamo
    import torch._inductor.config as ic

    bf = dict(dtype=torch.bfloat16, device="cuda")
    torch.manual_seed(0)
    x = torch.randn(m, h, **bf)  # replicated: the same on every rank
    torch.manual_seed(1 + rank)
    n = world
    shapes = [(h, h // n), (h // n, h), (h, f // n), (f // n, h)]
    args = (x, *[torch.randn(r, c, **bf) / r**0.5 for _ in range(layers) for (r, c) in shapes])
    name = f"tp{layers}_{m}x{h}x{f}"
    ref = tp_eager(*args).float()
    ic.reorder_for_compute_comm_overlap = True
    for mode in modes:
        try:
            torch._dynamo.reset()
            ic._micro_pipeline_tp = mode == "compile_sp_mptp"
            if mode == "eager":
                fn = tp_eager
            elif mode == "compile":
                fn = torch.compile(tp_compile, fullgraph=True)
            else:
                fn = torch.compile(make_tp_sp(rank, world), fullgraph=True)
            if mode == "compile_sp_mptp":
                ag, rs = count_fused(fn, args)
                if rank == 0:
                    print(f"fused,{mode},ag={ag},rs={rs}", flush=True)
            got = fn(*args).float()
            diff = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
            mean, med = time_steps(fn, args, iters)
            if rank == 0:
                print(f"diff,{mode},{diff:.3g}", flush=True)
                print(f"{mode},{name},{mean * 1e6:.1f},{med * 1e6:.1f}", flush=True)
        except Exception as e:  # report, keep going
            if rank == 0:
                print(f"{mode},{name},failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
        torch.cuda.empty_cache()
    ic._micro_pipeline_tp = False
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    a = sys.argv[1:]
    if not a or a[0] not in ("micro", "steps"):
        sys.exit(__doc__)
    if a[0] == "micro":
        events = "--events" in a
        shapes = [s for s in a[1:] if s != "--events"] or SHAPES
        mp.spawn(micro_worker, args=(2, shapes, events, 29541), nprocs=2, join=True)
    else:
        layers, m, h, f = (int(v) for v in a[1:5])
        iters = int(a[5]) if len(a) > 5 else 30
        modes = a[6].split(",") if len(a) > 6 else MODES
        mp.spawn(steps_worker, args=(2, layers, m, h, f, iters, modes, 29543), nprocs=2, join=True)
