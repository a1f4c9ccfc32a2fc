#!/usr/bin/env bash
# Step time of examples/tp_mlp.mlir and examples/fsdp_layer.mlir on 2 GPUs: commlir with the
# full pipeline and with coll-to-comm + comm-plan-pools only (the `time:` line, wall time per
# call, 200 calls after 20 warm-up, slowest rank), and PyTorch eager and torch.compile of the
# same programs (bench/gpu/steps_torch.py), in the same call.
#   bench/gpu/run_example_steps.sh [DIR] [OUT]     (DIR from bench/gpu/prepare.sh)
# Lines: commlir,examples|examples_nosched,PROGRAM,us / MODE,PROGRAM,us (steps_torch.py)
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
for v in examples examples_nosched; do
  for b in tp_mlp fsdp_layer; do
    o=$(timeout 60 "$R" "$dir/$v/$b.commlir" --backend cuda --ranks 2 --bench-iters 200 --warmup 20 2>&1)
    echo "$o" | grep -E '^(time|op )' >>"$log"
    say "commlir,$v,$b,$(echo "$o" | sed -n 's/^time: \([0-9.]*\) us.*/\1/p')$(echo "$o" | grep -m1 -i error | sed 's/^/,/')"
  done
done
PYTHONUNBUFFERED=1 timeout ${STEPS_TIMEOUT:-240} python3 "$here/steps_torch.py" 200 2>&1 | grep -vi warn | tee -a "$log"
say "== done"; date -u | tee -a "$log"
