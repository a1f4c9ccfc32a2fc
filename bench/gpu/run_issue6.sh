#!/usr/bin/env bash
# One device call (2 GPUs) for issue 6: (1) collective parity like for like — raw NCCL
# (`commlir-run --nccl-baseline`: back-to-back calls, events around the loop, registered and
# plain buffers) against whole single-collective programs timed the same way
# (`time(events)`), with argument/result slots (no copies) and without (`--no-slots`);
# (2) `--check` of every example and of the small transformers; (3) the 4-layer TP/FSDP step
# times against PyTorch eager and torch.compile, in the same call.
# Expects bench/gpu/prepare.sh's DIR (default .gpubench); writes OUT (default ./gpu-out).
#   bench/gpu/run_issue6.sh [DIR] [OUT]
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

say "== (1) raw NCCL baseline (commlir-run --nccl-baseline, events around the loop, mean over ranks)"
say "\$ commlir-run --nccl-baseline all_reduce,all_gather,reduce_scatter --sizes-mib 1,4,16,64 --bench-iters 100 --warmup 10"
timeout 120 "$run" --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 1,4,16,64 --bench-iters 100 --warmup 10 2>&1 | tee -a "$log" "$out/baseline.txt"
say "\$ commlir-run --nccl-baseline all_reduce,all_gather,reduce_scatter --sizes-mib 256,1024 --bench-iters 20 --warmup 5"
timeout 120 "$run" --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 256,1024 --bench-iters 20 --warmup 5 2>&1 | tee -a "$log" "$out/baseline.txt"

say "== (1) commlir single-collective programs, same timing (time(events)); slots vs --no-slots"
csv="$out/commlir_colls.csv"
echo "op,bytes,slots,us_events,us_wall,us_nccl_perop" >"$csv"
for op in all_reduce all_gather reduce_scatter; do
  for mib in 1 4 16 64 256 1024; do
    if [ $mib -le 64 ]; then it=100; wu=10; else it=20; wu=5; fi
    for sl in slots no-slots; do
      fl=""; [ $sl = no-slots ] && fl=--no-slots
      a="$dir/colls/${op}_${mib}MiB.commlir"
      o=$(timeout 60 "$run" "$a" --backend cuda --ranks 2 --bench-iters $it --warmup $wu $fl 2>>"$log")
      echo "\$ commlir-run colls/${op}_${mib}MiB.commlir --backend cuda --ranks 2 --bench-iters $it --warmup $wu $fl" >>"$log"
      echo "$o" | grep -E '^(time|op )' >>"$log"
      te=$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us.*/\1/p')
      tw=$(echo "$o" | sed -n 's/^time: \([0-9.]*\) us.*/\1/p')
      c=$(echo "$o" | grep "comm $op" | sed -n 's/.*: \([0-9.]*\) us, algbw.*/\1/p')
      echo "$op,$((mib * 1048576)),$sl,$te,$tw,$c" | tee -a "$csv" "$log"
    done
  done
done

say "== (2) --check, every example (full and unscheduled pipeline) and the small transformers"
for a in "$dir"/examples/*.commlir "$dir"/examples_nosched/*.commlir; do
  b=$(basename "$a" .commlir)
  say "\$ commlir-run $(basename $(dirname $a))/$b.commlir --backend cuda --ranks 2 --check --check-against src/$b.mlir"
  timeout 60 "$run" "$a" --backend cuda --ranks 2 --check --check-against "$dir/src/$b.mlir" 2>&1 | grep -E 'check|error|note' | tee -a "$log"
done
for p in tp fsdp; do
  for v in full plain; do
    for sl in "" --no-slots; do
      say "\$ commlir-run tf/${p}4_small.$v.commlir --backend cuda --ranks 2 --check --check-against tf/${p}4_small.mlir $sl"
      timeout 60 "$run" "$dir/tf/${p}4_small.$v.commlir" --backend cuda --ranks 2 --check --check-against "$dir/tf/${p}4_small.mlir" $sl 2>&1 | grep -E 'check|error' | tee -a "$log"
    done
  done
done

say "== (3) step times, 4 layers, tokens 2048, hidden 4096, ffn 16384, bf16"
for pv in "tp full" "tp plain" "fsdp full" "fsdp plain" "fsdp full --no-slots"; do
  set -- $pv
  o=$(timeout 120 "$run" "$dir/tf/${1}4_big.$2.commlir" --backend cuda --ranks 2 --bench-iters ${ITERS:-50} --warmup 5 ${3:-} 2>>"$log")
  echo "\$ commlir-run tf/${1}4_big.$2.commlir --backend cuda --ranks 2 --bench-iters ${ITERS:-50} --warmup 5 ${3:-}" >>"$log"
  echo "$o" | grep -E '^(time|op )' >>"$log"
  say "commlir,$1,$2${3:-},wall=$(echo "$o" | sed -n 's/^time: \([0-9.]*\) us.*/\1/p'),events=$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us.*/\1/p')"
done
say "\$ python3 steps_transformer.py 4 2048 4096 16384 ${ITERS:-50}"
PYTHONUNBUFFERED=1 timeout ${STEPS_TIMEOUT:-240} python3 "$here/steps_transformer.py" 4 2048 4096 16384 ${ITERS:-50} 2>&1 | grep -vi warn | tee -a "$log"
say "== done"; date -u | tee -a "$log"
