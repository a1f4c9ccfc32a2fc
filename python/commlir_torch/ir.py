"""Textual commlir IR: tensor types, attribute spellings, locations and an op emitter that
keeps SSA names unique. Everything here prints the uniform custom form of
docs/language.md."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import torch

DTYPES: dict[torch.dtype, str] = {
    torch.float32: "f32",
    torch.bfloat16: "bf16",
    torch.float16: "f16",
    torch.float64: "f64",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "ui8",
    torch.bool: "i1",
}


class ExportError(Exception):
    """Something in the graph has no commlir equivalent; the message names the op and node."""


def elem_type(dtype: torch.dtype) -> str:
    """The commlir element type of a torch dtype."""
    try:
        return DTYPES[dtype]
    except KeyError:
        name = str(dtype).removeprefix("torch.")
        raise ExportError(f"unsupported dtype {name} (commlir has {', '.join(DTYPES.values())})") from None


@dataclass(frozen=True)
class TensorType:
    """A statically shaped tensor type."""

    shape: tuple[int, ...]
    dtype: torch.dtype

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        return f"tensor<{dims}{elem_type(self.dtype)}>"

    @property
    def rank(self) -> int:
        return len(self.shape)

    def with_shape(self, shape: tuple[int, ...] | list[int]) -> TensorType:
        return TensorType(tuple(int(d) for d in shape), self.dtype)

    def with_dtype(self, dtype: torch.dtype) -> TensorType:
        return TensorType(self.shape, dtype)


@dataclass(frozen=True)
class Value:
    """An SSA value of the function being emitted."""

    name: str
    type: TensorType

    def __str__(self) -> str:
        return f"%{self.name}"


def fmt_float(x: float) -> str:
    """An f64 attribute: decimal with a point and exponent, hex for inf and nan."""
    if math.isnan(x):
        return "0x7FF8000000000000 : f64"
    if math.isinf(x):
        return ("0x7FF0000000000000" if x > 0 else "0xFFF0000000000000") + " : f64"
    return f"{x:.17e} : f64"


def fmt_int(x: int) -> str:
    return f"{int(x)} : i64"


def fmt_array(xs: list[int] | tuple[int, ...]) -> str:
    return "array<i64" + (": " + ", ".join(str(int(x)) for x in xs) if xs else "") + ">"


def fmt_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def fmt_loc(loc: tuple[str, int, int] | None) -> str:
    if loc is None:
        return ""
    file, line, col = loc
    return f" loc({fmt_str(file)}:{line}:{col})"


_SANITIZE = re.compile(r"[^A-Za-z0-9_]")


def sanitize(name: str) -> str:
    """An SSA-name-safe spelling of ``name`` (``layers.0.attn.wq`` → ``layers_0_attn_wq``)."""
    s = _SANITIZE.sub("_", name)
    if not s or s[0].isdigit():
        s = "v" + s
    return s


@dataclass
class Emitter:
    """Appends ops to one function body, giving every result a fresh SSA name."""

    lines: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    loc: tuple[str, int, int] | None = None

    def fresh(self, hint: str) -> str:
        base = sanitize(hint)
        name, i = base, 1
        while name in self.used:
            name = f"{base}_{i}"
            i += 1
        self.used.add(name)
        return name

    def op(
        self,
        opname: str,
        operands: list[Value],
        result: TensorType | list[TensorType],
        attrs: dict[str, str] | None = None,
        hint: str = "t",
    ) -> Value | list[Value]:
        """Emits ``opname`` and returns its result (a list for several results)."""
        results = result if isinstance(result, list) else [result]
        names = [self.fresh(hint) for _ in results]
        lhs = ", ".join(f"%{n}" for n in names)
        text = f"{lhs} = {opname}" if names else opname
        if operands:
            text += " " + ", ".join(str(v) for v in operands)
        if attrs:
            text += " {" + ", ".join(f"{k} = {v}" for k, v in attrs.items()) + "}"
        rtypes = ", ".join(str(t) for t in results)
        if operands:
            ins = ", ".join(str(v.type) for v in operands)
            outs = rtypes if len(results) == 1 else f"({rtypes})"
            text += f" : ({ins}) -> {outs}"
        elif results:
            text += f" : {rtypes}"
        self.lines.append("    " + text + fmt_loc(self.loc))
        values = [Value(n, t) for n, t in zip(names, results)]
        return values if isinstance(result, list) else values[0]
