"""PyTorch's references for the symmetric-memory all-reduce benchmark (bench/gpu/run_symm_kernels.sh).

Per size (bytes of bf16): NCCL all_reduce, torch.ops.symm_mem.one_shot_all_reduce and
torch.ops.symm_mem.two_shot_all_reduce_, each as CALLS back-to-back calls captured in one CUDA
graph, the graph replayed REPLAYS times; prints the median microseconds per call:
    torch,<op>,<bytes>,<us>
Run: python3 bench/gpu/symm_torch.py [--world N] [SIZES...]   (spawns one process per GPU,
N GPUs, default 2)
Multicast stays off: TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1.
"""

import os
import statistics
import sys

for k, v in (("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NCCL_NVLS_ENABLE", "0"),
             ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[k] = v

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CALLS = 100
REPLAYS = 20
SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]


def timed(fn, stream):
    """Median microseconds per call of CALLS calls of fn captured in one graph."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
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
    return statistics.median(out)


def worker(rank, world, sizes):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    import torch.distributed._symmetric_memory as symm_mem
    group = dist.group.WORLD.group_name
    try:
        symm_mem.enable_symm_mem_for_group(group)
    except Exception:  # newer releases need no opt-in
        pass
    stream = torch.cuda.Stream()
    for nbytes in sizes:
        n = nbytes // 2
        x = torch.randn(n, dtype=torch.bfloat16, device="cuda")
        t = symm_mem.empty(n, dtype=torch.bfloat16, device="cuda")
        symm_mem.rendezvous(t, group)
        t.copy_(x)
        res = {}
        with torch.cuda.stream(stream):
            res["nccl"] = timed(lambda: dist.all_reduce(x), stream)
            res["one_shot"] = timed(
                lambda: torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group), stream)
            res["two_shot"] = timed(
                lambda: torch.ops.symm_mem.two_shot_all_reduce_(t, "sum", group), stream)
        if rank == 0:
            for k, v in res.items():
                print(f"torch,{k},{nbytes},{v:.2f}", flush=True)
        del t
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    argv = sys.argv[1:]
    world = 2
    if argv[:1] == ["--world"]:
        world, argv = int(argv[1]), argv[2:]
    sizes = [int(s) for s in argv] or SIZES
    mp.spawn(worker, args=(world, sizes), nprocs=world, join=True)
