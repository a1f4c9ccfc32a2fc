"""The ``_c10d_functional`` op table: each functional collective mapped to its ``coll`` op
on the group its ``group_name`` resolves to (see groups.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

from .aten import Handler, Result, node_type, node_types
from .ir import ExportError, TensorType, fmt_array, fmt_int, fmt_str

if TYPE_CHECKING:
    from .export import Lowering

c10d = torch.ops._c10d_functional

REDUCE_OPS = {"sum", "avg", "max", "min", "product"}

TABLE: dict[Any, Handler] = {}


def _reduce_op(op: str) -> str:
    op = str(op).lower()
    if op not in REDUCE_OPS:
        raise ExportError(f"reduce op '{op}' (coll supports {', '.join(sorted(REDUCE_OPS))})")
    return fmt_str(op)


def _check_size(cx: Lowering, group_size: int, group_name: str) -> str:
    g = cx.groups.lookup(group_name)
    if int(group_size) != g.size:
        raise ExportError(f"group_size {group_size} but group '{group_name}' has {g.size} ranks")
    return g.symbol


def _all_reduce(cx: Lowering, node: fx.Node) -> Result:
    x, op, name = node.args[:3]
    g = cx.groups.lookup(name).symbol
    ty = node_type(node)
    return cx.em.op("coll.all_reduce", [cx.value(x)], ty, {"reduce_op": _reduce_op(op), "group": f"@{g}"}, hint=node.name)


def _all_reduce_coalesced(cx: Lowering, node: fx.Node) -> Result:
    xs, op, name = node.args[:3]
    g = cx.groups.lookup(name).symbol
    return cx.em.op(
        "coll.all_reduce_coalesced", [cx.value(x) for x in xs], node_types(node),
        {"reduce_op": _reduce_op(op), "group": f"@{g}"}, hint=node.name,
    )


def _all_gather(cx: Lowering, node: fx.Node) -> Result:
    x, size, name = node.args[:3]
    g = _check_size(cx, size, name)
    return cx.em.op("coll.all_gather_into_tensor", [cx.value(x)], node_type(node), {"group": f"@{g}"}, hint=node.name)


def _all_gather_coalesced(cx: Lowering, node: fx.Node) -> Result:
    xs, size, name = node.args[:3]
    g = _check_size(cx, size, name)
    return cx.em.op(
        "coll.all_gather_into_tensor_coalesced", [cx.value(x) for x in xs], node_types(node),
        {"group": f"@{g}"}, hint=node.name,
    )


def _reduce_scatter(cx: Lowering, node: fx.Node) -> Result:
    x, op, size, name = node.args[:4]
    g = _check_size(cx, size, name)
    return cx.em.op(
        "coll.reduce_scatter_tensor", [cx.value(x)], node_type(node),
        {"reduce_op": _reduce_op(op), "group": f"@{g}"}, hint=node.name,
    )


def _reduce_scatter_coalesced(cx: Lowering, node: fx.Node) -> Result:
    xs, op, size, name = node.args[:4]
    g = _check_size(cx, size, name)
    return cx.em.op(
        "coll.reduce_scatter_tensor_coalesced", [cx.value(x) for x in xs], node_types(node),
        {"reduce_op": _reduce_op(op), "group": f"@{g}"}, hint=node.name,
    )


def _splits(xs: Any) -> list[int] | None:
    if xs is None or len(xs) == 0:
        return None
    try:
        return [int(s) for s in xs]
    except (TypeError, ValueError):
        raise ExportError(f"split sizes {xs!r} are not static integers") from None


def _all_to_all(cx: Lowering, node: fx.Node) -> Result:
    x, out_splits, in_splits, name = node.args[:4]
    group = cx.groups.lookup(name)
    ins, outs = _splits(in_splits), _splits(out_splits)
    ty: TensorType = node_type(node)
    xv = cx.value(x)
    if xv.type.shape[1:] != ty.shape[1:] or xv.type.shape[0] != ty.shape[0]:
        raise ExportError(
            f"all_to_all_single from {xv.type} to {ty}: coll.all_to_all_single keeps the shape "
            "(every rank must send and receive the same number of rows)"
        )
    attrs = {"group": f"@{group.symbol}"}
    index = len(cx.a2a_local)
    cx.a2a_local.append((ins or [], outs or []))
    if ins is not None or outs is not None:
        table = cx.tables.a2a[index] if cx.tables.a2a is not None else None
        if table is None:
            # Filled in when every rank has been traced (trace.py); this rank's view only.
            table = ([ins or []], [outs or []])
        attrs["input_split_sizes"] = "[" + ", ".join(fmt_array(r) for r in table[0]) + "]"
        attrs["output_split_sizes"] = "[" + ", ".join(fmt_array(r) for r in table[1]) + "]"
    return cx.em.op("coll.all_to_all_single", [xv], ty, attrs, hint=node.name)


def _broadcast(cx: Lowering, node: fx.Node) -> Result:
    x, src, name = node.args[:3]
    g = cx.groups.lookup(name).symbol
    return cx.em.op(
        "coll.broadcast", [cx.value(x)], node_type(node), {"src": fmt_int(src), "group": f"@{g}"},
        hint=node.name,
    )


def _wait(cx: Lowering, node: fx.Node) -> Result:
    x = cx.value(node.args[0])
    return cx.em.op("coll.wait_tensor", [x], x.type, hint=node.name)


TABLE.update(
    {
        c10d.all_reduce.default: _all_reduce,
        c10d.all_reduce_coalesced.default: _all_reduce_coalesced,
        c10d.all_gather_into_tensor.default: _all_gather,
        c10d.all_gather_into_tensor_coalesced.default: _all_gather_coalesced,
        c10d.reduce_scatter_tensor.default: _reduce_scatter,
        c10d.reduce_scatter_tensor_coalesced.default: _reduce_scatter_coalesced,
        c10d.all_to_all_single.default: _all_to_all,
        c10d.broadcast.default: _broadcast,
        c10d.wait_tensor.default: _wait,
    }
)
