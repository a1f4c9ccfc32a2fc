"""NCCL all-to-all baseline for bench/gpu/run_multi_gpu.sh (`commlir-run --nccl-baseline` has
no all_to_all): torch.distributed.all_to_all_single on the NCCL backend (grouped
ncclSend/ncclRecv, what nccl-tests' alltoall runs), bf16, equal splits, the message being
each rank's whole buffer as in gen_collectives.sh's all_to_all programs. Back-to-back calls
with CUDA events around the loop (100 after 10 warm-up up to 64 MiB, 20 after 5 above), mean
over ranks; bus bandwidth as nccl-tests counts it (bytes * (N-1)/N / time).

    python3 bench/gpu/a2a_torch.py [--world N] [SIZES_MIB...]

Prints `baseline,all_to_all,<bytes>,<us>,<busbw GB/s>` (rank 0).
Multicast stays off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1.
"""

import os
import sys

for k, v in (("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NCCL_NVLS_ENABLE", "0"),
             ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[k] = v

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES_MIB = [1, 4, 16, 64, 256, 1024]


def worker(rank, world, sizes):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29541")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    for mib in sizes:
        nbytes = mib << 20
        x = torch.randn(nbytes // 2, dtype=torch.bfloat16, device="cuda")
        y = torch.empty_like(x)
        iters, warm = (100, 10) if mib <= 64 else (20, 5)
        for _ in range(warm):
            dist.all_to_all_single(y, x)
        torch.cuda.synchronize()
        dist.barrier()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            dist.all_to_all_single(y, x)
        b.record()
        b.synchronize()
        t = torch.tensor([a.elapsed_time(b) * 1e3 / iters], device="cuda")
        dist.all_reduce(t)
        us = t.item() / world
        if rank == 0:
            bw = nbytes * (world - 1) / world / (us * 1e-6) / 1e9
            print(f"baseline,all_to_all,{nbytes},{us:.2f},{bw:.2f}", flush=True)
        del x, y
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    argv = sys.argv[1:]
    world = 2
    if argv[:1] == ["--world"]:
        world, argv = int(argv[1]), argv[2:]
    sizes = [int(s) for s in argv] or SIZES_MIB
    mp.spawn(worker, args=(world, sizes), nprocs=world, join=True)
