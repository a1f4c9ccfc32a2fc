"""The command line: ``python -m commlir_torch export|check|ops``.

    python -m commlir_torch export train.py:build --ranks 4 -o step.mlir \\
        --inputs-out 'in_{rank}.safetensors'
    python -m commlir_torch check model.py:make_model --tp 2 --sp
    python -m commlir_torch ops
"""

from __future__ import annotations

import argparse
import sys
import tempfile


from . import aten, collectives
from .diagnose import debug, diagnostic
from .ir import ExportError
from .program import DTYPE_NAMES, Program, export
from .trace import Parallelism, load_factory


def _parallel_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="FILE.py:FUNCTION or MODULE:FUNCTION. With --ranks: a builder that "
                   "parallelizes the model itself and returns (step, model, inputs) or (model, inputs); "
                   "else a factory of a plain nn.Module (with example_inputs() and, for --tp, tp_plan(sp)) "
                   "or of (module, inputs)")
    p.add_argument("--ranks", type=int, default=0, metavar="N",
                   help="the model parallelizes itself (its own DeviceMesh, parallelize_module, fully_shard, "
                   "functional collectives): call the builder on each of N ranks and export what it runs")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (the model's tp_plan)")
    p.add_argument("--sp", action="store_true", help="sequence parallelism with --tp (tp_plan(sp=True))")
    p.add_argument("--fsdp", type=int, default=1, help="FSDP degree: parameters sharded on dim 0 over the dp group")
    p.add_argument("--mesh", metavar="DPxTP", help="a 2-D mesh, e.g. 2x2: the same as --fsdp DP --tp TP")
    p.add_argument("--symm-mem", action="store_true",
                   help="declare the groups with symmetric memory (one-shot all-reduce, fused matmul kernels)")
    p.add_argument("--backward", action="store_true",
                   help="export the training step: loss (the output, or its sum) and every gradient shard")
    p.add_argument("--dtype", choices=sorted(DTYPE_NAMES), help="cast the model (and inputs) to this type")
    p.add_argument("--seed", type=int, default=0, help="seed of the parameters and example inputs")


def _parallelism(ns: argparse.Namespace) -> Parallelism:
    tp, fsdp = ns.tp, ns.fsdp
    if ns.mesh:
        try:
            dp_s, tp_s = ns.mesh.lower().split("x")
            fsdp, tp = int(dp_s), int(tp_s)
        except ValueError:
            raise ExportError(f"--mesh '{ns.mesh}' is not DPxTP (e.g. 2x4)") from None
    return Parallelism(tp=tp, fsdp=fsdp, sp=ns.sp, symm_mem=ns.symm_mem, ranks=ns.ranks)


def _export(ns: argparse.Namespace) -> Program:
    dtype = DTYPE_NAMES[ns.dtype] if ns.dtype else None
    return export(
        load_factory(ns.model), _parallelism(ns), backward=ns.backward, dtype=dtype,
        seed=ns.seed, model_spec=ns.model, check_ranks=not getattr(ns, "no_rank_check", False),
    )


def cmd_export(ns: argparse.Namespace) -> int:
    prog = _export(ns)
    if ns.output in (None, "-"):
        sys.stdout.write(prog.text)
    else:
        side = prog.write(ns.output)
        print(f"wrote {ns.output} (@{prog.sidecar()['function']} on {prog.world_size} ranks) and {side}", file=sys.stderr)
    if ns.inputs_out:
        paths = prog.write_inputs(ns.inputs_out)
        print(f"wrote {', '.join(paths)}", file=sys.stderr)
    return 0


def cmd_check(ns: argparse.Namespace) -> int:
    from .check import DEFAULT_PIPELINE, check

    prog = _export(ns)
    pipeline = None if ns.no_pipeline else (ns.pipeline or DEFAULT_PIPELINE)
    with tempfile.TemporaryDirectory(prefix="commlir-check-") as tmp:
        workdir = ns.workdir or tmp
        report = check(prog, workdir, pipeline=pipeline)
    how = ("parallelized by the model" if prog.par.user else
           f"tp {prog.par.tp}, fsdp {prog.par.fsdp}{', sp' if prog.par.sp else ''}")
    print(f"{ns.model} on {prog.world_size} ranks ({how}{', backward' if prog.backward else ''}): "
          f"commlir sim vs PyTorch gloo")
    print(report.summary())
    print("OK" if report.ok else "FAILED")
    return 0 if report.ok else 1


def cmd_ops(_: argparse.Namespace) -> int:
    names = sorted({str(op) for op in aten.TABLE} | {str(op) for op in collectives.TABLE})
    print("\n".join(names))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m commlir_torch", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    e = sub.add_parser("export", help="trace a model and write its per-rank SPMD program")
    _parallel_args(e)
    e.add_argument("-o", "--output", help="the .mlir file (a .json sidecar goes next to it); default stdout")
    e.add_argument("--inputs-out", metavar="PATTERN",
                   help="write every rank's arguments (parameter shards, buffers, inputs) to "
                   "PATTERN, {rank} standing for the rank: in_{rank}.safetensors for commlir-run --inputs")
    e.add_argument("--no-rank-check", action="store_true",
                   help="trace rank 0 only, without checking that the other ranks trace the same program")
    e.set_defaults(run=cmd_export)

    c = sub.add_parser("check", help="export, then compare commlir's sim with PyTorch on gloo")
    _parallel_args(c)
    c.add_argument("--pipeline", help="the commlir-opt pipeline whose results must stay bit-identical")
    c.add_argument("--no-pipeline", action="store_true", help="skip the pipeline check")
    c.add_argument("--workdir", help="keep the files (program, inputs, results) here")
    c.set_defaults(run=cmd_check)

    o = sub.add_parser("ops", help="list the aten and _c10d_functional ops the exporter lowers")
    o.set_defaults(run=cmd_ops)
    return p


def main(argv: list[str] | None = None) -> int:
    ns = parser().parse_args(argv)
    try:
        return int(ns.run(ns))
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - one line, never a traceback (unless asked for)
        if debug():
            raise
        print(f"error: {diagnostic(e, 'internal error of the exporter')} "
              "(COMMLIR_TORCH_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        return 1


__all__ = ["main", "parser"]
