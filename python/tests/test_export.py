"""The exporter on its own (no commlir binaries, no gloo): what it emits for tensor-parallel,
FSDP and 2-D programs, and what it refuses."""

from __future__ import annotations

import os
import re
import unittest

from commlir_torch.ir import ExportError
from commlir_torch.models import make_llama_block, make_llama_lm, make_mlp
from commlir_torch.program import export
from commlir_torch.trace import Parallelism, load_factory

HERE = os.path.dirname(os.path.abspath(__file__))


def spec(fn: str) -> str:
    return os.path.join(HERE, "collective_models.py") + ":" + fn


class TensorParallelMLP(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.prog = export(make_mlp, Parallelism(tp=2))
        cls.text = cls.prog.text

    def test_group_and_all_reduce(self) -> None:
        self.assertIn("coll.group @tp {size = 2 : i64}", self.text)
        self.assertRegex(self.text, r'coll\.all_reduce %\w+ \{reduce_op = "sum", group = @tp\} : \(tensor<16x64xf32>\)')
        self.assertEqual(self.text.count("coll.wait_tensor"), 1)

    def test_arguments_are_local_shards_by_name(self) -> None:
        self.assertIn("%w1_weight: tensor<128x64xf32> loc(\"w1_weight\")", self.text)
        self.assertIn("%w2_weight: tensor<64x128xf32> loc(\"w2_weight\")", self.text)
        # The row-parallel bias and the input are the same on every rank of the group.
        self.assertIn("%w2_bias: tensor<64xf32> {coll.replicated = @tp}", self.text)
        self.assertIn("%x: tensor<16x64xf32> {coll.replicated = @tp}", self.text)
        kinds = [(a["name"], a["kind"], a["fqn"]) for a in self.prog.sidecar()["args"]]
        self.assertEqual(kinds[0], ("w1_weight", "param", "w1.weight"))
        self.assertEqual(kinds[-1], ("x", "input", "x"))

    def test_bias_broadcast_is_explicit(self) -> None:
        self.assertRegex(self.text, r"compute\.broadcast %w1_bias : \(tensor<128xf32>\) -> tensor<16x128xf32>")

    def test_source_locations(self) -> None:
        locs = re.findall(r'loc\("([^"]+)":(\d+):(\d+)\)', self.text)
        self.assertTrue(locs)
        self.assertTrue(all(f.endswith("models.py") for f, _, _ in locs), locs)

    def test_rank_inputs_are_the_shards(self) -> None:
        r0, r1 = self.prog.rank_inputs(0), self.prog.rank_inputs(1)
        self.assertEqual(tuple(r0["w1_weight"].shape), (128, 64))
        self.assertFalse(bool((r0["w1_weight"] == r1["w1_weight"]).all()))
        self.assertTrue(bool((r0["x"] == r1["x"]).all()))


class LlamaBlock(unittest.TestCase):
    def test_sequence_parallel_gathers_and_scatters(self) -> None:
        text = export(make_llama_block, Parallelism(tp=2, sp=True)).text
        self.assertIn("%x: tensor<2x8x64xf32>", text)  # the local half of the sequence
        self.assertEqual(text.count("coll.all_gather_into_tensor "), 2)
        self.assertEqual(text.count("coll.reduce_scatter_tensor "), 2)
        self.assertNotIn("coll.all_reduce ", text)
        for op in ("compute.rsqrt", "compute.permute", "compute.attention"):
            self.assertIn(op, text)

    def test_attention_is_one_op_unless_a_backward_is_traced(self) -> None:
        fwd = export(make_llama_block, Parallelism(tp=2)).text
        # Batch 2, 4 heads (2 per rank) of 16 positions; causal, scale 1/sqrt(head dim 16).
        self.assertRegex(
            fwd,
            r"compute\.attention %\w+, %\w+, %\w+ \{scale = 2\.5\d*e-01 : f64, causal = unit\} : "
            r"\(tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>\) -> tensor<2x2x16x16xf32>",
        )
        self.assertNotIn("compute.softmax", fwd)
        # The training step keeps the math decomposition, whose backward is elementary ops.
        bwd = export(make_llama_block, Parallelism(tp=2), backward=True).text
        self.assertNotIn("compute.attention", bwd)
        self.assertIn("compute.softmax", bwd)

    def test_fsdp_backward_reduce_scatters_every_gradient(self) -> None:
        prog = export(make_llama_block, Parallelism(fsdp=2), backward=True)
        text = prog.text
        n_params = sum(1 for a in prog.args if a.kind == "param")
        self.assertIn("func.func @train_step(", text)
        self.assertEqual(text.count("coll.all_gather_into_tensor "), n_params)
        self.assertEqual(len(re.findall(r'coll\.reduce_scatter_tensor %\S+ \{reduce_op = "avg", group = @dp\}', text)), n_params)
        self.assertEqual([o.kind for o in prog.outs], ["loss"] + ["grad"] * n_params)

    def test_2d_mesh_groups_are_families(self) -> None:
        text = export(make_llama_block, Parallelism(tp=2, fsdp=2)).text
        self.assertIn("coll.group @dp {size = 2 : i64, ranks = [array<i64: 0, 2>, array<i64: 1, 3>]}", text)
        self.assertIn("coll.group @tp {size = 2 : i64}", text)


class Refusals(unittest.TestCase):
    def test_unsupported_op_names_the_op_and_node(self) -> None:
        with self.assertRaises(ExportError) as e:
            export(load_factory(spec("make_unsupported")), Parallelism(tp=2))
        msg = str(e.exception)
        self.assertIn("aten.erf.default", msg)
        self.assertIn("node 'erf'", msg)
        self.assertIn("collective_models.py:", msg)

    def test_rank_dependent_program(self) -> None:
        with self.assertRaises(ExportError) as e:
            export(load_factory(spec("make_rank_dependent")), Parallelism(tp=2))
        self.assertIn("depends on the rank", str(e.exception))

    def test_all_to_all_splits_from_every_rank(self) -> None:
        text = export(load_factory(spec("make_collectives")), Parallelism(tp=4)).text
        self.assertIn(
            "input_split_sizes = [array<i64: 2, 3, 1, 2>, array<i64: 2, 2, 3, 1>, "
            "array<i64: 1, 2, 2, 3>, array<i64: 3, 1, 2, 2>]",
            text,
        )

    def test_rank_dependent_constants_become_all_slices(self) -> None:
        # The vocabulary-parallel embedding subtracts each rank's vocabulary offset.
        text = export(make_llama_lm, Parallelism(tp=2)).text
        self.assertRegex(text, r"compute\.concat %rank0_cst, %rank1_cst \{dim = 0 : i64\}")
        self.assertRegex(text, r"coll\.all_slice %per_rank_cst \{dim = 0 : i64, group = @tp\}")

    def test_sp_without_tp(self) -> None:
        with self.assertRaises(ExportError):
            Parallelism(sp=True)


if __name__ == "__main__":
    unittest.main()
