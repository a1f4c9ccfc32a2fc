"""Tracing a parallelized model into one rank's SPMD program.

The model is built exactly as a training script builds it (same seed, ``parallelize_module``
with the model's tensor-parallel plan), on PyTorch's fake process group, so that tracing needs
no GPU and no second process. The traced function takes every rank-local tensor as an argument
(parameter shards, buffers, input shards) and wraps the parameters back into DTensors inside,
so that DTensor's redistributions become ``_c10d_functional`` collectives of the graph.

FSDP is traced SimpleFSDP-style: each parameter's FSDP shard is all-gathered along dim 0 over
the data-parallel group by a small autograd function whose backward reduce-scatters the
gradient (``avg``); that is the communication FSDP2's ``fully_shard`` issues, and it traces with
``make_fx`` on CPU (``fully_shard``'s hooks and its copy-in/copy-out buffers do not)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn as nn
from torch._decomp import core_aten_decompositions, get_decompositions
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor, Placement, Replicate, Shard
from torch.distributed.tensor.parallel import parallelize_module
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.overrides import TorchFunctionMode

from .aten import fold_repeat_kv
from .export import Arg, Out, RankTables, lower_graph
from .diagnose import param_location
from .groups import GroupTable
from .ir import ExportError, TensorType, sanitize

Factory = Callable[[], Any]


@dataclass(frozen=True)
class Parallelism:
    """How the model is parallelized: a ``(dp, tp)`` device mesh (either may be 1) that the
    exporter builds and applies (the model's ``tp_plan``, FSDP), or, with ``ranks``, nothing:
    the model parallelizes itself on that many ranks (its own ``DeviceMesh``,
    ``parallelize_module``, ``fully_shard``, functional collectives; see user.py)."""

    tp: int = 1
    fsdp: int = 1
    sp: bool = False
    # Declare the groups with symmetric memory (`symm_mem`), which lets commlir use its
    # one-shot/two-shot all-reduces and fused all-gather-matmul kernels.
    symm_mem: bool = False
    ranks: int = 0

    def __post_init__(self) -> None:
        if self.tp < 1 or self.fsdp < 1 or self.ranks < 0:
            raise ExportError("--tp, --fsdp and --ranks must be at least 1")
        if self.ranks and (self.tp > 1 or self.fsdp > 1 or self.sp):
            raise ExportError(
                "--ranks N exports a model that parallelizes itself; --tp, --fsdp, --sp and "
                "--mesh parallelize a plain model for you: use one or the other"
            )
        if self.sp and self.tp == 1:
            raise ExportError("sequence parallelism needs tensor parallelism (--tp N, N > 1)")

    @property
    def user(self) -> bool:
        """Whether the model parallelizes itself (``ranks`` given)."""
        return self.ranks > 0

    @property
    def world_size(self) -> int:
        return self.ranks if self.ranks else self.tp * self.fsdp

    @property
    def mesh_shape(self) -> tuple[tuple[int, ...], tuple[str, ...]]:
        dims = [(self.fsdp, "dp")] if self.fsdp > 1 else []
        dims += [(self.tp, "tp")] if self.tp > 1 or not dims else []
        return tuple(d for d, _ in dims), tuple(n for _, n in dims)

    def coords(self, rank: int) -> tuple[int, int]:
        """The (dp, tp) coordinates of a global rank (the mesh is row-major, tp innermost)."""
        return rank // self.tp, rank % self.tp

    def make_mesh(self) -> DeviceMesh:
        shape, names = self.mesh_shape
        return init_device_mesh("cpu", shape, mesh_dim_names=names)

    def submesh(self, mesh: DeviceMesh, name: str) -> DeviceMesh | None:
        names = mesh.mesh_dim_names or ()
        if name not in names:
            return None
        return mesh[name] if mesh.ndim > 1 else mesh


def decompositions(fused_attention: bool = True) -> dict[Any, Any]:
    """The core-aten decompositions, plus those of ops that are core aten but have no single
    commlir op (layer norm becomes means, a variance and rsqrt), minus those of the lookups
    aten.py lowers whole (embedding gradients, the negative log-likelihood). With
    ``fused_attention`` (the default, with or without a backward), scaled-dot-product
    attention without mask or dropout stays one op (``compute.attention``, and its backward
    ``compute.attention_backward``) instead of its math decomposition."""
    aten = torch.ops.aten
    table = dict(core_aten_decompositions())
    table.update(get_decompositions([aten.native_layer_norm]))
    # Lowered as one-hot matmuls (aten.py) rather than through gather/scatter decompositions.
    for packet in (aten.embedding_dense_backward, aten.nll_loss_forward, aten.nll_loss_backward):
        for overload in packet.overloads():
            table.pop(getattr(packet, overload), None)
    if fused_attention:
        flash = aten._scaled_dot_product_flash_attention_for_cpu.default
        table[flash] = attention_or_decompose(table[flash])
    return table


def attention_or_decompose(decompose: Callable[..., Any]) -> Callable[..., Any]:
    """The decomposition of PyTorch's CPU attention op that keeps it whole (``NotImplemented``
    makes the tracer record the op itself) where ``compute.attention`` expresses it: no mask,
    no dropout, q, k and v of one float type and the same leading dims, but for the key and
    value heads (dim -3), which may divide the query's (grouped-query attention)."""

    def attention(query: Any, key: Any, value: Any, dropout_p: float = 0.0, is_causal: bool = False,
                  *, attn_mask: Any = None, scale: float | None = None) -> Any:
        whole = (
            dropout_p == 0.0
            and attn_mask is None
            and query.dim() >= 3
            and query.shape[:-3] == key.shape[:-3] == value.shape[:-3]
            and key.shape[-3] == value.shape[-3] > 0
            and query.shape[-3] % key.shape[-3] == 0
            and key.shape[-2] == value.shape[-2]
            and query.dtype == key.dtype == value.dtype
            and query.dtype.is_floating_point
        )
        if whole:
            return NotImplemented
        return decompose(query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)

    return attention


class MathForMaskedAttention(TorchFunctionMode):
    """Runs ``scaled_dot_product_attention`` with a mask or dropout on PyTorch's math backend,
    so that in a traced training step it decomposes above autograd and its backward is made
    of elementary ops: the fused CPU kernel would take the mask, and its backward (one opaque
    op with the mask) has no commlir lowering. Calls without either keep the backends in
    force (the fused kernel: ``compute.attention`` and ``compute.attention_backward``)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention:
            mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
            dropout = kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0)
            if mask is not None or dropout:
                with sdpa_kernel([SDPBackend.MATH]):
                    return func(*args, **kwargs)
        return func(*args, **kwargs)


def load_factory(spec: str) -> Factory:
    """``path/to/model.py:make_model`` or ``package.module:make_model``."""
    if ":" not in spec:
        raise ExportError(f"model '{spec}' is not FILE.py:FUNCTION or MODULE:FUNCTION")
    where, fn = spec.rsplit(":", 1)
    if where.endswith(".py") or os.sep in where:
        path = os.path.abspath(where)
        if not os.path.exists(path):
            raise ExportError(f"model file '{where}' does not exist")
        name = "commlir_user_" + sanitize(os.path.splitext(os.path.basename(path))[0])
        mod_spec = importlib.util.spec_from_file_location(name, path)
        assert mod_spec is not None and mod_spec.loader is not None
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = module
        mod_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    factory = getattr(module, fn, None)
    if not callable(factory):
        raise ExportError(f"'{where}' has no function '{fn}'")
    return factory


@dataclass
class Instance:
    """A model as built on one rank, with its example inputs (global, before sharding)."""

    model: nn.Module
    inputs: tuple[torch.Tensor, ...]
    input_names: list[str]
    fixed_inputs: bool


def build(factory: Factory, dtype: torch.dtype | None, seed: int) -> Instance:
    """The unparallelized model and example inputs for data-parallel rank 0."""
    torch.manual_seed(seed)
    made = factory()
    fixed = isinstance(made, tuple)
    model, inputs = (made[0], tuple(made[1])) if fixed else (made, ())
    if not isinstance(model, nn.Module):
        raise ExportError(f"the factory returned {type(model).__name__}, not an nn.Module")
    if dtype is not None:
        model.to(dtype)
        inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
    if not fixed and not hasattr(model, "example_inputs"):
        raise ExportError("the model has no example_inputs(); return (model, inputs) instead")
    sig = inspect.signature(model.forward)
    names = [p for p in sig.parameters if p != "self"]
    return Instance(model, inputs, names, fixed)


def example_inputs(inst: Instance, seed: int, dp_index: int) -> tuple[torch.Tensor, ...]:
    """The global inputs of a data-parallel rank (each draws its own batch)."""
    if inst.fixed_inputs:
        return inst.inputs
    torch.manual_seed(seed + 1000 + dp_index)
    return tuple(inst.model.example_inputs())


def input_layouts(model: nn.Module, par: Parallelism, n: int) -> list[Placement]:
    """How each input is laid out over the tensor-parallel group."""
    fn = getattr(model, "tp_input_layouts", None)
    layouts = list(fn(par.sp)) if (fn is not None and par.tp > 1) else []
    return layouts + [Replicate()] * (n - len(layouts))


def shard(t: torch.Tensor, placements: tuple[Placement, ...], index: int, n: int, what: str = "") -> torch.Tensor:
    """The local part of ``t`` under a one-dimensional placement at mesh index ``index``.
    ``what`` names the tensor in errors (``parameter 'w1.weight'``)."""
    for p in placements:
        if isinstance(p, Shard):
            check_even(what, tuple(t.shape), p.dim, n)
            return t.chunk(n, dim=p.dim)[index].contiguous()
        if not isinstance(p, Replicate):
            raise ExportError(f"{what or 'a tensor'}: placement {p} is not supported")
    return t


def check_even(what: str, shape: tuple[int, ...], dim: int, n: int, group: str = "", where: str = "") -> None:
    """Tensor-parallel shards must have one shape on every rank: an SPMD program has one type
    per argument. (FSDP's dim-0 shards are padded instead, as FSDP2 pads them.) ``where`` is
    the ``file:line: `` of the tensor, if known."""
    dim = dim + len(shape) if dim < 0 else dim
    if shape[dim] % n:
        sizes = [c.shape[dim] for c in torch.empty(shape, device="meta").chunk(n, dim=dim)]
        sizes += [0] * (n - len(sizes))
        over = f" over @{group}" if group else ""
        raise ExportError(
            f"{where}{what or 'a tensor'} of shape {shape}: dim {dim} does not split {n} ways{over} "
            f"(the ranks would hold {', '.join(map(str, sizes))}); one SPMD program needs the same "
            f"shard shape on every rank: make dim {dim} a multiple of {n}"
        )


def fsdp_shard(t: torch.Tensor, index: int, n: int) -> torch.Tensor:
    """FSDP2's dim-0 shard of ``t`` for data-parallel rank ``index``: chunk ``index`` of
    ``torch.chunk(t, n)`` padded with zeros to the length of chunk 0, so that every rank holds
    a shard of the same shape (``(25, 192)`` over 2 ranks: 13 rows, the second rank's last row
    padding)."""
    if t.ndim == 0:
        raise ExportError("FSDP shards a 0-dim parameter")
    rows = t.shape[0]
    per = -(-rows // n)
    out = t.new_zeros((per, *t.shape[1:]))
    start = min(index * per, rows)
    valid = min(per, rows - start)
    if valid > 0:
        out[:valid] = t[start : start + valid]
    return out


def fsdp_valid_rows(rows: int, index: int, n: int) -> int:
    """How many rows of data-parallel rank ``index``'s padded FSDP shard are real."""
    per = -(-rows // n)
    return max(0, min(per, rows - index * per))


def real_view(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its ``view_as_real`` (the program's argument; complex.py turns it
    back into a complex value inside), any other tensor as it is."""
    return torch.view_as_real(t) if t.is_complex() else t


def apply_tp(model: nn.Module, par: Parallelism, tp_mesh: DeviceMesh | None) -> None:
    """``parallelize_module`` with the model's ``tp_plan(sp)``. A model without a plan runs
    as written on every rank (its own collectives, on the world group)."""
    plan = getattr(model, "tp_plan", None)
    if par.tp > 1 and plan is not None:
        parallelize_module(model, tp_mesh, plan(par.sp))
    elif par.sp:
        raise ExportError("--sp needs the model to define tp_plan(sp)")


class FsdpAllGather(torch.autograd.Function):
    """All-gather of an FSDP shard along dim 0; its backward reduce-scatters the gradient."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:  # type: ignore[override]
        ctx.group = group
        return funcol.all_gather_tensor(x.contiguous(), 0, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return funcol.reduce_scatter_tensor(grad.contiguous(), "avg", 0, ctx.group), None


def loss_of(outputs: list[torch.Tensor]) -> torch.Tensor:
    """The scalar a backward program differentiates: the output itself if it is a scalar,
    else the sum of its elements (a gradient of ones)."""
    if len(outputs) != 1:
        raise ExportError(f"--backward needs one output (the loss or a tensor), got {len(outputs)}")
    out = outputs[0]
    return out if out.ndim == 0 else out.sum()


def local_outputs(out: Any) -> list[torch.Tensor]:
    flat = out if isinstance(out, (list, tuple)) else [out]
    res = []
    for o in flat:
        if isinstance(o, DTensor):
            o = o.to_local()
        if not isinstance(o, torch.Tensor):
            raise ExportError(f"the model returned {type(o).__name__}, not a tensor")
        res.append(o)
    return res


@dataclass
class ParamInfo:
    fqn: str
    placements: tuple[Placement, ...] | None  # tensor-parallel placements, None if plain
    global_shape: tuple[int, ...]
    global_stride: tuple[int, ...]
    # The length of the (TP-local) parameter's FSDP-sharded dim when its shards are padded
    # (FSDP2 pads a dim that does not split evenly); None when they are not.
    fsdp_rows: int | None = None
    fsdp_dim: int = 0
    fsdp_group: str = "dp"  # the group symbol FSDP shards over


@dataclass
class Traced:
    """One rank's trace: the graph, and what its inputs and outputs are."""

    text: str
    args: list[Arg]
    outs: list[Out]
    consts: dict[str, torch.Tensor]
    a2a: list[tuple[list[int], list[int]]]
    fills: list[float]
    picks: list[int]
    params: list[ParamInfo] = field(default_factory=list)
    # The rank layout of every group the program declares (user.py fills it in).
    groups: dict[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)


_TRACES = itertools.count()


def _tag_meshes(*meshes: DeviceMesh | None) -> None:
    """Makes this trace's meshes unequal to every earlier trace's. DTensor caches sharding
    decisions (in Python and C++) by mesh equality, and a cached decision carries the mesh it
    was made with, and so the process-group names of an earlier trace, possibly another
    rank's. A mesh's equality includes the thread id it records for the "threaded" backend,
    unused here: a per-trace token there keeps the caches apart."""
    token = ("commlir_torch.trace", next(_TRACES))
    for m in meshes:
        if m is not None:
            m._thread_id = token  # type: ignore[assignment]
            m._hash = None


def _reset_dtensor_caches() -> None:
    """Forgets DTensor's sharding and redistribution caches: their entries hold the device
    mesh (and so the process-group names) of the previous trace."""
    from torch.distributed.tensor import _redistribute
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    transform = getattr(_redistribute, "_gen_transform_infos", None)
    if transform is not None and hasattr(transform, "cache_clear"):
        transform.cache_clear()
    prop = DTensor._op_dispatcher.sharding_propagator
    for name in ("propagate_op_sharding",):
        cached = getattr(prop, name, None)
        inner = getattr(cached, "cache", None)
        if inner is not None and hasattr(inner, "cache_clear"):
            inner.cache_clear()
    meta = getattr(ShardingPropagator, "_propagate_tensor_meta_cached", None)
    if meta is not None and hasattr(meta, "cache_clear"):
        meta.cache_clear()


def trace_rank(
    factory: Factory,
    par: Parallelism,
    rank: int,
    backward: bool,
    dtype: torch.dtype | None,
    seed: int,
    tables: RankTables | None = None,
) -> Traced:
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise ExportError("a process group is already initialized; export in a fresh process")
    _reset_dtensor_caches()
    hook = sys.excepthook  # init_process_group prefixes tracebacks with "[rank0]:"
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=par.world_size)
    try:
        mesh = par.make_mesh()
        tp_mesh, dp_mesh = par.submesh(mesh, "tp"), par.submesh(mesh, "dp")
        _tag_meshes(mesh, tp_mesh, dp_mesh)
        inst = build(factory, dtype, seed)
        model = inst.model
        dp_index, tp_index = par.coords(rank)
        inputs = example_inputs(inst, seed, dp_index)
        apply_tp(model, par, tp_mesh)
        groups = GroupTable.from_mesh(mesh, par.world_size, par.symm_mem)
        tp_sym = "tp" if par.tp > 1 else None

        params: list[ParamInfo] = []
        args: list[Arg] = []
        flat: list[torch.Tensor] = []
        for fqn, p in model.named_parameters():
            if isinstance(p, DTensor):
                local, pl = p.to_local(), tuple(p.placements)
                for x in pl:
                    if isinstance(x, Shard):
                        check_even(f"parameter '{fqn}'", tuple(p.shape), x.dim, par.tp, "tp",
                                   param_location(model, fqn))
                info = ParamInfo(fqn, pl, tuple(p.shape), tuple(p.stride()))
            else:
                local, pl = p.detach(), None
                info = ParamInfo(fqn, None, tuple(p.shape), tuple(p.stride()))
            if par.fsdp > 1:
                rows = local.shape[0] if local.ndim else 0
                local = fsdp_shard(local, dp_index, par.fsdp)
                if local.shape[0] * par.fsdp != rows:
                    info.fsdp_rows = rows
            replicated = tp_sym if (pl is None or all(isinstance(x, Replicate) for x in pl)) else None
            params.append(info)
            args.append(Arg(sanitize(fqn), "param", fqn, TensorType(tuple(local.shape), local.dtype), replicated))
            flat.append(local.detach().clone())
        buffers = list(model.named_buffers())
        for fqn, b in buffers:
            rep = tp_sym or ("dp" if par.fsdp > 1 else None)
            b = real_view(b)
            args.append(Arg(sanitize(fqn), "buffer", fqn, TensorType(tuple(b.shape), b.dtype), rep))
            flat.append(b)
        complex_buffers = {fqn for fqn, b in buffers if b.is_complex()}
        layouts = input_layouts(model, par, len(inputs))
        names = inst.input_names + [f"input{i}" for i in range(len(inst.input_names), len(inputs))]
        for i, (x, pl) in enumerate(zip(inputs, layouts)):
            local = shard(x, (pl,), tp_index, par.tp, f"input '{names[i]}'")
            rep = tp_sym if isinstance(pl, Replicate) else None
            args.append(Arg(sanitize(names[i]), "input", names[i], TensorType(tuple(local.shape), local.dtype), rep))
            flat.append(local)
        n_params, n_buffers = len(params), len(buffers)
        dp_group = dp_mesh.get_group() if (dp_mesh is not None and par.fsdp > 1) else None
        outs: list[Out] = []

        def step(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            ps = list(xs[:n_params])
            if backward:
                ps = [p.detach().requires_grad_(p.is_floating_point()) for p in ps]
            state: dict[str, Any] = {}
            for p, info in zip(ps, params):
                t = p
                if dp_group is not None:
                    t = FsdpAllGather.apply(t, dp_group)
                    if info.fsdp_rows is not None:
                        t = t.narrow(0, 0, info.fsdp_rows)  # FSDP2's padding off
                if info.placements is not None:
                    t = DTensor.from_local(
                        t, tp_mesh, info.placements, run_check=False,
                        shape=torch.Size(info.global_shape), stride=info.global_stride,
                    )
                state[info.fqn] = t
            for (fqn, _), b in zip(buffers, xs[n_params : n_params + n_buffers]):
                state[fqn] = torch.view_as_complex(b) if fqn in complex_buffers else b
            # The fused CPU kernel where it applies (compute.attention, and its backward
            # compute.attention_backward: the score matrix is never a tensor of the program);
            # the math attention for the rest. In a training step a masked or dropout attention
            # takes the math backend above autograd (MathForMaskedAttention), so that its
            # backward is elementary ops too.
            backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]
            masked = MathForMaskedAttention() if backward else contextlib.nullcontext()
            with sdpa_kernel(backends), masked, torch.enable_grad() if backward else torch.no_grad():
                out = local_outputs(torch.func.functional_call(model, state, tuple(xs[n_params + n_buffers :])))
                if not backward:
                    return tuple(out)
                loss = loss_of(out)
                grads = torch.autograd.grad(loss, [p for p in ps if p.requires_grad], allow_unused=True, materialize_grads=True)
            return (loss, *grads)

        gm = make_fx(
            step,
            decomposition_table=decompositions(),
            tracing_mode="fake",
            record_stack_traces=True,
        )(*flat)
        gm.graph.eliminate_dead_code()
        gm.recompile()
        # torchtitan's repeat_kv feeding the attention becomes its grouped kv heads.
        fold_repeat_kv(gm)
        out_vals = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
        n_out = len(out_vals) if isinstance(out_vals, (list, tuple)) else 1
        if backward:
            outs = [Out("loss", "loss")] + [
                Out("grad", info.fqn) for info, p in zip(params, flat) if p.is_floating_point()
            ]
        else:
            outs = [Out("output", str(i)) for i in range(n_out)]
        text, cx = lower_graph(gm, args, outs, groups, "train_step" if backward else "forward", tables)
        return Traced(text, args, outs, cx.consts, cx.a2a_local, cx.fill_values, cx.pick_values, params)
    finally:
        dist.destroy_process_group()
        sys.excepthook = hook
