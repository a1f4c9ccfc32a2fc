"""Raw NCCL bus bandwidth through torch.distributed, one process per GPU, for the sizes the
commlir sweep uses (bench/gpu/gen_collectives.sh): all_reduce, all_gather_into_tensor and
reduce_scatter_tensor on bf16, nccl-tests' size convention and bus-bandwidth factors.

    python3 bench/gpu/nccl_torch.py [NGPUS] [ITERS] [WARMUP] [SIZES_MIB, comma-separated]

Prints `op,bytes,us_per_call,busbw_GBps,us_event,busbw_event_GBps` lines (rank 0):
- us_per_call: ITERS back-to-back calls timed on the host, the slowest rank (nccl-tests-like);
- us_event: each call alone (ranks lined up by a barrier), CUDA events recorded around it on
  the stream, mean over ITERS calls and over ranks -- the way `commlir-run --bench-iters`
  times the NCCL call inside a compiled program, so the two compare like for like."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES_MIB = [1, 4, 16, 64, 256, 1024]


def worker(rank, world, iters, warmup, port, sizes):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    for mib in sizes:
        n = mib * 1024 * 1024 // 2
        full = torch.randn(n, dtype=torch.bfloat16, device="cuda")
        shard = torch.randn(n // world, dtype=torch.bfloat16, device="cuda")
        ops = {
            "all_reduce": (lambda: dist.all_reduce(full), 2 * (world - 1) / world),
            "all_gather": (lambda: dist.all_gather_into_tensor(full, shard), (world - 1) / world),
            "reduce_scatter": (lambda: dist.reduce_scatter_tensor(shard, full), (world - 1) / world),
        }
        for name, (fn, factor) in ops.items():
            for _ in range(warmup):
                fn()
            torch.cuda.synchronize()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            torch.cuda.synchronize()
            t = (time.perf_counter() - t0) / iters
            tt = torch.tensor([t], device="cuda")
            dist.all_reduce(tt, op=dist.ReduceOp.MAX)
            t = tt.item()
            ev = 0.0
            for _ in range(iters):
                torch.cuda.synchronize()
                dist.barrier()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                ev += a.elapsed_time(b) * 1e-3
            te = torch.tensor([ev / iters], device="cuda")
            dist.all_reduce(te)
            te = te.item() / world
            if rank == 0:
                nbytes = n * 2
                print(f"{name},{nbytes},{t * 1e6:.1f},{nbytes * factor / t / 1e9:.1f},{te * 1e6:.1f},{nbytes * factor / te / 1e9:.1f}", flush=True)
        del full, shard
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else torch.cuda.device_count()
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    sizes = [int(v) for v in sys.argv[4].split(",")] if len(sys.argv) > 4 else SIZES_MIB
    print(f"# torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, {world} GPUs", flush=True)
    mp.spawn(worker, args=(world, iters, warmup, 29531, sizes), nprocs=world)
