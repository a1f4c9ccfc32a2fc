#!/usr/bin/env bash
# Calibration and profiles on the GPUs (docs/cost-model.md, "Calibration" and "Profile
# feedback"): a machine file measured on N GPUs (and on 1), and for the 4-layer TP and FSDP
# transformers (full pipeline) the measured step time and the per-op profile. Then, on any
# machine with commlir-opt, bench/gpu/predict_steps.sh compares the predicted step times
# (default machine, calibrated machine, calibrated machine + profile) with the measured ones.
#   bench/gpu/run_calibrate.sh [DIR] [OUT] [N]     (DIR from bench/gpu/prepare.sh; N GPUs, 2)
# Files in OUT: calibrated_x1.json, calibrated_xN.json (machine files), tp4_big.profile.json,
# fsdp4_big.profile.json, steps.txt (`PROGRAM time(events): T us`), log.txt.
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
n=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
say "\$ commlir-run --backend cuda --ranks 1 --calibrate=calibrated_x1.json"
timeout 300 "$R" --backend cuda --ranks 1 --calibrate="$out/calibrated_x1.json" 2>&1 | tee -a "$log"
if [ "$n" -gt 1 ]; then
  say "\$ commlir-run --backend cuda --ranks $n --calibrate=calibrated_x$n.json"
  timeout 300 "$R" --backend cuda --ranks "$n" --calibrate="$out/calibrated_x$n.json" 2>&1 | tee -a "$log"
  : >"$out/steps.txt"
  for p in tp4_big fsdp4_big; do
    say "\$ commlir-run tf/$p.full.commlir --ranks $n --bench-iters 30 --warmup 5 --profile=$p.profile.json"
    o=$(timeout 300 "$R" "$dir/tf/$p.full.commlir" --backend cuda --ranks "$n" --bench-iters 30 --warmup 5 \
      --profile="$out/$p.profile.json" 2>&1)
    echo "$o" | grep -E '^time|error' | tee -a "$log"
    echo "$p $(echo "$o" | grep '^time(events)' | sed 's/ per call.*//')" | tee -a "$out/steps.txt"
  done
fi
say "== done"; date -u | tee -a "$log"
