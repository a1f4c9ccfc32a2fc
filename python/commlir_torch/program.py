"""The exported program: its module text, what its arguments and results are (the sidecar
JSON), and each rank's argument tensors (``in_{rank}.safetensors``).

:func:`export` traces rank 0 and checks that the program does not depend on the rank: it
traces the last rank as well and requires the same text, except for the split sizes of
``all_to_all_single``, which are collected from every rank into the rank-major tables that
``coll.all_to_all_single`` takes.

Two kinds of model export: a plain model that the exporter parallelizes (``--tp``, ``--fsdp``,
``--sp``, its ``tp_plan``; trace.py), and a model or training step that the user's own code
parallelized (``--ranks N``; user.py). Both end in the same :class:`Program`."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from collections.abc import Callable
from typing import Any

import torch
from safetensors.torch import save_file

from .diagnose import user_code
from .export import Arg, Out, RankTables
from .ir import ExportError
from .trace import (
    Factory,
    Parallelism,
    ParamInfo,
    Traced,
    trace_rank,
    build,
    example_inputs,
    fsdp_shard,
    fsdp_valid_rows,
    input_layouts,
    real_view,
    shard,
)

from .user import fake_process_group, trace_user_rank
from .user import rank_inputs as rank_inputs_user

DTYPE_NAMES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f64": torch.float64}


@dataclass
class Program:
    """One SPMD program exported from a model, and how to feed it on every rank."""

    text: str
    args: list[Arg]
    outs: list[Out]
    par: Parallelism
    backward: bool
    dtype: torch.dtype | None
    seed: int
    model_spec: str
    consts: dict[str, torch.Tensor] = field(default_factory=dict)
    params: list[ParamInfo] = field(default_factory=list)
    factory: Factory | None = None
    # The rank layout of every declared group (user-parallelized programs; the exporter's
    # own mesh is known from ``par``).
    groups: dict[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        return self.par.world_size

    def valid_rows(self, fqn: str, rank: int) -> tuple[int, int] | None:
        """For a parameter whose FSDP shards are padded: (dim, how many of ``rank``'s shard
        rows along it are real); None when its shards are not padded."""
        info = next((p for p in self.params if p.fqn == fqn), None)
        if info is None or info.fsdp_rows is None:
            return None
        if self.par.user:
            family = self.groups.get(info.fsdp_group, ())
            place = {r: (i, len(sub)) for sub in family for i, r in enumerate(sub)}
            index, n = place.get(rank, (0, 1))
        else:
            index, n = self.par.coords(rank)[0], self.par.fsdp
        return info.fsdp_dim, fsdp_valid_rows(info.fsdp_rows, index, n)

    def unpad(self, rank: int, result: int, t: torch.Tensor) -> torch.Tensor:
        """Result ``result`` of ``rank`` without FSDP's padding: a padded parameter's gradient
        shard cut to the rows FSDP2 holds on that rank (what ``p.grad.to_local()`` is)."""
        out = self.outs[result]
        valid = self.valid_rows(out.fqn, rank) if out.kind == "grad" else None
        if valid is None:
            return t
        dim, rows = valid
        return t.narrow(dim, 0, rows)

    def sidecar(self) -> dict[str, Any]:
        """What the arguments and results are, for harnesses writing each rank's tensors.
        ``fsdp_valid`` (padded FSDP shards only): per global rank, how many entries along
        ``fsdp_dim`` are real, the rest being FSDP2's zero padding."""
        shape, names = self.par.mesh_shape if not self.par.user else ((), ())

        def padding(fqn: str) -> dict[str, Any]:
            info = next((p for p in self.params if p.fqn == fqn), None)
            if info is None or info.fsdp_rows is None:
                return {}
            valid = [self.valid_rows(fqn, r) for r in range(self.world_size)]
            return {"fsdp_dim": info.fsdp_dim, "fsdp_valid": [v[1] if v else None for v in valid]}

        return {
            "model": self.model_spec,
            "function": "train_step" if self.backward else "forward",
            "world_size": self.world_size,
            "ranks": self.par.ranks,
            "mesh": {"shape": list(shape), "dim_names": list(names)},
            "groups": {k: [list(g) for g in v] for k, v in self.groups.items()},
            "tp": self.par.tp,
            "sp": self.par.sp,
            "fsdp": self.par.fsdp,
            "symm_mem": self.par.symm_mem,
            "backward": self.backward,
            "dtype": str(self.dtype).removeprefix("torch.") if self.dtype else None,
            "seed": self.seed,
            "args": [
                {
                    "name": a.name,
                    "kind": a.kind,
                    "fqn": a.fqn,
                    "type": str(a.type),
                    "replicated": a.replicated,
                    "placements": _placements(self.params, a),
                    **(padding(a.fqn) if a.kind == "param" else {}),
                }
                for a in self.args
            ],
            "results": [{**asdict(o), **(padding(o.fqn) if o.kind == "grad" else {})} for o in self.outs],
        }

    def write(self, path: str) -> str:
        """Writes the module to ``path`` and the sidecar next to it (``.json``); returns the
        sidecar's path."""
        with open(path, "w") as f:
            f.write(self.text)
        side = os.path.splitext(path)[0] + ".json"
        with open(side, "w") as f:
            json.dump(self.sidecar(), f, indent=1)
            f.write("\n")
        return side

    def rank_inputs(self, rank: int) -> dict[str, torch.Tensor]:
        """Every argument of ``rank``, by argument name: its parameter shards (sliced from the
        seeded model exactly as ``parallelize_module`` and ``fully_shard`` slice them), the
        buffers, its data-parallel rank's inputs (sequence-sharded under SP) and constants."""
        if self.factory is None:
            raise ExportError("the program was not exported from a model factory")
        if self.par.user:
            return rank_inputs_user(self.factory, self.par, rank, self.seed, self.args, self.consts)
        # The factory and example_inputs() run on the rank's fake process group, as in the trace.
        with fake_process_group(self.world_size, rank), user_code():
            return self._rank_inputs(rank)

    def _rank_inputs(self, rank: int) -> dict[str, torch.Tensor]:
        assert self.factory is not None
        inst = build(self.factory, self.dtype, self.seed)
        dp, tp = self.par.coords(rank)
        full = dict(inst.model.named_parameters())
        bufs = dict(inst.model.named_buffers())
        inputs = example_inputs(inst, self.seed, dp)
        layouts = input_layouts(inst.model, self.par, len(inputs))
        placements = {p.fqn: p.placements for p in self.params}
        out: dict[str, torch.Tensor] = {}
        i_input = 0
        for a in self.args:
            if a.kind == "param":
                t = full[a.fqn].detach()
                pl = placements.get(a.fqn)
                if pl is not None:
                    t = shard(t, pl, tp, self.par.tp, f"parameter '{a.fqn}'")
                if self.par.fsdp > 1:
                    t = fsdp_shard(t, dp, self.par.fsdp)
            elif a.kind == "buffer":
                t = real_view(bufs[a.fqn].detach())
            elif a.kind == "input":
                t = shard(inputs[i_input], (layouts[i_input],), tp, self.par.tp, f"input '{a.fqn}'")
                i_input += 1
            else:
                t = self.consts[a.name]
            if tuple(t.shape) != a.type.shape or t.dtype != a.type.dtype:
                raise ExportError(f"rank {rank}'s '{a.name}' is {t.dtype} {tuple(t.shape)}, the program takes {a.type}")
            out[a.name] = t.contiguous()
        return out

    def write_inputs(self, pattern: str) -> list[str]:
        """Writes ``rank_inputs`` of every rank to ``pattern`` (``{rank}`` is the rank)."""
        if "{rank}" not in pattern and self.world_size > 1:
            raise ExportError(f"'{pattern}' needs {{rank}}: every rank has its own inputs")
        paths = []
        for r in range(self.world_size):
            path = pattern.replace("{rank}", str(r))
            save_file(self.rank_inputs(r), path, metadata={"commlir_torch": json.dumps({"rank": r})})
            paths.append(path)
        return paths


def _placements(params: list[ParamInfo], a: Arg) -> list[str] | None:
    for p in params:
        if a.kind == "param" and p.fqn == a.fqn:
            return [str(x) for x in p.placements] if p.placements is not None else None
    return None


_SSA = re.compile(r"%[A-Za-z0-9_$.-]+")


def _canonical(text: str) -> str:
    """``text`` with SSA values renamed in order of appearance (node names depend on what
    DTensor's sharding-propagation cache made the tracer record, not on the program)."""
    names: dict[str, str] = {}
    return _SSA.sub(lambda m: names.setdefault(m.group(0), f"%v{len(names)}"), text)


def export(
    factory: Factory,
    par: Parallelism,
    *,
    backward: bool = False,
    dtype: torch.dtype | None = None,
    seed: int = 0,
    model_spec: str = "",
    check_ranks: bool = True,
) -> Program:
    """Traces ``factory``'s model under ``par`` and returns rank 0's program, checked to be
    the program of every rank."""
    if not model_spec:
        model_spec = f"{factory.__module__}:{factory.__qualname__}"
    if par.user and dtype is not None:
        raise ExportError("--dtype casts a model the exporter parallelizes; a model that parallelizes itself "
                          "chooses its own dtypes (FSDP2's MixedPrecisionPolicy, model.to(...))")
    trace = _tracer(factory, par, backward, dtype, seed)
    first = trace(0, None)
    if check_ranks and par.world_size > 1:
        first = _check_ranks(trace, par, first)
    training = backward or bool(first.outs and first.outs[0].kind in ("loss", "grad"))
    return Program(
        first.text, first.args, first.outs, par, training, dtype, seed, model_spec,
        first.consts, first.params, factory, first.groups,
    )


Tracer = Callable[[int, "RankTables | None"], Traced]


def _tracer(factory: Factory, par: Parallelism, backward: bool, dtype: torch.dtype | None, seed: int) -> Tracer:
    """Traces one rank (with the rank tables of a second pass); failures of the user's code
    are one diagnostic each (diagnose.py)."""

    def trace(rank: int, tables: RankTables | None) -> Traced:
        with user_code():
            if par.user:
                return trace_user_rank(factory, par, rank, backward, seed, tables)
            return trace_rank(factory, par, rank, backward, dtype, seed, tables)

    return trace


def _check_ranks(trace: Tracer, par: Parallelism, first: Traced) -> Traced:
    """Rank 0's program, made the same on every rank: rank-dependent all-to-all splits,
    constants and chunk choices go into rank tables (export.RankTables) when every rank's
    trace has the same shape; anything else that differs is an error showing the first
    differing line."""
    n = par.world_size
    has_splits = any(ins or outs for ins, outs in first.a2a)
    traces = {0: first}
    for r in range(1, n) if has_splits else [n - 1]:
        traces[r] = trace(r, None)
    differs = any(_canonical(t.text) != _canonical(first.text) for t in traces.values())
    if has_splits or differs:
        for r in range(1, n):
            if r not in traces:
                traces[r] = trace(r, None)
        tables = RankTables()
        if has_splits:
            tables.a2a = []
            for i in range(len(first.a2a)):
                ins = [traces[r].a2a[i][0] for r in range(n)]
                outs = [traces[r].a2a[i][1] for r in range(n)]
                tables.a2a.append((ins, outs) if any(ins) or any(outs) else None)
        if all(len(t.fills) == len(first.fills) for t in traces.values()):
            for i in range(len(first.fills)):
                values = [traces[r].fills[i] for r in range(n)]
                if len(set(values)) > 1:
                    tables.fills[i] = values
        if all(len(t.picks) == len(first.picks) for t in traces.values()):
            for i in range(len(first.picks)):
                chosen = [traces[r].picks[i] for r in range(n)]
                if len(set(chosen)) > 1:
                    tables.picks[i] = chosen
        traces = {r: trace(r, tables) for r in range(n)}
        first = traces[0]
    for r, t in traces.items():
        if _canonical(t.text) != _canonical(first.text):
            a, b = _canonical(first.text).splitlines(), _canonical(t.text).splitlines()
            diff = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            show = lambda lines: lines[diff].strip() if diff < len(lines) else "(end)"  # noqa: E731
            raise ExportError(
                f"the traced program depends on the rank (rank 0 and rank {r} differ at line "
                f"{diff + 1}):\n  rank 0: {show(a)}\n  rank {r}: {show(b)}"
            )
    return first
