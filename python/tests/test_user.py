"""Models and training steps that the user's own code parallelized (``--ranks N``): a
torchtitan-style script (its ``parallelize_llama``: torchtitan's TP/SP plan and FSDP2
wrapping, ``nn.RMSNorm``, complex RoPE, its training step), FSDP2 with a parameter that does
not split evenly, and a tensor-parallel forward, each exported as written and checked
against the same script run on gloo (model on gloo vs exported program on the sim)."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import unittest

from commlir_torch.check import check
from commlir_torch.ir import ExportError
from commlir_torch.program import Program, export
from commlir_torch.trace import Parallelism, load_factory

HERE = os.path.dirname(os.path.abspath(__file__))


def spec(file: str, fn: str) -> str:
    return os.path.join(HERE, file) + ":" + fn


class UserParallelized(unittest.TestCase):
    tmp: tempfile.TemporaryDirectory[str]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory(prefix="commlir-user-")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()

    def export_and_check(self, s: str, ranks: int, backward: bool = False) -> Program:
        prog = export(load_factory(s), Parallelism(ranks=ranks), backward=backward, model_spec=s)
        workdir = os.path.join(self.tmp.name, self.id().rsplit(".", 1)[-1])
        report = check(prog, workdir)
        self.assertTrue(report.errors, "nothing was compared")
        self.assertTrue(report.ok, "\n" + report.summary())
        return prog

    def test_torchtitan_llama_2d_training_step(self) -> None:
        # torchtitan's own plans and wrapping on a (dp_shard, tp) mesh of 4 ranks; the
        # training step as torchtitan writes it. Nothing exporter-specific in the script.
        s = spec("titan_llama.py", "build")
        titan_llama = sys.modules[load_factory(s).__module__]
        prog = self.export_and_check(s, 4)
        text = prog.text
        self.assertIn("func.func @train_step(", text)
        self.assertIn("coll.group @dp_shard {size = 2 : i64, ranks = [array<i64: 0, 2>, array<i64: 1, 3>]}", text)
        self.assertIn("coll.group @tp {size = 2 : i64}", text)
        self.assertNotRegex(text, r"complex\d|xc\d")  # no complex types
        self.assertIn("%freqs_cis: tensor<32x8x2xf32>", text)  # complex64 (32, 8) as real pairs
        # Every parameter is FSDP-sharded: one all-gather and one reduce-scatter each.
        n_params = sum(1 for a in prog.args if a.kind == "param")
        self.assertEqual(len(re.findall(r"coll\.all_gather_into_tensor %\S+ \{group = @dp_shard\}", text)), n_params)
        self.assertEqual(len(re.findall(r'reduce_op = "avg", group = @dp_shard', text)), n_params)
        self.assertEqual([o.kind for o in prog.outs], ["loss"] + ["grad"] * n_params)
        for attr in ("example_inputs", "tp_plan", "fsdp_units"):
            self.assertFalse(any(hasattr(m, attr) for m in titan_llama.Transformer(titan_llama.ModelArgs()).modules()))

    def test_torchtitan_llama_bf16_mixed_precision(self) -> None:
        # MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=f32): parameters cast before the
        # all-gather, gradients reduced in f32; the tolerance follows the computation.
        prog = self.export_and_check(spec("titan_llama.py", "build_bf16"), 4)
        self.assertRegex(prog.text, r"coll\.all_gather_into_tensor %\S+ \{group = @dp_shard\} : \(tensor<\d+x\d+xbf16>\)")
        self.assertRegex(prog.text, r'coll\.reduce_scatter_tensor %\S+ \{reduce_op = "avg", group = @dp_shard\} : \(tensor<\d+x\d+xf32>\)')

    def test_torchtitan_llama_loss_parallel(self) -> None:
        # torchtitan's default: the output sharded over the vocabulary and the cross-entropy
        # under loss_parallel() (DTensor's gather of the target logits and its index_put
        # of the gradient, lowered as one-hot products).
        prog = self.export_and_check(spec("titan_llama.py", "build_loss_parallel"), 4)
        self.assertEqual(prog.outs[0].kind, "loss")

    def test_fully_shard_uneven_parameter(self) -> None:
        # out.weight is (25, 64) over 2 ranks: FSDP2's padded 13-row shards; the gradient
        # results are compared with FSDP2's unpadded 13 and 12 rows.
        prog = self.export_and_check(spec("user_models.py", "build_fsdp"), 2)
        self.assertIn("%out_weight: tensor<13x64xf32>", prog.text)
        side = prog.sidecar()
        out_arg = next(a for a in side["args"] if a["name"] == "out_weight")
        self.assertEqual((out_arg["fsdp_dim"], out_arg["fsdp_valid"]), (0, [13, 12]))
        grad = next(r for r in side["results"] if r["kind"] == "grad" and r["fqn"] == "out.weight")
        self.assertEqual(grad["fsdp_valid"], [13, 12])

    def test_sequence_parallel_and_fsdp_2d(self) -> None:
        # nn.RMSNorm under the user's SequenceParallel, FSDP2 over the outer mesh dimension.
        prog = self.export_and_check(spec("user_models.py", "build_2d"), 4)
        self.assertIn("coll.group @dp {size = 2 : i64, ranks = [array<i64: 0, 2>, array<i64: 1, 3>]}", prog.text)
        self.assertIn("{coll.replicated = @tp}", prog.text)  # the norm weights (Replicate over tp)

    def test_hsdp(self) -> None:
        # Gradients reduce-scattered over the shard dimension, then all-reduced over the
        # replicate one.
        prog = self.export_and_check(spec("user_models.py", "build_hsdp"), 4)
        self.assertRegex(prog.text, r'coll\.all_reduce %\S+ \{reduce_op = "avg", group = @replicate\}')
        self.assertRegex(prog.text, r'coll\.reduce_scatter_tensor %\S+ \{reduce_op = "avg", group = @shard\}')

    def test_fsdp_shard_placement_fn_dim1(self) -> None:
        prog = self.export_and_check(spec("user_models.py", "build_fsdp_dim1"), 2)
        self.assertIn("%emb_weight: tensor<64x12xf32>", prog.text)  # (64, 24) sharded on dim 1

    def test_flattened_mesh_dimension(self) -> None:
        prog = self.export_and_check(spec("user_models.py", "build_flattened"), 4)
        self.assertIn("coll.group @dp {size = 4 : i64}", prog.text)

    def test_tensor_parallel_forward(self) -> None:
        prog = self.export_and_check(spec("user_models.py", "build_tp_forward"), 2)
        self.assertIn("func.func @forward(", prog.text)
        self.assertEqual(prog.text.count("coll.all_reduce "), 2)

    def test_cli_ranks_writes_program_and_inputs(self) -> None:
        from commlir_torch.cli import main

        out = os.path.join(self.tmp.name, "fsdp.mlir")
        rc = main(["export", spec("user_models.py", "build_fsdp"), "--ranks", "2", "-o", out,
                   "--inputs-out", os.path.join(self.tmp.name, "fsdp_in_{rank}.safetensors")])
        self.assertEqual(rc, 0)
        with open(os.path.splitext(out)[0] + ".json") as f:
            side = json.load(f)
        self.assertEqual((side["ranks"], side["function"]), (2, "train_step"))
        self.assertEqual(side["groups"], {"dp": [[0, 1]]})
        self.assertTrue(os.path.exists(os.path.join(self.tmp.name, "fsdp_in_1.safetensors")))

    def test_ranks_excludes_the_exporters_parallelism(self) -> None:
        with self.assertRaises(ExportError) as e:
            Parallelism(ranks=2, tp=2)
        self.assertIn("--ranks N exports a model that parallelizes itself", str(e.exception))


if __name__ == "__main__":
    unittest.main()
