"""The PyTorch reference: the model run eagerly on CPU with the gloo backend, one process per
rank, parallelized as a training script does it (``parallelize_module`` with the model's
tensor-parallel plan, FSDP2 ``fully_shard`` on the data-parallel mesh dimension). Each rank
reads its arguments from the exported program's ``in_{rank}.safetensors`` (after checking
that its own parameter shards are the same tensors), and writes its results, in the order of
the program's results, to ``ref_{rank}.safetensors`` as ``result0``, ``result1``, …

A model that parallelizes itself (``--ranks``, user.py) runs as its builder makes it on gloo:
its own mesh, plans, ``fully_shard`` and training step. There the exported arguments are
copied into the model (every parameter's local shard, FSDP2's padding off, every buffer) and
replace the builder's inputs: the builder may initialize differently on gloo than under the
fake process group (a broadcast of the initial weights, say), the program's inputs are what
counts. FSDP2 holds a padded parameter's gradient unpadded; so do the results here."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from typing import Any

import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.distributed.tensor import DTensor

from .diagnose import debug, diagnostic
from .ir import ExportError
from .trace import Parallelism, apply_tp, build, load_factory, local_outputs, loss_of


def _plain(t: torch.Tensor) -> torch.Tensor:
    """A plain tensor of ``t``'s values (an in-flight collective's result is waited for)."""
    if isinstance(t, AsyncCollectiveTensor):
        t = t.wait()
    return t.detach().clone().contiguous()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, sidecar: dict[str, Any], in_pattern: str, ref_pattern: str, port: int) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    par = Parallelism(tp=sidecar["tp"], fsdp=sidecar["fsdp"], sp=sidecar["sp"], ranks=sidecar.get("ranks", 0))
    dist.init_process_group("gloo", rank=rank, world_size=par.world_size)
    if par.user:
        _run_user_rank(rank, sidecar, in_pattern, ref_pattern)
    else:
        _run_rank(rank, sidecar, par, in_pattern, ref_pattern)
    # Every rank has written its results before any leaves; the process then exits without
    # tearing gloo down (see the end of this file), as a failed rank does by its exception.
    dist.barrier()


def _run_rank(rank: int, sidecar: dict[str, Any], par: Parallelism, in_pattern: str, ref_pattern: str) -> None:
    from torch.distributed.fsdp import fully_shard

    dtype = getattr(torch, sidecar["dtype"]) if sidecar["dtype"] else None
    mesh = par.make_mesh()
    inst = build(load_factory(sidecar["model"]), dtype, sidecar["seed"])
    model = inst.model
    apply_tp(model, par, par.submesh(mesh, "tp"))
    if par.fsdp > 1:
        dp_mesh = par.submesh(mesh, "dp")
        units = model.fsdp_units() if hasattr(model, "fsdp_units") else []
        for unit in units:
            fully_shard(unit, mesh=dp_mesh)
        fully_shard(model, mesh=dp_mesh)
    files = load_file(in_pattern.replace("{rank}", str(rank)))
    params = dict(model.named_parameters())
    inputs = []
    for a in sidecar["args"]:
        t = files[a["name"]]
        if a["kind"] == "param":
            p = params[a["fqn"]]
            local = p.to_local() if isinstance(p, DTensor) else p
            t = _unpadded(t, a, rank)
            if not torch.equal(local.detach(), t):
                raise ExportError(
                    f"rank {rank}: parameter '{a['fqn']}' is not the tensor the exported inputs "
                    f"hold (shapes {tuple(local.shape)} and {tuple(t.shape)})"
                )
        elif a["kind"] == "input":
            inputs.append(t)
    if sidecar["backward"]:
        out = local_outputs(model(*inputs))
        loss = loss_of(out)
        loss.backward()
        results = [loss.detach()]
        for r in sidecar["results"][1:]:
            p = params[r["fqn"]]
            g = p.grad
            if g is None:
                g = torch.zeros_like(p.to_local() if isinstance(p, DTensor) else p)
            elif isinstance(g, DTensor):
                g = g.redistribute(p.device_mesh, p.placements).to_local()
            results.append(g)
    else:
        with torch.no_grad():
            results = local_outputs(model(*inputs))
    save_file(
        {f"result{i}": _plain(r) for i, r in enumerate(results)},
        ref_pattern.replace("{rank}", str(rank)),
    )


def _unpadded(t: torch.Tensor, entry: dict[str, Any], rank: int) -> torch.Tensor:
    """An FSDP-padded argument or result of the sidecar as FSDP2 holds it on ``rank``."""
    valid = entry.get("fsdp_valid")
    if not valid:
        return t
    return t.narrow(int(entry["fsdp_dim"]), 0, int(valid[rank]))


def _run_user_rank(rank: int, sidecar: dict[str, Any], in_pattern: str, ref_pattern: str) -> None:
    """The builder's model on gloo, loaded with the exported arguments; its training step, its
    forward and backward, or its forward."""
    from .user import call_builder

    built = call_builder(load_factory(sidecar["model"]), sidecar["seed"])
    model = built.model
    files = load_file(in_pattern.replace("{rank}", str(rank)))
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    inputs: list[torch.Tensor] = []
    with torch.no_grad():
        for a in sidecar["args"]:
            t = files[a["name"]]
            if a["kind"] == "param":
                p = params[a["fqn"]]
                local = p._local_tensor if isinstance(p, DTensor) else p
                local.copy_(_unpadded(t, a, rank))
            elif a["kind"] == "buffer":
                b = buffers[a["fqn"]]
                b.copy_(torch.view_as_complex(t) if b.is_complex() else t)
            elif a["kind"] == "input":
                inputs.append(t)
    it = iter(inputs)
    args: list[Any] = []
    for x in built.inputs:
        if isinstance(x, DTensor):
            args.append(DTensor.from_local(next(it), x.device_mesh, x.placements, run_check=False,
                                           shape=x.shape, stride=x.stride()))
        elif isinstance(x, torch.Tensor):
            t = next(it)
            args.append(torch.view_as_complex(t) if x.is_complex() else t)
        else:
            args.append(x)
    results: list[torch.Tensor] = []
    if sidecar["backward"]:
        if built.step is not None:
            ret = built.step(model, *args)
            if ret is not None:
                ret = ret[0] if isinstance(ret, (list, tuple)) else ret
                if isinstance(ret, DTensor):
                    ret = ret.full_tensor()
                results.append(ret.detach())
        else:
            loss = loss_of(local_outputs(model(*args)))
            loss.backward()
            results.append(loss.detach())
        for r in sidecar["results"]:
            if r["kind"] != "grad":
                continue
            p = params[r["fqn"]]
            g = p.grad
            if g is None:
                g = torch.zeros_like(p.to_local() if isinstance(p, DTensor) else p)
            elif isinstance(g, DTensor):
                g = g.redistribute(p.device_mesh, p.placements).to_local()
            results.append(g)
    else:
        with torch.no_grad():
            results = local_outputs(model(*args))
    save_file({f"result{i}": _plain(r) for i, r in enumerate(results)}, ref_pattern.replace("{rank}", str(rank)))


def run_reference(
    sidecar: dict[str, Any], in_pattern: str, ref_pattern: str, timeout: float = 300.0
) -> list[dict[str, torch.Tensor]]:
    """Runs the model of ``sidecar`` (the exported program's JSON) on gloo, one process per
    rank (``python -m commlir_torch.reference``), and returns each rank's results."""
    n = int(sidecar["world_size"])
    side_path = ref_pattern.replace("{rank}", "sidecar").removesuffix(".safetensors") + ".json"
    with open(side_path, "w") as f:
        json.dump(sidecar, f)
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    # A rendezvous can lose its port to another process between free_port() and the bind;
    # a failed launch is tried once more, on a new port, before it counts.
    failed = _launch(n, env, side_path, in_pattern, ref_pattern, timeout)
    if failed:
        failed = _launch(n, env, side_path, in_pattern, ref_pattern, timeout)
    if failed:
        raise ExportError("the gloo reference failed (twice):\n" + "\n".join(failed))
    return [load_file(ref_pattern.replace("{rank}", str(r))) for r in range(n)]


def _launch(n: int, env: dict[str, str], side_path: str, in_pattern: str, ref_pattern: str, timeout: float) -> list[str]:
    """Runs the ``n`` rank processes; returns what the failed ones printed (empty if none)."""
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "commlir_torch.reference", side_path, in_pattern, ref_pattern, port, str(r)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for r in range(n)
    ]
    failed = []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            for q in procs:
                q.communicate()
            return [f"timed out after {timeout} s"]
        if p.returncode != 0:
            failed.append(f"rank {r} exited with {p.returncode}:\n" + "\n".join(out.splitlines()[-25:]))
    return failed


def main(argv: list[str]) -> None:
    side_path, in_pattern, ref_pattern, port, rank = argv
    with open(side_path) as f:
        sidecar = json.load(f)
    _worker(int(rank), sidecar, in_pattern, ref_pattern, int(port))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Exception as e:  # noqa: BLE001 - the rank's failure as one diagnostic line
        if debug():
            raise
        print(f"error: {diagnostic(e)}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)
    # The results are written and every rank passed the barrier: leave without
    # destroy_process_group and the interpreter's teardown, where gloo's background threads
    # can be destroyed while still joinable ("terminate called without an active exception",
    # SIGABRT) although the run succeeded.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
