"""The torch.compile route: the graph an aot_autograd backend captures, lowered, is the same
program as the make_fx export (same arguments by name, same results on the sim)."""

from __future__ import annotations

import os
import sys
import tempfile
import unittest

import torch
import torch.distributed as dist
from safetensors.torch import load_file
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import parallelize_module
from torch.testing._internal.distributed.fake_pg import FakeStore

from commlir_torch.check import run_sim
from commlir_torch.compile import CommlirBackend, arg_name
from commlir_torch.models import make_mlp
from commlir_torch.program import export
from commlir_torch.trace import Parallelism


def compiled_module(tp: int) -> str:
    hook = sys.excepthook
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=tp)
    try:
        mesh = init_device_mesh("cpu", (tp,), mesh_dim_names=("tp",))
        torch.manual_seed(0)
        model = make_mlp()
        parallelize_module(model, mesh, model.tp_plan())
        backend = CommlirBackend(mesh)
        torch._dynamo.reset()
        with torch.no_grad():
            torch.compile(model, backend=backend, fullgraph=True)(torch.randn(16, 64))
        assert len(backend.modules) == 1, backend.modules
        return backend.modules[0]
    finally:
        dist.destroy_process_group()
        sys.excepthook = hook


class CompileBackend(unittest.TestCase):
    def test_argument_names(self) -> None:
        self.assertEqual(arg_name("L_self_modules_w1_parameters_weight_"), "w1_weight")
        self.assertEqual(arg_name("l_x_"), "x")

    def test_same_program_as_make_fx(self) -> None:
        text = compiled_module(2)
        self.assertIn('coll.all_reduce', text)
        self.assertIn("%w1_weight: tensor<128x64xf32>", text)
        prog = export(make_mlp, Parallelism(tp=2))
        with tempfile.TemporaryDirectory() as tmp:
            compiled = os.path.join(tmp, "compiled.mlir")
            with open(compiled, "w") as f:
                f.write(text)
            traced = os.path.join(tmp, "traced.mlir")
            prog.write(traced)
            inputs = os.path.join(tmp, "in_{rank}.safetensors")
            prog.write_inputs(inputs)
            a = run_sim(compiled, 2, inputs, os.path.join(tmp, "a_{rank}.safetensors"))
            b = run_sim(traced, 2, inputs, os.path.join(tmp, "b_{rank}.safetensors"))
            for r in range(2):
                self.assertTrue(torch.equal(a[r]["result0"], b[r]["result0"]))
            self.assertTrue(torch.equal(a[0]["result0"], load_file(os.path.join(tmp, "b_0.safetensors"))["result0"]))


if __name__ == "__main__":
    unittest.main()
