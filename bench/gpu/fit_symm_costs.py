"""Fits the cost model's symm constants (passes/src/analysis/cost.rs, docs/cost-model.md) to
the all-reduce latencies bench/gpu/run_symm_kernels.sh prints (part 3):

    commlir,<one-shot|two-shot|auto|nccl>,<bytes>,<us>
    torch,<nccl|one_shot|two_shot>,<bytes>,<us>

    python3 bench/gpu/fit_symm_costs.py LOG [G] [LAUNCH_US]

The model (G ranks, n bytes):
    one-shot, n ≤ 1 MiB (LL) = ll                              + n·(G−1)   / ll_bw
    one-shot, n > 1 MiB      = launch + 2·barrier              + n·(G−1)   / read_bw
    two-shot                 = launch + 2·barrier + push       + 2·n·(G−1)/G / rw_bw
Each line is a least-squares fit of (intercept, 1/bandwidth) over the sizes measured; the
kernel launch inside a CUDA graph is taken as LAUNCH_US (default 2.5) and the rest of the
barrier one-shot's intercept is two barriers. The benchmark's programs take the all-reduce's
input as a function argument and return its result, so one-shot copies the argument into the
pool once and two-shot twice (in, and its in-place result out); those copies are subtracted
at the cost model's own price for a device copy (launch 2 µs + 2·n / 4.2 TB/s, the machine's
`launch_ns` and `mem_bw`), so that the constants are the kernels' alone, as `coll-to-comm`
adds the copies a program needs to them. Prints the constants, then per size the measured times,
the model's choice and the fastest measured path (commlir's and PyTorch's)."""
import sys
from collections import defaultdict


def fit(points):
    """Least squares y = a + b·x; returns (a, b)."""
    n = len(points)
    sx = sum(x for x, _ in points)
    sy = sum(y for _, y in points)
    sxx = sum(x * x for x, _ in points)
    sxy = sum(x * y for x, y in points)
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    return (sy - b * sx) / n, b


def copy_us(n):
    """The cost model's device copy of n bytes (Machine::copy on h200x2-nvlink), µs."""
    return 2.0 + 2 * n / 4.2e6


def main():
    path = sys.argv[1]
    g = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    launch = float(sys.argv[3]) if len(sys.argv) > 3 else 2.5
    t = defaultdict(dict)
    for line in open(path):
        f = line.strip().split(",")
        if len(f) >= 4 and f[0] in ("commlir", "torch"):
            try:
                t[(f[0], f[1])][int(f[2])] = float(f[3])
            except ValueError:
                pass
    one = t[("commlir", "one-shot")]
    two = t[("commlir", "two-shot")]
    ll_max = 1 << 20
    al, bl = fit([(n * (g - 1), us - copy_us(n)) for n, us in one.items() if n <= ll_max])
    a1, b1 = fit([(n * (g - 1), us - copy_us(n)) for n, us in one.items() if n > ll_max])
    a2, b2 = fit([(2 * n * (g - 1) / g, us - 2 * copy_us(n)) for n, us in two.items()])
    barrier = max(a1 - launch, 0.0) / 2
    push = max(a2 - a1, 0.0)
    print(f"symm_launch_us: {launch:.2f}")
    print(f"symm_barrier_us: {barrier:.2f}")
    print(f"symm_push_us: {push:.2f}")
    print(f"symm_read_gbps: {1e-3 / b1:.1f}")
    print(f"symm_rw_gbps: {1e-3 / b2:.1f}")
    print(f"symm_ll_us: {al:.2f}")
    print(f"symm_ll_gbps: {1e-3 / bl:.1f}")
    print()
    print("bytes,one-shot,two-shot,auto,nccl,torch nccl,torch one,torch two,model picks,fastest")
    for n in sorted(one):
        m1 = (al + bl * n * (g - 1)) if n <= ll_max else (a1 + b1 * n * (g - 1))
        m2 = a2 + b2 * 2 * n * (g - 1) / g
        pick = "one-shot" if m1 <= m2 else "two-shot"
        cols = {k: v.get(n) for k, v in t.items()}
        best = min((v, f"{k[0]} {k[1]}") for k, v in cols.items() if v is not None)
        row = [cols.get(k) for k in (("commlir", "one-shot"), ("commlir", "two-shot"),
                                     ("commlir", "auto"), ("commlir", "nccl"), ("torch", "nccl"),
                                     ("torch", "one_shot"), ("torch", "two_shot"))]
        print(n, *("-" if v is None else f"{v:.2f}" for v in row), pick, best[1], sep=",")


if __name__ == "__main__":
    main()
