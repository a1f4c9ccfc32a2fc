#!/usr/bin/env bash
# Attention forward and backward through commlir (cuDNN's fused flash attention, the default
# lowering) against PyTorch's scaled_dot_product_attention per backend, same GPU, same run
# (DIR from prepare_attention.sh): first `--check` of the small programs against the sim, then
# µs per call of each shape and the ratio commlir / PyTorch's fastest backend (< 1: faster).
#   bench/gpu/run_attention.sh [DIR] [OUT] [ITERS]
set -uo pipefail
dir=${1:-.gpubench-attn}
out=${2:-${OUT:-gpu-out}}
iters=${3:-30}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
mkdir -p "$out"
log="$out/attention.txt"
R="$dir/commlir-run"
say() { echo "$*" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
for e in train cross; do
  say "== @$e against the sim"
  timeout 300 "$R" "$dir/check.commlir" --backend cuda --ranks 1 --check --entry "$e" \
    --check-against "$dir/check.mlir" 2>&1 | grep -E '^check|error' | tee -a "$log"
done
declare -A ours
for f in "$dir"/fwd_*.commlir; do
  name=${f##*/fwd_}; name=${name%.commlir}
  for p in fwd bwd; do
    us=$(timeout 300 "$R" "$dir/${p}_$name.commlir" --backend cuda --ranks 1 --bench-iters "$iters" --warmup 3 2>&1 \
      | sed -n 's/^time(events): \([0-9.]*\) us.*/\1/p' | head -1)
    ours[$p,$name]=$us
    say "commlir,$name,$p,${us:-FAILED}"
  done
done
timeout 400 python3 "$here/attention_torch.py" "$iters" 2>/dev/null | tee "$out/attention_torch.txt" | tee -a "$log"
say "== ratio commlir / fastest PyTorch backend (µs)"
python3 - "$out/attention_torch.txt" "$log" <<'PY'
import re, sys
best = {}
for line in open(sys.argv[1]):
    m = re.match(r"torch,([^,]+),(\w+),fwd_us=([\d.]+),bwd_us=([\d.]+)", line)
    if m:
        name, be, f, b = m.group(1), m.group(2), float(m.group(3)), float(m.group(4))
        for p, v in (("fwd", f), ("bwd", b)):
            if (name, p) not in best or v < best[name, p][0]:
                best[name, p] = (v, be)
ours = {}
for line in open(sys.argv[2]):
    m = re.match(r"commlir,([^,]+),(\w+),([\d.]+)$", line.strip())
    if m:
        ours[m.group(1), m.group(2)] = float(m.group(3))
for (name, p), v in sorted(ours.items()):
    if (name, p) in best:
        t, be = best[name, p]
        print(f"ratio,{name},{p},commlir={v:.1f},torch_{be}={t:.1f},ratio={v / t:.3f}")
PY
date -u | tee -a "$log"
