#!/usr/bin/env bash
# The Llama-3-8B-shaped training step (DIR from prepare_llama3.sh; copy DIR, bench/gpu and
# python/ to the GPU machine): per configuration, `--check` of the small model's step against
# the sim on its exported inputs, then the step time and peak device memory of the real-size
# step through commlir next to PyTorch's configurations in the same run
# (bench/gpu/llama3_step_torch.py), with the ratios commlir / the fastest and peak / the leanest.
#   bench/gpu/run_llama3.sh [DIR] [OUT] [CONFIGS] [SEQS]
# CONFIGS as prepare_llama3.sh's (default single); SEQS default "4096 8192"; TORCH_CONFIGS
# narrows PyTorch's configurations (llama3_step_torch.py --configs).
set -uo pipefail
dir=${1:-.gpubench-llama3}
out=${2:-${OUT:-gpu-out}}
configs=${3:-single}
seqs=${4:-4096 8192}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
mkdir -p "$out"
log="$out/llama3.txt"
R="$dir/commlir-run"
say() { echo "$*" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
for c in $configs; do
  case $c in
    single) n=1; mode=single ;;
    fsdp*) n=${c#fsdp}; mode=fsdp ;;
    tp*) n=${c#tp}; mode=tp ;;
    mesh2x2) n=4; mode=mesh ;;
  esac
  say "== $c: small model's training step, --check against the sim on the exported inputs"
  timeout 300 "$R" "$dir/small_$c.commlir" --backend cuda --ranks "$n" --check \
    --check-against "$dir/small_$c.mlir" --inputs "$dir/small_${c}_in_{rank}.safetensors" 2>&1 \
    | grep -E '^check|error' | tail -4 | tee -a "$log"
  for s in $seqs; do
    say "== $c seq $s: commlir"
    timeout 300 "$R" "$dir/${c}_$s.commlir" --backend cuda --ranks "$n" --bench-iters 10 --warmup 2 2>&1 \
      | grep -E '^time|^work|memory|error' | tee "$out/llama3_${c}_$s.commlir.txt" | tee -a "$log"
    [ "$mode" = mesh ] && continue
    say "== $c seq $s: PyTorch"
    timeout 560 python3 "$here/llama3_step_torch.py" --mode "$mode" --gpus "$n" --seq "$s" --iters 10 \
      --configs "${TORCH_CONFIGS:-}" 2>&1 \
      | grep -E '^(eager|compile|fsdp|tp)' | tee "$out/llama3_${c}_$s.torch.txt" | tee -a "$log"
    python3 - "$out/llama3_${c}_$s.commlir.txt" "$out/llama3_${c}_$s.torch.txt" "$c seq $s" <<'PY' | tee -a "$log"
import re, sys
c = open(sys.argv[1]).read()
t = re.search(r"time\(events\): ([\d.]+) us", c)
m = re.search(r"device memory: peak ([\d.]+) MiB", c)
ref = []
for line in open(sys.argv[2]):
    f = line.strip().split(",")
    if len(f) == 3 and f[1].endswith(" us"):
        ref.append((f[0], float(f[1].split()[0]), float(f[2].split()[1])))
if t and ref:
    fast = min(ref, key=lambda r: r[1]); lean = min(ref, key=lambda r: r[2])
    us = float(t.group(1)); mib = float(m.group(1)) if m else float("nan")
    print(f"ratio,{sys.argv[3]},commlir {us:.0f} us / {fast[0]} {fast[1]:.0f} us = {us / fast[1]:.3f},"
          f" peak {mib:.0f} MiB / {lean[0]} {lean[2]:.0f} MiB = {mib / lean[2]:.3f}")
PY
  done
done
date -u | tee -a "$log"
