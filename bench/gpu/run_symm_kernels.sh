#!/usr/bin/env bash
# Symmetric memory on 2 GPUs, in one device call (after bench/gpu/prepare_symm.sh DIR):
#  0. (one GPU is enough) the generated kernels with G = 2 and 4 virtual ranks on one device,
#     bit for bit against the sim, back to back, and a missing peer (symm_selftest);
#  1. --check of the symm probes (both pipelines), threads in one process and one process per
#     GPU, also after 50 graph replays (back-to-back calls on reused slots);
#  2. the injected fault: rank 1 skips a symm kernel, rank 0 must fail naming op and pool;
#  3. bf16 all-reduce latency, 4 KiB to 16 MiB: commlir one-shot, two-shot, the cost model's
#     choice and the NCCL path, each 100 calls in one CUDA graph replayed 20 times
#     (`--cuda-graph --graph-calls 100`); PyTorch 2.11's NCCL all_reduce, symm_mem one-shot and
#     two-shot captured the same way (symm_torch.py), in the same run;
#  4. the decode-like TP program (4 layers, hidden 4096) at 1/8/32/128 tokens with and without
#     symm_mem, against torch.compile of the same model (decode_torch.py).
#   bench/gpu/run_symm_kernels.sh [DIR] [OUT] [PARTS]     PARTS: any of 01234 (default all)
# Lines: commlir,<algo>,<bytes>,<us> / torch,<op>,<bytes>,<us> / decode,<tokens>,<variant>,<us>
set -uo pipefail
dir=${1:-.gpubench-symm}
out=${2:-${OUT:-gpu-out}}
parts=${3:-01234}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
chk() {  # chk LABEL ARTIFACT SOURCE [runner args...]
  local l=$1 a=$2 s=$3; shift 3
  say "\$ commlir-run $l --check $*"
  timeout 120 "$R" "$a" --backend cuda --ranks 2 --check --check-against "$s" "$@" 2>&1 | grep -E '^check: |note|error|element' | tee -a "$log"
}
if [[ $parts == *0* ]]; then
  say "== 0. symm kernels with virtual ranks on one GPU"
  for g in 2 4; do timeout 300 "$dir/symm_selftest" "$dir/selftest/selftest_$g.commlir" 200 2>&1 | tee -a "$log"; done
fi
if [[ $parts == *1* ]]; then
  say "== 1. --check"
  for p in "$dir"/probe/*.commlir; do
    b=$(basename "$p" .commlir); src="$dir/probe/${b%%.*}.mlir"
    chk "$b" "$p" "$src"
    chk "$b (50 graph replays)" "$p" "$src" --cuda-graph --bench-iters 50 --warmup 3
  done
  say "\$ two processes (WORLD_SIZE=2, file rendezvous): symm_ops.full --check"
  rm -f /tmp/commlir-rdzv-symm
  for r in 0 1; do
    WORLD_SIZE=2 RANK=$r LOCAL_RANK=$r COMMLIR_RDZV_FILE=/tmp/commlir-rdzv-symm timeout 120 "$R" "$dir/probe/symm_ops.full.commlir" \
      --backend cuda --check --check-against "$dir/probe/symm_ops.mlir" >"$out/mp$r.txt" 2>&1 &
  done
  wait
  grep -hE '^check: |note|error|element' "$out"/mp0.txt "$out"/mp1.txt | tee -a "$log"
fi
if [[ $parts == *2* ]]; then
  say "== 2. injected fault: COMMLIR_FAULT_SKIP_SYMM=1 (rank 1 never arrives), --timeout-s 8"
  s=$SECONDS
  COMMLIR_FAULT_SKIP_SYMM=1 timeout 60 "$R" "$dir/probe/symm_chain.full.commlir" --backend cuda --ranks 2 --timeout-s 8 2>&1 | grep -E 'error|note' | head -5 | tee -a "$log"
  say "exit ${PIPESTATUS[0]} after $((SECONDS - s)) s"
  rm -f /tmp/commlir-rdzv-fault
  s=$SECONDS
  for r in 0 1; do
    COMMLIR_FAULT_SKIP_SYMM=1 WORLD_SIZE=2 RANK=$r LOCAL_RANK=$r COMMLIR_RDZV_FILE=/tmp/commlir-rdzv-fault timeout 60 "$R" "$dir/probe/symm_chain.full.commlir" \
      --backend cuda --timeout-s 8 >"$out/fault$r.txt" 2>&1 &
    pids[r]=$!
  done
  for r in 0 1; do wait "${pids[r]}"; codes[r]=$?; done
  say "two processes (exit ${codes[0]} and ${codes[1]} after $((SECONDS - s)) s):"
  for r in 0 1; do grep -E 'error|signal' "$out/fault$r.txt" | head -3 | sed "s/^/rank $r: /" | tee -a "$log"; done
fi
if [[ $parts == *3* ]]; then
  say "== 3. bf16 all-reduce, us per call (100 calls per CUDA graph, 20 replays)"
  for bytes in 4096 16384 65536 262144 1048576 4194304 16777216; do
    for algo in one-shot two-shot auto nccl; do
      o=$(timeout 60 "$R" "$dir/ar/ar_${bytes}_$algo.commlir" --backend cuda --ranks 2 --cuda-graph --graph-calls 100 --bench-iters 20 --warmup 5 2>&1)
      t=$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us per call.*/\1/p')
      say "commlir,$algo,$bytes,${t:-?}$(echo "$o" | grep -m1 -i error | sed 's/^/,/')"
    done
  done
  (cd "$dir" && timeout 300 python3 symm_torch.py 2>&1 | grep -E '^torch,|Error|error' | tee -a "$log")
fi
if [[ $parts == *4* ]]; then
  say "== 4. decode-like TP step (4 layers, hidden 4096), us per step (10 steps per CUDA graph, 20 replays)"
  for t in 1 8 32 128; do
    for s in 1 0; do
      o=$(timeout 120 "$R" "$dir/decode/decode_${t}_$s.commlir" --backend cuda --ranks 2 --cuda-graph --graph-calls 10 --bench-iters 20 --warmup 5 2>&1)
      say "decode,$t,commlir_symm$s,$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us per call.*/\1/p')$(echo "$o" | grep -m1 -i error | sed 's/^/,/')"
    done
  done
  # Every token count in one pair of processes (one process group, a compile per shape).
  (cd "$dir" && PYTHONUNBUFFERED=1 timeout ${DECODE_TIMEOUT:-400} python3 decode_torch.py 1,8,32,128 2>&1 | grep -E '^compile|Error' | sed 's/^/decode,/' | tee -a "$log")
fi
say "== done"; date -u | tee -a "$log"
