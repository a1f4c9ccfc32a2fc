"""PyTorch baselines of the transformer programs that `gen_transformer` prints
(testgen/src/transformer.rs), op for op, bf16, 2 GPUs, one process per GPU:

- tp: per layer  q = x·Wq; s = softmax(q, 1); o = s·Wo; all_reduce(o); x1 = x + o;
  a = x1·W1; g = gelu_tanh(a); y = g·W2; all_reduce(y); x2 = x1 + y   (Wq, W1 column shards,
  Wo, W2 row shards of the full weights)
- fsdp: per layer the four weights all-gathered from dim-0 shards (each waited right after
  its gather, as the generated program waits), the same block on the full weights without
  all-reduces; then backward stand-in: transpose(x_final) (unused, as in the program) and, for
  the gathered weights in reverse order, dW = 0.5·W reduce-scattered (avg) at once, all
  waited at the end. Results: x_final and the gradient shards.

Modes: eager (async collectives, `dist.*(async_op=True)`, waited where the program waits) and
torch.compile (fullgraph) of the same code with functional collectives and
`torch._inductor.config.reorder_for_compute_comm_overlap = True`.

    python3 bench/gpu/steps_transformer.py LAYERS TOKENS HIDDEN FFN [ITERS] [PROGS]

Prints `mode,program,mean_us,median_us` lines (rank 0; slowest rank): mean = ITERS steps back
to back timed on the host (the way `commlir-run --bench-iters` times a call), median = ITERS
steps each timed alone between CUDA events (streams synchronized between steps)."""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
import torch.distributed._functional_collectives as funcol


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


def gather(shard):
    full = torch.empty(shard.shape[0] * dist.get_world_size(), shard.shape[1], dtype=shard.dtype, device=shard.device)
    dist.all_gather_into_tensor(full, shard, async_op=True).wait()
    return full


def fsdp_eager(x, *shards):
    full = []
    for l in range(len(shards) // 4):
        wq, wo = gather(shards[4 * l]), gather(shards[4 * l + 1])
        x1 = x + torch.softmax(x @ wq, dim=1) @ wo
        w1, w2 = gather(shards[4 * l + 2]), gather(shards[4 * l + 3])
        x = x1 + F.gelu(x1 @ w1, approximate="tanh") @ w2
        full += [wq, wo, w1, w2]
    xt = x.t().contiguous()  # noqa: F841 (the program's unused transpose)
    pending = []
    for w in reversed(full):
        dw = w * 0.5
        g = torch.empty(w.shape[0] // dist.get_world_size(), w.shape[1], dtype=w.dtype, device=w.device)
        pending.append((g, dist.reduce_scatter_tensor(g, dw, op=dist.ReduceOp.AVG, async_op=True)))
    for _, h in pending:
        h.wait()
    return (x, *[g for g, _ in pending])


def fsdp_compile(x, *shards):
    grp = dist.group.WORLD
    full = []
    for l in range(len(shards) // 4):
        wq = funcol.all_gather_tensor(shards[4 * l], 0, grp)
        wo = funcol.all_gather_tensor(shards[4 * l + 1], 0, grp)
        x1 = x + torch.softmax(x @ wq, dim=1) @ wo
        w1 = funcol.all_gather_tensor(shards[4 * l + 2], 0, grp)
        w2 = funcol.all_gather_tensor(shards[4 * l + 3], 0, grp)
        x = x1 + F.gelu(x1 @ w1, approximate="tanh") @ w2
        full += [wq, wo, w1, w2]
    grads = [funcol.reduce_scatter_tensor(w * 0.5, "avg", 0, grp) for w in reversed(full)]
    return (x, *grads)


def time_steps(fn, args, iters):
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


def worker(rank, world, layers, m, h, f, iters, progs, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    torch.manual_seed(rank)
    bf = dict(dtype=torch.bfloat16, device="cuda")

    def w(r, c):
        return torch.randn(r, c, **bf) / r**0.5

    x = torch.randn(m, h, **bf)
    n = world
    shapes = {
        "tp": [(h, h // n), (h // n, h), (h, f // n), (f // n, h)],
        "fsdp": [(h // n, h), (h // n, h), (h // n, f), (f // n, h)],
    }
    fns = {"tp": (tp_eager, tp_compile), "fsdp": (fsdp_eager, fsdp_compile)}
    import torch._inductor.config as ic

    ic.reorder_for_compute_comm_overlap = True
    for p in progs:
        args = (x, *[w(r, c) for _ in range(layers) for (r, c) in shapes[p]])
        for mode, fn in (("eager", fns[p][0]), ("compile", torch.compile(fns[p][1], fullgraph=True))):
            try:
                mean, med = time_steps(fn, args, iters)
                if rank == 0:
                    print(f"{mode},{p}{layers}_{m}x{h}x{f},{mean * 1e6:.1f},{med * 1e6:.1f}", flush=True)
            except Exception as e:  # report, keep going
                if rank == 0:
                    print(f"{mode},{p},failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
        del args
        torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    a = sys.argv[1:]
    layers, m, h, f = (int(v) for v in a[:4])
    iters = int(a[4]) if len(a) > 4 else 50
    progs = a[5].split(",") if len(a) > 5 else ["tp", "fsdp"]
    mp.spawn(worker, args=(2, layers, m, h, f, iters, progs, 29537), nprocs=2)
