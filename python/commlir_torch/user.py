"""Exporting what a training script parallelized itself.

A torchtitan-style script builds its own ``DeviceMesh``, applies its own ``parallelize_module``
plans and ``fully_shard``, and writes its training step as forward, loss and
``loss.backward()``. That code exports as it is (``Parallelism(ranks=N)``, ``--ranks N``): a
*builder*, a function of the script that the exporter calls on every rank under PyTorch's fake
process group, returns what the script would run on that rank:

* ``(step, model, inputs)``: the training step ``step(model, *inputs)``, which computes the loss
  and calls ``loss.backward()``; the program (``@train_step``) returns the loss ``step``
  returns (if it returns one) and the gradient shard of every parameter that requires one;
* ``(model, inputs)``: the forward of the parallelized model on this rank's inputs (with
  ``backward=True``, the loss is the output, or the sum of its elements, and the gradients
  follow, as for the exporter's own parallelization);
* ``model``, a module with ``example_inputs()``.

A builder that takes a ``device`` (or ``device_type``) argument gets ``"cpu"``: tracing runs on
CPU, the script's ``init_device_mesh(device, ...)`` with it. The parameters, buffers and inputs
of each rank are those the builder made on that rank; the reference run on gloo (``check``)
copies them into the model it builds, so an initialization that differs between the fake and
the real process group does not matter. Functional collectives on ``dist.group.WORLD`` (no
mesh) are declared as ``coll.group @world``; mesh dimensions under their own names.

How it traces. DTensor parameters (``parallelize_module``) become their local shards, rebuilt
as DTensors inside the traced function, so that the module's own hooks redistribute
activations as in training. FSDP2's ``fully_shard`` itself cannot be traced (hooks, copy-in and
copy-out buffers), but its state says everything the program needs: each FSDP-managed
parameter becomes its padded shard, as FSDP2 holds it, all-gathered over FSDP's group (after
the cast to the ``param_dtype`` of its ``MixedPrecisionPolicy``) and unpadded, by an autograd
function whose backward reduce-scatters the gradient (``avg``, in ``reduce_dtype``; then an
all-reduce over the replicate group under HSDP). FSDP's forward hooks are replaced by the input
and output casts they make."""

from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Placement, Replicate, Shard
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.utils.stateless import _reparametrize_module

from .aten import fold_repeat_kv
from .diagnose import param_location, user_code
from .export import Arg, Out, RankTables, lower_graph
from .groups import GroupTable
from .ir import ExportError, TensorType, sanitize
from .trace import (
    Factory,
    MathForMaskedAttention,
    Parallelism,
    ParamInfo,
    Traced,
    _reset_dtensor_caches,
    check_even,
    decompositions,
    local_outputs,
    loss_of,
    real_view,
)


@contextmanager
def fake_process_group(world_size: int, rank: int) -> Iterator[None]:
    """PyTorch's fake process group at ``rank`` (collectives do nothing): the model's code sees
    the rank and the world size it sees in training, and needs no second process."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise ExportError("a process group is already initialized; export in a fresh process")
    hook = sys.excepthook  # init_process_group prefixes tracebacks with "[rank0]:"
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()
        sys.excepthook = hook


@contextmanager
def local_scatter() -> Iterator[None]:
    """DTensor's ``distribute_tensor`` (``parallelize_module`` shards parameters with it)
    scatters the shards from rank 0 of the mesh dimension, so that every rank holds rank 0's
    tensor: on the fake process group that scatter moves nothing and leaves the shard
    uninitialized. Every rank computes the same scatter list (same seed), so rank 0's shard
    for this rank is this rank's own entry of it: it is taken from there."""
    from torch.distributed.tensor import placement_types

    original = placement_types.mesh_scatter

    def scatter(output: torch.Tensor, scatter_list: list[torch.Tensor], mesh: DeviceMesh, mesh_dim: int = 0,
                async_op: bool = False, *, group_src: int | None = 0) -> None:
        if not output.is_meta:
            output.copy_(scatter_list[mesh.get_local_rank(mesh_dim)])
        return None

    placement_types.mesh_scatter = scatter  # type: ignore[assignment]
    try:
        yield
    finally:
        placement_types.mesh_scatter = original  # type: ignore[assignment]


@dataclass
class Built:
    """What a builder returned on one rank."""

    model: nn.Module
    inputs: tuple[Any, ...]
    step: Callable[..., Any] | None
    input_names: list[str]


def call_builder(factory: Factory, seed: int, device: str = "cpu") -> Built:
    """Calls the builder (after ``torch.manual_seed(seed)``, on the current process group) and
    sorts out what it returned."""
    torch.manual_seed(seed)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    kwargs = {k: device for k in ("device", "device_type") if k in params}
    made = factory(**kwargs)
    step = None
    if isinstance(made, nn.Module):
        if not hasattr(made, "example_inputs"):
            raise ExportError("the builder returned a module without example_inputs(); return (model, inputs)")
        model, inputs = made, tuple(made.example_inputs())
    elif isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], nn.Module):
        model, inputs = made[0], made[1]
    elif isinstance(made, tuple) and len(made) == 3 and callable(made[0]) and isinstance(made[1], nn.Module):
        step, model, inputs = made
    else:
        raise ExportError(
            "the builder must return (step, model, inputs), (model, inputs) or a module with "
            f"example_inputs(), not {type(made).__name__}"
        )
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    fn = step if step is not None else model.forward
    try:
        names = [p for p in inspect.signature(fn).parameters if p != "self"]
    except (TypeError, ValueError):
        names = []
    if step is not None:
        names = names[1:]  # step(model, *inputs)
    names = names[: len(inputs)] + [f"input{i}" for i in range(len(names), len(inputs))]
    return Built(model, inputs, step, names)


# ------------------------------------------------------------------------------- FSDP2


@dataclass(frozen=True)
class FsdpSpec:
    """How FSDP2 holds one parameter: its shard of ``dim`` over ``group`` (padded to
    ``padded`` of the ``rows`` of the unsharded, TP-local, parameter), and the dtypes of its
    ``MixedPrecisionPolicy``."""

    dim: int
    rows: int
    padded: int
    group: dist.ProcessGroup | None
    size: int
    replicate_group: dist.ProcessGroup | None
    param_dtype: torch.dtype | None
    reduce_dtype: torch.dtype | None

    @property
    def pads(self) -> bool:
        return self.padded * self.size != self.rows


class FsdpGather(torch.autograd.Function):
    """FSDP2's all-gather of a parameter shard (in ``param_dtype``); its backward is FSDP2's
    gradient reduction: reduce-scatter with ``avg`` (in ``reduce_dtype``), all-reduce over
    the replicate group under HSDP, cast back to the parameter's dtype."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, spec: FsdpSpec) -> torch.Tensor:  # type: ignore[override]
        ctx.spec, ctx.dtype = spec, x.dtype
        if spec.param_dtype is not None:
            x = x.to(spec.param_dtype)
        if spec.group is None:
            return x
        return funcol.all_gather_tensor(x.contiguous(), spec.dim, spec.group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        spec: FsdpSpec = ctx.spec
        if spec.reduce_dtype is not None:
            grad = grad.to(spec.reduce_dtype)
        if spec.group is not None:
            grad = funcol.reduce_scatter_tensor(grad.contiguous(), "avg", spec.dim, spec.group)
        if spec.replicate_group is not None:
            grad = funcol.all_reduce(grad, "avg", spec.replicate_group)
        return grad.to(ctx.dtype), None


def fsdp_params(model: nn.Module) -> dict[str, tuple[Any, Any]]:
    """FQN → (FSDPParam, FSDPState) of every parameter ``fully_shard`` manages."""
    from torch.distributed.fsdp import FSDPModule

    names: dict[int, str] = {}
    for name, mod in model.named_modules(remove_duplicate=False):
        names.setdefault(id(mod), name)
    found: dict[str, tuple[Any, Any]] = {}
    for mod in model.modules():
        if not isinstance(mod, FSDPModule):
            continue
        state = mod._get_fsdp_state()
        group = state._fsdp_param_group
        if group is None:
            continue
        for fp in group.fsdp_params:
            info = fp._module_info
            prefix = names.get(id(info.module), "")
            found[f"{prefix}.{info.param_name}" if prefix else info.param_name] = (fp, state)
    return found


def _spec(fp: Any, state: Any) -> FsdpSpec:
    """The :class:`FsdpSpec` of an ``FSDPParam``."""
    from torch.distributed.fsdp._fully_shard._fsdp_common import FSDPMeshInfo, HSDPMeshInfo

    if getattr(fp, "_extensions_data", None) is not None and fp._extensions_data.all_gather_metadata is not None:
        raise ExportError(f"parameter '{fp._param_fqn}': FSDP all-gather extensions (float8) have no commlir lowering")
    mi = fp.mesh_info
    dim = fp.fsdp_placement.dim
    shards = isinstance(mi, FSDPMeshInfo)
    mp = state._mp_policy
    orig = fp.sharded_param.dtype
    param_dtype = mp.param_dtype if mp.param_dtype not in (None, orig) else None
    reduce_dtype = mp.reduce_dtype if mp.reduce_dtype not in (None, param_dtype or orig) else None
    return FsdpSpec(
        dim=dim,
        rows=int(fp._orig_size[dim]),
        padded=int(fp.padded_sharded_param_size[dim]),
        group=mi.shard_process_group if shards else None,
        size=int(mi.shard_mesh_size) if shards else 1,
        replicate_group=mi.replicate_process_group if isinstance(mi, HSDPMeshInfo) or not shards else None,
        param_dtype=param_dtype,
        reduce_dtype=reduce_dtype,
    )


def _pad(t: torch.Tensor, dim: int, length: int) -> torch.Tensor:
    """``t`` padded with zeros along ``dim`` to ``length`` (FSDP2's padded shard)."""
    if t.shape[dim] == length:
        return t.detach().contiguous()
    shape = list(t.shape)
    shape[dim] = length
    out = t.detach().new_zeros(shape)
    out.narrow(dim, 0, t.shape[dim]).copy_(t.detach())
    return out


def _replace_fsdp_hooks(model: nn.Module) -> None:
    """Removes FSDP2's forward hooks (they all-gather through process-group calls that a
    trace does not see) and puts back the only thing they do to values: the casts of its
    ``MixedPrecisionPolicy`` (floating inputs to ``param_dtype``, outputs to
    ``output_dtype``)."""
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.fsdp._fully_shard._fsdp_common import _cast_fp_tensor
    from torch.distributed.utils import _apply_to_tensors

    seen: set[int] = set()
    for mod in model.modules():
        if not isinstance(mod, FSDPModule):
            continue
        state = mod._get_fsdp_state()
        if id(state) in seen:
            continue
        seen.add(id(state))
        for handle in {id(h): h for h in (state._pre_forward_hook_handle, state._post_forward_hook_handle) if h}.values():
            handle.remove()
        mp = state._mp_policy
        first = state._modules[0]
        if mp.cast_forward_inputs and mp.param_dtype is not None:
            cast = functools.partial(_cast_fp_tensor, mp.param_dtype)

            def pre(_m: nn.Module, args: Any, kwargs: Any, cast: Any = cast) -> Any:
                return _apply_to_tensors(cast, args), _apply_to_tensors(cast, kwargs)

            first.register_forward_pre_hook(pre, prepend=True, with_kwargs=True)
        if mp.output_dtype is not None:
            cast_out = functools.partial(_cast_fp_tensor, mp.output_dtype)
            state._modules[-1].register_forward_hook(lambda _m, _a, out, c=cast_out: _apply_to_tensors(c, out))


# ---------------------------------------------------------------------------- the trace


@dataclass
class Local:
    """One rank-local argument: its kind, name, tensor and how to rebuild the model's view."""

    kind: str  # "param" | "buffer" | "input"
    fqn: str
    tensor: torch.Tensor
    info: ParamInfo | None = None
    fsdp: FsdpSpec | None = None
    mesh: DeviceMesh | None = None  # a DTensor's mesh (TP parameter, DTensor input)
    placements: tuple[Placement, ...] | None = None
    shape: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    complex: bool = False
    replicated: str | None = None
    trainable: bool = False


def _meshes() -> list[DeviceMesh]:
    """Every live DeviceMesh (``type()``, not ``isinstance``: a deprecated module-level proxy
    of torch.distributed warns when its ``__class__`` is read)."""
    return [o for o in gc.get_objects() if issubclass(type(o), DeviceMesh)]


def _tag_new_meshes(token: Any) -> None:
    """Makes the meshes the builder made unequal to every earlier trace's (see
    ``trace._tag_meshes``: DTensor caches decisions by mesh equality, and a cached decision
    carries the process groups of the trace that made it). Every mesh of this trace gets the
    same token, so that they stay equal among themselves."""
    for m in _meshes():
        if m._thread_id is None:  # made by this trace's builder (earlier ones are tagged)
            m._thread_id = token  # type: ignore[assignment]
            m._hash = None


def _replicated_over(groups: GroupTable, mesh: DeviceMesh, placements: tuple[Placement, ...]) -> str | None:
    """The group of a mesh dimension a DTensor is replicated over (its local tensors are the
    same on every rank of that group), if any."""
    for d, p in enumerate(placements):
        if isinstance(p, Replicate) and mesh.size(d) > 1:
            g = groups.by_name.get(mesh.get_group(d).group_name)
            if g is not None:
                return g.symbol
    return None


def collect(built: Built, groups: GroupTable | None = None, symm_mem: bool = False) -> list[Local]:
    """Every rank-local tensor the program takes, in argument order: parameter shards (FSDP's
    padded), buffers, tensor inputs. ``groups`` (when tracing) gets the meshes declared."""
    model = built.model
    fsdp = fsdp_params(model)
    if groups is not None:
        meshes: list[DeviceMesh] = []
        for _, p in model.named_parameters():
            if isinstance(p, DTensor):
                meshes.append(p.device_mesh)
        for fp, _ in fsdp.values():
            meshes.append(fp.mesh_info.mesh)
        meshes += [x.device_mesh for x in built.inputs if isinstance(x, DTensor)]
        roots = {id(m._get_root_mesh()): m._get_root_mesh() for m in meshes}
        for root in roots.values():
            groups.add_mesh(root, symm_mem)
        for root in roots.values():
            for flat in root._flatten_mapping.values():
                groups.add_mesh(flat, symm_mem)
        for m in meshes:
            groups.add_mesh(m, symm_mem)

    out: list[Local] = []
    for fqn, p in model.named_parameters():
        what = f"parameter '{fqn}'"
        trainable = bool(p.requires_grad and p.is_floating_point())
        if fqn in fsdp:
            fp, state = fsdp[fqn]
            spec = _spec(fp, state)
            tp = fp._tp_spec if fp.is_dtensor else None
            mesh = tp.mesh if tp is not None else None
            placements = tuple(tp.placements) if tp is not None else None
            shape = tuple(tp.tensor_meta.shape) if tp is not None else tuple(fp._orig_size)
            stride = tuple(tp.tensor_meta.stride) if tp is not None else tuple(fp._contiguous_orig_stride)
            local = _pad(p.to_local(), spec.dim, spec.padded)
        elif isinstance(p, DTensor):
            spec, mesh, placements = None, p.device_mesh, tuple(p.placements)
            shape, stride = tuple(p.shape), tuple(p.stride())
            local = p.to_local().detach().contiguous()
        else:
            spec, mesh, placements, shape, stride = None, None, None, tuple(p.shape), tuple(p.stride())
            local = p.detach()
        if mesh is not None and placements is not None:
            for d, pl in enumerate(placements):
                if isinstance(pl, Shard):
                    names = mesh.mesh_dim_names
                    check_even(what, shape, pl.dim, mesh.size(d), names[d] if names else "",
                               param_location(model, fqn))
                elif isinstance(pl, Partial):
                    raise ExportError(f"{what}: a Partial parameter ({pl}) is not supported")
        if local.is_complex():
            raise ExportError(f"{what} is {str(local.dtype).removeprefix('torch.')}: unsupported dtype "
                              "(complex parameters; complex buffers and activations are lowered to real ones)")
        rep = None
        if groups is not None and mesh is not None and placements is not None:
            rep = _replicated_over(groups, mesh, placements)
        info = ParamInfo(fqn, placements, shape, stride)
        if spec is not None:
            info.fsdp_dim = spec.dim
            info.fsdp_rows = spec.rows if spec.pads else None
            if groups is not None and spec.group is not None:
                g = groups.by_name.get(spec.group.group_name)
                info.fsdp_group = g.symbol if g is not None else "dp"
        out.append(Local("param", fqn, local, info, spec, mesh, placements, shape, stride,
                         replicated=rep, trainable=trainable))
    for fqn, b in model.named_buffers():
        if isinstance(b, DTensor):
            raise ExportError(f"buffer '{fqn}' is a DTensor (only parameters and inputs may be)")
        out.append(Local("buffer", fqn, real_view(b.detach()), complex=b.is_complex()))
    for name, x in zip(built.input_names, built.inputs):
        if isinstance(x, DTensor):
            out.append(Local("input", name, x.to_local().detach().contiguous(), mesh=x.device_mesh,
                             placements=tuple(x.placements), shape=tuple(x.shape), stride=tuple(x.stride())))
        elif isinstance(x, torch.Tensor):
            out.append(Local("input", name, real_view(x.detach()), complex=x.is_complex()))
    return out


def _rebuild_inputs(built: Built, locals_: list[Local], xs: list[torch.Tensor]) -> list[Any]:
    """The builder's inputs with every tensor replaced by its traced argument."""
    it = iter(zip([loc for loc in locals_ if loc.kind == "input"], xs))
    out: list[Any] = []
    for x in built.inputs:
        if not isinstance(x, torch.Tensor):
            out.append(x)
            continue
        loc, t = next(it)
        if loc.mesh is not None:
            t = DTensor.from_local(t, loc.mesh, loc.placements, run_check=False,
                                   shape=torch.Size(loc.shape), stride=loc.stride)
        elif loc.complex:
            t = torch.view_as_complex(t)
        out.append(t)
    return out


def trace_user_rank(
    factory: Factory,
    par: Parallelism,
    rank: int,
    backward: bool,
    seed: int,
    tables: RankTables | None = None,
) -> Traced:
    """Rank ``rank``'s trace of a builder's model or training step (see the module's doc)."""
    _reset_dtensor_caches()
    with fake_process_group(par.world_size, rank):
        with user_code(), local_scatter():
            built = call_builder(factory, seed)
        _tag_new_meshes(("commlir_torch.user", _next_token()))
        groups = GroupTable(par.world_size)
        with user_code():
            locals_ = collect(built, groups, par.symm_mem)
        _replace_fsdp_hooks(built.model)
        training = backward or built.step is not None
        params = [loc for loc in locals_ if loc.kind == "param"]
        buffers = [loc for loc in locals_ if loc.kind == "buffer"]
        n_params, n_buffers = len(params), len(buffers)
        has_loss: list[bool] = []

        def fn(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            ps = list(xs[:n_params])
            if training:
                ps = [p.detach().requires_grad_(loc.trainable) for p, loc in zip(ps, params)]
            state: dict[str, Any] = {}
            for p, loc in zip(ps, params):
                t = p
                if loc.fsdp is not None:
                    t = FsdpGather.apply(t, loc.fsdp)
                    if loc.fsdp.pads:
                        t = t.narrow(loc.fsdp.dim, 0, loc.fsdp.rows)  # FSDP2's padding off
                if loc.mesh is not None:
                    t = DTensor.from_local(t, loc.mesh, loc.placements, run_check=False,
                                           shape=torch.Size(loc.shape), stride=loc.stride)
                state[loc.fqn] = t
            for loc, b in zip(buffers, xs[n_params : n_params + n_buffers]):
                state[loc.fqn] = torch.view_as_complex(b) if loc.complex else b
            inputs = _rebuild_inputs(built, locals_, list(xs[n_params + n_buffers :]))
            # Attention as trace.py traces it: the fused kernel where it applies, the math
            # backend for a masked or dropout attention in a training step.
            backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]
            masked = MathForMaskedAttention() if training else contextlib.nullcontext()
            with sdpa_kernel(backends), masked, torch.enable_grad() if training else torch.no_grad(), \
                    _reparametrize_module(built.model, state):
                leaves = [p for p, loc in zip(ps, params) if loc.trainable]
                if built.step is not None:
                    ret = built.step(built.model, *inputs)
                    loss = _loss_value(ret)
                    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in leaves]
                elif training:
                    loss = loss_of(local_outputs(built.model(*inputs)))
                    grads = list(torch.autograd.grad(loss, leaves, allow_unused=True, materialize_grads=True))
                else:
                    return tuple(local_outputs(built.model(*inputs)))
            has_loss.append(loss is not None)
            return tuple(([loss] if loss is not None else []) + grads)

        flat = [loc.tensor for loc in locals_]
        with user_code():
            gm = make_fx(
                fn,
                decomposition_table=decompositions(),
                tracing_mode="fake",
                record_stack_traces=True,
            )(*flat)
        gm.graph.eliminate_dead_code()
        gm.recompile()
        fold_repeat_kv(gm)  # as trace.py: torchtitan's repeat_kv into grouped kv heads
        args = [
            Arg(sanitize(loc.fqn), loc.kind, loc.fqn, TensorType(tuple(loc.tensor.shape), loc.tensor.dtype),
                loc.replicated)
            for loc in locals_
        ]
        if training:
            outs = ([Out("loss", "loss")] if has_loss and has_loss[-1] else []) + [
                Out("grad", loc.fqn) for loc in params if loc.trainable
            ]
        else:
            out_vals = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
            n_out = len(out_vals) if isinstance(out_vals, (list, tuple)) else 1
            outs = [Out("output", str(i)) for i in range(n_out)]
        text, cx = lower_graph(gm, args, outs, groups, "train_step" if training else "forward", tables)
        infos = [loc.info for loc in params if loc.info is not None]
        return Traced(text, args, outs, cx.consts, cx.a2a_local, cx.fill_values, cx.pick_values, infos,
                      groups.families())


_TOKENS = iter(range(1 << 62))


def _next_token() -> int:
    return next(_TOKENS)


def _loss_value(ret: Any) -> torch.Tensor | None:
    """The loss a training step returned: a tensor (a DTensor's local value), or None."""
    if ret is None:
        return None
    if isinstance(ret, (list, tuple)) and ret:
        ret = ret[0]
    if isinstance(ret, DTensor):
        ret = ret.full_tensor() if any(isinstance(p, Partial) for p in ret.placements) else ret.to_local()
    if not isinstance(ret, torch.Tensor):
        raise ExportError(f"the training step returned {type(ret).__name__}; return the loss (a tensor) or None")
    return ret.detach() if not ret.requires_grad else ret


def rank_inputs(factory: Factory, par: Parallelism, rank: int, seed: int, args: list[Arg],
                consts: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every argument of ``rank``, by name: what the builder makes on that rank."""
    with fake_process_group(par.world_size, rank), user_code(), local_scatter():
        built = call_builder(factory, seed)
        locals_ = collect(built)
    tensors = iter(loc.tensor for loc in locals_)
    out: dict[str, torch.Tensor] = {}
    for a in args:
        t = consts[a.name] if a.kind == "const" else next(tensors)
        if tuple(t.shape) != a.type.shape or t.dtype != a.type.dtype:
            raise ExportError(f"rank {rank}'s '{a.name}' is {t.dtype} {tuple(t.shape)}, the program takes {a.type}")
        out[a.name] = t.contiguous()
    return out


__all__ = ["Built", "FsdpGather", "FsdpSpec", "call_builder", "collect", "fake_process_group", "fsdp_params",
           "rank_inputs", "trace_user_rank"]
