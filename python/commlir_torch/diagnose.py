"""Refusals as one diagnostic, never a PyTorch traceback.

Tracing runs the user's code (the model's ``__init__`` and ``forward``, a training step, a
``parallelize_module`` plan) under fake tensors, where what has no static SPMD program fails
deep inside PyTorch: ``if h.sum() > 0:`` ends in ``GuardOnDataDependentSymNode`` after a
hundred lines of traceback. :func:`user_code` turns any such failure into an
:class:`ExportError` that names the user's file and line (the innermost frame outside PyTorch
and this package), shows the line, and says why: data-dependent control flow, a
data-dependent shape, an unsupported dtype, or the exception's own one-line message."""

from __future__ import annotations

import linecache
import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

import torch

from .ir import ExportError

_TORCH_DIR = os.path.dirname(torch.__file__)
_OWN_DIR = os.path.dirname(os.path.abspath(__file__))
_STDLIB_DIR = os.path.dirname(os.__file__)

DATA_DEPENDENT_FLOW = (
    "data-dependent control flow: this line needs a tensor's value while the program is traced "
    "(a Python `if`, `while`, `bool()`, `int()` or `.item()` on a tensor), and one SPMD program "
    "must serve every input; compute both branches and pick with torch.where, or pass the "
    "decision in as a Python value"
)
DATA_DEPENDENT_SHAPE = (
    "data-dependent shape: {what} has a size that depends on the values of a tensor "
    "(nonzero, a boolean-mask index, masked_select, unique); commlir programs have static "
    "shapes: keep the shape and mask the values (torch.where) instead"
)


def is_user_file(path: str) -> bool:
    """A file of the user's code: not PyTorch, not this package (its tests count as user
    code), not the standard library, not generated code."""
    if path.startswith("<") or path.startswith(_TORCH_DIR) or "site-packages" in path:
        return False
    if path.startswith(_STDLIB_DIR):
        return False
    if path.startswith(_OWN_DIR):
        return False
    return True


def user_frame(tb: TracebackType | None) -> tuple[str, int] | None:
    """The innermost frame of ``tb`` in the user's code: (file, line)."""
    best = None
    for frame, lineno in traceback.walk_tb(tb):
        path = frame.f_code.co_filename
        if is_user_file(os.path.abspath(path)):
            best = (path, lineno)
    return best


def where(path: str, line: int) -> str:
    """``file:line`` as the user knows the file (relative to the working directory when
    inside it)."""
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:
        pass
    return f"{path}:{line}"


def param_location(model: object, fqn: str) -> str:
    """``file:line: `` of the statement that makes parameter ``fqn`` of ``model`` (the
    ``self.name = ...`` of its owner's ``__init__``, or the owner's ``class`` line), or
    nothing when the source is not at hand."""
    import inspect
    import re

    *path, leaf = fqn.split(".")
    owner, parent, attr = model, None, leaf
    for name in path:
        parent, owner = owner, getattr(owner, name, None)
        attr = name
        if owner is None:
            return ""
    # The parameter is made by its owner (a library module such as nn.Linear) where the
    # user's code assigns that owner; a parameter of a user's module, where it is assigned.
    for cls, name in ((type(parent), attr), (type(owner), leaf)) if parent is not None else ((type(owner), leaf),):
        try:
            lines, start = inspect.getsourcelines(cls)
            path_ = inspect.getsourcefile(cls)
        except (OSError, TypeError):
            continue
        if path_ is None or not is_user_file(os.path.abspath(path_)):
            continue
        pattern = re.compile(rf"self\.{re.escape(name)}\s*(:[^=]*)?=")
        for i, line in enumerate(lines):
            if pattern.search(line):
                return f"{where(path_, start + i)}: "
        return f"{where(path_, start)}: "
    return ""


def _reason(e: BaseException) -> str:
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        UnsupportedFakeTensorException,
    )

    name = type(e).__name__
    if isinstance(e, DynamicOutputShapeException):
        return DATA_DEPENDENT_SHAPE.format(what=f"the result of {e.func}")
    if isinstance(e, DataDependentOutputException) or name in (
        "GuardOnDataDependentSymNode", "DataDependentOutputException", "PendingUnbackedSymbolNotFound",
    ):
        return DATA_DEPENDENT_FLOW
    if isinstance(e, UnsupportedFakeTensorException):
        return f"unsupported tensor while tracing: {_first_line(e)}"
    msg = _first_line(e)
    if "dtype" in msg.lower() and ("not supported" in msg.lower() or "unsupported" in msg.lower()):
        return f"unsupported dtype: {msg}"
    return f"{name}: {msg}" if msg else name


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0].strip() if text else ""


def diagnostic(e: BaseException, context: str = "") -> ExportError:
    """``e``, raised while running the user's code, as one :class:`ExportError`:
    ``file:line: reason`` and the line itself."""
    frame = user_frame(e.__traceback__)
    reason = _reason(e)
    if context:
        reason = f"{context}: {reason}"
    if frame is None:
        return ExportError(reason)
    path, line = frame
    src = linecache.getline(path, line).strip()
    shown = f"\n    {src}" if src else ""
    return ExportError(f"{where(path, line)}: {reason}{shown}")


@contextmanager
def user_code(context: str = "") -> Iterator[None]:
    """Runs user code: an :class:`ExportError` passes through as it is, any other exception
    becomes one diagnostic (:func:`diagnostic`). ``KeyboardInterrupt`` and ``SystemExit``
    are left alone."""
    try:
        yield
    except ExportError:
        raise
    except Exception as e:  # noqa: BLE001 - every failure of the user's code is reported
        if debug():
            raise
        raise diagnostic(e, context) from None


def debug() -> bool:
    """``COMMLIR_TORCH_TRACEBACK=1`` keeps full tracebacks (for reporting a bug in the
    exporter itself)."""
    return os.environ.get("COMMLIR_TORCH_TRACEBACK", "") not in ("", "0")


__all__ = ["DATA_DEPENDENT_FLOW", "DATA_DEPENDENT_SHAPE", "debug", "diagnostic", "user_code", "user_frame", "where"]
