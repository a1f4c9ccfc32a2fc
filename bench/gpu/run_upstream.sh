#!/usr/bin/env bash
# The upstream MLIR programs (examples/upstream/: shard + arith + math read by real MLIR,
# converted, lowered, scheduled, compiled by bench/gpu/prepare.sh) on 2 GPUs: `--check`
# against the converted program on the sim backend, then the step time (`time(events)`, 50
# calls after 5 warm-up).
#   bench/gpu/run_upstream.sh [DIR] [OUT]     (DIR from bench/gpu/prepare.sh)
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
for a in "$dir"/upstream/*.commlir; do
  b=$(basename "$a" .commlir)
  say "\$ commlir-run upstream/$b.commlir --backend cuda --ranks 2 --check --check-against upstream/$b.ref.mlir"
  timeout 90 "$R" "$a" --backend cuda --ranks 2 --check --check-against "$dir/upstream/$b.ref.mlir" 2>&1 | grep -E '^check: |error' | tee -a "$log"
  say "\$ commlir-run upstream/$b.commlir --backend cuda --ranks 2 --bench-iters 50 --warmup 5"
  timeout 90 "$R" "$a" --backend cuda --ranks 2 --bench-iters 50 --warmup 5 2>&1 | grep -E '^(time|op )' | tee -a "$log"
done
say "== done"; date -u | tee -a "$log"
