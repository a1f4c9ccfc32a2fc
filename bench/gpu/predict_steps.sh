#!/usr/bin/env bash
# The predicted step time of the 4-layer TP and FSDP transformers (full pipeline), next to
# the measured one, from what bench/gpu/run_calibrate.sh brought back: the simulated makespan
# (`--comm-report`) on the default machine, on the calibrated machine, and on the calibrated
# machine with the measured profile applied (`comm-apply-profile` before the pipeline, so the
# schedulers see the measured times too). Runs where commlir-opt is (no GPU).
#   bench/gpu/predict_steps.sh GPU_OUT [N]      (GPU_OUT: run_calibrate.sh's OUT; N GPUs, 2)
# One line per program and prediction: `PROGRAM MACHINE predicted P us measured M us (E%)`.
set -uo pipefail
g=${1:?usage: predict_steps.sh GPU_OUT [N]}
n=${2:-2}
opt=target/release/commlir-opt
gen=target/release/examples/gen_transformer
[ -x "$opt" ] && [ -x "$gen" ] || cargo build --release -p commlir-opt -p commlir-passes --example gen_transformer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sched='coll-to-comm,comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools'
makespan() { # FILE: the makespan of the report's first function, us
  python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["functions"][0]["makespan_ns"] / 1e3))' "$1"
}
for p in tp fsdp; do
  $gen $p 4 2048 4096 16384 >"$tmp/$p.mlir"
  measured=$(grep "^${p}4_big " "$g/steps.txt" | sed -E 's/.*: ([0-9.]+) us.*/\1/')
  for m in h200x2-nvlink "$g/calibrated_x$n.json"; do
    # The machine as the module's attribute: the passes and the report both use it.
    sed "0,/^module {/s||module attributes {commlir.machine = \"$m\"} {|" "$tmp/$p.mlir" >"$tmp/$p.m.mlir"
    $opt "$tmp/$p.m.mlir" --pass-pipeline="builtin.module(func.func($sched))" --comm-report="$tmp/r.json" -o /dev/null
    echo "${p}4_big $(basename "$m") predicted $(makespan "$tmp/r.json") us measured ${measured:-?} us"
  done
  if [ -e "$g/${p}4_big.profile.json" ]; then
    $opt "$tmp/$p.m.mlir" --pass-pipeline="builtin.module(comm-apply-profile{file=$g/${p}4_big.profile.json},func.func($sched))" \
      --comm-report="$tmp/r.json" -o /dev/null 2>"$tmp/warn.txt"
    echo "${p}4_big calibrated+profile predicted $(makespan "$tmp/r.json") us measured ${measured:-?} us ($(grep -c warning "$tmp/warn.txt") profile entries unmatched)"
  fi
done
