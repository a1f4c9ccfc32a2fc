"""PyTorch reference of the exported Llama block (python/commlir_torch/models.py's LlamaBlock,
the model `python -m commlir_torch export` traces): the same module, sizes and dtype, on GPU,
eager and under torch.compile, with the same tensor parallelism (parallelize_module with the
model's tp_plan) when TP > 1, one process per GPU.

    python3 bench/gpu/llama_block_torch.py [--tp N] [--sp] [--dim 4096] [--heads 32]
        [--hidden 11008] [--seq 4096] [--batch 1] [--iters 20]

Prints `eager,<us per call>` and `compile,<us per call>` (rank 0; CUDA events around ITERS
back-to-back forward calls after warm-up) and the peak device memory of each."""
import argparse
import os
import sys

os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def timed(fn, x, iters):
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn(x)
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / iters, torch.cuda.max_memory_allocated()


def worker(rank, args):
    from commlir_torch.models import LlamaBlock

    torch.cuda.set_device(rank)
    if args.tp > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29561")
        dist.init_process_group("nccl", rank=rank, world_size=args.tp, device_id=torch.device("cuda", rank))
    torch.manual_seed(0)
    model = LlamaBlock(dim=args.dim, n_heads=args.heads, hidden=args.hidden, seq=args.seq, batch=args.batch)
    model = model.to(device="cuda", dtype=torch.bfloat16)
    x = torch.randn(args.batch, args.seq, args.dim, device="cuda", dtype=torch.bfloat16)
    if args.tp > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import parallelize_module

        mesh = init_device_mesh("cuda", (args.tp,))
        model = parallelize_module(model, mesh, model.tp_plan(sp=args.sp))
        if args.sp:  # the block's input is sequence-sharded under SP
            x = x.chunk(args.tp, dim=1)[rank].contiguous()
    with torch.no_grad():
        eager = timed(model, x, args.iters)
        compiled = torch.compile(model)
        comp = timed(compiled, x, args.iters)
    if rank == 0:
        print(f"eager,{eager[0]:.1f} us,peak {eager[1] / 2**20:.0f} MiB")
        print(f"compile,{comp[0]:.1f} us,peak {comp[1] / 2**20:.0f} MiB")
    if args.tp > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--sp", action="store_true")
    p.add_argument("--dim", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--hidden", type=int, default=11008)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    if args.tp > 1:
        mp.spawn(worker, args=(args,), nprocs=args.tp)
    else:
        worker(0, args)


if __name__ == "__main__":
    main()
