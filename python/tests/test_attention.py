"""Fused attention through the exporter: ``compute.attention`` and
``compute.attention_backward``.

- Against PyTorch (like ``test_against_pytorch``): small attention models run on gloo and,
  exported, on commlir's sim backend; forward-only and training steps (gradients compared),
  causal and not, odd sequence lengths, grouped kv heads by ``enable_gqa`` and by torchtitan's
  ``repeat_kv``, cross-attention, and a masked model that keeps the math attention.
- What the exporter emits: one op each way and no score matrix (no ``compute.softmax``).
- The CUDA kernels' graphs (flash, efficient, cuDNN, as a GPU capture records them, with
  their log-sum-exp layouts), built by hand with meta tensors, lowered and run on the sim
  against PyTorch's CPU attention and its autograd.

Needs the commlir binaries, as ``test_against_pytorch`` does."""

from __future__ import annotations

import os
import tempfile
import unittest
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F
from safetensors.torch import save_file

from commlir_torch.check import DEFAULT_PIPELINE, TOLERANCE, check, rel_error, run_sim
from commlir_torch.compile import CommlirBackend
from commlir_torch.export import Arg, Out, lower_graph
from commlir_torch.groups import GroupTable
from commlir_torch.ir import TensorType
from commlir_torch.program import export
from commlir_torch.trace import Parallelism, load_factory

HERE = os.path.dirname(os.path.abspath(__file__))
aten = torch.ops.aten


def spec(fn: str) -> str:
    return os.path.join(HERE, "attention_models.py") + ":" + fn


def attention_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "compute.attention" in line]


class AgainstPyTorch(unittest.TestCase):
    tmp: tempfile.TemporaryDirectory[str]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory(prefix="commlir-attention-")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()

    def check_model(self, fn: str, par: Parallelism = Parallelism(), *, backward: bool = False) -> str:
        """Checks the model (sim against gloo, then the pipeline bit-identical); returns the
        exported text."""
        prog = export(load_factory(spec(fn)), par, backward=backward, model_spec=spec(fn))
        workdir = os.path.join(self.tmp.name, self.id().rsplit(".", 1)[-1])
        report = check(prog, workdir, pipeline=DEFAULT_PIPELINE)
        self.assertTrue(report.errors, "nothing was compared")
        self.assertTrue(report.ok, "\n" + report.summary())
        self.assertTrue(report.pipeline_identical)
        return prog.text

    def assert_fused(self, text: str, backward: bool) -> None:
        self.assertNotIn("compute.softmax", text)
        self.assertEqual(text.count("compute.attention "), 1, text)
        self.assertEqual(text.count("compute.attention_backward "), 1 if backward else 0, text)

    def test_gqa_causal_forward(self) -> None:
        text = self.check_model("make_gqa_causal")
        self.assert_fused(text, backward=False)
        # 6 query heads of 13 positions over 2 kv heads, head dim 4.
        self.assertIn("(tensor<2x6x13x4xf32>, tensor<2x2x13x4xf32>, tensor<2x2x13x4xf32>) -> tensor<2x6x13x4xf32>", text)

    def test_gqa_causal_training(self) -> None:
        text = self.check_model("make_gqa_causal", backward=True)
        self.assert_fused(text, backward=True)
        (bwd,) = [line for line in attention_lines(text) if "attention_backward" in line]
        self.assertIn("-> (tensor<2x6x13x4xf32>, tensor<2x2x13x4xf32>, tensor<2x2x13x4xf32>)", bwd)
        self.assertIn("causal", bwd)

    def test_gqa_full_forward(self) -> None:
        self.assert_fused(self.check_model("make_gqa_full"), backward=False)

    def test_gqa_full_training_fsdp2(self) -> None:
        text = self.check_model("make_gqa_full", Parallelism(fsdp=2), backward=True)
        self.assert_fused(text, backward=True)
        self.assertRegex(text, r"scale = 2\.99999\d*e-01 : f64")
        self.assertNotIn("causal", "".join(attention_lines(text)))

    def test_repeat_kv_forward(self) -> None:
        text = self.check_model("make_repeat_kv")
        self.assert_fused(text, backward=False)
        # The repetition is folded into grouped heads: 2 kv heads reach the attention, and
        # the repeated b×s×h×n×d tensor is not computed.
        self.assertIn("tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>) -> tensor<2x6x5x4xf32>", text)
        self.assertNotIn("x2x3x4xf32>", text)

    def test_repeat_kv_training(self) -> None:
        text = self.check_model("make_repeat_kv", backward=True)
        self.assert_fused(text, backward=True)
        (bwd,) = [line for line in attention_lines(text) if "attention_backward" in line]
        self.assertIn("-> (tensor<2x6x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>)", bwd)
        # Neither the repetition nor the gradient's sum over it (both b×s×h×n×d) is left.
        self.assertNotIn("x2x3x4xf32>", text)

    def test_cross_attention_forward_and_training(self) -> None:
        self.assert_fused(self.check_model("make_cross"), backward=False)
        text = self.check_model("make_cross", backward=True)
        self.assert_fused(text, backward=True)
        self.assertIn("(tensor<2x6x5x4xf32>, tensor<2x6x7x4xf32>, tensor<2x6x7x4xf32>)", text)

    def test_masked_keeps_the_math_attention(self) -> None:
        for backward in (False, True):
            text = self.check_model("make_masked", backward=backward)
            self.assertNotIn("compute.attention", text)
            self.assertIn("compute.softmax", text)


class CompileBackend(unittest.TestCase):
    """The torch.compile route: attention stays fused in the captured forward graph, with
    and without gradients, and torchtitan's repeat_kv is folded in the lowered copy while the
    graph PyTorch runs stays its own."""

    def compile(self, fn: str, grad: bool) -> tuple[str, dict[str, torch.Tensor], torch.Tensor]:
        torch.manual_seed(0)
        model = load_factory(spec(fn))()
        inputs = model.example_inputs()
        backend = CommlirBackend()
        torch._dynamo.reset()
        with torch.enable_grad() if grad else torch.no_grad():
            got = torch.compile(model, backend=backend, fullgraph=True)(*inputs)
            want = model(*inputs)
        torch.testing.assert_close(got, want)
        self.assertEqual(len(backend.modules), 1, backend.modules)
        named = {name.replace(".", "_"): p.detach() for name, p in model.named_parameters()}
        named["x"] = inputs[0]
        return backend.modules[0], named, want.detach()

    def test_repeat_kv_inference(self) -> None:
        text, named, want = self.compile("make_repeat_kv", grad=False)
        self.assertIn("tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>) -> tensor<2x6x5x4xf32>", text)
        self.assertNotIn("x2x3x4xf32>", text)
        self.assertNotIn("compute.softmax", text)
        with tempfile.TemporaryDirectory() as tmp:
            mlir = os.path.join(tmp, "compiled.mlir")
            with open(mlir, "w") as fh:
                fh.write(text)
            save_file(named, os.path.join(tmp, "in_0.safetensors"))
            got = run_sim(mlir, 1, os.path.join(tmp, "in_{rank}.safetensors"), os.path.join(tmp, "out_{rank}.safetensors"))
        self.assertLessEqual(rel_error(got[0]["result0"], want), TOLERANCE[torch.float32])

    def test_training_forward_saves_the_log_sum_exp(self) -> None:
        text, _, _ = self.compile("make_gqa_causal", grad=True)
        (fwd,) = attention_lines(text)
        self.assertIn("with_lse", fwd)
        self.assertIn("-> (tensor<2x6x13x4xf32>, tensor<2x6x13xf32>)", fwd)
        self.assertNotIn("compute.softmax", text)


# ------------------------------------------------------------------- the CUDA kernels' graphs


def _meta(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(t.shape, dtype=t.dtype, device="meta")


class CudaKernels(unittest.TestCase):
    """The graphs a GPU capture records for the CUDA attention kernels, built by hand (the
    kernels' meta functions give every node its metadata), lowered, and run on the sim."""

    tmp: tempfile.TemporaryDirectory[str]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory(prefix="commlir-attention-cuda-")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()

    def graph(self, kind: str, x: dict[str, torch.Tensor], causal: bool, scale: float | None,
              lse_out: bool = False) -> fx.GraphModule:
        """forward + backward of kernel ``kind`` on placeholders q, k, v, dout; returns out,
        dq, dk, dv (and the kernel's log-sum-exp, with ``lse_out``)."""
        g = fx.Graph()
        ph = {}
        for name, t in x.items():
            ph[name] = g.placeholder(name)
            ph[name].meta["val"] = _meta(t)
        q, k, v, do = ph["q"], ph["k"], ph["v"], ph["dout"]
        mq, mk, mv, mdo = (_meta(x[n]) for n in ("q", "k", "v", "dout"))

        def call(target: Any, args: tuple[Any, ...], margs: tuple[Any, ...], kwargs: dict[str, Any]) -> fx.Node:
            n = g.call_function(target, args, kwargs)
            n.meta["val"] = target(*margs, **kwargs)
            return n

        def item(n: fx.Node, i: int) -> fx.Node:
            r = g.call_function(__import__("operator").getitem, (n, i))
            r.meta["val"] = n.meta["val"][i]
            return r

        kw = {} if scale is None else {"scale": scale}
        if kind == "flash":
            f = call(aten._scaled_dot_product_flash_attention.default, (q, k, v, 0.0, causal), (mq, mk, mv, 0.0, causal), kw)
            fv = f.meta["val"]
            out, lse, cq, ck, seed, off = item(f, 0), item(f, 1), item(f, 2), item(f, 3), item(f, 6), item(f, 7)
            b = call(
                aten._scaled_dot_product_flash_attention_backward.default,
                (do, q, k, v, out, lse, cq, ck, fv[4], fv[5], 0.0, causal, seed, off),
                (mdo, mq, mk, mv, fv[0], fv[1], fv[2], fv[3], fv[4], fv[5], 0.0, causal, fv[6], fv[7]), kw,
            )
        elif kind == "efficient":
            f = call(aten._scaled_dot_product_efficient_attention.default, (q, k, v, None, True, 0.0, causal),
                     (mq, mk, mv, None, True, 0.0, causal), kw)
            fv = f.meta["val"]
            out, lse, seed, off = item(f, 0), item(f, 1), item(f, 2), item(f, 3)
            mask = [True, True, True, False]
            b = call(
                aten._scaled_dot_product_efficient_attention_backward.default,
                (do, q, k, v, None, out, lse, seed, off, 0.0, mask, causal),
                (mdo, mq, mk, mv, None, fv[0], fv[1], fv[2], fv[3], 0.0, mask, causal), kw,
            )
        else:
            f = call(aten._scaled_dot_product_cudnn_attention.default, (q, k, v, None, True, 0.0, causal),
                     (mq, mk, mv, None, True, 0.0, causal), kw)
            fv = f.meta["val"]
            out, lse, seed, off = item(f, 0), item(f, 1), item(f, 6), item(f, 7)
            e = torch.empty(0, device="meta")
            lq, lk = fv[4], fv[5]
            b = call(
                aten._scaled_dot_product_cudnn_attention_backward.default,
                (do, q, k, v, out, lse, seed, off, None, None, None, lq, lk, 0.0, causal),
                (mdo, mq, mk, mv, fv[0], fv[1], fv[6], fv[7], e, e, e, lq, lk, 0.0, causal), kw,
            )
        results = [out, item(b, 0), item(b, 1), item(b, 2)] + ([lse] if lse_out else [])
        g.output(tuple(results))
        return fx.GraphModule(torch.nn.Module(), g)

    def lower(self, gm: fx.GraphModule, x: dict[str, torch.Tensor]) -> str:
        args = [Arg(n, "input", n, TensorType(tuple(t.shape), t.dtype)) for n, t in x.items()]
        n_out = len([n for n in gm.graph.nodes if n.op == "output"][0].args[0])
        text, _ = lower_graph(gm, args, [Out("output", str(i)) for i in range(n_out)], GroupTable(1), "step")
        return text

    def run_case(self, kind: str, dtype: torch.dtype, hkv: int, causal: bool, scale: float | None,
                 lse_out: bool = False) -> None:
        torch.manual_seed(0)
        b, h, lq, lk, d = 2, 4, 5, 7, 8
        x = {
            "q": torch.randn(b, h, lq, d).to(dtype),
            "k": torch.randn(b, hkv, lk, d).to(dtype),
            "v": torch.randn(b, hkv, lk, d).to(dtype),
            "dout": torch.randn(b, h, lq, d).to(dtype),
        }
        text = self.lower(self.graph(kind, x, causal, scale, lse_out), x)
        self.assertEqual(text.count("compute.attention "), 1, text)
        self.assertEqual(text.count("compute.attention_backward "), 1, text)
        self.assertNotIn("compute.softmax", text)
        # PyTorch's math attention and its autograd, in f64.
        q, k, v = (x[n].double().requires_grad_() for n in ("q", "k", "v"))
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=hkv != h)
        grads = torch.autograd.grad(ref, [q, k, v], x["dout"].double())
        work = os.path.join(self.tmp.name, f"{kind}_{dtype}_{hkv}_{causal}_{scale}")
        os.makedirs(work, exist_ok=True)
        mlir = os.path.join(work, "step.mlir")
        with open(mlir, "w") as fh:
            fh.write(text)
        save_file(x, os.path.join(work, "in_0.safetensors"))
        got = run_sim(mlir, 1, os.path.join(work, "in_{rank}.safetensors"), os.path.join(work, "out_{rank}.safetensors"))[0]
        tol = TOLERANCE[dtype]
        for i, (name, want) in enumerate(zip(["out", "dq", "dk", "dv"], [ref, *grads])):
            err = rel_error(got[f"result{i}"].double(), want.detach())
            self.assertLessEqual(err, tol, f"{kind} {dtype} heads {h}/{hkv} causal={causal}: {name} off by {err:.3g}")
        if lse_out:
            # The kernel's layout of the log-sum-exp: rows, then (efficient) +inf padding.
            s = (x["q"].double() @ x["k"].double().repeat_interleave(h // hkv, 1).transpose(-1, -2))
            s = s * (scale if scale is not None else d**-0.5)
            if causal:
                s = s.masked_fill(~torch.ones(lq, lk, dtype=torch.bool).tril(), float("-inf"))
            lse = got["result4"].reshape(b, h, -1)
            self.assertLessEqual(rel_error(lse[..., :lq].double(), torch.logsumexp(s, -1)), tol)
            self.assertTrue(bool((lse[..., lq:] == float("inf")).all()))

    def test_flash(self) -> None:
        for hkv, causal in ((4, True), (2, False), (1, True)):
            self.run_case("flash", torch.float32, hkv, causal, None)
        self.run_case("flash", torch.bfloat16, 2, True, 0.2)

    def test_efficient(self) -> None:
        # The efficient kernel takes no grouped heads (SDPA sends those elsewhere).
        for causal in (True, False):
            self.run_case("efficient", torch.float32, 4, causal, None)

    def test_cudnn(self) -> None:
        for hkv, causal in ((4, False), (2, True)):
            self.run_case("cudnn", torch.float32, hkv, causal, 0.4)

    def test_log_sum_exp_layouts(self) -> None:
        x = {
            "q": torch.randn(1, 2, 5, 8),
            "k": torch.randn(1, 2, 5, 8),
            "v": torch.randn(1, 2, 5, 8),
            "dout": torch.randn(1, 2, 5, 8),
        }
        # cuDNN's B×H×L×1 is ours reshaped; flash's is ours.
        text = self.lower(self.graph("cudnn", x, True, None, lse_out=True), x)
        self.assertIn("tensor<1x2x5xf32>) -> tensor<1x2x5x1xf32>", text)
        text = self.lower(self.graph("flash", x, True, None, lse_out=True), x)
        self.assertRegex(text, r"return .* : .*tensor<1x2x5xf32>\n")
        # The efficient kernel's is padded to 32 rows with +inf (as that kernel writes them);
        # its backward reads the rows it has.
        text = self.lower(self.graph("efficient", x, True, None, lse_out=True), x)
        self.assertRegex(text, r"compute\.fill \{value = 0x7FF0000000000000 : f64\} : tensor<1x2x27xf32>")
        self.assertRegex(text, r"compute\.concat .* -> tensor<1x2x32xf32>")
        self.assertRegex(text, r"compute\.slice .*\{dim = 2 : i64, start = 0 : i64, size = 5 : i64\} .* -> tensor<1x2x5xf32>")

    def test_efficient_log_sum_exp_read_elsewhere_runs(self) -> None:
        self.run_case("efficient", torch.float32, 4, True, None, lse_out=True)


if __name__ == "__main__":
    unittest.main()
