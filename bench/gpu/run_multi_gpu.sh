#!/usr/bin/env bash
# commlir on N GPUs of one host (N = 4 or 8; after bench/gpu/prepare_multi_gpu.sh DIR N), every
# commlir measurement in both launch modes: `threads` (all GPUs in one process, --ranks N) and
# `procs` (one process per GPU: WORLD_SIZE/RANK/LOCAL_RANK, file rendezvous COMMLIR_RDZV_FILE):
#  0. (one GPU) the symm kernels at G = N virtual ranks against the sim (symm_selftest);
#  1. --check against the sim of every small program (DIR/check.list: colls at 1 MiB, the symm
#     all-reduces, the self-test program, the small transformers, SP/fused included);
#  2. bus bandwidth 1 MiB - 1 GiB: raw NCCL (`--nccl-baseline` all_reduce, all_gather,
#     reduce_scatter, one process by construction; all_to_all through torch's
#     all_to_all_single, one process per GPU, a2a_torch.py) against
#     commlir's single-collective programs (time(events), slots; 100 calls after 10 warm-up up
#     to 64 MiB, 20 after 5 above);
#  3. bf16 all-reduce latency 4 KiB - 16 MiB on `@tp {size = N, symm_mem}`: one-shot,
#     two-shot, the cost model's choice, nccl (100 calls per CUDA graph, 20 replays), and
#     PyTorch's NCCL all_reduce and symm_mem one-/two-shot (symm_torch.py --world N);
#  4. 4-layer transformer steps (2048 tokens, hidden 4096, ffn 16384): every tf/*_big artifact
#     (full pipeline; TP ones also with SP + fusion), 30 calls after 5 warm-up, next to the cost
#     model's makespan (DIR/predicted.csv), and PyTorch eager / torch.compile of the same
#     programs (steps_transformer.py ... N).
#   bench/gpu/run_multi_gpu.sh [DIR] [OUT] [N] [PARTS]     PARTS: any of 01234 (default all)
# N defaults to DIR/world_size. Outputs OUT/log.txt and CSV files:
#   OUT/colls.csv  op,bytes,mode,us_events      OUT/symm_ar.csv  algo,bytes,mode,us
#   OUT/steps.csv  program,mode,us_events,predicted_us,measured_over_predicted
set -uo pipefail
dir=${1:-.gpubench-mg8}
out=${2:-${OUT:-gpu-out}}
n=${3:-$(cat "$dir/world_size" 2>/dev/null || echo 8)}
parts=${4:-01234}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
mkdir -p "$out/mp"
[ "$(cat "$dir/world_size" 2>/dev/null)" = "$n" ] || say "warning: $dir was prepared for $(cat "$dir/world_size" 2>/dev/null || echo '?') ranks, running $n"
say "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS N=$n"
# launch MODE TIMEOUT ARGS...: commlir-run ARGS on N GPUs, in one process (threads) or one per
# GPU with a file rendezvous (procs; every rank's output, prefixed `[rank R] `).
launch() {
  local mode=$1 to=$2 f r
  shift 2
  if [ "$mode" = threads ]; then
    timeout "$to" "$R" "$@" --ranks "$n" 2>&1
    return
  fi
  f=/tmp/commlir-rdzv-mg.$$.$RANDOM
  rm -f "$f"
  for ((r = 0; r < n; r++)); do
    WORLD_SIZE=$n RANK=$r LOCAL_RANK=$r COMMLIR_RDZV_FILE=$f timeout "$to" "$R" "$@" >"$out/mp/r$r.txt" 2>&1 &
  done
  wait
  for ((r = 0; r < n; r++)); do sed "s/^/[rank $r] /" "$out/mp/r$r.txt"; done
  rm -f "$f"
}
# tev: the mean over the output's `time(events): T us` lines (one, or one per process).
tev() { grep -oE 'time\(events\): [0-9.]+' | awk '{s += $2; k++} END {if (k) printf "%.2f", s / k; else printf "?"}'; }
# err: `,first error line` of the output, if any.
err() { grep -m1 -iE 'error|panic' | sed 's/^/,/'; }

if [[ $parts == *0* ]]; then
  say "== 0. symm kernels with $n virtual ranks on one GPU"
  if [ -x "$dir/symm_selftest" ]; then
    timeout 300 "$dir/symm_selftest" "$dir/selftest/selftest_$n.commlir" 200 2>&1 | tee -a "$log"
  else
    say "skip: no symm_selftest in $dir"
  fi
fi

if [[ $parts == *1* ]]; then
  say "== 1. --check against the sim, both launch modes"
  while read -r a s; do
    for mode in threads procs; do
      say "\$ commlir-run $a --backend cuda --check --check-against $s ($mode, $n GPUs)"
      launch $mode 180 "$dir/$a" --backend cuda --check --check-against "$dir/$s" | grep -E 'check: |note|error|element|panic' | tee -a "$log"
    done
  done <"$dir/check.list"
fi

if [[ $parts == *2* ]]; then
  say "== 2. bus bandwidth: raw NCCL (--nccl-baseline runs one process, a thread per GPU)"
  say "\$ commlir-run --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks $n"
  launch threads 300 --nccl-baseline all_reduce,all_gather,reduce_scatter --sizes-mib 1,4,16,64 --bench-iters 100 --warmup 10 | tee -a "$log"
  launch threads 300 --nccl-baseline all_reduce,all_gather,reduce_scatter --sizes-mib 256,1024 --bench-iters 20 --warmup 5 | tee -a "$log"
  say "\$ python3 a2a_torch.py --world $n"
  (cd "$dir" && timeout 300 python3 a2a_torch.py --world "$n" 2>&1 | grep -E '^baseline,|Error' | tee -a "$log")
  say "== 2. commlir single-collective programs (time(events), slots)"
  csv="$out/colls.csv"
  echo "op,bytes,mode,us_events" >"$csv"
  for op in all_reduce all_gather reduce_scatter all_to_all; do
    for mib in 1 4 16 64 256 1024; do
      if [ $mib -le 64 ]; then it=100; wu=10; else it=20; wu=5; fi
      for mode in threads procs; do
        o=$(launch $mode 120 "$dir/colls/${op}_${mib}MiB.commlir" --backend cuda --bench-iters $it --warmup $wu)
        echo "$op,$((mib * 1048576)),$mode,$(echo "$o" | tev)$(echo "$o" | err)" | tee -a "$csv" "$log"
      done
    done
  done
fi

if [[ $parts == *3* ]]; then
  say "== 3. bf16 all-reduce on symm_mem, us per call (100 calls per CUDA graph, 20 replays)"
  csv="$out/symm_ar.csv"
  echo "algo,bytes,mode,us" >"$csv"
  for bytes in 4096 16384 65536 262144 1048576 4194304 16777216; do
    for algo in one-shot two-shot auto nccl; do
      for mode in threads procs; do
        o=$(launch $mode 120 "$dir/ar/ar_${bytes}_$algo.commlir" --backend cuda --cuda-graph --graph-calls 100 --bench-iters 20 --warmup 5)
        t=$(echo "$o" | grep -oE 'time\(events\): [0-9.]+ us per call' | awk '{s += $2; k++} END {if (k) printf "%.2f", s / k; else printf "?"}')
        echo "$algo,$bytes,$mode,$t$(echo "$o" | err)" | tee -a "$csv" "$log"
      done
    done
  done
  say "\$ python3 symm_torch.py --world $n"
  (cd "$dir" && timeout 400 python3 symm_torch.py --world "$n" 2>&1 | grep -E '^torch,|Error|error' | tee -a "$log")
fi

if [[ $parts == *4* ]]; then
  say "== 4. transformer steps (4 layers, 2048x4096x16384), 30 calls after 5 warm-up, against the cost model"
  csv="$out/steps.csv"
  echo "program,mode,us_events,predicted_us,measured_over_predicted" >"$csv"
  progs=""
  for src in "$dir"/tf/*_big.mlir; do
    b=$(basename "$src" .mlir)
    case $b in *_symm_big) continue ;; esac
    name=${b%_big}
    progs="$progs${progs:+,}$name"
    for v in full sp spf; do
      a="$dir/tf/${b}.$v.commlir"
      [ -e "$a" ] || continue
      pred=$(awk -F, -v p="${b}.$v" '$1 == p {print $3}' "$dir/predicted.csv")
      for mode in threads procs; do
        o=$(launch $mode 300 "$a" --backend cuda --bench-iters 30 --warmup 5)
        t=$(echo "$o" | tev)
        ratio=$(awk -v t="$t" -v p="$pred" 'BEGIN {if (t + 0 > 0 && p + 0 > 0) printf "%.3f", t * 1000 / p; else printf "?"}')
        echo "${b}.$v,$mode,$t,$(awk -v p="$pred" 'BEGIN {if (p + 0 > 0) printf "%.1f", p / 1000; else printf "?"}'),$ratio$(echo "$o" | err)" | tee -a "$csv" "$log"
      done
    done
  done
  say "\$ python3 steps_transformer.py 4 2048 4096 16384 30 $progs $n"
  PYTHONUNBUFFERED=1 timeout "${STEPS_TIMEOUT:-900}" python3 "$dir/steps_transformer.py" 4 2048 4096 16384 30 "$progs" "$n" 2>&1 | grep -vi warn | tee -a "$log"
fi
say "== done"; date -u | tee -a "$log"
