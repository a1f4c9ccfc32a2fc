"""A ``torch.compile`` backend that lowers what it captures to commlir.

``aot_autograd`` with the core-aten decompositions turns each Dynamo graph into a graph of
aten and ``_c10d_functional`` ops on plain tensors (DTensor subclasses flattened to their local
tensors); the backend lowers that forward graph with :func:`commlir_torch.export.lower_graph`,
keeps the module text, and runs the graph itself unchanged, so the compiled model still
computes its results::

    backend = CommlirBackend(mesh)
    with torch.no_grad():
        torch.compile(model, backend=backend, fullgraph=True)(x)
    print(backend.modules[0])

Under ``torch.no_grad()`` the forward graph is the inference program; with gradients enabled
its extra results are the activations saved for the backward graph. Argument names come from
Dynamo's placeholders (``L_self_modules_up_parameters_weight_`` → ``up_weight``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.fx as fx
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch.distributed.device_mesh import DeviceMesh

from .export import Arg, Out, lower_graph
from .groups import GroupTable
from .ir import TensorType, sanitize
from .aten import fold_repeat_kv
from .trace import decompositions

_DYNAMO_PREFIX = re.compile(r"^l_(self_)?", re.IGNORECASE)


def arg_name(placeholder: str) -> str:
    """A readable argument name from a Dynamo placeholder name."""
    s = _DYNAMO_PREFIX.sub("", placeholder)
    s = s.replace("modules_", "").replace("_parameters_", "_").replace("_buffers_", "_")
    return sanitize(s.strip("_") or placeholder)


class CommlirBackend:
    """Collects the commlir module of every graph ``torch.compile`` hands it."""

    def __init__(self, mesh: DeviceMesh | None = None, func_name: str = "forward") -> None:
        self.mesh = mesh
        self.func_name = func_name
        # Made here: the compiler callbacks run under the tracer's fake mode, where the mesh's
        # rank tensor cannot be built.
        self.world = dist.get_world_size() if dist.is_initialized() else 1
        self.groups = GroupTable.from_mesh(mesh, self.world)
        self.modules: list[str] = []

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        names = [arg_name(n.name) for n in gm.graph.nodes if n.op == "placeholder"]

        def fw_compiler(fgm: fx.GraphModule, fargs: list[Any]) -> Callable[..., Any]:
            self.modules.append(self._lower(fgm, names))
            return make_boxed_func(fgm.forward)

        # Attention stays one op, with a backward traced too (aot_autograd builds a joint
        # graph exactly when grad is on and an input requires it): the forward graph then
        # returns its log-sum-exp, saved for the backward, as compute.attention's second
        # result.
        table = decompositions()
        return aot_autograd(fw_compiler=fw_compiler, decompositions=table)(gm, example_inputs)

    def _lower(self, fgm: fx.GraphModule, names: list[str]) -> str:
        fgm = _fold_repeat_kv_copy(fgm)
        groups = GroupTable(self.world, dict(self.groups.by_name), dict(self.groups.used))
        args = []
        placeholders = [n for n in fgm.graph.nodes if n.op == "placeholder"]
        for i, node in enumerate(placeholders):
            val = node.meta["val"]
            name = names[i] if len(names) == len(placeholders) else node.name
            args.append(Arg(name, "input", name, TensorType(tuple(int(d) for d in val.shape), val.dtype)))
        out_node = next(n for n in fgm.graph.nodes if n.op == "output")
        flat = out_node.args[0] if isinstance(out_node.args[0], (list, tuple)) else [out_node.args[0]]
        outs = [Out("output", str(i)) for i in range(len(flat))]
        text, _ = lower_graph(fgm, args, outs, groups, self.func_name)
        return text


def _fold_repeat_kv_copy(fgm: fx.GraphModule) -> fx.GraphModule:
    """``fgm`` with torchtitan's ``repeat_kv`` folded into grouped-query attention
    (``aten.fold_repeat_kv``), in a copy: the graph the backend hands back, and PyTorch runs,
    stays as captured (not every CUDA kernel takes grouped kv heads)."""
    graph = fx.Graph()
    graph.output(graph.graph_copy(fgm.graph, {}))
    copy = fx.GraphModule(fgm, graph)
    return copy if fold_repeat_kv(copy) else fgm


__all__ = ["CommlirBackend", "arg_name"]
