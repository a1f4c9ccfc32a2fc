"""PyTorch reference of the Llama-3-8B-shaped training step (bench/gpu/llama3_sizes.py's
model, python/commlir_torch/models.py's LlamaStack, the module `python -m commlir_torch export
--backward` traces): forward, the loss, backward, with the gradients (shards) left in
``.grad`` (set to None before each step, as ``zero_grad`` does). One process per GPU.
Configurations timed in the same run, each with its peak device memory
(``torch.cuda.max_memory_allocated``, the rank using the most):

* one GPU (``--mode single``): ``eager`` (SDPA picks its fastest backend: cuDNN on an H200),
  ``compile`` (``torch.compile`` of the model, forward and backward through AOTAutograd),
  ``compile_blocks`` (per-block ``torch.compile``, torchtitan's default);
* ``--mode fsdp``: FSDP2 ``fully_shard`` per layer and at the root, eager (its own prefetching:
  ``fsdp_eager``), with per-block compile (``fsdp_compile_blocks``), and the whole model
  compiled with Inductor's aten-level overlap scheduling and collective bucketing
  (``fsdp_compile_overlap``: ``aten_distributed_optimizations.enable_overlap_scheduling``,
  ``collective_bucketing``, ``bucket_all_gathers_fx = bucket_reduce_scatters_fx = "all"``);
* ``--mode tp``: DTensor tensor parallelism with sequence parallelism (the model's torchtitan
  plan), eager (``tp_eager``), compiled with the overlap flags (``tp_compile_overlap``), and
  compiled with async TP (``tp_async``: ``_micro_pipeline_tp`` on a symm_mem group).

    python3 bench/gpu/llama3_step_torch.py [--mode single|fsdp|tp] [--gpus N] [--seq 4096]
        [--layers 2] [--iters 10] [--configs a,b]

Prints `<config>,<us per step>,peak <MiB>` per configuration (rank 0 prints; CUDA events around
ITERS back-to-back steps after warm-up, the slowest rank's time); a configuration PyTorch
refuses prints `<config>,failed,<reason>`."""
import argparse
import os
import sys

os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

MODES = {
    "single": ["eager", "compile", "compile_blocks"],
    "fsdp": ["fsdp_eager", "fsdp_compile_blocks", "fsdp_compile_overlap"],
    "tp": ["tp_eager", "tp_compile_overlap", "tp_async"],
}


def timed(step, iters):
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        step()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / iters, torch.cuda.max_memory_allocated()


def overlap_flags():
    opt = torch._inductor.config.aten_distributed_optimizations
    opt.enable_overlap_scheduling = True
    opt.collective_bucketing = True
    torch._inductor.config.bucket_all_gathers_fx = "all"
    torch._inductor.config.bucket_reduce_scatters_fx = "all"


def build(cfg, args, rank, n):
    """The model, its per-rank input and the module to call, for one configuration."""
    from commlir_torch.models import LlamaStack

    torch.manual_seed(0)
    # DTensor's SDPA under torch.compile refuses enable_gqa's grouped shapes (PyTorch 2.11:
    # "sdpa_flop_count: query/key/value shapes are incompatible") and runs it eagerly through
    # the math path, so TP takes torchtitan's repeat_kv, as torchtitan does.
    kv = "repeat_kv" if cfg.startswith("tp") else "gqa"
    model = LlamaStack(dim=4096, n_layers=args.layers, n_heads=32, n_kv_heads=8, hidden=14336,
                       seq=args.seq, batch=1, kv=kv).to(device="cuda", dtype=torch.bfloat16)
    x = torch.randn(1, args.seq, 4096, device="cuda", dtype=torch.bfloat16)
    fwd = model
    if cfg == "compile":
        fwd = torch.compile(model)
    elif cfg == "compile_blocks":
        for layer in model.layers:
            layer.compile()
    elif cfg.startswith("fsdp"):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cuda", (n,))
        for layer in model.layers:
            if cfg == "fsdp_compile_blocks":
                layer.compile()
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        if cfg == "fsdp_compile_overlap":
            overlap_flags()
            fwd = torch.compile(model)
    elif cfg.startswith("tp"):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import parallelize_module

        mesh = init_device_mesh("cuda", (n,))
        model = parallelize_module(model, mesh, model.tp_plan(sp=True))
        x = x.chunk(n, dim=1)[rank].contiguous()
        fwd = model
        if cfg == "tp_compile_overlap":
            overlap_flags()
            fwd = torch.compile(model)
        elif cfg == "tp_async":
            from torch.distributed._symmetric_memory import enable_symm_mem_for_group

            enable_symm_mem_for_group(dist.group.WORLD.group_name)
            torch._inductor.config._micro_pipeline_tp = True
            fwd = torch.compile(model)
    return model, x, fwd


def worker(rank, args):
    n = args.gpus
    torch.cuda.set_device(rank)
    if n > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29563")
        dist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", rank))
    configs = args.configs.split(",") if args.configs else MODES[args.mode]
    for cfg in configs:
        torch._dynamo.reset()
        try:
            model, x, fwd = build(cfg, args, rank, n)

            def step():
                for q in model.parameters():
                    q.grad = None
                fwd(x).backward()

            us, peak = timed(step, args.iters)
            res = torch.tensor([us, float(peak)], device="cuda")
            if n > 1:
                dist.all_reduce(res, op=dist.ReduceOp.MAX)
            if rank == 0:
                print(f"{cfg},{res[0].item():.1f} us,peak {res[1].item() / 2**20:.0f} MiB", flush=True)
            del model, fwd, x
        except Exception as e:  # noqa: BLE001 (a configuration PyTorch refuses is reported)
            if rank == 0:
                why = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
                print(f"{cfg},failed,{why}", flush=True)
        torch.cuda.empty_cache()
        if n > 1:
            dist.barrier()
    if n > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=sorted(MODES), default="single")
    p.add_argument("--gpus", type=int, default=None)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--configs", default="")
    args = p.parse_args()
    if args.gpus is None:
        args.gpus = 1 if args.mode == "single" else 2
    if args.gpus > 1:
        mp.spawn(worker, args=(args,), nprocs=args.gpus)
    else:
        worker(0, args)


if __name__ == "__main__":
    main()
