"""FX graph → commlir module text.

:func:`lower_graph` walks a graph of aten and ``_c10d_functional`` ops (from ``make_fx`` or an
``aot_autograd`` backend) in order and emits one ``func.func``: placeholders become named
arguments, every node the ops of its table entry (aten.py, collectives.py), the output node a
``return``. A node without a table entry is an error naming the op and the node; nothing is
dropped silently. Each op carries the user source line its node came from as
``loc("file":line:col)``."""

from __future__ import annotations

import linecache
import os
import re
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from . import aten as aten_table
from . import collectives
from .groups import GroupTable
from .ir import Emitter, ExportError, TensorType, Value, fmt_str

_TORCH_DIR = os.path.dirname(torch.__file__)
_OWN_DIR = os.path.dirname(__file__)
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


@dataclass
class Arg:
    """A function argument: a parameter, buffer, model input or lifted constant."""

    name: str
    kind: str  # "param" | "buffer" | "input" | "const"
    fqn: str
    type: TensorType
    replicated: str | None = None  # the group symbol it is identical across, if any


@dataclass
class Out:
    """A function result: a model output, the loss, or a parameter's gradient."""

    kind: str  # "output" | "loss" | "grad"
    fqn: str


@dataclass
class RankTables:
    """What differs between ranks, gathered by tracing each of them (program.py): the split
    sizes of every all-to-all (rank-major, ``None`` for one without splits), and the values of
    the ``compute.fill`` ops whose constant depends on the rank (by the fill's index in the
    order of emission, one value per global rank)."""

    a2a: list[tuple[list[list[int]], list[list[int]]] | None] | None = None
    fills: dict[int, list[float]] = field(default_factory=dict)
    # The element of a split each rank takes (by the getitem's index among getitems of
    # splits): DTensor's Replicate → Shard keeps "my chunk", a coll.all_slice.
    picks: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class Lowering:
    """The state of one graph's lowering: values by node, the emitter, the groups."""

    groups: GroupTable
    em: Emitter = field(default_factory=Emitter)
    env: dict[fx.Node, Any] = field(default_factory=dict)
    view_nodes: set[fx.Node] = field(default_factory=set)
    consts: dict[str, torch.Tensor] = field(default_factory=dict)
    a2a_local: list[tuple[list[int], list[int]]] = field(default_factory=list)
    fill_values: list[float] = field(default_factory=list)
    pick_values: list[int] = field(default_factory=list)
    splits: dict[fx.Node, tuple[Value, int]] = field(default_factory=dict)
    tables: RankTables = field(default_factory=RankTables)

    def value(self, a: Any) -> Value:
        if not isinstance(a, fx.Node):
            raise ExportError(f"expected a tensor, got {a!r}")
        v = self.env.get(a)
        if not isinstance(v, Value):
            raise ExportError(f"node '{a.name}' has no tensor value here")
        return v


def source_loc(node: fx.Node) -> tuple[str, int, int] | None:
    """The innermost user frame of ``node``'s stack trace: file, line and the column of the
    statement's first character (1-based)."""
    st = node.meta.get("stack_trace")
    if not st:
        return None
    lines = st.splitlines()
    best = None
    for i, line in enumerate(lines):
        m = _FRAME.search(line)
        if not m:
            continue
        path = m.group(1)
        if path.startswith(_TORCH_DIR) or path.startswith("<"):
            continue
        if path.startswith(_OWN_DIR) and os.path.basename(path) == "trace.py":
            continue
        lineno = int(m.group(2))
        # The trace keeps the statement stripped; its column is the source line's indentation.
        src = linecache.getline(path, lineno)
        col = len(src) - len(src.lstrip()) + 1 if src.strip() else 1
        best = (path, lineno, col)
    if best is None:
        return None
    path, line, col = best
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:
        pass
    return path, line, col


def _inplace_base(target: Any) -> Any | None:
    """The out-of-place overload of an in-place aten op (``add_.Tensor`` → ``add.Tensor``)."""
    if not isinstance(target, torch._ops.OpOverload) or not target._schema.is_mutable:
        return None
    packet = target._schema.name.split("::")[-1]
    if not packet.endswith("_"):
        return None
    base = getattr(torch.ops.aten, packet[:-1], None)
    return getattr(base, target._overloadname, None) if base is not None else None


_VIEW_OPS = {
    "view", "_unsafe_view", "reshape", "expand", "permute", "t", "transpose", "slice",
    "select", "unsqueeze", "squeeze", "alias", "split", "unbind", "narrow", "as_strided",
}


def _lower_node(cx: Lowering, node: fx.Node) -> None:
    target = node.target
    if target is aten_table.GETITEM:
        seq, idx = node.args
        if seq in cx.splits:
            cx.env[node] = _pick(cx, node, seq, int(idx))
        else:
            cx.env[node] = cx.env[seq][idx]
        return
    if target in aten_table.ASSERTS:
        cx.env[node] = None
        return
    handler = aten_table.TABLE.get(target) or collectives.TABLE.get(target)
    mutated = None
    if handler is None:
        base = _inplace_base(target)
        if base is not None and base in aten_table.TABLE:
            handler, mutated = aten_table.TABLE[base], node.args[0]
            if mutated in cx.view_nodes:
                raise ExportError(f"in-place {target} on a view (mutation through an alias)")
    if handler is None:
        raise ExportError(f"no commlir lowering for {target}")
    result = handler(cx, node)
    cx.env[node] = result
    if mutated is not None:
        cx.env[mutated] = result
    if isinstance(target, torch._ops.OpOverload) and target._schema.name.split("::")[-1] in _VIEW_OPS:
        cx.view_nodes.add(node)


def _pick(cx: Lowering, node: fx.Node, split: fx.Node, idx: int) -> Value:
    """Element ``idx`` of a split; where each rank takes another element (``cx.tables.picks``)
    and rank r takes chunk r of a group, that group's ``coll.all_slice`` of the split input."""
    index = len(cx.pick_values)
    cx.pick_values.append(idx)
    per_rank = cx.tables.picks.get(index)
    if per_rank is None:
        return cx.env[split][idx]
    x, dim = cx.splits[split]
    chunks = cx.env[split]
    if any(c.type.shape[dim] != chunks[0].type.shape[dim] for c in chunks):
        raise ExportError("each rank takes another chunk of an uneven split")
    group = cx.groups.group_of_positions(per_rank, len(chunks))
    if group is None:
        raise ExportError(f"each rank takes another chunk of a split (chunks {per_rank} by rank), not by its place in a group")
    shape = list(x.type.shape)
    shape[dim] = chunks[0].type.shape[dim]
    attrs = {"dim": f"{dim} : i64", "group": f"@{group.symbol}"}
    mine = cx.em.op("coll.all_slice", [x], x.type.with_shape(shape), attrs, hint=node.name)
    return aten_table.reshape(cx, mine, chunks[idx].type.shape)


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in _flatten(e)]
    return [x]


def _const(cx: Lowering, node: fx.Node, gm: fx.GraphModule, args: list[Arg]) -> Value:
    """A ``get_attr`` tensor constant: a fill when uniform, else an extra argument whose
    value the sidecar carries."""
    t = getattr(gm, str(node.target))
    if not isinstance(t, torch.Tensor):
        raise ExportError(f"constant '{node.target}' is not a tensor")
    ty = TensorType(tuple(t.shape), t.dtype)
    flat = t.detach().reshape(-1)
    if flat.numel() > 0 and bool((flat == flat[0]).all()):
        return aten_table.fill(cx, flat[0].item(), ty)
    name = cx.em.fresh(f"const_{node.target}")
    cx.consts[name] = t.detach().clone()
    args.append(Arg(name, "const", str(node.target), ty))
    return Value(name, ty)


def lower_graph(
    gm: fx.GraphModule,
    args: list[Arg],
    outs: list[Out],
    groups: GroupTable,
    func_name: str = "forward",
    tables: RankTables | None = None,
) -> tuple[str, Lowering]:
    """The module text of ``gm`` as function ``func_name``. ``args`` describe the
    placeholders in order (lifted constants are appended to it); ``outs`` the flattened
    outputs. Errors are :class:`ExportError` naming the node and its op."""
    cx = Lowering(groups, tables=tables or RankTables())
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(args):
        raise ExportError(f"the graph has {len(placeholders)} inputs, {len(args)} were described")
    for node, arg in zip(placeholders, args):
        arg.name = cx.em.fresh(arg.name)
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and tuple(val.shape) != arg.type.shape:
            raise ExportError(f"input '{arg.name}' is {tuple(val.shape)}, described as {arg.type}")
        cx.env[node] = Value(arg.name, arg.type)
    results: list[Value] = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        cx.em.loc = source_loc(node)
        try:
            if node.op == "get_attr":
                cx.env[node] = _const(cx, node, gm, args)
            elif node.op == "call_function":
                _lower_node(cx, node)
            elif node.op == "output":
                for x in _flatten(node.args[0]):
                    if not isinstance(x, fx.Node):
                        raise ExportError(f"output {x!r} is not a tensor")
                    results.append(cx.value(x))
            else:
                raise ExportError(f"{node.op} nodes are not supported")
        except (ExportError, IndexError, TypeError, ValueError, KeyError) as e:
            # Anything a table entry trips over is reported at the node, with its op.
            where = cx.em.loc
            at = f" at {where[0]}:{where[1]}" if where else ""
            msg = str(e) if isinstance(e, ExportError) else f"{type(e).__name__}: {e}"
            raise ExportError(f"node '{node.name}' ({_opname(node)}{_format_args(node)}){at}: {msg}") from None
    if len(results) != len(outs):
        raise ExportError(f"the graph returns {len(results)} tensors, {len(outs)} were described")
    return _module_text(cx, args, results, func_name), cx


def _format_args(node: fx.Node) -> str:
    def show(a: Any) -> str:
        if isinstance(a, fx.Node):
            val = a.meta.get("val")
            return f"{a.name}: {list(val.shape)}" if isinstance(val, torch.Tensor) else a.name
        if isinstance(a, (list, tuple)):
            return "[" + ", ".join(show(x) for x in a) + "]"
        return repr(a)

    return "(" + ", ".join(show(a) for a in node.args) + ")" if node.op == "call_function" else ""


def _opname(node: fx.Node) -> str:
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        ns = t.namespace
        return f"{ns}.{t._schema.name.split('::')[-1]}.{t._overloadname}"
    return str(getattr(t, "__name__", t))


def _module_text(cx: Lowering, args: list[Arg], results: list[Value], func_name: str) -> str:
    params = []
    for a in args:
        attr = f" {{coll.replicated = @{a.replicated}}}" if a.replicated else ""
        params.append(f"%{a.name}: {a.type}{attr} loc({fmt_str(a.name)})")
    rtypes = ", ".join(str(r.type) for r in results)
    rsig = rtypes if len(results) == 1 else f"({rtypes})"
    lines = ["module {"]
    lines += cx.groups.declarations()
    lines.append(f"  func.func @{func_name}({', '.join(params)}) -> {rsig} {{")
    lines += cx.em.lines
    lines.append(f"    return {', '.join(str(r) for r in results)} : {rtypes}")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"
