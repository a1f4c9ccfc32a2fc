"""``python -m commlir_torch``: export writes the program, the sidecar and every rank's
inputs, which commlir-run reads by name; errors are one line and exit code 1; and the check
catches a program that computes something else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest

from commlir_torch.check import check, run_sim, tool
from commlir_torch.models import make_mlp
from commlir_torch.program import export
from commlir_torch.trace import Parallelism, load_factory
from safetensors.torch import load_file

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(PYTHON_DIR)


def cli(*args: str, cwd: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    return subprocess.run([sys.executable, "-m", "commlir_torch", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


class CommandLine(unittest.TestCase):
    def test_export_then_run(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            model = os.path.join(REPO, "examples", "pytorch", "mlp.py") + ":make_model"
            p = cli("export", model, "--tp", "2", "--sp", "-o", "mlp.mlir", "--inputs-out", "in_{rank}.safetensors", cwd=tmp)
            self.assertEqual(p.returncode, 0, p.stderr)
            for f in ("mlp.mlir", "mlp.json", "in_0.safetensors", "in_1.safetensors"):
                self.assertTrue(os.path.exists(os.path.join(tmp, f)), f)
            with open(os.path.join(tmp, "mlp.json")) as f:
                side = json.load(f)
            self.assertEqual(side["world_size"], 2)
            self.assertEqual([a["name"] for a in side["args"]], ["up_weight", "up_bias", "down_weight", "down_bias", "x"])
            self.assertEqual(side["args"][0]["placements"], ["S(0)"])
            out = run_sim(os.path.join(tmp, "mlp.mlir"), 2, os.path.join(tmp, "in_{rank}.safetensors"),
                          os.path.join(tmp, "out_{rank}.safetensors"))
            self.assertEqual(tuple(out[0]["result0"].shape), (16, 256))  # the local half of the tokens

    def test_errors_are_one_line(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            p = cli("export", "missing.py:make", "--tp", "2", cwd=tmp)
            self.assertEqual(p.returncode, 1)
            self.assertEqual(p.stderr.strip(), "error: model file 'missing.py' does not exist")
            p = cli("export", "commlir_torch.models:make_mlp", "--mesh", "2by2", cwd=tmp)
            self.assertEqual(p.returncode, 1)
            self.assertIn("is not DPxTP", p.stderr)

    def test_refusals_are_one_diagnostic_not_a_traceback(self) -> None:
        # `if h.sum() > 0:` used to end in a 106-line PyTorch traceback.
        model = os.path.join(PYTHON_DIR, "tests", "refusal_models.py") + ":make_branch"
        p = cli("export", model, "--tp", "2", cwd=PYTHON_DIR)
        self.assertEqual(p.returncode, 1)
        self.assertNotIn("Traceback", p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 2, p.stderr)
        self.assertRegex(lines[0], r"^error: tests/refusal_models\.py:\d+: data-dependent control flow")
        self.assertIn("if h.sum() > 0:", lines[1])

    def test_ops_lists_the_table(self) -> None:
        p = cli("ops", cwd=PYTHON_DIR)
        self.assertEqual(p.returncode, 0)
        for op in ("aten.addmm.default", "_c10d_functional.all_to_all_single.default"):
            self.assertIn(op, p.stdout.split())


class CheckCatchesWrongPrograms(unittest.TestCase):
    def test_a_wrong_reduction_is_a_mismatch(self) -> None:
        prog = export(make_mlp, Parallelism(tp=2))
        prog.text = prog.text.replace('reduce_op = "sum"', 'reduce_op = "max"')
        with tempfile.TemporaryDirectory() as tmp:
            report = check(prog, tmp, pipeline=None)
        self.assertFalse(report.ok)
        self.assertEqual({m.rank for m in report.mismatches}, {0, 1})
        self.assertIn("MISMATCH", report.summary())

    def test_wrong_rank_order_and_reduction_are_caught(self) -> None:
        # Every rank has its own data, so a collective that takes the ranks in another order,
        # or reduces with another op, computes something else than PyTorch.
        model = os.path.join(PYTHON_DIR, "tests", "collective_models.py") + ":build_collectives"
        prog = export(load_factory(model), Parallelism(ranks=4), model_spec=model)
        with tempfile.TemporaryDirectory() as tmp:
            good = check(prog, os.path.join(tmp, "good"), pipeline=None)
            self.assertTrue(good.ok, good.summary())
            reference = [load_file(os.path.join(tmp, "good", f"ref_{r}.safetensors")) for r in range(4)]
            text = prog.text
            # A group whose first two ranks are swapped.
            prog.text = text.replace("coll.group @world {size = 4 : i64}",
                                     "coll.group @world {size = 4 : i64, ranks = array<i64: 1, 0, 2, 3>}")
            swapped = check(prog, os.path.join(tmp, "swapped"), pipeline=None, reference=reference)
            # The all-reduce with min made a max.
            prog.text = text.replace('coll.all_reduce %mm {reduce_op = "min"', 'coll.all_reduce %mm {reduce_op = "max"', 1)
            self.assertNotEqual(prog.text, text)
            wrong_op = check(prog, os.path.join(tmp, "wrong_op"), pipeline=None, reference=reference)
        self.assertFalse(swapped.ok)
        self.assertIn("result9 (output 9)", {m.result for m in swapped.mismatches})  # the dim-1 all-gather
        self.assertFalse(wrong_op.ok)
        self.assertEqual({m.result for m in wrong_op.mismatches}, {"result3 (output 3)"})

    def test_tools_are_found(self) -> None:
        self.assertTrue(os.access(tool("commlir-run"), os.X_OK))
        self.assertTrue(os.access(tool("commlir-opt"), os.X_OK))


if __name__ == "__main__":
    unittest.main()
