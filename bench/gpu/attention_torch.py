"""PyTorch's scaled-dot-product attention timed per backend, the reference of the attention
benchmark (bench/gpu/run_attention.sh): forward and backward of causal bf16 attention, one
line per shape and backend:

    torch,<B>x<HQ>x<HKV>x<L>x<D>,<backend>,fwd_us=<us>,bwd_us=<us>

The backward is timed alone (``torch.autograd.grad`` of a retained graph, so no gradient
accumulates into ``.grad``). Grouped-query shapes (HKV < HQ) pass ``enable_gqa=True``; a
backend that refuses a shape prints ``unsupported`` with PyTorch's reason.

    python3 bench/gpu/attention_torch.py [ITERS] [B,HQ,HKV,L,D ...]
"""

import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def timed(fn, iters: int) -> float:
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def main() -> None:
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    shapes = [tuple(int(x) for x in a.split(",")) for a in sys.argv[2:]] or [
        (1, 32, hkv, l, 128) for l in (4096, 8192) for hkv in (32, 8)
    ]
    torch.manual_seed(0)
    for b, hq, hkv, l, d in shapes:
        q = torch.randn(b, hq, l, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(b, hkv, l, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(b, hkv, l, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        dout = torch.randn(b, hq, l, d, device="cuda", dtype=torch.bfloat16)
        gqa = hkv != hq
        name = f"{b}x{hq}x{hkv}x{l}x{d}"
        for backend, which in BACKENDS.items():
            try:
                with sdpa_kernel([which]):
                    def fwd():
                        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
                    with torch.no_grad():
                        f_us = timed(fwd, iters)
                    out = fwd()
                    b_us = timed(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), iters)
                print(f"torch,{name},{backend},fwd_us={f_us:.1f},bwd_us={b_us:.1f}", flush=True)
            except RuntimeError as e:
                reason = str(e).strip().splitlines()[0][:120] if str(e).strip() else type(e).__name__
                print(f"torch,{name},{backend},unsupported,{reason}", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
