#!/usr/bin/env bash
# One device call (2 GPUs), seventh run: (1) like-for-like collective parity after the
# runner's ordering pass (raw NCCL back-to-back vs commlir single-collective programs, events
# around the loop); (2) --check of every example, the small transformers and the upstream
# program; (3) 4-layer TP/FSDP step times (accurate tanh, and TP with commlir.approx_tanh)
# against PyTorch eager and torch.compile, in the same call.
#   bench/gpu/run_session2.sh [DIR] [OUT]   (DIR from bench/gpu/prepare.sh; DIR/tf_approx
#   holds the TP programs compiled with `module attributes {commlir.approx_tanh}`)
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

say "== (1) raw NCCL, back to back (registered and plain buffers)"
timeout 120 "$run" --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 1,4,16,64 --bench-iters 100 --warmup 10 2>&1 | tee -a "$log"
timeout 120 "$run" --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 256,1024 --bench-iters 20 --warmup 5 2>&1 | tee -a "$log"
say "== (1) commlir single-collective programs (time(events))"
for op in all_reduce all_gather reduce_scatter; do
  for mib in 1 4 16 64 256 1024; do
    if [ $mib -le 64 ]; then it=100; wu=10; else it=20; wu=5; fi
    o=$(timeout 60 "$run" "$dir/colls/${op}_${mib}MiB.commlir" --backend cuda --ranks 2 --bench-iters $it --warmup $wu 2>>"$log")
    say "commlir,$op,${mib}MiB,$(echo "$o" | grep '^time(events)')"
  done
done

say "== (2) --check"
for a in "$dir"/examples/*.commlir "$dir"/examples_nosched/*.commlir; do
  b=$(basename "$a" .commlir)
  say "\$ commlir-run $(basename $(dirname $a))/$b.commlir --check --check-against src/$b.mlir"
  timeout 60 "$run" "$a" --backend cuda --ranks 2 --check --check-against "$dir/src/$b.mlir" 2>&1 | grep -E '^check: (PASS|FAIL)|error' | tee -a "$log"
done
for t in tf/tp4_small.full tf/tp4_small.plain tf/fsdp4_small.full tf/fsdp4_small.plain tf_approx/tp4_small.full; do
  p=$(basename "$t" | cut -d. -f1)
  say "\$ commlir-run $t.commlir --check --check-against tf/$p.mlir"
  timeout 60 "$run" "$dir/$t.commlir" --backend cuda --ranks 2 --check --check-against "$dir/tf/$p.mlir" 2>&1 | grep -E '^check: (PASS|FAIL)|error' | tee -a "$log"
done
for a in "$dir"/upstream/*.commlir; do
  b=$(basename "$a" .commlir)
  say "\$ commlir-run upstream/$b.commlir --check --check-against upstream/$b.ref.mlir"
  timeout 60 "$run" "$a" --backend cuda --ranks 2 --check --check-against "$dir/upstream/$b.ref.mlir" 2>&1 | grep -E '^check: (PASS|FAIL)|error' | tee -a "$log"
done

say "== (3) step times, 4 layers, tokens 2048, hidden 4096, ffn 16384, bf16"
for t in tf/tp4_big.full tf/tp4_big.plain tf_approx/tp4_big.full tf/fsdp4_big.full tf/fsdp4_big.plain; do
  o=$(timeout 120 "$run" "$dir/$t.commlir" --backend cuda --ranks 2 --bench-iters ${ITERS:-30} --warmup 5 2>>"$log")
  echo "\$ commlir-run $t.commlir --backend cuda --ranks 2 --bench-iters ${ITERS:-30} --warmup 5" >>"$log"
  echo "$o" | grep -E '^(time|op )' >>"$log"
  say "commlir,$t,$(echo "$o" | grep '^time(events)' | sed 's/ per call.*//'),softmax=$(echo "$o" | grep -m1 softmax | sed 's/.*: //'),gelu=$(echo "$o" | grep -m1 gelu | sed 's/.*: //')"
done
say "\$ python3 steps_transformer.py 4 2048 4096 16384 ${ITERS:-30}"
PYTHONUNBUFFERED=1 timeout ${STEPS_TIMEOUT:-200} python3 "$here/steps_transformer.py" 4 2048 4096 16384 ${ITERS:-30} 2>&1 | grep -vi warn | tee -a "$log"
say "== done"; date -u | tee -a "$log"
