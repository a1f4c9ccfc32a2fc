"""A torchtitan-style Llama training script, written the way a torchtitan user writes it and
knowing nothing of commlir: the model (``nn.RMSNorm``, the complex rotary embedding of
``view_as_complex``/``polar``, SDPA, SwiGLU, a ``ModuleDict`` of blocks), torchtitan's
tensor/sequence-parallel plan (``apply_tp``) and FSDP2 wrapping (``apply_fsdp``: every block,
the final norm and output together, then the root, with a ``MixedPrecisionPolicy``), a
``parallelize_llama`` that applies both on a ``(dp_shard, tp)`` mesh, and the training step
(forward, cross-entropy, ``loss.backward()``, under ``loss_parallel()`` when the output stays
sharded over the vocabulary, torchtitan's default).

The exporter needs one function from such a script, a builder: here :func:`build`, which
makes the mesh on the device it is given, parallelizes the model and returns
``(train_step, model, (tokens, labels))`` for this rank."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)


@dataclass
class ModelArgs:
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    vocab_size: int = 128
    multiple_of: int = 32
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_seq_len: int = 16


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> torch.Tensor:
    """The rotary embedding's complex exponentials (complex64), as torchtitan computes them."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


def reshape_for_broadcast(freqs_cis: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    seqlen = x.shape[1]
    freqs_cis = freqs_cis[0:seqlen]
    shape = [d if i == 1 or i == x.ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, args.dim, bias=False)
        self.wv = nn.Linear(args.dim, args.dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        bs, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        # -1: the local heads, which tensor parallelism divides.
        xq = xq.view(bs, seqlen, -1, self.head_dim)
        xk = xk.view(bs, seqlen, -1, self.head_dim)
        xv = xv.view(bs, seqlen, -1, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
        xq, xk, xv = xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2)
        output = F.scaled_dot_product_attention(xq, xk, xv, is_causal=True)
        output = output.transpose(1, 2).contiguous().view(bs, seqlen, -1)
        return self.wo(output)


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden_dim: int, multiple_of: int) -> None:
        super().__init__()
        hidden_dim = int(2 * hidden_dim / 3)
        hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args.dim, 4 * args.dim, args.multiple_of)
        self.attention_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.ffn_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.register_buffer(
            "freqs_cis", precompute_freqs_cis(args.dim // args.n_heads, args.max_seq_len * 2, args.rope_theta),
            persistent=True,
        )
        self.layers = nn.ModuleDict({str(i): TransformerBlock(args) for i in range(args.n_layers)})
        self.norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h, self.freqs_cis)
        return self.output(self.norm(h))


def apply_tp(model: Transformer, tp_mesh: DeviceMesh, loss_parallel: bool = False) -> None:
    """torchtitan's tensor and sequence parallelism."""
    parallelize_module(
        model,
        tp_mesh,
        {
            "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
            "norm": SequenceParallel(),
            "output": ColwiseParallel(
                input_layouts=Shard(1),
                output_layouts=Shard(-1) if loss_parallel else Replicate(),
                use_local_output=not loss_parallel,
            ),
        },
    )
    for block in model.layers.values():
        plan = {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(
                input_layouts=(Shard(1), None),
                desired_input_layouts=(Replicate(), None),
            ),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(
                input_layouts=(Shard(1),),
                desired_input_layouts=(Replicate(),),
            ),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel(),
        }
        parallelize_module(block, tp_mesh, plan)


def apply_fsdp(model: Transformer, dp_mesh: DeviceMesh, param_dtype: torch.dtype, reduce_dtype: torch.dtype) -> None:
    """torchtitan's FSDP2 wrapping."""
    mp_policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)
    config = {"mesh": dp_mesh, "mp_policy": mp_policy}
    fully_shard(model.tok_embeddings, **config)
    for block in model.layers.values():
        fully_shard(block, **config, reshard_after_forward=True)
    fully_shard([model.norm, model.output], **config, reshard_after_forward=False)
    fully_shard(model, **config)


def parallelize_llama(model: Transformer, world_mesh: DeviceMesh, param_dtype: torch.dtype = torch.float32,
                      loss_parallel: bool = False) -> None:
    if world_mesh["tp"].size() > 1:
        apply_tp(model, world_mesh["tp"], loss_parallel)
    apply_fsdp(model, world_mesh["dp_shard"], param_dtype, torch.float32)


def train_step(model: nn.Module, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    pred = model(tokens)
    loss = F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
    loss.backward()
    return loss


def train_step_loss_parallel(model: nn.Module, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The step with the logits sharded over the vocabulary (torchtitan's default with TP)."""
    with loss_parallel():
        return train_step(model, tokens, labels)


def batch(args: ModelArgs, dp_rank: int, batch_size: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """This data-parallel rank's batch (the tensor-parallel ranks of a replica share it)."""
    g = torch.Generator().manual_seed(1234 + dp_rank)
    tokens = torch.randint(0, args.vocab_size, (batch_size, args.max_seq_len + 1), generator=g)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def build(device: str = "cuda", dp: int = 2, tp: int = 2, param_dtype: torch.dtype = torch.float32,
          loss_parallel: bool = False):
    """The builder: this rank's training step, its parallelized model and its batch."""
    world_mesh = init_device_mesh(device, (dp, tp), mesh_dim_names=("dp_shard", "tp"))
    args = ModelArgs()
    model = Transformer(args)
    parallelize_llama(model, world_mesh, param_dtype, loss_parallel)
    tokens, labels = batch(args, world_mesh["dp_shard"].get_local_rank())
    return (train_step_loss_parallel if loss_parallel else train_step), model, (tokens, labels)


def build_loss_parallel(device: str = "cuda"):
    """torchtitan's defaults: loss parallelism on."""
    return build(device, loss_parallel=True)


def build_bf16(device: str = "cuda"):
    """The same with torchtitan's default mixed precision (bf16 parameters, f32 reductions)."""
    return build(device, param_dtype=torch.bfloat16)


def main() -> None:  # pragma: no cover - how the script runs on GPUs, for the docs
    dist.init_process_group("nccl")
    torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
    step, model, (tokens, labels) = build("cuda")
    print(step(model, tokens.cuda(), labels.cuda()).item())


if __name__ == "__main__":  # pragma: no cover
    main()
