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
from . import complex as complex_ops
from .diagnose import DATA_DEPENDENT_SHAPE
from .groups import GroupTable
from .ir import DTYPES, Emitter, ExportError, TensorType, Value, fmt_str

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
    # The operand and permutation of every emitted transpose/permute, by result name: a
    # permutation that undoes one (autograd transposes every linear weight back for the input
    # gradient, and the weight gradient back to the weight's layout) reads the original value.
    permuted: dict[str, tuple[Value, list[int]]] = field(default_factory=dict)

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
        if path.startswith(_OWN_DIR) and os.path.basename(path) in ("trace.py", "user.py"):
            continue  # the tracing harness, not the model
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
    if complex_ops.involved(cx, node):
        # Complex values are pairs of real values (complex.py); in-place ops as elsewhere.
        base = _inplace_base(target)
        if base is not None and node.args[0] in cx.view_nodes:
            raise ExportError(f"in-place {target} on a view (mutation through an alias)")
        cx.env[node] = complex_ops.lower(cx, node, base or target)
        if base is not None:
            cx.env[node.args[0]] = cx.env[node]
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


def _dead_nodes(graph: fx.Graph) -> set[fx.Node]:
    """Nodes whose results nobody reads, in-place ops among them when the tensor they mutate
    is a temporary that only they touch. DTensor's sharding propagation of a fused op
    (``nn.RMSNorm`` under sequence parallelism) leaves such a chain in the graph: an
    ``empty_strided`` and an ``add_`` into it that ``eliminate_dead_code`` keeps because
    ``add_`` mutates. Collectives always stay (every rank issues them)."""
    dead: set[fx.Node] = set()
    changed = True
    while changed:
        changed = False
        for node in reversed(graph.nodes):
            if node in dead or node.op != "call_function":
                continue
            if any(u not in dead for u in node.users):
                continue
            target = node.target
            if isinstance(target, torch._ops.OpOverload) and target.namespace == "_c10d_functional":
                continue
            if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
                base = node.args[0] if node.args else None
                if not (isinstance(base, fx.Node) and base.op == "call_function"):
                    continue  # mutates an argument: its effect is the point
                if any(u is not node and u not in dead for u in base.users):
                    continue
            dead.add(node)
            changed = True
    return dead


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
        if arg.type.dtype not in DTYPES:
            raise ExportError(f"{_first_use(node)}{_KIND_NAMES.get(arg.kind, arg.kind)} '{arg.fqn}' is "
                              f"{str(arg.type.dtype).removeprefix('torch.')}: unsupported dtype (commlir has "
                              f"{', '.join(DTYPES.values())})")
        cx.env[node] = Value(arg.name, arg.type)
    results: list[Value] = []
    dead = _dead_nodes(gm.graph)
    for node in gm.graph.nodes:
        if node.op == "placeholder" or node in dead:
            continue
        cx.em.loc = source_loc(node)
        try:
            if node.op == "get_attr":
                cx.env[node] = _const(cx, node, gm, args)
            elif node.op == "call_function":
                if _data_dependent(node.meta.get("val")):
                    raise ExportError(DATA_DEPENDENT_SHAPE.format(what=f"the result of {_opname(node)}"))
                _lower_node(cx, node)
            elif node.op == "output":
                for x in _flatten(node.args[0]):
                    if not isinstance(x, fx.Node):
                        raise ExportError(f"output {x!r} is not a tensor")
                    if isinstance(cx.env.get(x), complex_ops.Complex):
                        raise ExportError("a complex result: return torch.view_as_real(z) instead")
                    results.append(cx.value(x))
            else:
                raise ExportError(f"{node.op} nodes are not supported")
        except Exception as e:  # noqa: BLE001 - reported at the node, whatever it was
            # Anything a table entry trips over is one diagnostic: the user's line, the
            # reason, and the node with its op (never a traceback).
            raise node_error(node, cx.em.loc, e) from None
    if len(results) != len(outs):
        raise ExportError(f"the graph returns {len(results)} tensors, {len(outs)} were described")
    return _module_text(cx, args, results, func_name), cx


def node_error(node: fx.Node, where: tuple[str, int, int] | None, e: BaseException) -> ExportError:
    """``file:line: reason (node 'n': aten.op(args))`` and the source line, for a node that
    could not be lowered."""
    msg = str(e) if isinstance(e, ExportError) else f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    what = f"node '{node.name}': {_opname(node)}{_format_args(node)}"
    if where is None:
        return ExportError(f"{msg} ({what})")
    src = linecache.getline(where[0], where[1]).strip()
    return ExportError(f"{where[0]}:{where[1]}: {msg} ({what})" + (f"\n    {src}" if src else ""))


def _data_dependent(val: Any) -> bool:
    """Whether a node's value has a size known only from the data (an unbacked SymInt)."""
    if isinstance(val, (list, tuple)):
        return any(_data_dependent(v) for v in val)
    return isinstance(val, torch.Tensor) and any(not isinstance(d, int) for d in val.shape)


_KIND_NAMES = {"param": "parameter", "buffer": "buffer", "input": "input", "const": "constant"}


def _first_use(node: fx.Node) -> str:
    """``file:line: `` of the first op that reads placeholder ``node`` (where the user's code
    meets the argument), or nothing."""
    for user in node.users:
        loc = source_loc(user)
        if loc is not None:
            return f"{loc[0]}:{loc[1]}: "
    return ""


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
