"""Reference models for the exporter's tests and docs: a two-layer MLP and a Llama-style
transformer block (RMSNorm, rotary embedding, causal attention, SwiGLU MLP).

Each model exposes what the exporter and the reference harness need besides ``forward``:

* ``example_inputs()``: a tuple of input tensors (drawn from the global RNG, so that the
  caller chooses the data by seeding it);
* ``tp_plan(sp)``: the ``parallelize_module`` plan for tensor parallelism, with sequence
  parallelism when ``sp`` is true;
* ``fsdp_units()``: the submodules ``fully_shard`` wraps before the root (FSDP2).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor import Placement, Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
)


class MLP(nn.Module):
    """``w2(gelu(w1(x)))``: the Megatron MLP, column- then row-parallel under TP."""

    def __init__(self, dim: int = 64, hidden: int = 256, tokens: int = 16) -> None:
        super().__init__()
        self.dim, self.tokens = dim, tokens
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.gelu(self.w1(x), approximate="tanh"))

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(self.tokens, self.dim, dtype=self.w1.weight.dtype),)

    def tp_plan(self, sp: bool = False) -> dict[str, ParallelStyle]:
        if sp:
            return {
                "w1": ColwiseParallel(input_layouts=Shard(0)),
                "w2": RowwiseParallel(output_layouts=Shard(0)),
            }
        return {"w1": ColwiseParallel(), "w2": RowwiseParallel()}

    def tp_input_layouts(self, sp: bool = False) -> tuple[Placement, ...]:
        return (Shard(0),) if sp else (Replicate(),)

    def fsdp_units(self) -> list[nn.Module]:
        return [self.w1, self.w2]


class RMSNorm(nn.Module):
    """Root-mean-square layer norm with a learned scale."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return y.type_as(x) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """The rotary embedding's pairing of the two halves of the head dimension."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    """Causal attention with rotary position embeddings, ``n_kv_heads`` key/value heads shared
    by groups of the ``n_heads`` query heads (grouped-query attention, Llama 3; equal counts
    are multi-head attention). Heads are inferred from the projections' (possibly
    tensor-parallel) widths, so the same code runs on local heads; the grouped key/value heads
    reach SDPA through ``enable_gqa`` (``kv="gqa"``) or repeated by torchtitan's ``repeat_kv``
    (``kv="repeat_kv"``: what torchtitan runs, and what ``torch.compile`` of a DTensor model
    takes; the exporter folds the repeat back into grouped heads)."""

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int | None = None, kv: str = "gqa") -> None:
        super().__init__()
        self.kv = kv
        self.head_dim = dim // n_heads
        kv = n_kv_heads or n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        gqa = k.shape[1] != q.shape[1]
        if gqa and self.kv == "repeat_kv":
            rep = q.shape[1] // k.shape[1]
            k, v = (
                z.transpose(1, 2)[:, :, :, None, :]
                .expand(b, s, z.shape[1], rep, self.head_dim)
                .reshape(b, s, z.shape[1] * rep, self.head_dim)
                .transpose(1, 2)
                for z in (k, v)
            )
            gqa = False
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    """SwiGLU: ``w2(silu(w1(x)) * w3(x))``."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    """One pre-norm Llama transformer block over ``(batch, seq, dim)`` activations."""

    def __init__(
        self,
        dim: int = 64,
        n_heads: int = 4,
        hidden: int = 128,
        seq: int = 16,
        batch: int = 2,
        rope_theta: float = 10000.0,
        n_kv_heads: int | None = None,
        kv: str = "gqa",
    ) -> None:
        super().__init__()
        self.dim, self.seq, self.batch = dim, seq, batch
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, n_heads, n_kv_heads, kv)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim, hidden)
        head_dim = dim // n_heads
        inv_freq = 1.0 / rope_theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(seq).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("rope_cos", angles.cos(), persistent=False)
        self.register_buffer("rope_sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cos, sin = self.rope_cos.to(x.dtype), self.rope_sin.to(x.dtype)
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        dtype = self.attention.wq.weight.dtype
        return (torch.randn(self.batch, self.seq, self.dim, dtype=dtype),)

    def tp_plan(self, sp: bool = False) -> dict[str, ParallelStyle]:
        # torchtitan's plan: norms sequence-parallel (on Shard(1)) under SP; the attention and
        # feed-forward inputs gathered to Replicate before the column-parallel projections.
        seq_layout = Shard(1) if sp else Replicate()
        plan: dict[str, ParallelStyle] = {
            "attention": PrepareModuleInput(
                input_layouts=(seq_layout, None, None),
                desired_input_layouts=(Replicate(), None, None),
            ),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=seq_layout),
            "feed_forward": PrepareModuleInput(
                input_layouts=(seq_layout,), desired_input_layouts=(Replicate(),)
            ),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w3": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=seq_layout),
        }
        if sp:
            plan["attention_norm"] = SequenceParallel()
            plan["ffn_norm"] = SequenceParallel()
        return plan

    def tp_input_layouts(self, sp: bool = False) -> tuple[Placement, ...]:
        return (Shard(1),) if sp else (Replicate(),)

    def fsdp_units(self) -> list[nn.Module]:
        return [self.attention, self.feed_forward]


class LlamaLM(nn.Module):
    """A small Llama language model: token embedding, ``n_layers`` Llama blocks, a final
    RMSNorm, the output projection and the cross-entropy loss against the next tokens. Its
    forward returns the loss, so ``--backward`` differentiates that."""

    def __init__(self, vocab: int = 128, dim: int = 64, n_layers: int = 2, n_heads: int = 4,
                 hidden: int = 128, seq: int = 16, batch: int = 2,
                 n_kv_heads: int | None = None) -> None:
        super().__init__()
        self.vocab, self.seq, self.batch = vocab, seq, batch
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            LlamaBlock(dim, n_heads, hidden, seq, batch, n_kv_heads=n_kv_heads)
            for _ in range(n_layers)
        )
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        logits = self.output(self.norm(h))
        return F.cross_entropy(logits.reshape(-1, self.vocab).float(), targets.reshape(-1))

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        tokens = torch.randint(0, self.vocab, (self.batch, self.seq + 1))
        return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def tp_plan(self, sp: bool = False) -> dict[str, ParallelStyle]:
        # The vocabulary-parallel embedding and a column-parallel output gathered back to
        # the whole vocabulary (the loss sees every logit); the blocks as LlamaBlock plans them.
        seq_layout = Shard(1) if sp else Replicate()
        plan: dict[str, ParallelStyle] = {
            "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=seq_layout),
            "output": ColwiseParallel(input_layouts=seq_layout, output_layouts=Replicate()),
        }
        if sp:
            plan["norm"] = SequenceParallel()
        for i, layer in enumerate(self.layers):
            plan.update({f"layers.{i}.{k}": v for k, v in layer.tp_plan(sp).items()})
        return plan

    def fsdp_units(self) -> list[nn.Module]:
        return list(self.layers)


class LlamaStack(nn.Module):
    """``n_layers`` Llama blocks and a mean-square loss of their output: a Llama model's
    transformer layers without its vocabulary (embedding, output projection, cross-entropy),
    the part the training-step benchmark compares at real sizes (Llama 3 8B: dim 4096, 32
    query heads over 8 key/value heads, FFN 14336). Its forward returns the loss, so
    ``--backward`` exports the whole training step."""

    def __init__(self, dim: int = 64, n_layers: int = 2, n_heads: int = 4, hidden: int = 128,
                 seq: int = 16, batch: int = 2, n_kv_heads: int | None = None,
                 kv: str = "gqa") -> None:
        super().__init__()
        self.dim, self.seq, self.batch = dim, seq, batch
        self.layers = nn.ModuleList(
            LlamaBlock(dim, n_heads, hidden, seq, batch, n_kv_heads=n_kv_heads, kv=kv)
            for _ in range(n_layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x.float().pow(2).mean()

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return self.layers[0].example_inputs()

    def tp_plan(self, sp: bool = False) -> dict[str, ParallelStyle]:
        plan: dict[str, ParallelStyle] = {}
        for i, layer in enumerate(self.layers):
            plan.update({f"layers.{i}.{k}": v for k, v in layer.tp_plan(sp).items()})
        return plan

    def tp_input_layouts(self, sp: bool = False) -> tuple[Placement, ...]:
        return self.layers[0].tp_input_layouts(sp)

    def fsdp_units(self) -> list[nn.Module]:
        return list(self.layers)


def make_llama_lm() -> LlamaLM:
    """The small Llama language model with its default (test-sized) shapes."""
    return LlamaLM()


class GPTBlock(nn.Module):
    """A GPT-2 style block: LayerNorm, a fused QKV projection with biases, attention written
    out (scores, a causal ``masked_fill`` and softmax), a tanh-GELU MLP. Data-parallel only
    (the fused projection's split needs the whole width)."""

    def __init__(self, dim: int = 64, n_heads: int = 4, seq: int = 16, batch: int = 2) -> None:
        super().__init__()
        self.n_heads, self.dim, self.seq, self.batch = n_heads, dim, seq, batch
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).bool(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_heads, -1).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = F.softmax(att.masked_fill(~self.mask[:t, :t], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(self.batch, self.seq, self.dim, dtype=self.qkv.weight.dtype),)

    def fsdp_units(self) -> list[nn.Module]:
        return [self.qkv, self.proj, self.fc, self.out]


def make_gpt_block() -> GPTBlock:
    """The GPT block with its default (test-sized) shapes."""
    return GPTBlock()


def make_mlp() -> MLP:
    """The MLP with its default (test-sized) shapes."""
    return MLP()


def make_llama_block() -> LlamaBlock:
    """The Llama block with its default (test-sized) shapes."""
    return LlamaBlock()
