#!/usr/bin/env bash
# One device call (2 GPUs), tenth run: (1) where the small-size collective gap comes from: raw
# NCCL back to back with and without one event record per call (`--baseline-events`), host
# time per call on both sides; (2) accuracy of the narrow-type transcendental kernels
# (bench/gpu/probe) and --check of the examples and small transformers; (3) 4-layer TP/FSDP
# step times against PyTorch eager and torch.compile, in the same call.
#   bench/gpu/run_session3.sh [DIR] [OUT]   (DIR from bench/gpu/prepare.sh plus DIR/probe)
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

say "== (1) raw NCCL back to back, registered, without and with an event per call"
for ev in "" --baseline-events; do
  timeout 120 "$run" --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 1,4,16 --bench-iters 100 --warmup 10 --buffers registered $ev 2>&1 | tee -a "$log"
done
say "== (1) commlir single-collective programs"
for op in all_reduce all_gather reduce_scatter; do
  for mib in 1 4 16; do
    o=$(timeout 60 "$run" "$dir/colls/${op}_${mib}MiB.commlir" --backend cuda --ranks 2 --bench-iters 100 --warmup 10 2>>"$log")
    say "commlir,$op,${mib}MiB,$(echo "$o" | grep '^time' | sed 's/ per call.*//' | tr '\n' ' ')"
  done
done

say "== (2) accuracy probes and --check"
for t in bf16 f32; do
  say "\$ commlir-run probe/transcendental_$t.commlir --ranks 1 --check"
  timeout 120 "$run" "$dir/probe/transcendental_$t.commlir" --backend cuda --ranks 1 --check --check-against "$dir/probe/transcendental_$t.mlir" 2>&1 | grep -E '^check: |error|element' | tee -a "$log"
done
for a in "$dir"/examples/*.commlir; do
  b=$(basename "$a" .commlir)
  say "\$ commlir-run examples/$b.commlir --check"
  timeout 60 "$run" "$a" --backend cuda --ranks 2 --check --check-against "$dir/src/$b.mlir" 2>&1 | grep -E '^check: |error' | tee -a "$log"
done
for t in tf/tp4_small.full tf/tp4_small.plain tf/fsdp4_small.full; do
  p=$(basename "$t" | cut -d. -f1)
  say "\$ commlir-run $t.commlir --check --check-against tf/$p.mlir"
  timeout 60 "$run" "$dir/$t.commlir" --backend cuda --ranks 2 --check --check-against "$dir/tf/$p.mlir" 2>&1 | grep -E '^check: |error|element' | tee -a "$log"
done
for a in "$dir"/upstream/*.commlir; do
  b=$(basename "$a" .commlir)
  say "\$ commlir-run upstream/$b.commlir --check"
  timeout 60 "$run" "$a" --backend cuda --ranks 2 --check --check-against "$dir/upstream/$b.ref.mlir" 2>&1 | grep -E '^check: |error' | tee -a "$log"
done

say "== (3) step times, 4 layers, tokens 2048, hidden 4096, ffn 16384, bf16"
for t in tf/tp4_big.full tf/tp4_big.plain tf/fsdp4_big.full tf/fsdp4_big.plain; do
  o=$(timeout 120 "$run" "$dir/$t.commlir" --backend cuda --ranks 2 --bench-iters ${ITERS:-30} --warmup 5 2>>"$log")
  echo "\$ commlir-run $t.commlir --backend cuda --ranks 2 --bench-iters ${ITERS:-30} --warmup 5" >>"$log"
  echo "$o" | grep -E '^(time|op )' >>"$log"
  say "commlir,$t,$(echo "$o" | grep '^time(events)' | sed 's/ per call.*//'),softmax=$(echo "$o" | grep -m1 softmax | sed 's/.*: //'),gelu=$(echo "$o" | grep -m1 gelu | sed 's/.*: //')"
done
say "\$ python3 steps_transformer.py 4 2048 4096 16384 ${ITERS:-30}"
PYTHONUNBUFFERED=1 timeout ${STEPS_TIMEOUT:-200} python3 "$here/steps_transformer.py" 4 2048 4096 16384 ${ITERS:-30} 2>&1 | grep -vi warn | tee -a "$log"
say "== done"; date -u | tee -a "$log"
