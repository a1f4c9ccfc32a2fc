#!/usr/bin/env bash
# Correctness on 2 GPUs: `--check` (the cuda backend against the sim backend) of every probe
# (bench/gpu/probe), every example under both pipelines, the small TP and FSDP transformers
# under both and the upstream MLIR programs; then the launch modes: one process per GPU through
# the file rendezvous and through MASTER_ADDR/MASTER_PORT, and the watchdog (rank 0 of a
# 2-process job started alone must fail after --timeout-s).
#   bench/gpu/run_check.sh [DIR] [OUT]     (DIR from bench/gpu/prepare.sh)
# Lines: `check: PASS|FAIL ...` per program; OUT/log.txt keeps everything.
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
check_probes
say "== examples, small transformers, upstream programs"
check_programs
say "== one process per GPU, file rendezvous: examples/tp_mlp.commlir --check"
rd=$(mktemp -d)
for r in 0 1; do
  WORLD_SIZE=2 RANK=$r LOCAL_RANK=$r COMMLIR_RDZV_FILE="$rd/id" timeout 90 "$R" "$dir/examples/tp_mlp.commlir" \
    --backend cuda --check --check-against "$dir/src/tp_mlp.mlir" >"$out/file_rank$r.txt" 2>&1 &
done
wait
for r in 0 1; do say "rank $r: $(grep -E '^check: |error' "$out/file_rank$r.txt" | head -2)"; done
say "== one process per GPU, TCP rendezvous: examples/fsdp_layer.commlir --check"
for r in 0 1; do
  WORLD_SIZE=2 RANK=$r LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-29541} timeout 90 "$R" \
    "$dir/examples/fsdp_layer.commlir" --backend cuda --check --check-against "$dir/src/fsdp_layer.mlir" >"$out/tcp_rank$r.txt" 2>&1 &
done
wait
for r in 0 1; do say "rank $r: $(grep -E '^check: |error' "$out/tcp_rank$r.txt" | head -2)"; done
say "== watchdog: rank 0 of a 2-process job alone, --timeout-s 5 (must fail, exit 1)"
WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 COMMLIR_RDZV_FILE="$rd/lonely" timeout 30 \
  "$R" "$dir/examples/tp_mlp.commlir" --backend cuda --timeout-s 5 2>&1 | grep -m1 error | tee -a "$log"
say "exit ${PIPESTATUS[0]}"
say "== done"; date -u | tee -a "$log"
