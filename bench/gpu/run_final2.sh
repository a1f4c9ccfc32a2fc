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
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
check_probes
say "== --check"
check_programs
say "== steps (commlir, 30 timed calls after 5 warm-up)"
time_steps commlir tf/tp4_big.full tf/tp4_big.plain tf/fsdp4_big.full tf/fsdp4_big.plain
say "\$ python3 steps_transformer.py 4 2048 4096 16384 30"
PYTHONUNBUFFERED=1 timeout ${STEPS_TIMEOUT:-200} python3 "$here/steps_transformer.py" 4 2048 4096 16384 30 2>&1 | grep -vi warn | tee -a "$log"
say "== done"; date -u | tee -a "$log"
