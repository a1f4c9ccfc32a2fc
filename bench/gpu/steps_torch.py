"""PyTorch baselines of examples/tp_mlp.mlir and examples/fsdp_layer.mlir (same shapes, bf16,
2 GPUs), one process per GPU: eager (async collectives waited where the commlir program
waits) and torch.compile (the same programs written with functional collectives, Inductor's
compute/communication reordering on: reorder_for_compute_comm_overlap = True).

    python3 bench/gpu/steps_torch.py [ITERS]

Prints `mode,program,us_per_step` lines (rank 0, slowest rank; mode eager or compile)."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
import torch.distributed._functional_collectives as funcol


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


def tp_mlp_f(x, w1, w2):
    o = F.gelu(x @ w1) @ w2
    return funcol.all_reduce(o, "sum", dist.group.WORLD)


def fsdp_layer_f(x, w1s, w2s, dy):
    g = dist.group.WORLD
    w1 = funcol.all_gather_tensor(w1s, 0, g)
    w2 = funcol.all_gather_tensor(w2s, 0, g)
    a = F.gelu(x @ w1)
    y = a @ w2
    dw2 = a.t() @ dy
    g2 = funcol.reduce_scatter_tensor(dw2, "avg", 0, g)
    da = dy @ w2.t()
    dw1 = x.t() @ da
    g1 = funcol.reduce_scatter_tensor(dw1, "avg", 0, g)
    return y, g1, g2


def time_steps(fn, args, iters, rank):
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
    return t.item()


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
        t = time_steps(fn, args, iters, rank)
        if rank == 0:
            print(f"eager,{name},{t * 1e6:.1f}", flush=True)
    import torch._inductor.config as ic
    ic.reorder_for_compute_comm_overlap = True
    compiled = {"tp_mlp": tp_mlp_f, "fsdp_layer": fsdp_layer_f}
    for name, (_, args) in progs.items():
        try:
            fn = torch.compile(compiled[name], fullgraph=True)
            t = time_steps(fn, args, iters, rank)
            if rank == 0:
                print(f"compile,{name},{t * 1e6:.1f}", flush=True)
        except Exception as e:  # report, keep going
            if rank == 0:
                print(f"compile,{name},failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    mp.spawn(worker, args=(2, iters, 29533), nprocs=2)
