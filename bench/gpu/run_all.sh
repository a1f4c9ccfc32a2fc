#!/usr/bin/env bash
# The whole GPU session in one command (2 GPUs): checks, multi-process launch, the collective
# sweep against raw NCCL, and the example step times. Expects what bench/gpu/prepare.sh built
# here, in DIR (default .gpubench): commlir-run, examples/*.commlir (full pipeline),
# examples_nosched/*.commlir (coll-to-comm + comm-plan-pools only), colls/*.commlir, and the
# sources src/*.mlir. Writes logs to OUT (default ./gpu-out). SKIP_MP=1 skips the
# multi-process and watchdog checks.
#   bench/gpu/run_all.sh [DIR] [OUT]
set -uo pipefail
dir=${1:-.gpubench}
out=${2:-${OUT:-gpu-out}}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
run="$dir/commlir-run"
log="$out/log.txt"
say() { echo "$@" | tee -a "$log"; }
say "== machine"; nvidia-smi -L 2>&1 | tee -a "$log"; ls -la /tmp/commlir-libs | tee -a "$log"
nvidia-smi topo -m 2>&1 | head -5 | tee -a "$log"

say "== (a) --check on every example (2 GPUs, one process, threads)"
for a in "$dir"/examples/*.commlir "$dir"/examples_nosched/*.commlir; do
  b=$(basename "$a" .commlir)
  say "\$ commlir-run $a --backend cuda --ranks 2 --check --check-against src/$b.mlir"
  timeout 60 "$run" "$a" --backend cuda --ranks 2 --check --check-against "$dir/src/$b.mlir" 2>&1 | tee -a "$log"
  say "rc=${PIPESTATUS[0]}"
done

if [ "${SKIP_MP:-0}" != 1 ]; then
say "== multi-process: WORLD_SIZE=2, file rendezvous"
rm -f /tmp/commlir-rdzv
for r in 0 1; do
  WORLD_SIZE=2 RANK=$r LOCAL_RANK=$r COMMLIR_RDZV_FILE=/tmp/commlir-rdzv timeout 60 \
    "$run" "$dir/examples/tp_mlp.commlir" --backend cuda --check --check-against "$dir/src/tp_mlp.mlir" >"$out/mp_rank$r.txt" 2>&1 &
done
wait
for r in 0 1; do say "-- rank $r"; cat "$out/mp_rank$r.txt" | tee -a "$log"; done
say "== multi-process: WORLD_SIZE=2, TCP rendezvous (MASTER_ADDR/PORT)"
for r in 0 1; do
  WORLD_SIZE=2 RANK=$r LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29541 timeout 60 \
    "$run" "$dir/examples/fsdp_layer.commlir" --backend cuda --check --check-against "$dir/src/fsdp_layer.mlir" >"$out/tcp_rank$r.txt" 2>&1 &
done
wait
for r in 0 1; do say "-- rank $r"; cat "$out/tcp_rank$r.txt" | tee -a "$log"; done
say "== watchdog: a 1-rank-of-2 job must time out cleanly"
WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 COMMLIR_RDZV_FILE=/tmp/commlir-rdzv-lonely timeout 30 \
  "$run" "$dir/examples/tp_mlp.commlir" --backend cuda --timeout-s 5 2>&1 | tee -a "$log"
say "rc=${PIPESTATUS[0]}"
fi

say "== (b) collective sweep through commlir (20 timed calls after 5 warm-up, then 20 with per-op events)"
# us_program: the whole compiled program per call (copy in, collective, copy out);
# us_nccl/busbw_nccl: the NCCL call the program issues on its pool buffers (per-op events).
csv="$out/commlir_colls.csv"
echo "op,bytes,us_program,us_nccl,busbw_nccl_GBps" >"$csv"
for op in all_reduce all_gather reduce_scatter; do
  for mib in 1 4 16 64 256 1024; do
    a="$dir/colls/${op}_${mib}MiB.commlir"
    o=$(timeout 60 "$run" "$a" --backend cuda --ranks 2 --bench-iters 20 --warmup 5 2>>"$log")
    echo "$o" >>"$log"
    t=$(echo "$o" | sed -n 's/^time: \([0-9.]*\) us.*/\1/p')
    c=$(echo "$o" | grep "comm $op" | sed -n 's/.*: \([0-9.]*\) us, algbw.*busbw \([0-9.]*\) GB.*/\1,\2/p')
    echo "$op,$((mib * 1048576)),$t,$c" | tee -a "$csv" "$log"
  done
done
say "== (b) raw NCCL through torch.distributed"
PYTHONUNBUFFERED=1 timeout 240 python3 "$here/nccl_torch.py" 2 20 5 2>&1 | grep -v Warning | tee "$out/torch_colls.csv" | tee -a "$log"

say "== (c) example step times: commlir (scheduled / unscheduled), PyTorch eager and torch.compile"
for v in examples examples_nosched; do
  for b in tp_mlp fsdp_layer; do
    o=$(timeout 60 "$run" "$dir/$v/$b.commlir" --backend cuda --ranks 2 --bench-iters 200 --warmup 20 2>>"$log")
    echo "$o" | grep -E '^(time|op )' >>"$log"
    t=$(echo "$o" | sed -n 's/^time: \([0-9.]*\) us.*/\1/p')
    say "commlir,$v,$b,$t"
  done
done
PYTHONUNBUFFERED=1 timeout ${STEPS_TIMEOUT:-240} python3 "$here/steps_torch.py" 200 2>&1 | grep -v Warning | tee -a "$log"
say "== done"
