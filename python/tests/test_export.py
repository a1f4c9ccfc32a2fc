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

    def test_attention_is_one_op_each_way(self) -> None:
        fwd = export(make_llama_block, Parallelism(tp=2)).text
        # Batch 2, 4 heads (2 per rank) of 16 positions; causal, scale 1/sqrt(head dim 16).
        self.assertRegex(
            fwd,
            r"compute\.attention %\w+, %\w+, %\w+ \{scale = 2\.5\d*e-01 : f64, causal = unit\} : "
            r"\(tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>\) -> tensor<2x2x16x16xf32>",
        )
        self.assertNotIn("compute.softmax", fwd)
        # The training step keeps it fused too: the forward returns its log-sum-exp, which
        # the backward reads; no score matrix (no softmax) anywhere.
        bwd = export(make_llama_block, Parallelism(tp=2), backward=True).text
        self.assertRegex(
            bwd,
            r"%(\w+), %(\w+) = compute\.attention %\w+, %\w+, %\w+ \{scale = 2\.5\d*e-01 : f64, causal = unit, "
            r"with_lse = unit\} : \(tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>\) -> "
            r"\(tensor<2x2x16x16xf32>, tensor<2x2x16xf32>\)",
        )
        self.assertEqual(bwd.count("compute.attention_backward "), 1)
        self.assertNotIn("compute.softmax", bwd)

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

    def refusal(self, fn: str, par: Parallelism | None = None) -> str:
        with self.assertRaises(ExportError) as e:
            export(load_factory(os.path.join(HERE, "refusal_models.py") + ":" + fn), par or Parallelism(tp=2))
        return str(e.exception)

    def assert_at(self, msg: str, marker: str) -> None:
        """``msg`` starts with refusal_models.py:LINE, LINE being the line with ``marker``,
        and shows that line; it is one diagnostic, not a traceback."""
        path = os.path.join(HERE, "refusal_models.py")
        with open(path) as f:
            line = next(i for i, text in enumerate(f, 1) if marker in text)
        self.assertRegex(msg.splitlines()[0], rf"^\S*refusal_models\.py:{line}: ")
        self.assertIn(marker, msg.splitlines()[-1])
        self.assertLessEqual(len(msg.splitlines()), 2, msg)
        self.assertNotIn("Traceback", msg)

    def test_data_dependent_control_flow(self) -> None:
        msg = self.refusal("make_branch")
        self.assert_at(msg, "# BRANCH")
        self.assertIn("data-dependent control flow", msg)

    def test_data_dependent_shape(self) -> None:
        msg = self.refusal("make_mask")
        self.assert_at(msg, "# MASK")
        self.assertIn("data-dependent shape", msg)

    def test_unsupported_dtype(self) -> None:
        msg = self.refusal("make_float8")
        self.assert_at(msg, "# FLOAT8")
        self.assertIn("unsupported dtype float8_e4m3fn", msg)
        msg = self.refusal("make_complex_parameter")
        self.assertRegex(msg, r"refusal_models\.py:\d+: parameter 'phase' is complex64: unsupported dtype")

    def test_shape_errors_name_the_parameter(self) -> None:
        msg = self.refusal("make_uneven_tp")
        self.assertIn("parameter 'up.weight' of shape (25, 8): dim 0 does not split 2 ways over @tp", msg)
        self.assertIn("13, 12", msg)
        self.assertRegex(msg, r"refusal_models\.py:\d+: ")

    def test_rank_dependent_program(self) -> None:
        with self.assertRaises(ExportError) as e:
            export(load_factory(spec("make_rank_dependent")), Parallelism(tp=2))
        self.assertIn("depends on the rank", str(e.exception))

    def test_all_to_all_splits_from_every_rank(self) -> None:
        text = export(load_factory(spec("build_collectives")), Parallelism(ranks=4)).text
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


class ExampleInputs(unittest.TestCase):
    def test_example_inputs_run_on_the_ranks_process_group(self) -> None:
        # example_inputs() asks dist.get_world_size(): it runs on the fake process group of the
        # rank whose inputs it makes, when exporting and when the inputs are written.
        prog = export(load_factory(os.path.join(HERE, "refusal_models.py") + ":make_rank_inputs"), Parallelism(tp=2))
        self.assertEqual(float(prog.rank_inputs(1)["x"][0, 0]), 2.0)


class Lowerings(unittest.TestCase):
    def test_dead_in_place_chains_are_dropped(self) -> None:
        # nn.RMSNorm under SP: DTensor's rule leaves `empty_strided` + `add_` nobody reads.
        text = export(load_factory(os.path.join(HERE, "op_models.py") + ":make_rmsnorm_mlp"),
                      Parallelism(tp=2, sp=True)).text
        self.assertNotIn("empty", text)
        # One add of the norm's eps: the live one (the dead chain would be a second, into zeros).
        self.assertEqual(text.count("value = 1.19209289550781250e-07"), 1)
        self.assertEqual(text.count("coll.all_gather_into_tensor "), 1)

    def test_complex_numbers_are_real_pairs(self) -> None:
        text = export(load_factory(os.path.join(HERE, "op_models.py") + ":make_complex_rope"), Parallelism(tp=2)).text
        self.assertNotRegex(text, r"complex\d|xc\d")  # no complex types
        # polar in the forward: cos and sin of the angles; view_as_real: a concat of the parts.
        self.assertIn("compute.cos", text)
        self.assertIn("compute.sin", text)
        self.assertRegex(text, r"compute\.concat %\S+, %\S+ \{dim = 4 : i64\} : \(tensor<2x16x2x8x1xf32>")

    def test_uneven_fsdp_parameters_are_padded(self) -> None:
        prog = export(load_factory(os.path.join(HERE, "op_models.py") + ":make_uneven_mlp"), Parallelism(fsdp=2),
                      backward=True)
        self.assertIn("%a_weight: tensor<13x192xf32>", prog.text)
        self.assertRegex(prog.text, r"compute\.slice %\S+ \{dim = 0 : i64, start = 0 : i64, size = 25 : i64\} : "
                                    r"\(tensor<26x192xf32>\)")
        r0, r1 = prog.rank_inputs(0)["a_weight"], prog.rank_inputs(1)["a_weight"]
        self.assertEqual(tuple(r1.shape), (13, 192))
        self.assertEqual(float(r1[12].abs().sum()), 0.0)  # FSDP2's padding row
        self.assertGreater(float(r0[12].abs().sum()), 0.0)


if __name__ == "__main__":
    unittest.main()
