#!/usr/bin/env bash
# One device call (2 GPUs) for the sixth run: (1) the upstream MLIR program
# (examples/upstream/, shard + arith through real MLIR) on GPUs, checked against the sim
# backend and timed; (2) --check of every example and the small transformers with the
# current kernels; (3) 4-layer TP/FSDP step times against PyTorch eager and torch.compile,
# in the same call.
#   bench/gpu/run_session.sh [DIR] [OUT]     (DIR from bench/gpu/prepare.sh)
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
run="$dir/commlir-run"
log="$out/log.txt"
say() { echo "$@" | tee -a "$log"; }
say "== machine"; nvidia-smi -L 2>&1 | tee -a "$log"; date -u | tee -a "$log"

say "== (1) upstream MLIR programs through NCCL"
for a in "$dir"/upstream/*.commlir; do
  b=$(basename "$a" .commlir)
  say "\$ commlir-run upstream/$b.commlir --backend cuda --ranks 2 --check-against upstream/$b.ref.mlir"
  timeout 90 "$run" "$a" --backend cuda --ranks 2 --check-against "$dir/upstream/$b.ref.mlir" 2>&1 | tee -a "$log"
  say "\$ commlir-run upstream/$b.commlir --backend cuda --ranks 2 --bench-iters 50 --warmup 5"
  timeout 90 "$run" "$a" --backend cuda --ranks 2 --bench-iters 50 --warmup 5 2>&1 | grep -E '^(time|op )' | tee -a "$log"
done

say "== (2) --check, every example and the small transformers"
for a in "$dir"/examples/*.commlir "$dir"/examples_nosched/*.commlir; do
  b=$(basename "$a" .commlir)
  say "\$ commlir-run $(basename $(dirname $a))/$b.commlir --backend cuda --ranks 2 --check --check-against src/$b.mlir"
  timeout 60 "$run" "$a" --backend cuda --ranks 2 --check --check-against "$dir/src/$b.mlir" 2>&1 | grep -E 'check|error|note' | tee -a "$log"
done
for p in tp fsdp; do
  for v in full plain; do
    say "\$ commlir-run tf/${p}4_small.$v.commlir --backend cuda --ranks 2 --check --check-against tf/${p}4_small.mlir"
    timeout 60 "$run" "$dir/tf/${p}4_small.$v.commlir" --backend cuda --ranks 2 --check --check-against "$dir/tf/${p}4_small.mlir" 2>&1 | grep -E 'check|error' | tee -a "$log"
  done
done

say "== (3) step times, 4 layers, tokens 2048, hidden 4096, ffn 16384, bf16"
for pv in "tp full" "tp plain" "fsdp full" "fsdp plain"; do
  set -- $pv
  o=$(timeout 120 "$run" "$dir/tf/${1}4_big.$2.commlir" --backend cuda --ranks 2 --bench-iters ${ITERS:-30} --warmup 5 2>>"$log")
  echo "\$ commlir-run tf/${1}4_big.$2.commlir --backend cuda --ranks 2 --bench-iters ${ITERS:-30} --warmup 5" >>"$log"
  echo "$o" | grep -E '^(time|op )' >>"$log"
  say "commlir,$1,$2,wall=$(echo "$o" | sed -n 's/^time: \([0-9.]*\) us.*/\1/p'),events=$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us.*/\1/p')"
done
say "\$ python3 steps_transformer.py 4 2048 4096 16384 ${ITERS:-30}"
PYTHONUNBUFFERED=1 timeout ${STEPS_TIMEOUT:-240} python3 "$here/steps_transformer.py" 4 2048 4096 16384 ${ITERS:-30} 2>&1 | grep -vi warn | tee -a "$log"
say "== done"; date -u | tee -a "$log"
