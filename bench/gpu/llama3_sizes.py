"""The Llama-3-8B-shaped models of the training-step benchmark (prepare_llama3.sh): dim 4096,
32 query heads over 8 key/value heads, head dim 128, FFN 14336, bf16, two layers; sequence
4096 or 8192, batch 1; and a small model of the same structure for `--check` against the sim."""
from commlir_torch.models import LlamaStack


def big_4096():
    return LlamaStack(dim=4096, n_layers=2, n_heads=32, n_kv_heads=8, hidden=14336, seq=4096, batch=1)


def big_8192():
    return LlamaStack(dim=4096, n_layers=2, n_heads=32, n_kv_heads=8, hidden=14336, seq=8192, batch=1)


def small():
    return LlamaStack(dim=256, n_layers=2, n_heads=8, n_kv_heads=2, hidden=512, seq=128, batch=1)
