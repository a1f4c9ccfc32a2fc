"""Checking an exported program: commlir's sim backend against PyTorch on gloo, and the
optimized program against the unoptimized one.

1. the program and every rank's arguments are written (``model.mlir``, ``in_{rank}``);
2. PyTorch runs the model on gloo (reference.py) → ``ref_{rank}``;
3. ``commlir-run --backend sim`` runs the program on the same arguments → ``out_{rank}``,
   and the same program in f64 (every floating type promoted, the arguments converted) →
   ``exact_{rank}``; every result must match PyTorch's within the tolerance below;
4. ``commlir-opt`` runs a pipeline (lowering, scheduling, pool planning) and the sim runs
   the result → ``opt_{rank}``, which must be bit-identical to ``out_{rank}``.

The tolerance. How far a low-precision result may be from PyTorch's depends on the dtype
*and* on the computation: a bf16 training step through a ReLU flips the ReLU's derivative
wherever rounding moves a pre-activation across zero, and a result can end up several percent
from the exact one, legitimately (an ``addmm`` that PyTorch rounds once and the program, a
matmul and an add, rounds twice flips other elements than PyTorch does). A fixed tolerance per
dtype either fails such a correct program or passes wrong ones. The f64 run of the same
program measures what this computation does to this dtype: the sim's distance to it,
``e_sim``, is the rounding error of a correct evaluation of the program; PyTorch's distance to
it, ``e_torch``, is the rounding error of PyTorch's evaluation plus any difference between the
program and the model. A result matches when ``e_torch ≤ max(RATIO · e_sim, FLOOR_ULPS · ε)``
(ε the dtype's machine epsilon): a wrong program (a reduction, a rank order, a scale, a
transposition) leaves PyTorch far from the exact program while the sim's own rounding stays
small, whatever the dtype; ``RATIO`` leaves room for PyTorch rounding in other places than the
program (it may be a few times noisier than the sim, or quieter). In f32, ``e_sim`` is around
1e-7 and a tolerance around 1e-6; in bf16 it is what the computation makes it. Errors are the
largest absolute difference over the largest magnitude of the exact result, FSDP's padding
removed (as FSDP2 holds its shards); integer results must be equal."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

import torch
from safetensors.torch import load_file, save_file

from .ir import ExportError
from .program import Program

# See the module's doc: PyTorch's error against the f64 run of the program may be this many
# times the sim's, and need not be below this many units of the dtype's epsilon.
RATIO = 8.0
FLOOR_ULPS = 4.0

# A fixed bound per dtype (relative to the largest magnitude) for comparisons made without an
# f64 run of the program: a single op against PyTorch in f64, or check() on a program that
# the sim cannot run in f64 (the summary says so).
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
    error: float  # PyTorch's error against the f64 program
    tolerance: float


@dataclass
class Compared:
    """One result on one rank: the sim against PyTorch, and both against the f64 program."""

    direct: float  # |sim − PyTorch|, relative
    sim: float  # |sim − f64 program|
    torch: float  # |PyTorch − f64 program|
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.torch <= self.tolerance


@dataclass
class Report:
    """What the check found: the worst relative error per result (against PyTorch, and of
    each side against the f64 program, with the tolerance these allow), and the mismatches."""

    errors: dict[str, float] = field(default_factory=dict)
    mismatches: list[Mismatch] = field(default_factory=list)
    pipeline_identical: bool | None = None
    details: dict[str, Compared] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches and self.pipeline_identical is not False

    def summary(self) -> str:
        lines = []
        for name, err in self.errors.items():
            d = self.details.get(name)
            more = (f"; against the f64 program: sim {d.sim:.3g}, PyTorch {d.torch:.3g} (tolerance {d.tolerance:.3g})"
                    if d is not None else "")
            lines.append(f"  {name}: max relative error {err:.3g}{more}")
        lines += [f"  note: {n}" for n in self.notes]
        for m in self.mismatches:
            lines.append(f"  MISMATCH rank {m.rank} {m.result}: {m.error:.3g} > {m.tolerance:.3g}")
        if self.pipeline_identical is not None:
            lines.append(
                "  pipeline: results bit-identical"
                if self.pipeline_identical
                else "  pipeline: RESULTS DIFFER from the unoptimized program's"
            )
        return "\n".join(lines)


def rel_error(got: torch.Tensor, ref: torch.Tensor, scale_of: torch.Tensor | None = None) -> float:
    """The largest absolute difference over the largest magnitude of ``scale_of`` (``ref``
    by default); infinite for different shapes, NaN where one side has a NaN the other lacks."""
    if got.shape != ref.shape:
        return float("inf")
    if not got.numel():
        return 0.0
    g, r = got.double(), ref.double()
    base = (scale_of if scale_of is not None else r).double()
    if bool((g.isnan() != r.isnan()).any()):
        return float("nan")
    both = ~(g.isnan() | r.isnan())
    same_inf = (g == r) & g.isinf()
    diff = torch.where(both & ~same_inf, (g - r).abs(), torch.zeros_like(g))
    finite = base[base.isfinite()]
    scale = max(float(finite.abs().max()) if finite.numel() else 0.0, 1e-30)
    return float(diff.max()) / scale


def tolerance(dtype: torch.dtype, e_sim: float) -> float:
    """What PyTorch's error against the f64 program may reach when the sim's is ``e_sim``
    (see the module's doc)."""
    if not dtype.is_floating_point:
        return 0.0
    floor = FLOOR_ULPS * torch.finfo(dtype).eps
    return max(RATIO * e_sim, floor) if e_sim == e_sim else float("nan")


_FLOAT_TYPE = re.compile(r"(tensor<(?:[0-9?]+x)*)(bf16|f16|f32)([>,])")


def promote_f64(text: str) -> str:
    """The program with every floating tensor type made f64: the same computation, rounded
    (almost) nowhere. A cast between two float types becomes an f64 → f64 cast."""
    return _FLOAT_TYPE.sub(lambda m: f"{m.group(1)}f64{m.group(3)}", text)


def _as_f64(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.double() if v.is_floating_point() else v for k, v in tensors.items()}


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
    try:
        exact: list[dict[str, torch.Tensor]] | None = _run_f64(prog, workdir, mlir, in_pat)
    except ExportError as e:
        # A program the sim cannot run in f64: the fixed tolerance of its dtype, said so.
        exact = None
        report.notes.append(f"no f64 run of the program ({str(e).splitlines()[-1]}): fixed tolerances by dtype")
    for rank in range(n):
        for i, out in enumerate(prog.outs):
            key = f"result{i}"
            label = f"{key} ({out.kind}{' ' + out.fqn if out.kind != 'loss' else ''})"
            ref = reference[rank][key]
            sim = prog.unpad(rank, i, got[rank][key])
            err = rel_error(sim, ref)
            report.errors[label] = _worst(report.errors.get(label, 0.0), err)
            if sim.dtype != ref.dtype or sim.shape != ref.shape:
                report.mismatches.append(Mismatch(rank, label, float("inf"), 0.0))
                continue
            if not ref.dtype.is_floating_point:
                if not torch.equal(sim, ref):
                    report.mismatches.append(Mismatch(rank, label, err, 0.0))
                continue
            if exact is None:
                if not err <= TOLERANCE.get(ref.dtype, 0.0):
                    report.mismatches.append(Mismatch(rank, label, err, TOLERANCE.get(ref.dtype, 0.0)))
                continue
            x = prog.unpad(rank, i, exact[rank][key])
            e_sim, e_torch = rel_error(sim, x), rel_error(ref, x)
            tol = tolerance(ref.dtype, e_sim)
            c = Compared(err, e_sim, e_torch, tol)
            old = report.details.get(label)
            if old is None or _worse(c, old):
                report.details[label] = c
            if not c.ok:
                report.mismatches.append(Mismatch(rank, label, e_torch, tol))
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


def _worst(a: float, b: float) -> float:
    """The larger error, NaN counting as the worst."""
    if a != a or b != b:
        return float("nan")
    return max(a, b)


def _worse(a: Compared, b: Compared) -> bool:
    """Whether ``a`` is nearer its tolerance than ``b`` (the one a summary shows)."""
    ra = a.torch / a.tolerance if a.tolerance else float("inf")
    rb = b.torch / b.tolerance if b.tolerance else float("inf")
    return not ra <= rb


def _run_f64(prog: Program, workdir: str, mlir: str, in_pat: str) -> list[dict[str, torch.Tensor]]:
    """The sim's results of the program promoted to f64, on the arguments converted to f64."""
    n = prog.world_size
    exact_mlir = os.path.join(workdir, "model.f64.mlir")
    with open(mlir) as f:
        text = f.read()
    with open(exact_mlir, "w") as f:
        f.write(promote_f64(text))
    in64 = os.path.join(workdir, "in64_{rank}.safetensors")
    for r in range(n):
        save_file(_as_f64(load_file(in_pat.replace("{rank}", str(r)))), in64.replace("{rank}", str(r)))
    return run_sim(exact_mlir, n, in64, os.path.join(workdir, "exact_{rank}.safetensors"))
