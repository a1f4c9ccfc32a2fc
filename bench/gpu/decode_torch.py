"""PyTorch reference of bench/gpu/gen_decode.py's program (same shapes, bf16, 2 GPUs, one
process per GPU): torch.compile of the model written with functional collectives, timed as
STEPS steps captured in one CUDA graph (decode runs under graphs) and as plain calls.

    python3 bench/gpu/decode_torch.py TOKENS[,TOKENS...] [HIDDEN] [LAYERS]

Prints `compile_graph,<tokens>,<us per step>` and `compile,<tokens>,<us per step>` (rank 0)
per token count. Every token count runs in the same two processes (one process group, one
free port), each compiled for its own static shape."""
import os
import statistics
import sys

os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
import torch.distributed._functional_collectives as funcol

STEPS = 20


def model(x, ws):
    g = dist.group.WORLD
    for wa, wo, w1, w2 in ws:
        x = x + funcol.wait_tensor(funcol.all_reduce((x @ wa) @ wo, "sum", g))
        x = x + funcol.wait_tensor(funcol.all_reduce(F.gelu(x @ w1, approximate="tanh") @ w2, "sum", g))
    return x


def measure(rank, t, h, layers):
    bf = dict(dtype=torch.bfloat16, device="cuda")
    x = torch.randn(t, h, **bf)
    ws = [tuple(torch.randn(*s, **bf) * 0.02 for s in ((h, h // 2), (h // 2, h), (h, 2 * h), (2 * h, h)))
          for _ in range(layers)]
    fn = torch.compile(model, fullgraph=True, dynamic=False)
    for _ in range(5):
        fn(x, ws)
    torch.cuda.synchronize()
    res = {}
    # plain calls, events around STEPS*5 calls
    dist.barrier()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(STEPS * 5):
        fn(x, ws)
    b.record()
    b.synchronize()
    res["compile"] = a.elapsed_time(b) * 1e3 / (STEPS * 5)
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn(x, ws)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(STEPS):
                fn(x, ws)
        g.replay()
        torch.cuda.synchronize()
        ts = []
        for _ in range(10):
            dist.barrier()
            torch.cuda.synchronize()
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) * 1e3 / STEPS)
        res["compile_graph"] = statistics.median(ts)
    except Exception as e:  # report, keep going
        if rank == 0:
            print(f"compile_graph,{t},failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
    if rank == 0:
        for k, v in res.items():
            print(f"{k},{t},{v:.1f}", flush=True)


def worker(rank, world, tokens, h, layers, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    for t in tokens:
        measure(rank, t, h, layers)
    dist.destroy_process_group()


def free_port():
    import socket
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


if __name__ == "__main__":
    tokens = [int(v) for v in sys.argv[1].split(",")]
    h = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    layers = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    mp.spawn(worker, args=(2, tokens, h, layers, free_port()), nprocs=2, join=True)
