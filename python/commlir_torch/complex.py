"""Complex tensors as pairs of real tensors.

commlir has no complex element type, and it needs none for what models do with complex
numbers: torchtitan's rotary embedding (``view_as_complex``, ``polar``, a complex multiply,
``view_as_real``) is real arithmetic on the two halves of the last dimension. A complex value
of the graph is carried as a :class:`Complex` (its real and imaginary parts, two values of the
component type: ``complex64`` → two ``f32`` tensors), and every op on complex values lowers to
the real ops on the parts. It never reaches the program: a complex argument arrives as its
``view_as_real`` (trace.py), a complex result must leave through ``view_as_real``.

Shape ops (views, slices, concatenation, sums, …) apply to each part as they are
(:data:`PER_PART`: the aten table's own lowering runs once per part); arithmetic has its own
rules here (:data:`TABLE`). Anything else on a complex tensor is an error naming the op."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

from . import aten as A
from .ir import ExportError, TensorType, Value, fmt_int

if TYPE_CHECKING:
    from .export import Lowering

aten = torch.ops.aten


@dataclass(frozen=True)
class Complex:
    """A complex tensor as its real and imaginary parts (same type: the component type)."""

    re: Value
    im: Value

    @property
    def type(self) -> TensorType:
        return self.re.type


Handler = Callable[["Lowering", fx.Node], Any]
TABLE: dict[Any, Handler] = {}


def _register(*ops: Any) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for op in ops:
            TABLE[op] = fn
        return fn

    return deco


# Ops that act on the real and the imaginary part alike.
PER_PART = {
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default,
    aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.flatten.using_ints,
    aten.unflatten.int, aten.expand.default, aten.permute.default, aten.t.default,
    aten.transpose.int, aten.slice.Tensor, aten.narrow.default, aten.select.int,
    aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int, aten.cat.default,
    aten.clone.default, aten.alias.default, aten.detach.default, aten.contiguous.default,
    aten.lift_fresh_copy.default, aten.view_as.default, aten.resolve_conj.default,
    aten.resolve_neg.default, aten.sum.dim_IntList, aten.sum.default, aten.mean.dim,
    aten._to_copy.default, aten.slice_scatter.default, aten.select_scatter.default,
}

# Creation ops of a complex tensor: the position of their fill value (None: zero; "one": one).
_CREATION: dict[Any, int | str | None] = {
    aten.zeros.default: None, aten.zeros_like.default: None, aten.new_zeros.default: None,
    aten.empty.memory_format: None, aten.empty_like.default: None, aten.new_empty.default: None,
    aten.empty_strided.default: None,
    aten.ones.default: "one", aten.ones_like.default: "one", aten.new_ones.default: "one",
    aten.full.default: 1, aten.full_like.default: 1, aten.new_full.default: 2,
    aten.scalar_tensor.default: 0,
}


def involved(cx: Lowering, node: fx.Node) -> bool:
    """Whether ``node`` produces or reads a complex tensor."""
    if _is_complex_val(node.meta.get("val")):
        return True
    return any(isinstance(cx.env.get(a), Complex) for a in _nodes(node.args) + _nodes(list(node.kwargs.values())))


def _is_complex_val(val: Any) -> bool:
    if isinstance(val, (list, tuple)):
        return any(_is_complex_val(v) for v in val)
    return isinstance(val, torch.Tensor) and val.dtype.is_complex


def _nodes(args: Any) -> list[fx.Node]:
    out: list[fx.Node] = []
    for a in args:
        if isinstance(a, fx.Node):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(_nodes(a))
    return out


def lower(cx: Lowering, node: fx.Node, target: Any = None) -> Any:
    """The lowering of a node that produces or reads complex tensors (as ``target``, the
    out-of-place form of an in-place op, when given)."""
    target = node.target if target is None else target
    if target in TABLE:
        return TABLE[target](cx, node)
    if target in _CREATION:
        return _create(cx, node, target)
    if target in PER_PART and target in A.TABLE:
        return _per_part(cx, node, A.TABLE[target])
    raise ExportError(
        f"complex tensors through {target}: complex numbers are lowered to real arithmetic for "
        "view_as_complex, view_as_real, complex, polar, +, -, *, conj and shape ops only"
    )


def _per_part(cx: Lowering, node: fx.Node, handler: A.Handler) -> Any:
    """Runs the aten lowering of ``node`` once on the real parts of its complex inputs and
    once on their imaginary parts (``aten.node_type`` gives a complex node the component
    type)."""
    inputs = [a for a in _nodes(node.args) if isinstance(cx.env.get(a), Complex)]
    saved = {a: cx.env[a] for a in inputs}
    parts = []
    try:
        for which in ("re", "im"):
            for a in inputs:
                cx.env[a] = getattr(saved[a], which)
            parts.append(handler(cx, node))
    finally:
        cx.env.update(saved)
    re, im = parts
    if isinstance(re, list):
        return [Complex(r, i) for r, i in zip(re, im)]
    return Complex(re, im)


def _create(cx: Lowering, node: fx.Node, target: Any) -> Complex:
    ty = A.node_type(node)
    where = _CREATION[target]
    if where is None:
        value: complex = 0j
    elif where == "one":
        value = 1 + 0j
    else:
        assert isinstance(where, int)
        value = complex(node.args[where])
    return Complex(A.fill(cx, value.real, ty), A.fill(cx, value.imag, ty))


def _operand(cx: Lowering, a: Any, ty: TensorType) -> Complex | Value | complex:
    """A complex operand (broadcast to ``ty``), a real tensor operand (broadcast and cast to
    the component type), or a Python number."""
    if isinstance(a, (int, float, complex)) and not isinstance(a, bool):
        return complex(a)
    v = cx.env.get(a) if isinstance(a, fx.Node) else None
    if isinstance(v, Complex):
        return Complex(A.broadcast(cx, v.re, ty.shape), A.broadcast(cx, v.im, ty.shape))
    return A.operand(cx, a, ty)


def _parts(cx: Lowering, x: Complex | Value | complex, ty: TensorType) -> tuple[Value | None, Value | None]:
    """``x``'s real and imaginary parts as values of ``ty`` (None for a zero part)."""
    if isinstance(x, Complex):
        return x.re, x.im
    if isinstance(x, Value):
        return x, None
    re = A.fill(cx, x.real, ty) if x.real != 0 else None
    im = A.fill(cx, x.imag, ty) if x.imag != 0 else None
    return re, im


def _zero(cx: Lowering, ty: TensorType) -> Value:
    return A.fill(cx, 0.0, ty)


def _add_parts(cx: Lowering, a: Value | None, b: Value | None, ty: TensorType, hint: str, sub: bool = False) -> Value:
    if b is None:
        return a if a is not None else _zero(cx, ty)
    if a is None:
        return cx.em.op("compute.neg", [b], ty, hint=hint) if sub else b
    return cx.em.op("compute.sub" if sub else "compute.add", [a, b], ty, hint=hint)


@_register(aten.view_as_complex.default)
def _view_as_complex(cx: Lowering, node: fx.Node) -> Complex:
    x = cx.value(node.args[0])
    if x.type.rank == 0 or x.type.shape[-1] != 2:
        raise ExportError(f"view_as_complex of {x.type}: the last dimension must be 2")
    d = x.type.rank - 1
    ty = x.type.with_shape(x.type.shape[:-1])
    re = A.reshape(cx, A.slice_(cx, x, d, 0, 1, f"{node.name}_re"), ty.shape)
    im = A.reshape(cx, A.slice_(cx, x, d, 1, 1, f"{node.name}_im"), ty.shape)
    return Complex(re, im)


@_register(aten.view_as_real.default)
def _view_as_real(cx: Lowering, node: fx.Node) -> Value:
    z = cx.env.get(node.args[0])
    if not isinstance(z, Complex):
        raise ExportError("view_as_real of a real tensor")
    ty = A.node_type(node)
    one = ty.shape[:-1] + (1,)
    parts = [A.reshape(cx, z.re, one), A.reshape(cx, z.im, one)]
    return cx.em.op("compute.concat", parts, ty, {"dim": fmt_int(ty.rank - 1)}, hint=node.name)


@_register(aten.complex.default)
def _complex(cx: Lowering, node: fx.Node) -> Complex:
    ty = A.node_type(node)
    return Complex(A.operand(cx, node.args[0], ty), A.operand(cx, node.args[1], ty))


@_register(aten.polar.default)
def _polar(cx: Lowering, node: fx.Node) -> Complex:
    """``abs · (cos θ + i sin θ)``."""
    ty = A.node_type(node)
    r, theta = A.operand(cx, node.args[0], ty), A.operand(cx, node.args[1], ty)
    cos = cx.em.op("compute.cos", [theta], ty, hint=f"{node.name}_cos")
    sin = cx.em.op("compute.sin", [theta], ty, hint=f"{node.name}_sin")
    re = cx.em.op("compute.mul", [r, cos], ty, hint=f"{node.name}_re")
    im = cx.em.op("compute.mul", [r, sin], ty, hint=f"{node.name}_im")
    return Complex(re, im)


@_register(aten.mul.Tensor, aten.mul.Scalar)
def _mul(cx: Lowering, node: fx.Node) -> Complex:
    """``(a + bi)(c + di) = (ac − bd) + (ad + bc)i``; a real factor scales both parts."""
    ty = A.node_type(node)
    x, y = _operand(cx, node.args[0], ty), _operand(cx, node.args[1], ty)
    if not isinstance(x, Complex):
        x, y = y, x
    if not isinstance(x, Complex):
        raise ExportError("complex multiply without a complex operand")
    if isinstance(y, complex) and y.imag == 0:
        return Complex(A.scale(cx, x.re, y.real, f"{node.name}_re"), A.scale(cx, x.im, y.real, f"{node.name}_im"))
    if isinstance(y, Value):
        return Complex(
            cx.em.op("compute.mul", [x.re, y], ty, hint=f"{node.name}_re"),
            cx.em.op("compute.mul", [x.im, y], ty, hint=f"{node.name}_im"),
        )
    c, d = _parts(cx, y, ty)
    assert c is not None or d is not None

    def prod(p: Value, q: Value | None, tag: str) -> Value | None:
        return cx.em.op("compute.mul", [p, q], ty, hint=f"{node.name}_{tag}") if q is not None else None

    ac, bd = prod(x.re, c, "ac"), prod(x.im, d, "bd")
    ad, bc = prod(x.re, d, "ad"), prod(x.im, c, "bc")
    re = _add_parts(cx, ac, bd, ty, f"{node.name}_re", sub=True)
    im = _add_parts(cx, ad, bc, ty, f"{node.name}_im")
    return Complex(re, im)


def _add_sub(sub: bool) -> Handler:
    def lower(cx: Lowering, node: fx.Node) -> Complex:
        ty = A.node_type(node)
        alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
        x, y = _operand(cx, node.args[0], ty), _operand(cx, node.args[1], ty)
        if alpha != 1:
            if isinstance(y, complex):
                y = y * complex(alpha)
            elif isinstance(y, Complex):
                y = Complex(A.scale(cx, y.re, float(alpha), f"{node.name}_are"), A.scale(cx, y.im, float(alpha), f"{node.name}_aim"))
            else:
                y = A.scale(cx, y, float(alpha), f"{node.name}_alpha")
        a, b = _parts(cx, x, ty)
        c, d = _parts(cx, y, ty)
        return Complex(
            _add_parts(cx, a, c, ty, f"{node.name}_re", sub),
            _add_parts(cx, b, d, ty, f"{node.name}_im", sub),
        )

    return lower


_register(aten.add.Tensor, aten.add.Scalar)(_add_sub(False))
_register(aten.sub.Tensor, aten.sub.Scalar)(_add_sub(True))


@_register(aten.neg.default)
def _neg(cx: Lowering, node: fx.Node) -> Complex:
    z = _complex_arg(cx, node)
    return Complex(
        cx.em.op("compute.neg", [z.re], z.type, hint=f"{node.name}_re"),
        cx.em.op("compute.neg", [z.im], z.type, hint=f"{node.name}_im"),
    )


@_register(aten._conj.default, aten.conj_physical.default, aten.conj.default)
def _conj(cx: Lowering, node: fx.Node) -> Complex:
    z = _complex_arg(cx, node)
    return Complex(z.re, cx.em.op("compute.neg", [z.im], z.type, hint=f"{node.name}_im"))


@_register(aten.real.default)
def _real(cx: Lowering, node: fx.Node) -> Value:
    return _complex_arg(cx, node).re


@_register(aten.imag.default)
def _imag(cx: Lowering, node: fx.Node) -> Value:
    return _complex_arg(cx, node).im


def _complex_arg(cx: Lowering, node: fx.Node) -> Complex:
    z = cx.env.get(node.args[0])
    if not isinstance(z, Complex):
        raise ExportError(f"{node.target} of a real tensor")
    return z


__all__ = ["Complex", "PER_PART", "TABLE", "involved", "lower"]
