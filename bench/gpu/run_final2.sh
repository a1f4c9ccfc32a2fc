#!/usr/bin/env bash
# One device call (2 GPUs), the session's closing run: accuracy probes (bf16/f32/f64
# transcendentals, and the integer-ops probe when built), --check of every example, small
# transformer and upstream program with the current runner (host-path rework, thread
# placement), and the TP/FSDP step times next to PyTorch 2.11 eager and torch.compile in the
# same call.
#   bench/gpu/run_final2.sh [DIR] [OUT]     (DIR from bench/gpu/prepare.sh plus DIR/probe)
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
R="$dir/commlir-run"
log="$out/log.txt"
say() { echo "$@" | tee -a "$log"; }
say "== machine"; nvidia-smi -L 2>&1 | tee -a "$log"; date -u | tee -a "$log"
say "== probes"
for p in "$dir"/probe/*.commlir; do
  b=$(basename "$p" .commlir)
  ranks=1; case $b in integer*) ranks=2;; esac
  say "\$ commlir-run probe/$b.commlir --ranks $ranks --check"
  timeout 120 "$R" "$p" --backend cuda --ranks $ranks --check --check-against "$dir/probe/$b.mlir" 2>&1 | grep -E '^check: |error|element' | tee -a "$log"
done
say "== --check"
for a in "$dir"/examples/*.commlir "$dir"/examples_nosched/*.commlir; do
  b=$(basename "$a" .commlir)
  say "\$ commlir-run $(basename $(dirname $a))/$b.commlir --check"
  timeout 60 "$R" "$a" --backend cuda --ranks 2 --check --check-against "$dir/src/$b.mlir" 2>&1 | grep -E '^check: |error' | tee -a "$log"
done
for t in tf/tp4_small.full tf/tp4_small.plain tf/fsdp4_small.full tf/fsdp4_small.plain; do
  p=$(basename "$t" | cut -d. -f1)
  say "\$ commlir-run $t.commlir --check --check-against tf/$p.mlir"
  timeout 60 "$R" "$dir/$t.commlir" --backend cuda --ranks 2 --check --check-against "$dir/tf/$p.mlir" 2>&1 | grep -E '^check: |error|element' | tee -a "$log"
done
for a in "$dir"/upstream/*.commlir; do
  b=$(basename "$a" .commlir)
  say "\$ commlir-run upstream/$b.commlir --check"
  timeout 60 "$R" "$a" --backend cuda --ranks 2 --check --check-against "$dir/upstream/$b.ref.mlir" 2>&1 | grep -E '^check: |error' | tee -a "$log"
done
say "== steps (commlir, 30 timed calls after 5 warm-up)"
for t in tf/tp4_big.full tf/tp4_big.plain tf/fsdp4_big.full tf/fsdp4_big.plain; do
  o=$(timeout 120 "$R" "$dir/$t.commlir" --backend cuda --ranks 2 --bench-iters 30 --warmup 5 2>&1)
  say "commlir,$t,$(echo "$o" | grep '^time(events)' | sed 's/ per call.*//')$(echo "$o" | grep -m1 -i error)"
done
say "\$ python3 steps_transformer.py 4 2048 4096 16384 30"
PYTHONUNBUFFERED=1 timeout ${STEPS_TIMEOUT:-200} python3 "$here/steps_transformer.py" 4 2048 4096 16384 30 2>&1 | grep -vi warn | tee -a "$log"
say "== done"; date -u | tee -a "$log"
