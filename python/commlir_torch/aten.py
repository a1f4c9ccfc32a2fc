"""The aten op table: each supported aten overload mapped to the ``compute`` ops that
compute it. Broadcasting, type promotion and Python scalars are made explicit here
(``compute.broadcast``, ``compute.cast``, ``compute.fill``/``compute.scale``), because
commlir's elementwise ops take operands of exactly the result's type."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

from .ir import ExportError, TensorType, Value, fmt_array, fmt_float, fmt_int, fmt_str

if TYPE_CHECKING:
    from .export import Lowering

aten = torch.ops.aten
prims = torch.ops.prims

Result = Value | list[Value] | None
Handler = Callable[["Lowering", fx.Node], Result]

TABLE: dict[Any, Handler] = {}


def register(*ops: Any) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for op in ops:
            TABLE[op] = fn
        return fn

    return deco


# ----------------------------------------------------------------------------- helpers


def _val_type(val: torch.Tensor) -> TensorType:
    # A complex tensor is lowered as two real tensors (complex.py): each has the component type.
    dtype = val.dtype.to_real() if val.dtype.is_complex else val.dtype
    return TensorType(tuple(int(d) for d in val.shape), dtype)


def node_type(node: fx.Node) -> TensorType:
    """The type of ``node``'s (single tensor) result, from its fake-tensor metadata."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        raise ExportError(f"node '{node.name}' ({node.target}) has no tensor metadata")
    return _val_type(val)


def node_types(node: fx.Node) -> list[TensorType]:
    """The types of a node returning several tensors."""
    vals = node.meta.get("val")
    if not isinstance(vals, (list, tuple)):
        return [node_type(node)]
    return [_val_type(v) for v in vals]


def norm_dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def cast(cx: Lowering, v: Value, dtype: torch.dtype) -> Value:
    if v.type.dtype == dtype:
        return v
    return cx.em.op("compute.cast", [v], v.type.with_dtype(dtype), hint=f"{v.name}_cast")


def reshape(cx: Lowering, v: Value, shape: Sequence[int]) -> Value:
    shape = tuple(int(d) for d in shape)
    if v.type.shape == shape:
        return v
    return cx.em.op("compute.reshape", [v], v.type.with_shape(shape), hint=f"{v.name}_view")


def broadcast(cx: Lowering, v: Value, shape: Sequence[int]) -> Value:
    """``v`` expanded to ``shape`` (right-aligned, as torch broadcasts)."""
    shape = tuple(int(d) for d in shape)
    if v.type.shape == shape:
        return v
    src = v.type.shape
    if len(src) > len(shape) or any(
        s not in (1, d) for s, d in zip(reversed(src), reversed(shape))
    ):
        raise ExportError(f"cannot broadcast {v.type} to shape {list(shape)}")
    # Only size-1 dimensions being dropped or added: a reshape moves no data.
    if math.prod(src) == math.prod(shape):
        return reshape(cx, v, shape)
    return cx.em.op("compute.broadcast", [v], v.type.with_shape(shape), hint=f"{v.name}_bc")


def fill(cx: Lowering, value: float | bool, ty: TensorType) -> Value:
    """A constant tensor. A fill whose value differs between ranks (``cx.tables.fills``) is
    each rank's element of a table of every rank's value, taken by ``coll.all_slice`` over the
    world group: the same program on every rank."""
    index = len(cx.fill_values)
    cx.fill_values.append(float(value))
    per_rank = cx.tables.fills.get(index)
    if per_rank is None:
        return cx.em.op("compute.fill", [], ty, {"value": fmt_float(float(value))}, hint="cst")
    one = TensorType((1,), ty.dtype)
    parts = [cx.em.op("compute.fill", [], one, {"value": fmt_float(v)}, hint=f"rank{r}_cst") for r, v in enumerate(per_rank)]
    table = cx.em.op("compute.concat", parts, TensorType((len(per_rank),), ty.dtype), {"dim": fmt_int(0)}, hint="per_rank_cst")
    world = cx.groups.world()
    mine = cx.em.op("coll.all_slice", [table], one, {"dim": fmt_int(0), "group": f"@{world.symbol}"}, hint="rank_cst")
    return broadcast(cx, reshape(cx, mine, (1,) * ty.rank), ty.shape)


def is_scalar(a: Any) -> bool:
    return isinstance(a, (int, float, bool)) and not isinstance(a, torch.Tensor)


def operand(cx: Lowering, a: Any, ty: TensorType) -> Value:
    """Argument ``a`` (a node or a Python scalar) as a value of exactly type ``ty``."""
    if is_scalar(a):
        return fill(cx, a, ty)
    v = cx.value(a)
    return broadcast(cx, cast(cx, v, ty.dtype), ty.shape)


# ----------------------------------------------------------------------- elementwise


def _binary(opname: str) -> Handler:
    def lower(cx: Lowering, node: fx.Node) -> Result:
        ty = node_type(node)
        a, b = node.args[0], node.args[1]
        alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
        if opname == "compute.mul" and is_scalar(b):
            return scale(cx, operand(cx, a, ty), float(b), node.name)
        if opname == "compute.mul" and is_scalar(a):
            return scale(cx, operand(cx, b, ty), float(a), node.name)
        if opname == "compute.div" and is_scalar(b) and float(b) != 0 and is_float(ty.dtype):
            return cx.em.op("compute.div", [operand(cx, a, ty), fill(cx, b, ty)], ty, hint=node.name)
        if alpha != 1:
            if not is_scalar(alpha):
                raise ExportError(f"alpha {alpha!r} is not a number")
            if is_scalar(b):
                b = float(b) * float(alpha)
            else:
                b_v = scale(cx, operand(cx, b, ty), float(alpha), f"{node.name}_alpha")
                return cx.em.op(opname, [operand(cx, a, ty), b_v], ty, hint=node.name)
        return cx.em.op(opname, [operand(cx, a, ty), operand(cx, b, ty)], ty, hint=node.name)

    return lower


def scale(cx: Lowering, v: Value, factor: float, hint: str) -> Value:
    if factor == 1.0:
        return v
    return cx.em.op("compute.scale", [v], v.type, {"factor": fmt_float(factor)}, hint=hint)


for _ops, _name in [
    ((aten.add.Tensor, aten.add.Scalar), "compute.add"),
    ((aten.sub.Tensor, aten.sub.Scalar), "compute.sub"),
    ((aten.mul.Tensor, aten.mul.Scalar), "compute.mul"),
    ((aten.div.Tensor, aten.div.Scalar), "compute.div"),
    ((aten.maximum.default,), "compute.maximum"),
    ((aten.minimum.default,), "compute.minimum"),
]:
    register(*_ops)(_binary(_name))


@register(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    a, b = node.args[0], node.args[1]
    alpha = node.kwargs.get("alpha", 1)
    av = operand(cx, a, ty)
    if alpha != 1:
        av = scale(cx, av, float(alpha), f"{node.name}_alpha")
    return cx.em.op("compute.sub", [operand(cx, b, ty), av], ty, hint=node.name)


def _unary(opname: str) -> Handler:
    def lower(cx: Lowering, node: fx.Node) -> Result:
        ty = node_type(node)
        return cx.em.op(opname, [operand(cx, node.args[0], ty)], ty, hint=node.name)

    return lower


for _op, _name in [
    (aten.neg.default, "compute.neg"),
    (aten.exp.default, "compute.exp"),
    (aten.relu.default, "compute.relu"),
    (aten.silu.default, "compute.silu"),
    (aten.tanh.default, "compute.tanh"),
    (aten.sqrt.default, "compute.sqrt"),
    (aten.rsqrt.default, "compute.rsqrt"),
    (aten.sin.default, "compute.sin"),
    (aten.cos.default, "compute.cos"),
    (aten.sigmoid.default, "compute.sigmoid"),
    (aten.log.default, "compute.log"),
]:
    register(_op)(_unary(_name))


@register(aten.gelu.default)
def _gelu(cx: Lowering, node: fx.Node) -> Result:
    approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    if approx != "tanh":
        raise ExportError(
            "compute.gelu is the tanh approximation; aten.gelu with approximate='none' (erf) "
            "has no commlir equivalent (use F.gelu(x, approximate='tanh'))"
        )
    ty = node_type(node)
    return cx.em.op("compute.gelu", [operand(cx, node.args[0], ty)], ty, hint=node.name)


@register(aten.reciprocal.default)
def _reciprocal(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    return cx.em.op("compute.div", [fill(cx, 1.0, ty), operand(cx, node.args[0], ty)], ty, hint=node.name)


@register(aten.abs.default)
def _abs(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    x = operand(cx, node.args[0], ty)
    n = cx.em.op("compute.neg", [x], ty, hint=f"{node.name}_neg")
    return cx.em.op("compute.maximum", [x, n], ty, hint=node.name)


@register(aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default)
def _clamp(cx: Lowering, node: fx.Node) -> Result:
    """``torch.clamp``: ``min(max(x, lo), hi)``, NaN propagating as ``compute.maximum`` and
    ``compute.minimum`` do (so a NaN input stays NaN, as in PyTorch)."""
    ty = node_type(node)
    x = operand(cx, node.args[0], ty)
    if node.target == aten.clamp_min.default:
        lo, hi = node.args[1], None
    elif node.target == aten.clamp_max.default:
        lo, hi = None, node.args[1]
    else:
        lo = node.kwargs.get("min", node.args[1] if len(node.args) > 1 else None)
        hi = node.kwargs.get("max", node.args[2] if len(node.args) > 2 else None)
    for bound, opname, tag in ((lo, "compute.maximum", "lo"), (hi, "compute.minimum", "hi")):
        if bound is None:
            continue
        if not is_scalar(bound):
            raise ExportError(f"clamp bound {bound!r} is not a number")
        x = cx.em.op(opname, [x, fill(cx, bound, ty)], ty, hint=f"{node.name}_{tag}")
    return x


@register(aten.pow.Tensor_Scalar)
def _pow(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    x = operand(cx, node.args[0], ty)
    e = float(node.args[1])
    if e == 1.0:
        return x
    if e == 2.0:
        return cx.em.op("compute.mul", [x, x], ty, hint=node.name)
    if e == 3.0:
        sq = cx.em.op("compute.mul", [x, x], ty, hint=f"{node.name}_sq")
        return cx.em.op("compute.mul", [sq, x], ty, hint=node.name)
    if e == 0.5:
        return cx.em.op("compute.sqrt", [x], ty, hint=node.name)
    if e == -0.5:
        return cx.em.op("compute.rsqrt", [x], ty, hint=node.name)
    if e == -1.0:
        return cx.em.op("compute.div", [fill(cx, 1.0, ty), x], ty, hint=node.name)
    if e == 0.0:
        return fill(cx, 1.0, ty)
    raise ExportError(f"exponent {e} (only 0, ±0.5, ±1, 2 and 3 are supported)")


_PREDICATES = {
    aten.eq: "eq",
    aten.ne: "ne",
    aten.lt: "lt",
    aten.le: "le",
    aten.gt: "gt",
    aten.ge: "ge",
}


def _compare(pred: str) -> Handler:
    def lower(cx: Lowering, node: fx.Node) -> Result:
        ty = node_type(node)
        a, b = node.args[0], node.args[1]
        vals = [x.meta["val"] if isinstance(x, fx.Node) else x for x in (a, b)]
        common = torch.result_type(*vals) if not all(is_scalar(v) for v in vals) else torch.float64
        ot = TensorType(ty.shape, common)
        return cx.em.op(
            "compute.compare", [operand(cx, a, ot), operand(cx, b, ot)], ty,
            {"predicate": fmt_str(pred)}, hint=node.name,
        )

    return lower


for _packet, _pred in _PREDICATES.items():
    register(_packet.Tensor, _packet.Scalar)(_compare(_pred))


@register(aten.where.self)
def _where(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    c = operand(cx, node.args[0], ty.with_dtype(torch.bool))
    return cx.em.op(
        "compute.select", [c, operand(cx, node.args[1], ty), operand(cx, node.args[2], ty)], ty,
        hint=node.name,
    )


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    c = operand(cx, node.args[1], ty.with_dtype(torch.bool))
    v = node.args[2]
    return cx.em.op(
        "compute.select", [c, operand(cx, v, ty), operand(cx, node.args[0], ty)], ty,
        hint=node.name,
    )


@register(aten.logical_not.default, aten.bitwise_not.default)
def _not(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    if ty.dtype != torch.bool:
        raise ExportError("bitwise not of a non-bool tensor")
    x = operand(cx, node.args[0], ty)
    return cx.em.op("compute.compare", [x, fill(cx, False, ty)], ty, {"predicate": fmt_str("eq")}, hint=node.name)


@register(aten.logical_or.default, aten.bitwise_or.Tensor)
def _or(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    if ty.dtype != torch.bool:
        raise ExportError("bitwise or of non-bool tensors")
    a, b = operand(cx, node.args[0], ty), operand(cx, node.args[1], ty)
    return cx.em.op("compute.select", [a, fill(cx, True, ty), b], ty, hint=node.name)


@register(aten.logical_and.default, aten.bitwise_and.Tensor)
def _and(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    if ty.dtype != torch.bool:
        raise ExportError("bitwise and of non-bool tensors")
    a, b = operand(cx, node.args[0], ty), operand(cx, node.args[1], ty)
    return cx.em.op("compute.select", [a, b, fill(cx, False, ty)], ty, hint=node.name)


# ------------------------------------------------------------------------ reductions


def _dims(node: fx.Node, rank: int, pos: int = 1) -> list[int]:
    dims = node.args[pos] if len(node.args) > pos else node.kwargs.get("dim")
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(reversed(range(rank)))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({norm_dim(int(d), rank) for d in dims}, reverse=True)


def _reduce(cx: Lowering, node: fx.Node, opname: str, dtype: torch.dtype) -> tuple[Value, int]:
    x = cx.value(node.args[0])
    x = cast(cx, x, dtype)
    count = 1
    for d in _dims(node, x.type.rank):
        count *= x.type.shape[d]
        shape = x.type.shape[:d] + x.type.shape[d + 1 :]
        x = cx.em.op(opname, [x], x.type.with_shape(shape), {"dim": fmt_int(d)}, hint=f"{node.name}_r{d}")
    return x, count


@register(aten.sum.dim_IntList, aten.sum.default)
def _sum(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    v, _ = _reduce(cx, node, "compute.reduce_sum", ty.dtype)
    return reshape(cx, v, ty.shape)


@register(aten.mean.dim, aten.mean.default)
def _mean(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    v, n = _reduce(cx, node, "compute.reduce_sum", ty.dtype)
    return reshape(cx, scale(cx, v, 1.0 / n, node.name), ty.shape)


@register(aten.amax.default)
def _amax(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    v, _ = _reduce(cx, node, "compute.reduce_max", ty.dtype)
    return reshape(cx, v, ty.shape)


@register(aten._softmax.default)
def _softmax(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    x = operand(cx, node.args[0], ty)
    d = norm_dim(int(node.args[1]), ty.rank)
    return cx.em.op("compute.softmax", [x], ty, {"dim": fmt_int(d)}, hint=node.name)


@register(aten._log_softmax.default)
def _log_softmax(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    x = operand(cx, node.args[0], ty)
    d = norm_dim(int(node.args[1]), ty.rank)
    kept = ty.shape[:d] + (1,) + ty.shape[d + 1 :]
    red = ty.with_shape(ty.shape[:d] + ty.shape[d + 1 :])
    m = cx.em.op("compute.reduce_max", [x], red, {"dim": fmt_int(d)}, hint=f"{node.name}_max")
    m = broadcast(cx, reshape(cx, m, kept), ty.shape)
    z = cx.em.op("compute.sub", [x, m], ty, hint=f"{node.name}_z")
    e = cx.em.op("compute.exp", [z], ty, hint=f"{node.name}_exp")
    s = cx.em.op("compute.reduce_sum", [e], red, {"dim": fmt_int(d)}, hint=f"{node.name}_sum")
    lse = broadcast(cx, reshape(cx, cx.em.op("compute.log", [s], red, hint=f"{node.name}_log"), kept), ty.shape)
    return cx.em.op("compute.sub", [z, lse], ty, hint=node.name)


# ------------------------------------------------------------------------- attention


# PyTorch's fused attention kernels, as a graph records them: the CPU flash kernel the tracer
# keeps whole (``trace.attention_or_decompose``), and the CUDA kernels of a GPU capture. Each
# forward becomes one ``compute.attention`` and each backward one
# ``compute.attention_backward``, so that the score matrix is never a tensor of the program.
# The kernels take ``B×H×L×E`` query/key/value (key and value with fewer heads under
# ``enable_gqa``) and differ in their argument lists and in the layout of their log-sum-exp.
ATTENTION_FORWARD = {
    aten._scaled_dot_product_flash_attention_for_cpu.default: "flash_cpu",
    aten._scaled_dot_product_flash_attention.default: "flash",
    aten._scaled_dot_product_efficient_attention.default: "efficient",
    aten._scaled_dot_product_cudnn_attention.default: "cudnn",
}
ATTENTION_BACKWARD = {
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default: "flash_cpu",
    aten._scaled_dot_product_flash_attention_backward.default: "flash",
    aten._scaled_dot_product_efficient_attention_backward.default: "efficient",
    aten._scaled_dot_product_cudnn_attention_backward.default: "cudnn",
}


def _schema_args(node: fx.Node) -> dict[str, Any]:
    """``node``'s arguments by the names of its op's schema, defaults filled in: the kernels
    put ``is_causal``, ``scale`` and the rest at different positions."""
    out: dict[str, Any] = {}
    positional = [a for a in node.target._schema.arguments if not a.kwarg_only]
    for i, a in enumerate(node.target._schema.arguments):
        if not a.kwarg_only and i < len(node.args):
            out[a.name] = node.args[i]
        elif a.name in node.kwargs:
            out[a.name] = node.kwargs[a.name]
        else:
            out[a.name] = a.default_value if a.has_default_value() else None
    if len(node.args) > len(positional):
        raise ExportError(f"{len(node.args)} positional arguments for {len(positional)} parameters")
    return out


def _attention_attrs(node: fx.Node, args: dict[str, Any], q: Value) -> dict[str, str]:
    """``scale`` (PyTorch's default ``1/sqrt(E)``) and ``causal`` of an attention kernel's
    node; a mask, a bias or dropout has no fused commlir form (the exporter traces those
    through PyTorch's math attention instead)."""
    if float(args.get("dropout_p") or 0.0) != 0.0:
        raise ExportError(f"attention '{node.name}' with dropout has no commlir lowering")
    if args.get("attn_mask") is not None or args.get("attn_bias") is not None:
        raise ExportError(f"attention '{node.name}' with a mask or bias has no commlir lowering")
    scale = args.get("scale")
    scale = float(scale) if scale is not None else 1.0 / math.sqrt(q.type.shape[-1])
    attrs = {"scale": fmt_float(scale)}
    if args.get("is_causal"):
        attrs["causal"] = "unit"
    return attrs


def _lse_type(q: Value) -> TensorType:
    """The type of ``compute.attention``'s log-sum-exp: q's shape without its last dim (one
    value a query row), f32 (f64 for f64 attention, like PyTorch's CPU kernel's)."""
    return TensorType(q.type.shape[:-1], torch.float64 if q.type.dtype == torch.float64 else torch.float32)


def _result_users(node: fx.Node, index: int) -> list[fx.Node]:
    """The nodes that read result ``index`` of a node of several results (through getitem)."""
    return [u for g in node.users if g.target is GETITEM and int(g.args[1]) == index for u in g.users]


def attention_forward_of(node: Any) -> fx.Node | None:
    """The fused attention forward whose log-sum-exp ``node`` is (through aliases), if any."""
    while isinstance(node, fx.Node):
        if node.target is GETITEM:
            src = node.args[0]
            ok = isinstance(src, fx.Node) and src.target in ATTENTION_FORWARD and int(node.args[1]) == 1
            return src if ok else None
        if node.target not in (aten.alias.default, aten.detach.default):
            return None
        node = node.args[0]
    return None


@register(*ATTENTION_FORWARD)
def _attention(cx: Lowering, node: fx.Node) -> Result:
    """A fused attention kernel without mask or dropout as one ``compute.attention``, grouped
    kv heads included; with ``with_lse`` when its log-sum-exp is read (by its backward, or as
    a saved activation). Where a graph reads the log-sum-exp other than by the backward, it
    gets PyTorch's layout: cuDNN's ``B×H×L×1`` is ours reshaped; the efficient kernel's is
    padded to a multiple of 32 rows with ``+inf``, which is what that kernel writes there
    (seen on an H200). Its other results (rng state, sequence offsets) are zeros where a graph
    reads them outside the backward: dropout is 0, so they carry nothing."""
    kind = ATTENTION_FORWARD[node.target]
    args = _schema_args(node)
    q, k, v = (cx.value(args[n]) for n in ("query", "key", "value"))
    attrs = _attention_attrs(node, args, q)
    vals = node.meta.get("val")
    vals = list(vals) if isinstance(vals, (list, tuple)) else [vals]
    out_ty = TensorType(q.type.shape[:-1] + v.type.shape[-1:], q.type.dtype)
    lse_users = _result_users(node, 1)
    if not lse_users:
        out = cx.em.op("compute.attention", [q, k, v], out_ty, attrs, hint="attention")
        return [out] + [None] * (len(vals) - 1)
    attrs["with_lse"] = "unit"
    out, lse = cx.em.op("compute.attention", [q, k, v], [out_ty, _lse_type(q)], attrs, hint="attention")
    only_backward = all(u.target in ATTENTION_BACKWARD for u in lse_users)
    if kind == "cudnn" and not only_backward:
        lse = reshape(cx, lse, lse.type.shape + (1,))
    elif kind == "efficient" and not only_backward and isinstance(vals[1], torch.Tensor):
        rows, padded = lse.type.shape[-1], int(vals[1].shape[-1])
        if padded > rows:
            dim = lse.type.rank - 1
            inf = fill(cx, float("inf"), lse.type.with_shape(lse.type.shape[:-1] + (padded - rows,)))
            lse = cx.em.op(
                "compute.concat", [lse, inf], lse.type.with_shape(lse.type.shape[:-1] + (padded,)),
                {"dim": fmt_int(dim)}, hint=f"{node.name}_lse",
            )
    results: list[Value | None] = [out, lse]
    for i, val in enumerate(vals[2:], start=2):
        readers = [u for u in _result_users(node, i) if u.target not in ATTENTION_BACKWARD]
        if readers and isinstance(val, torch.Tensor):
            # The flash kernel's rng state is uint64, which commlir has no type for: zeros
            # are the same bits in i64.
            dtype = torch.int64 if val.dtype == torch.uint64 else val.dtype
            results.append(fill(cx, 0, TensorType(tuple(int(d) for d in val.shape), dtype)))
        elif readers:
            raise ExportError(f"attention '{node.name}': result #{i} ({val!r}) is read by '{readers[0].name}'")
        else:
            results.append(None)
    return results


@register(*ATTENTION_BACKWARD)
def _attention_backward(cx: Lowering, node: fx.Node) -> Result:
    """A fused attention kernel's backward as one ``compute.attention_backward`` (dk and dv
    with the kv heads under grouped-query attention). Its log-sum-exp must be the one a
    lowered forward returned (any other is not ours to reinterpret)."""
    args = _schema_args(node)
    fwd = attention_forward_of(args["logsumexp"])
    if fwd is None:
        raise ExportError(
            f"attention backward '{node.name}': its log-sum-exp does not come from a fused "
            "attention forward (was the forward decomposed?)"
        )
    q, k, v = (cx.value(args[n]) for n in ("query", "key", "value"))
    grad = args["grad_out"] if "grad_out" in args else args["grad_out_"]
    attrs = _attention_attrs(node, args, q)
    out_ty = TensorType(q.type.shape[:-1] + v.type.shape[-1:], q.type.dtype)
    out = cast(cx, cx.value(args["out"]), q.type.dtype)
    dout = cast(cx, cx.value(grad), q.type.dtype)
    lse = cx.value(args["logsumexp"])
    want = _lse_type(q)
    if lse.type.shape == want.shape + (1,):  # cuDNN's B×H×L×1
        lse = reshape(cx, lse, want.shape)
    elif lse.type.shape[:-1] == want.shape[:-1] and lse.type.shape[-1:] > want.shape[-1:]:
        # The efficient kernel's, padded (where the forward's is read elsewhere too).
        lse = slice_(cx, lse, lse.type.rank - 1, 0, want.shape[-1], f"{node.name}_lse")
    if lse.type != want or out.type != out_ty or dout.type != out_ty:
        raise ExportError(
            f"attention backward '{node.name}': out {out.type}, grad {dout.type} and log-sum-exp "
            f"{lse.type} do not fit q {q.type}, v {v.type}"
        )
    grads = cx.em.op(
        "compute.attention_backward", [q, k, v, out, dout, lse], [q.type, k.type, v.type], attrs,
        hint="attention_grad",
    )
    assert isinstance(grads, list)
    n = len(node.meta["val"]) if isinstance(node.meta.get("val"), (list, tuple)) else 3
    # The efficient kernel's fourth result is the bias gradient: there is no bias.
    return grads + [None] * (n - 3)


_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def _shape(node: Any) -> tuple[int, ...] | None:
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return tuple(int(d) for d in val.shape) if isinstance(val, torch.Tensor) else None


def _only_user(node: fx.Node) -> fx.Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


class _RepeatedKv:
    """A key or value that repeats the heads of ``src`` in place: ``src`` with a new axis
    ``axis`` expanded (to shape ``expanded``), merged into the axis before it (the kv heads),
    then permuted by ``perm`` (``None``: not permuted) so that the merged axis is the heads."""

    def __init__(self, src: fx.Node, axis: int, expanded: tuple[int, ...], perm: list[int] | None) -> None:
        self.src, self.axis, self.expanded, self.perm = src, axis, expanded, perm


def _repeat_kv_source(arg: Any) -> _RepeatedKv | None:
    """``arg`` as torchtitan's ``repeat_kv`` (``unsqueeze``, ``expand``, ``clone``, ``view``,
    then a ``permute``, as the tracer records it), or ``None``."""
    if not isinstance(arg, fx.Node):
        return None
    node, perm = arg, None
    if node.target == aten.permute.default:
        perm, node = [int(p) for p in node.args[1]], node.args[0]
    if not isinstance(node, fx.Node) or node.target not in _VIEWS:
        return None
    merged, node = node, node.args[0]
    if isinstance(node, fx.Node) and node.target == aten.clone.default:
        node = node.args[0]
    if not isinstance(node, fx.Node) or node.target != aten.expand.default:
        return None
    expanded, node = node, node.args[0]
    if not isinstance(node, fx.Node) or node.target != aten.unsqueeze.default:
        return None
    src = node.args[0]
    s, e, m = _shape(src), _shape(expanded), _shape(merged)
    if s is None or e is None or m is None or len(s) < 3:
        return None
    axis = norm_dim(int(node.args[1]), len(s) + 1)
    if not 1 <= axis <= len(s) - 1:
        return None
    n = e[axis]
    if e != s[:axis] + (n,) + s[axis:] or m != s[: axis - 1] + (s[axis - 1] * n,) + s[axis:]:
        return None
    heads = perm.index(axis - 1) if perm is not None else axis - 1
    if heads != len(s) - 3:
        return None
    return _RepeatedKv(src, axis, e, perm)


def _grad_sum_chain(bwd: fx.Node, index: int, rep: _RepeatedKv) -> tuple[fx.Node | None, fx.Node | None] | None:
    """The getitem of ``bwd``'s gradient ``index`` (of a repeated key or value) and the node
    that ends its sum over the repetitions (the gradient of ``rep.src``): the inverse
    ``permute``, a ``view`` to the expanded shape, a ``sum`` over the repeated axis (and a
    ``squeeze`` of it, with ``keepdim``). ``(None, None)``: the gradient is unused; ``None``:
    the graph does something else with it."""
    getitems = [g for g in bwd.users if g.target is GETITEM and int(g.args[1]) == index]
    if not getitems:
        return None, None
    if len(getitems) != 1:
        return None
    getitem = getitems[0]
    node = _only_user(getitem)
    if node is not None and rep.perm is not None:
        inv = [rep.perm.index(i) for i in range(len(rep.perm))]
        if node.target != aten.permute.default or [int(p) for p in node.args[1]] != inv:
            return None
        node = _only_user(node)
    if node is None or node.target not in _VIEWS or _shape(node) != rep.expanded:
        return None
    node = _only_user(node)
    if node is None or node.target != aten.sum.dim_IntList or node.kwargs.get("dtype") is not None:
        return None
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if [norm_dim(int(d), len(rep.expanded)) for d in (dims or [])] != [rep.axis]:
        return None
    if _shape(node) != _shape(rep.src):
        node = _only_user(node)
        squeezes = (aten.squeeze.dims, aten.squeeze.dim, *_VIEWS)
        if node is None or node.target not in squeezes or _shape(node) != _shape(rep.src):
            return None
    return getitem, node


def fold_repeat_kv(gm: fx.GraphModule) -> int:
    """Rewrites, in ``gm``, the key and value of each fused attention that repeat the heads
    of a smaller tensor in place (torchtitan's ``repeat_kv``: ``x[:, :, :, None, :]
    .expand(b, s, h, n, d).reshape(b, s, h * n, d)``, then transposed) into that smaller
    tensor: grouped-query attention, whose query head ``i`` reads kv head ``i // n``, exactly
    what the repetition gave it. The backward of the same attention is rewritten with it,
    and the gradient's sum over the repetitions (``view`` to ``b×s×h×n×d``, ``sum`` over the
    ``n`` axis) becomes its grouped ``dk``/``dv``; where the graph has another shape than
    that, or the repeated tensor has other readers, the attention is left as it is. The dead
    repetition is then removed. Returns how many keys and values were folded."""
    graph = gm.graph
    folded = 0
    for node in list(graph.nodes):
        if node.target not in ATTENTION_FORWARD:
            continue
        args = _schema_args(node)
        for index, name in ((1, "key"), (2, "value")):
            arg, rep = args[name], _repeat_kv_source(args[name])
            if rep is None:
                continue
            others = [u for u in arg.users if u is not node]
            backwards = [
                u for u in others
                if u.target in ATTENTION_BACKWARD and attention_forward_of(_schema_args(u)["logsumexp"]) is node
            ]
            if len(backwards) != len(others):
                continue
            chains = [_grad_sum_chain(b, index, rep) for b in backwards]
            if any(c is None for c in chains):
                continue
            grouped = rep.src
            if rep.perm is not None:
                with graph.inserting_after(rep.src):
                    grouped = graph.call_function(aten.permute.default, (rep.src, rep.perm))
                grouped.meta["val"] = rep.src.meta["val"].permute(rep.perm)
                grouped.meta["stack_trace"] = arg.meta.get("stack_trace")
            for u in (node, *backwards):
                u.replace_input_with(arg, grouped)
            for b, chain in zip(backwards, chains):
                assert chain is not None
                getitem, end = chain
                val = grouped.meta["val"].new_empty(grouped.meta["val"].shape)
                vals = list(b.meta["val"])
                vals[index] = val
                b.meta["val"] = tuple(vals)
                if getitem is None or end is None:
                    continue
                getitem.meta["val"] = val
                back = getitem
                if rep.perm is not None:
                    inv = [rep.perm.index(i) for i in range(len(rep.perm))]
                    with graph.inserting_after(getitem):
                        back = graph.call_function(aten.permute.default, (getitem, inv))
                    back.meta["val"] = val.permute(inv)
                    back.meta["stack_trace"] = end.meta.get("stack_trace")
                end.replace_all_uses_with(back)
            folded += 1
    if folded:
        graph.eliminate_dead_code()
        gm.recompile()
    return folded


# ----------------------------------------------------------------------------- views


@register(
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    aten.flatten.using_ints,
    aten.unflatten.int,
)
def _view(cx: Lowering, node: fx.Node) -> Result:
    x = cx.value(node.args[0])
    return reshape(cx, x, node_type(node).shape)


@register(aten.expand.default)
def _expand(cx: Lowering, node: fx.Node) -> Result:
    return broadcast(cx, cx.value(node.args[0]), node_type(node).shape)


def permute(cx: Lowering, x: Value, perm: Sequence[int], hint: str) -> Value:
    perm = [norm_dim(int(p), x.type.rank) for p in perm]
    if perm == list(range(len(perm))):
        return x
    undone = cx.permuted.get(x.name)
    if undone is not None and [undone[1][p] for p in perm] == list(range(len(perm))):
        return undone[0]
    shape = tuple(x.type.shape[p] for p in perm)
    # 2-D and 1-sized-dims-only permutations need no general permute.
    if [s for s in x.type.shape if s != 1] == [s for s in shape if s != 1] and _keeps_order(x.type.shape, perm):
        return reshape(cx, x, shape)
    if x.type.rank == 2:
        out = cx.em.op("compute.transpose", [x], x.type.with_shape(shape), hint=hint)
    else:
        out = cx.em.op("compute.permute", [x], x.type.with_shape(shape), {"perm": fmt_array(perm)}, hint=hint)
    cx.permuted[out.name] = (x, perm)
    return out


def _keeps_order(shape: tuple[int, ...], perm: list[int]) -> bool:
    """Whether the non-unit dimensions stay in the same relative order under ``perm``."""
    big = [p for p in perm if shape[p] != 1]
    return big == sorted(big)


@register(aten.permute.default)
def _permute(cx: Lowering, node: fx.Node) -> Result:
    return permute(cx, cx.value(node.args[0]), node.args[1], node.name)


@register(aten.t.default, aten.numpy_T.default)
def _t(cx: Lowering, node: fx.Node) -> Result:
    x = cx.value(node.args[0])
    return permute(cx, x, list(reversed(range(x.type.rank))), node.name)


@register(aten.transpose.int)
def _transpose(cx: Lowering, node: fx.Node) -> Result:
    x = cx.value(node.args[0])
    perm = list(range(x.type.rank))
    a, b = norm_dim(int(node.args[1]), x.type.rank), norm_dim(int(node.args[2]), x.type.rank)
    perm[a], perm[b] = perm[b], perm[a]
    return permute(cx, x, perm, node.name)


def slice_(cx: Lowering, x: Value, dim: int, start: int, size: int, hint: str) -> Value:
    if start == 0 and size == x.type.shape[dim]:
        return x
    shape = list(x.type.shape)
    shape[dim] = size
    attrs = {"dim": fmt_int(dim), "start": fmt_int(start), "size": fmt_int(size)}
    return cx.em.op("compute.slice", [x], x.type.with_shape(shape), attrs, hint=hint)


def _clamp_start(start: int | None, length: int) -> int:
    if start is None:
        return 0
    start = int(start)
    if start < 0:
        start += length
    return min(max(start, 0), length)


@register(aten.slice.Tensor)
def _slice(cx: Lowering, node: fx.Node) -> Result:
    x = cx.value(node.args[0])
    args = list(node.args) + [None] * (5 - len(node.args))
    dim = norm_dim(int(args[1] if args[1] is not None else node.kwargs.get("dim", 0)), x.type.rank)
    step = args[4] if args[4] is not None else node.kwargs.get("step", 1)
    if step != 1:
        raise ExportError(f"slice step {step} (only step 1 is supported)")
    start = args[2] if args[2] is not None else node.kwargs.get("start")
    size = node_type(node).shape[dim]
    return slice_(cx, x, dim, _clamp_start(start, x.type.shape[dim]), size, node.name)


@register(aten.narrow.default)
def _narrow(cx: Lowering, node: fx.Node) -> Result:
    x = cx.value(node.args[0])
    dim = norm_dim(int(node.args[1]), x.type.rank)
    return slice_(cx, x, dim, _clamp_start(node.args[2], x.type.shape[dim]), int(node.args[3]), node.name)


@register(aten.select.int)
def _select(cx: Lowering, node: fx.Node) -> Result:
    x = cx.value(node.args[0])
    dim = norm_dim(int(node.args[1]), x.type.rank)
    idx = int(node.args[2])
    idx = idx + x.type.shape[dim] if idx < 0 else idx
    s = slice_(cx, x, dim, idx, 1, f"{node.name}_slice")
    return reshape(cx, s, node_type(node).shape)


@register(aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int)
def _split(cx: Lowering, node: fx.Node) -> Result:
    x = cx.value(node.args[0])
    types = node_types(node)
    dim_arg = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    if node.target == aten.unbind.int:
        dim_arg = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    dim = norm_dim(int(dim_arg), x.type.rank)
    cx.splits[node] = (x, dim)
    out, start = [], 0
    for i, t in enumerate(types):
        size = t.shape[dim] if node.target != aten.unbind.int else 1
        s = slice_(cx, x, dim, start, size, f"{node.name}_{i}")
        out.append(reshape(cx, s, t.shape))
        start += size
    return out


@register(aten.cat.default)
def _cat(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    dim = norm_dim(int(node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)), ty.rank)
    parts = [cast(cx, cx.value(a), ty.dtype) for a in node.args[0]]
    parts = [p for p in parts if p.type.rank == ty.rank and p.type.shape[dim] > 0]
    if len(parts) == 1:
        return parts[0]
    return cx.em.op("compute.concat", parts, ty, {"dim": fmt_int(dim)}, hint=node.name)


# ---------------------------------------------------------------------- matmul family


@register(aten.mm.default, aten.bmm.default)
def _mm(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    a, b = cx.value(node.args[0]), cx.value(node.args[1])
    return cx.em.op("compute.matmul", [cast(cx, a, ty.dtype), cast(cx, b, ty.dtype)], ty, hint=node.name)


@register(aten.addmm.default, aten.baddbmm.default)
def _addmm(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    beta = float(node.kwargs.get("beta", 1))
    alpha = float(node.kwargs.get("alpha", 1))
    a, b = cx.value(node.args[1]), cx.value(node.args[2])
    mm = cx.em.op("compute.matmul", [cast(cx, a, ty.dtype), cast(cx, b, ty.dtype)], ty, hint=f"{node.name}_mm")
    mm = scale(cx, mm, alpha, f"{node.name}_alpha")
    if beta == 0.0:
        return mm
    bias = scale(cx, operand(cx, node.args[0], ty), beta, f"{node.name}_beta")
    return cx.em.op("compute.add", [mm, bias], ty, hint=node.name)


# ---------------------------------------------------------------- casts and identity


@register(aten._to_copy.default, prims.convert_element_type.default, aten.to.dtype)
def _to_copy(cx: Lowering, node: fx.Node) -> Result:
    return cast(cx, cx.value(node.args[0]), node_type(node).dtype)


@register(
    aten.alias.default,
    aten.detach.default,
    aten.clone.default,
    aten.lift_fresh_copy.default,
    aten.contiguous.default,
    aten.view_as.default,
)
def _identity(cx: Lowering, node: fx.Node) -> Result:
    x = cx.value(node.args[0])
    return reshape(cx, x, node_type(node).shape)


# --------------------------------------------------------------------------- creation


def _fill_node(cx: Lowering, node: fx.Node, value: Any) -> Value:
    if not is_scalar(value):
        raise ExportError(f"fill value {value!r} is not a number")
    return fill(cx, value, node_type(node))


@register(aten.full.default, aten.new_full.default)
def _full(cx: Lowering, node: fx.Node) -> Result:
    return _fill_node(cx, node, node.args[-1] if node.target == aten.new_full.default else node.args[1])


@register(aten.full_like.default)
def _full_like(cx: Lowering, node: fx.Node) -> Result:
    return _fill_node(cx, node, node.args[1])


@register(aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default)
def _zeros(cx: Lowering, node: fx.Node) -> Result:
    return _fill_node(cx, node, 0.0)


@register(aten.ones.default, aten.ones_like.default, aten.new_ones.default)
def _ones(cx: Lowering, node: fx.Node) -> Result:
    return _fill_node(cx, node, 1.0)


@register(aten.scalar_tensor.default)
def _scalar_tensor(cx: Lowering, node: fx.Node) -> Result:
    return _fill_node(cx, node, node.args[0])


@register(aten.arange.default, aten.arange.start, aten.arange.start_step)
def _arange(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    if node.target == aten.arange.default:
        start, step = 0, 1
    else:
        start = node.args[0]
        step = node.args[2] if len(node.args) > 2 else node.kwargs.get("step", 1)
    idx = cx.em.op("compute.iota", [], TensorType(ty.shape, torch.int64), {"dim": fmt_int(0)}, hint=f"{node.name}_iota")
    if start == 0 and step == 1:
        return cast(cx, idx, ty.dtype)
    # An integer range goes through f64, exact for any range a tensor holds in practice.
    work = ty if is_float(ty.dtype) else ty.with_dtype(torch.float64)
    if not is_float(ty.dtype) and max(abs(float(start)), abs(float(start) + float(step) * ty.shape[0])) >= 2.0**53:
        raise ExportError(f"integer arange with start {start} and step {step} beyond 2**53")
    x = scale(cx, cast(cx, idx, work.dtype), float(step), f"{node.name}_step")
    if start != 0:
        x = cx.em.op("compute.add", [x, fill(cx, start, work)], work, hint=node.name)
    return cast(cx, x, ty.dtype)


# Ops that compute nothing (assertions on metadata): no value, nothing emitted.
ASSERTS = {
    aten._assert_tensor_metadata.default,
    aten._assert_scalar.default,
    aten.sym_constrain_range_for_size.default,
}

GETITEM = operator.getitem


@register(aten.any.dim, aten.any.dims, aten.any.default)
def _any(cx: Lowering, node: fx.Node) -> Result:
    """``any`` as a max-reduction of the values as 0/1, compared with 0."""
    ty = node_type(node)
    x = cx.value(node.args[0])
    ft = torch.float32
    if x.type.dtype == torch.bool:
        x = cast(cx, x, ft)
    else:
        x = cx.em.op(
            "compute.compare", [x, fill(cx, 0, x.type)], x.type.with_dtype(torch.bool),
            {"predicate": fmt_str("ne")}, hint=f"{node.name}_nz",
        )
        x = cast(cx, x, ft)
    for d in _dims(node, x.type.rank):
        shape = x.type.shape[:d] + x.type.shape[d + 1 :]
        x = cx.em.op("compute.reduce_max", [x], x.type.with_shape(shape), {"dim": fmt_int(d)}, hint=f"{node.name}_r{d}")
    x = reshape(cx, x, ty.shape)
    return cx.em.op(
        "compute.compare", [x, fill(cx, 0, x.type)], ty, {"predicate": fmt_str("gt")}, hint=node.name
    )


def _scatter_along(cx: Lowering, node: fx.Node, base: Value, src: Value, dim: int, start: int) -> Value:
    """``base`` with rows ``[start, start + src.shape[dim])`` along ``dim`` replaced by ``src``."""
    size, length = src.type.shape[dim], base.type.shape[dim]
    parts = []
    if start > 0:
        parts.append(slice_(cx, base, dim, 0, start, f"{node.name}_lo"))
    parts.append(src)
    if start + size < length:
        parts.append(slice_(cx, base, dim, start + size, length - start - size, f"{node.name}_hi"))
    if len(parts) == 1:
        return src
    return cx.em.op("compute.concat", parts, base.type, {"dim": fmt_int(dim)}, hint=node.name)


@register(aten.slice_scatter.default)
def _slice_scatter(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    base = operand(cx, node.args[0], ty)
    args = list(node.args) + [None] * (6 - len(node.args))
    dim = norm_dim(int(args[2] if args[2] is not None else node.kwargs.get("dim", 0)), ty.rank)
    step = args[5] if args[5] is not None else node.kwargs.get("step", 1)
    if step != 1:
        raise ExportError(f"slice_scatter step {step} (only step 1 is supported)")
    start = _clamp_start(args[3] if args[3] is not None else node.kwargs.get("start"), ty.shape[dim])
    src = cast(cx, cx.value(node.args[1]), ty.dtype)
    return _scatter_along(cx, node, base, src, dim, start)


@register(aten.select_scatter.default)
def _select_scatter(cx: Lowering, node: fx.Node) -> Result:
    ty = node_type(node)
    base = operand(cx, node.args[0], ty)
    dim = norm_dim(int(node.args[2]), ty.rank)
    idx = int(node.args[3])
    idx = idx + ty.shape[dim] if idx < 0 else idx
    shape = list(ty.shape)
    shape[dim] = 1
    src = reshape(cx, cast(cx, cx.value(node.args[1]), ty.dtype), shape)
    return _scatter_along(cx, node, base, src, dim, idx)


def _var_mean_values(cx: Lowering, node: fx.Node) -> tuple[Value, Value, TensorType]:
    """The variance and mean of ``var``/``var_mean`` (``correction`` as Bessel's), in the
    result's shape."""
    x = cx.value(node.args[0])
    types = node_types(node)
    ty = types[0]
    x = cast(cx, x, ty.dtype)
    dims = _dims(node, x.type.rank)
    correction = node.kwargs.get("correction", 1)
    correction = 1 if correction is None else float(correction)
    count = math.prod(x.type.shape[d] for d in dims)
    kept = tuple(1 if d in dims else s for d, s in enumerate(x.type.shape))
    s = x
    for d in dims:
        s = cx.em.op("compute.reduce_sum", [s], s.type.with_shape(s.type.shape[:d] + s.type.shape[d + 1 :]),
                     {"dim": fmt_int(d)}, hint=f"{node.name}_sum")
    mean = scale(cx, s, 1.0 / count, f"{node.name}_mean")
    centered = cx.em.op("compute.sub", [x, broadcast(cx, reshape(cx, mean, kept), x.type.shape)], x.type, hint=f"{node.name}_c")
    sq = cx.em.op("compute.mul", [centered, centered], x.type, hint=f"{node.name}_sq")
    for d in dims:
        sq = cx.em.op("compute.reduce_sum", [sq], sq.type.with_shape(sq.type.shape[:d] + sq.type.shape[d + 1 :]),
                      {"dim": fmt_int(d)}, hint=f"{node.name}_ss")
    var = scale(cx, sq, 1.0 / max(count - correction, 0) if count > correction else float("inf"), f"{node.name}_var")
    return reshape(cx, var, ty.shape), reshape(cx, mean, ty.shape), ty


@register(aten.var_mean.correction)
def _var_mean(cx: Lowering, node: fx.Node) -> Result:
    var, mean, _ = _var_mean_values(cx, node)
    return [var, mean]


@register(aten.var.correction)
def _var(cx: Lowering, node: fx.Node) -> Result:
    var, _, _ = _var_mean_values(cx, node)
    return var


# ------------------------------------------------------- lookups as one-hot matmuls


def one_hot(cx: Lowering, indices: Value, classes: int, dtype: torch.dtype, hint: str) -> Value:
    """``[N]`` integer indices → ``[N, classes]`` one-hot rows of ``dtype`` (an index outside
    ``[0, classes)`` gives a row of zeros)."""
    (n,) = indices.type.shape
    idx = cast(cx, indices, torch.int64)
    grid = TensorType((n, classes), torch.int64)
    iota = cx.em.op("compute.iota", [], grid, {"dim": fmt_int(1)}, hint=f"{hint}_iota")
    col = broadcast(cx, reshape(cx, idx, (n, 1)), grid.shape)
    hit = cx.em.op("compute.compare", [iota, col], grid.with_dtype(torch.bool), {"predicate": fmt_str("eq")}, hint=f"{hint}_eq")
    return cast(cx, hit, dtype)


@register(aten.embedding.default)
def _embedding(cx: Lowering, node: fx.Node) -> Result:
    """``weight[indices]`` as ``one_hot(indices) @ weight``: each output row is one weight row
    times one plus zeros, so the lookup is exact."""
    ty = node_type(node)
    weight, indices = cx.value(node.args[0]), cx.value(node.args[1])
    vocab, dim = weight.type.shape
    n = math.prod(indices.type.shape)
    oh = one_hot(cx, reshape(cx, indices, (n,)), vocab, weight.type.dtype, node.name)
    rows = cx.em.op("compute.matmul", [oh, weight], weight.type.with_shape((n, dim)), hint=f"{node.name}_mm")
    return reshape(cx, rows, ty.shape)


@register(aten.embedding_dense_backward.default)
def _embedding_backward(cx: Lowering, node: fx.Node) -> Result:
    """The weight gradient ``one_hot(indices)ᵀ @ grad`` (rows of ``padding_idx`` stay zero)."""
    ty = node_type(node)
    grad, indices = cx.value(node.args[0]), cx.value(node.args[1])
    vocab, padding_idx, by_freq = int(node.args[2]), int(node.args[3]), bool(node.args[4])
    if by_freq:
        raise ExportError("scale_grad_by_freq=True (gradients scaled by index counts)")
    dim = ty.shape[1]
    n = math.prod(indices.type.shape)
    flat = reshape(cx, indices, (n,))
    oh = one_hot(cx, flat, vocab, ty.dtype, node.name)
    if padding_idx >= 0:
        keep = cx.em.op(
            "compute.compare", [cast(cx, flat, torch.int64), fill(cx, padding_idx, TensorType((n,), torch.int64))],
            TensorType((n,), torch.bool), {"predicate": fmt_str("ne")}, hint=f"{node.name}_keep",
        )
        oh = cx.em.op("compute.mul", [oh, broadcast(cx, reshape(cx, cast(cx, keep, ty.dtype), (n, 1)), oh.type.shape)],
                      oh.type, hint=f"{node.name}_pad")
    oht = permute(cx, oh, [1, 0], f"{node.name}_t")
    g = reshape(cx, cast(cx, grad, ty.dtype), (n, dim))
    return cx.em.op("compute.matmul", [oht, g], ty, hint=node.name)


_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _nll_parts(cx: Lowering, node: fx.Node, x: Value, target: Value, weight: Any, ignore_index: int) -> tuple[Value, Value]:
    """The one-hot of the targets (``[N, C]``, zero rows where ignored) and the kept-row mask
    (``[N]``), both of ``x``'s type."""
    if weight is not None:
        raise ExportError("nll_loss with class weights")
    if x.type.rank != 2:
        raise ExportError(f"nll_loss on {x.type} (only [N, C] inputs)")
    n, c = x.type.shape
    t = cast(cx, target, torch.int64)
    keep = cx.em.op(
        "compute.compare", [t, fill(cx, ignore_index, t.type)], t.type.with_dtype(torch.bool),
        {"predicate": fmt_str("ne")}, hint=f"{node.name}_keep",
    )
    mask = cast(cx, keep, x.type.dtype)
    oh = one_hot(cx, t, c, x.type.dtype, node.name)
    oh = cx.em.op("compute.mul", [oh, broadcast(cx, reshape(cx, mask, (n, 1)), (n, c))], oh.type, hint=f"{node.name}_oh")
    return oh, mask


@register(aten.nll_loss_forward.default)
def _nll_loss(cx: Lowering, node: fx.Node) -> Result:
    """``-x[i, target[i]]`` per row (one-hot products summed), reduced by ``reduction``; the
    second result is the number of rows not ignored."""
    out_t, total_t = node_types(node)
    x, target = cx.value(node.args[0]), cx.value(node.args[1])
    weight, reduction, ignore_index = node.args[2], int(node.args[3]), int(node.args[4])
    oh, mask = _nll_parts(cx, node, x, target, weight, ignore_index)
    picked = cx.em.op("compute.mul", [x, oh], x.type, hint=f"{node.name}_pick")
    rows = cx.em.op("compute.reduce_sum", [picked], mask.type, {"dim": fmt_int(1)}, hint=f"{node.name}_rows")
    rows = cx.em.op("compute.neg", [rows], rows.type, hint=f"{node.name}_neg")
    scalar = TensorType((), x.type.dtype)
    total = cx.em.op("compute.reduce_sum", [mask], scalar, {"dim": fmt_int(0)}, hint=f"{node.name}_total")
    kind = _REDUCTIONS.get(reduction)
    if kind == "none":
        return [reshape(cx, rows, out_t.shape), total]
    s = cx.em.op("compute.reduce_sum", [rows], scalar, {"dim": fmt_int(0)}, hint=f"{node.name}_sum")
    if kind == "sum":
        return [s, total]
    if kind == "mean":
        return [cx.em.op("compute.div", [s, total], scalar, hint=node.name), total]
    raise ExportError(f"reduction {reduction}")


@register(aten.nll_loss_backward.default)
def _nll_loss_backward(cx: Lowering, node: fx.Node) -> Result:
    """``-one_hot(target) · grad`` (divided by the kept-row count for ``mean``)."""
    ty = node_type(node)
    grad, x, target = cx.value(node.args[0]), cx.value(node.args[1]), cx.value(node.args[2])
    weight, reduction, ignore_index = node.args[3], int(node.args[4]), int(node.args[5])
    total = cx.value(node.args[6])
    oh, _ = _nll_parts(cx, node, x, target, weight, ignore_index)
    g = cast(cx, grad, ty.dtype)
    kind = _REDUCTIONS.get(reduction)
    if kind == "mean":
        g = cx.em.op("compute.div", [g, cast(cx, total, ty.dtype)], g.type, hint=f"{node.name}_mean")
    if kind == "none":
        g = broadcast(cx, reshape(cx, g, (ty.shape[0], 1)), ty.shape)
    else:
        g = broadcast(cx, g, ty.shape)
    neg = cx.em.op("compute.neg", [oh], ty, hint=f"{node.name}_neg")
    return cx.em.op("compute.mul", [neg, g], ty, hint=node.name)


@register(aten.index_put.default)
def _index_put(cx: Lowering, node: fx.Node) -> Result:
    """``x[mask] = v`` with one boolean mask over ``x``'s leading dimensions and a scalar (or
    full-shape) ``v``: a select."""
    ty = node_type(node)
    x, indices, values = node.args[0], node.args[1], node.args[2]
    accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
    if indices and all(isinstance(i, fx.Node) and not node_type(i).dtype.is_floating_point
                       and node_type(i).dtype != torch.bool for i in indices):
        return _index_put_int(cx, node, ty, x, indices, values, bool(accumulate))
    if accumulate or len(indices) != 1 or not isinstance(indices[0], fx.Node):
        raise ExportError("index_put other than x[mask] = v (one boolean mask, no accumulate) "
                          "or x[i, j, ...] = v (integer indices of one 1-D shape)")
    mask = cx.value(indices[0])
    k = mask.type.rank
    if mask.type.dtype != torch.bool or mask.type.shape != ty.shape[:k]:
        raise ExportError(f"index_put with index {mask.type} (only a boolean mask of leading dims of {list(ty.shape)})")
    mask = broadcast(cx, reshape(cx, mask, mask.type.shape + (1,) * (ty.rank - k)), ty.shape)
    vt = values.meta.get("val") if isinstance(values, fx.Node) else None
    if isinstance(vt, torch.Tensor) and vt.dim() > 0 and tuple(vt.shape) != ty.shape:
        raise ExportError(f"index_put of values {list(vt.shape)} (only a scalar or the full shape)")
    v = operand(cx, values, ty)
    return cx.em.op("compute.select", [mask, v, operand(cx, x, ty)], ty, hint=node.name)


# ------------------------------------------------- uninitialized memory, fills, copies


@register(
    aten.empty.memory_format,
    aten.empty_strided.default,
    aten.empty_like.default,
    aten.new_empty.default,
    aten.new_empty_strided.default,
)
def _empty(cx: Lowering, node: fx.Node) -> Result:
    """Uninitialized memory: any value is a correct one, and zero makes every rank and every
    run alike. (A dead ``empty_strided`` + ``add_`` that DTensor leaves in a graph never gets
    here: export.py drops in-place chains nobody reads.)"""
    return fill(cx, 0.0, node_type(node))


@register(aten.fill.Scalar)
def _fill_scalar(cx: Lowering, node: fx.Node) -> Result:
    """``x.fill_(v)`` (through the in-place rule): a fill of ``x``'s type."""
    return _fill_node(cx, node, node.args[1])


@register(aten.copy.default)
def _copy(cx: Lowering, node: fx.Node) -> Result:
    """``x.copy_(src)`` (through the in-place rule): ``src`` broadcast and cast to ``x``'s type."""
    return operand(cx, node.args[1], node_type(node))


@register(aten.pow.Scalar)
def _pow_scalar(cx: Lowering, node: fx.Node) -> Result:
    """``base ** x`` for a positive number ``base``: ``exp(x · ln base)``."""
    ty = node_type(node)
    base = node.args[0]
    if not is_scalar(base) or float(base) <= 0:
        raise ExportError(f"{base!r} ** tensor (only a positive number as the base)")
    x = operand(cx, node.args[1], ty)
    if float(base) == 1.0:
        return fill(cx, 1.0, ty)
    return cx.em.op("compute.exp", [scale(cx, x, math.log(float(base)), f"{node.name}_ln")], ty, hint=node.name)


@register(aten.gather.default)
def _gather(cx: Lowering, node: fx.Node) -> Result:
    """``torch.gather(x, dim, index)``: along ``dim``, each output element is the element of
    ``x`` that ``index`` names, a one-hot selection summed (exact: one term and zeros) —
    what DTensor's ``loss_parallel`` picks the target logits with."""
    ty = node_type(node)
    x = cx.value(node.args[0])
    dim = norm_dim(int(node.args[1]), x.type.rank)
    index = cx.value(node.args[2])
    if node.kwargs.get("sparse_grad"):
        raise ExportError("gather with sparse_grad")
    if any(i != o for d, (i, o) in enumerate(zip(index.type.shape, x.type.shape)) if d != dim):
        raise ExportError(f"gather of {x.type} by {index.type} (the index must match x outside dim {dim})")
    # Move dim last: x [..., C] against index [..., K] → [..., K, C].
    perm = [d for d in range(x.type.rank) if d != dim] + [dim]
    xt, it = permute(cx, x, perm, f"{node.name}_xt"), permute(cx, index, perm, f"{node.name}_it")
    c, k = xt.type.shape[-1], it.type.shape[-1]
    grid = xt.type.shape[:-1] + (k, c)
    xb = broadcast(cx, reshape(cx, xt, xt.type.shape[:-1] + (1, c)), grid)
    ib = broadcast(cx, reshape(cx, cast(cx, it, torch.int64), it.type.shape + (1,)), grid)
    iota = cx.em.op("compute.iota", [], TensorType(grid, torch.int64), {"dim": fmt_int(len(grid) - 1)}, hint=f"{node.name}_iota")
    hit = cx.em.op("compute.compare", [iota, ib], TensorType(grid, torch.bool), {"predicate": fmt_str("eq")}, hint=f"{node.name}_eq")
    picked = cx.em.op("compute.select", [hit, xb, fill(cx, 0.0, xb.type)], xb.type, hint=f"{node.name}_pick")
    out = cx.em.op("compute.reduce_sum", [picked], xb.type.with_shape(grid[:-1]), {"dim": fmt_int(len(grid) - 1)},
                   hint=f"{node.name}_sum")
    inverse = [perm.index(d) for d in range(x.type.rank)]
    return cast(cx, permute(cx, out, inverse, node.name), ty.dtype)


def _index_put_int(cx: Lowering, node: fx.Node, ty: TensorType, x: Any, indices: Sequence[fx.Node], values: Any,
                   accumulate: bool) -> Value:
    """``x[i₀, …, iₖ₋₁] = v`` (or ``+=``) with k integer index tensors of one 1-D shape [N]
    over ``x``'s first k dims (DTensor's ``loss_parallel`` backward writes its gradient so):
    the written rows as one-hot products, ``one_hot(flat index)ᵀ @ v`` (exact for distinct
    indices: each row one term), selected where an index hit (added, with ``accumulate``)."""
    idx = [cx.value(i) for i in indices]
    n_shape = idx[0].type.shape
    if len(n_shape) != 1 or any(i.type.shape != n_shape for i in idx) or len(idx) > ty.rank:
        raise ExportError("index_put with integer indices of other shapes than one 1-D shape")
    k, (n,) = len(idx), n_shape
    lead, rest = ty.shape[:k], ty.shape[k:]
    rows, width = math.prod(lead), math.prod(rest)
    lin: Value | None = None
    stride = 1
    for d in reversed(range(k)):
        term = cast(cx, idx[d], torch.int64)
        if stride != 1:
            term = cx.em.op("compute.mul", [term, fill(cx, stride, term.type)], term.type, hint=f"{node.name}_s{d}")
        lin = term if lin is None else cx.em.op("compute.add", [lin, term], term.type, hint=f"{node.name}_lin")
        stride *= lead[d]
    assert lin is not None
    oh = one_hot(cx, lin, rows, ty.dtype, node.name)  # [N, rows]
    oht = permute(cx, oh, [1, 0], f"{node.name}_t")
    v = operand(cx, values, ty.with_shape((n, *rest))) if not is_scalar(values) else fill(cx, values, ty.with_shape((n, *rest)))
    delta = cx.em.op("compute.matmul", [oht, reshape(cx, v, (n, width))], ty.with_shape((rows, width)), hint=f"{node.name}_put")
    base = reshape(cx, operand(cx, x, ty), (rows, width))
    if accumulate:
        out = cx.em.op("compute.add", [base, delta], base.type, hint=node.name)
        return reshape(cx, out, ty.shape)
    ones = fill(cx, 1.0, ty.with_shape((n, 1)))
    hits = cx.em.op("compute.matmul", [oht, ones], ty.with_shape((rows, 1)), hint=f"{node.name}_hits")
    hit = cx.em.op("compute.compare", [hits, fill(cx, 0.0, hits.type)], hits.type.with_dtype(torch.bool),
                   {"predicate": fmt_str("gt")}, hint=f"{node.name}_hit")
    hit = broadcast(cx, hit, (rows, width))
    out = cx.em.op("compute.select", [hit, delta, base], base.type, hint=node.name)
    return reshape(cx, out, ty.shape)
