"""PyTorch eager baselines of examples/tp_mlp.mlir and examples/fsdp_layer.mlir (same shapes,
bf16, 2 GPUs, async collectives waited where the commlir program waits), one process per GPU.

    python3 bench/gpu/steps_torch.py [ITERS]

Prints `program,us_per_step` lines (rank 0, slowest rank)."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F


def tp_mlp(x, w1, w2):
    o = F.gelu(x @ w1) @ w2
    dist.all_reduce(o, async_op=True).wait()
    return o


def fsdp_layer(x, w1s, w2s, dy):
    world = dist.get_world_size()
    w1 = torch.empty(w1s.shape[0] * world, w1s.shape[1], dtype=x.dtype, device=x.device)
    w2 = torch.empty(w2s.shape[0] * world, w2s.shape[1], dtype=x.dtype, device=x.device)
    h1 = dist.all_gather_into_tensor(w1, w1s, async_op=True)
    h2 = dist.all_gather_into_tensor(w2, w2s, async_op=True)
    h1.wait()
    a = F.gelu(x @ w1)
    h2.wait()
    y = a @ w2
    dw2 = a.t() @ dy
    g2 = torch.empty_like(w2s)
    r2 = dist.reduce_scatter_tensor(g2, dw2, op=dist.ReduceOp.AVG, async_op=True)
    da = dy @ w2.t()
    dw1 = x.t() @ da
    g1 = torch.empty_like(w1s)
    r1 = dist.reduce_scatter_tensor(g1, dw1, op=dist.ReduceOp.AVG, async_op=True)
    r2.wait()
    r1.wait()
    return y, g1, g2


def worker(rank, world, iters, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    bf = dict(dtype=torch.bfloat16, device="cuda")
    progs = {
        "tp_mlp": (tp_mlp, (torch.randn(8, 1024, **bf), torch.randn(1024, 4096, **bf), torch.randn(4096, 1024, **bf))),
        "fsdp_layer": (fsdp_layer, (torch.randn(8, 1024, **bf), torch.randn(512, 4096, **bf), torch.randn(2048, 1024, **bf), torch.randn(8, 1024, **bf))),
    }
    for name, (fn, args) in progs.items():
        for _ in range(10):
            fn(*args)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(*args)
        torch.cuda.synchronize()
        t = torch.tensor([(time.perf_counter() - t0) / iters], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(f"{name},{t.item() * 1e6:.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    mp.spawn(worker, args=(2, iters, 29533), nprocs=2)
