#!/usr/bin/env bash
# Async tensor parallelism on 2 GPUs, in one device call (after bench/gpu/prepare_async_tp.sh DIR):
#  1. --check against the sim of the small programs: the fused-op micro-benchmarks at
#     64x256x1024 (fused, unfused, the cost model's choice, matmul alone; the fused ones also
#     through 20 graph replays) and the small 4-layer TP transformer (plain, symm, sp, spf);
#  2. fused all-gather-matmul and matmul-reduce-scatter at tokens x hidden x ffn =
#     2048x4096x16384, 8192x4096x16384 and 8192x8192x28672 (bf16, A row-sharded on 2 ranks):
#     commlir's matmul alone, unfused sequence, the cost model's choice (auto) and fused op
#     (with copy engines moving the chunks, and with the transfer kernel's blocks: fusedk;
#     the reduce-scatter also accumulating in 1, 2 and 4 row blocks: fused1, fused2, fused4;
#     the all-gather pulling instead of pushing, fusedp; AG_VARIANTS / RS_VARIANTS choose others, TORCH_MICRO=0 skips PyTorch),
#     each 20 calls per CUDA graph replayed 20 times after 5 warm-up (`--cuda-graph
#     --graph-calls 20 --bench-iters 20 --warmup 5`, `time(events)`); PyTorch 2.11's matmul
#     alone, unfused sequence and torch.ops.symm_mem.fused_* at the same shapes
#     (async_tp_torch.py micro);
#  3. the 4-layer TP transformer step (2048 tokens, hidden 4096, ffn 16384, bf16): commlir
#     without sequence parallelism (plain; symm: on a symm_mem group), with coll-sequence-parallel
#     + coll-fuse-matmul (sp), with every pattern fused (spf), sp with every reduce-scatter
#     accumulating in 2 row blocks (sp2) and sp with the residual adds as kernels of their own
#     (spn; STEP_VARIANTS chooses others), 30 calls after 5 warm-up, and
#     10 calls per CUDA graph replayed 20 times; PyTorch eager, torch.compile, and torch.compile
#     of the sequence-parallel model with and without _micro_pipeline_tp (async_tp_torch.py steps;
#     STEP_MODES=eager,compile measures only those).
#   bench/gpu/run_async_tp.sh [DIR] [OUT] [PARTS]     PARTS: any of 123 (default all)
# Lines: atp,<side>,<TxHxF>,<variant>,<us> / torch,<side>,<TxHxF>,<variant>,<us>,<graph|events> /
#        step,<variant>,<us>,<graph_us> (commlir) / MODE,tp4_...,mean_us,median_us (PyTorch).
# An artifact that prepare_async_tp.sh could not build is reported as `skip` (DIR/not_built.txt).
set -uo pipefail
dir=${1:-.gpubench-atp}
out=${2:-${OUT:-gpu-out}}
parts=${3:-123}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
[ -s "$dir/not_built.txt" ] && { say "== not built by prepare_async_tp.sh:"; tee -a "$log" <"$dir/not_built.txt"; }
have() {  # have ARTIFACT: exists, else says `skip`
  [ -e "$1" ] && return 0
  say "skip $(basename "$1" .commlir): not built"
  return 1
}
chk() {  # chk ARTIFACT SOURCE [runner args...]
  local a=$1 s=$2; shift 2
  have "$a" || return 0
  say "\$ commlir-run ${a#"$dir"/} --check $*"
  timeout 120 "$R" "$a" --backend cuda --ranks 2 --check --check-against "$s" "$@" 2>&1 | grep -E '^check: |note|error|element' | tee -a "$log"
}
us() {  # us ARTIFACT [runner args...]: time(events) in us, then `,error` if any
  local o
  o=$(timeout 120 "$R" "$1" --backend cuda --ranks 2 "${@:2}" 2>&1)
  echo "$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us per call.*/\1/p')$(echo "$o" | grep -m1 -i error | sed 's/^/,/')"
}
if [[ $parts == *1* ]]; then
  say "== 1. --check against the sim"
  for side in ag rs; do
    vs="fused fusedk unfused auto mm"; [ $side = rs ] && vs="$vs fused2 fused4"; [ $side = ag ] && vs="$vs fusedp"
    for v in $vs; do
      b=${side}_64x256x1024_$v
      chk "$dir/micro/$b.commlir" "$dir/micro/$(echo "$b" | sed 's/fused[a-z0-9]*$/fused/').mlir"
    done
    b=${side}_64x256x1024_fused
    chk "$dir/micro/$b.commlir" "$dir/micro/$b.mlir" --cuda-graph --bench-iters 20 --warmup 3
  done
  chk "$dir/tf/tp4_small.plain.commlir" "$dir/tf/tp4_small.mlir"
  for v in symm sp spf sp2 spn; do
    chk "$dir/tf/tp4_small.$v.commlir" "$dir/tf/tp4_small_symm.mlir"
  done
  chk "$dir/tf/tp4_small.spf.commlir" "$dir/tf/tp4_small_symm.mlir" --cuda-graph --bench-iters 20 --warmup 3
fi
if [[ $parts == *2* ]]; then
  say "== 2. fused ops, us per call (20 calls per CUDA graph, 20 replays, 5 warm-up)"
  for shape in 2048x4096x16384 8192x4096x16384 8192x8192x28672; do
    for side in ag rs; do
      if [ $side = ag ]; then vs=${AG_VARIANTS:-mm unfused auto fused fusedk fusedp}
      else vs=${RS_VARIANTS:-mm unfused auto fused fusedk fused1 fused2 fused4}; fi
      for v in $vs; do
        a="$dir/micro/${side}_${shape}_$v.commlir"
        have "$a" || continue
        say "atp,$side,$shape,$v,$(us "$a" --cuda-graph --graph-calls 20 --bench-iters 20 --warmup 5)"
      done
    done
  done
  [ "${TORCH_MICRO:-1}" = 0 ] || say "\$ python3 async_tp_torch.py micro"
  [ "${TORCH_MICRO:-1}" = 0 ] || (cd "$dir" && PYTHONUNBUFFERED=1 timeout 300 python3 async_tp_torch.py micro 2>&1 | grep -E '^torch,|^#|Error|error' | tee -a "$log")
fi
if [[ $parts == *3* ]]; then
  say "== 3. 4-layer TP transformer step, 2048x4096x16384 (us: 30 calls after 5 warm-up; 10 calls per CUDA graph, 20 replays)"
  for v in ${STEP_VARIANTS:-plain symm sp spf sp2 spn}; do
    a="$dir/tf/tp4_big.$v.commlir"
    have "$a" || continue
    say "step,$v,$(us "$a" --bench-iters 30 --warmup 5),$(us "$a" --cuda-graph --graph-calls 10 --bench-iters 20 --warmup 5)"
  done
  say "\$ python3 async_tp_torch.py steps 4 2048 4096 16384 30 ${STEP_MODES:-}"
  (cd "$dir" && PYTHONUNBUFFERED=1 timeout ${STEPS_TIMEOUT:-300} python3 async_tp_torch.py steps 4 2048 4096 16384 30 ${STEP_MODES:-} 2>&1 |
    grep -E '^(eager|compile|compile_sp|compile_sp_mptp|fused|diff),|Error' | tee -a "$log")
fi
say "== done"; date -u | tee -a "$log"
