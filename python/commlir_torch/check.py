"""Checking an exported program: commlir's sim backend against PyTorch on gloo, and the
optimized program against the unoptimized one.

1. the program and every rank's arguments are written (``model.mlir``, ``in_{rank}``);
2. PyTorch runs the model on gloo (reference.py) → ``ref_{rank}``;
3. ``commlir-run --backend sim`` runs the program on the same arguments → ``out_{rank}``;
   every result must match PyTorch's within the tolerance of its element type;
4. ``commlir-opt`` runs a pipeline (lowering, scheduling, pool planning) and the sim runs
   the result → ``opt_{rank}``, which must be bit-identical to ``out_{rank}``."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

import torch
from safetensors.torch import load_file

from .ir import ExportError
from .program import Program

# The largest error allowed, relative to the largest magnitude of the reference result.
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10, torch.bfloat16: 2e-2, torch.float16: 5e-3}

DEFAULT_PIPELINE = "builtin.module(func.func(coll-to-comm,comm-overlap-schedule,comm-plan-pools))"

_REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def tool(name: str) -> str:
    """A commlir binary: ``$COMMLIR_OPT`` / ``$COMMLIR_RUN``, else on ``PATH``, else the
    repository's release or debug build."""
    env = os.environ.get(name.upper().replace("-", "_"))
    if env:
        if not os.path.exists(env):
            raise ExportError(f"${name.upper().replace('-', '_')} is '{env}', which does not exist")
        return env
    found = shutil.which(name)
    if found:
        return found
    for build in ("release", "debug"):
        path = os.path.join(_REPO, "target", build, name)
        if os.path.exists(path):
            return path
    raise ExportError(f"{name} not found: build it (make build) or set ${name.upper().replace('-', '_')}")


def run_tool(cmd: list[str]) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise ExportError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr.strip()}")
    return p.stdout


@dataclass
class Mismatch:
    rank: int
    result: str
    error: float
    tolerance: float


@dataclass
class Report:
    """What the check found: the worst relative error per result, and the mismatches."""

    errors: dict[str, float] = field(default_factory=dict)
    mismatches: list[Mismatch] = field(default_factory=list)
    pipeline_identical: bool | None = None

    @property
    def ok(self) -> bool:
        return not self.mismatches and self.pipeline_identical is not False

    def summary(self) -> str:
        lines = [f"  {name}: max relative error {err:.3g}" for name, err in self.errors.items()]
        for m in self.mismatches:
            lines.append(f"  MISMATCH rank {m.rank} {m.result}: {m.error:.3g} > {m.tolerance:.3g}")
        if self.pipeline_identical is not None:
            lines.append(
                "  pipeline: results bit-identical"
                if self.pipeline_identical
                else "  pipeline: RESULTS DIFFER from the unoptimized program's"
            )
        return "\n".join(lines)


def rel_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return float("inf")
    g, r = got.double(), ref.double()
    scale = max(float(r.abs().max()) if r.numel() else 0.0, 1e-30)
    return float((g - r).abs().max()) / scale if r.numel() else 0.0


def run_sim(mlir: str, ranks: int, in_pattern: str, out_pattern: str) -> list[dict[str, torch.Tensor]]:
    run_tool([tool("commlir-run"), mlir, "--backend", "sim", "--ranks", str(ranks),
              "--inputs", in_pattern, "--outputs", out_pattern])
    return [load_file(out_pattern.replace("{rank}", str(r))) for r in range(ranks)]


def check(
    prog: Program,
    workdir: str,
    *,
    pipeline: str | None = DEFAULT_PIPELINE,
    reference: list[dict[str, torch.Tensor]] | None = None,
) -> Report:
    """Runs steps 1–4 in ``workdir``; ``reference`` skips the gloo run (results given)."""
    from .reference import run_reference

    os.makedirs(workdir, exist_ok=True)
    mlir = os.path.join(workdir, "model.mlir")
    prog.write(mlir)
    in_pat = os.path.join(workdir, "in_{rank}.safetensors")
    prog.write_inputs(in_pat)
    n = prog.world_size
    if reference is None:
        reference = run_reference(prog.sidecar(), in_pat, os.path.join(workdir, "ref_{rank}.safetensors"))
    got = run_sim(mlir, n, in_pat, os.path.join(workdir, "out_{rank}.safetensors"))
    report = Report()
    for rank in range(n):
        for i, out in enumerate(prog.outs):
            key = f"result{i}"
            label = f"{key} ({out.kind}{' ' + out.fqn if out.kind != 'loss' else ''})"
            ref = reference[rank][key]
            err = rel_error(got[rank][key], ref)
            tol = TOLERANCE.get(ref.dtype, 0.0)
            report.errors[label] = max(report.errors.get(label, 0.0), err)
            if not err <= tol:
                report.mismatches.append(Mismatch(rank, label, err, tol))
    if pipeline:
        opt = os.path.join(workdir, "model.opt.mlir")
        run_tool([tool("commlir-opt"), mlir, f"--pass-pipeline={pipeline}", "--mlir-print-debuginfo", "-o", opt])
        after = run_sim(opt, n, in_pat, os.path.join(workdir, "opt_{rank}.safetensors"))
        report.pipeline_identical = all(
            after[r].keys() == got[r].keys()
            and all(torch.equal(after[r][k].reshape(-1).view(torch.uint8), got[r][k].reshape(-1).view(torch.uint8)) for k in got[r])
            for r in range(n)
        )
    return report
