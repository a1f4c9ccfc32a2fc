#!/usr/bin/env bash
# The sim runs at N ranks of every small program of bench/gpu/prepare_multi_gpu.sh DIR N (no
# GPU): `commlir-run PROG.mlir --ranks N` (sim backend) on the source and on the IR after each
# pipeline that program is compiled with, requiring identical digests (every result's line of
# every rank: digest, sum, max_abs):
#   colls/*_1MiB, ar/*, selftest, tf/*_small      the full pipeline
#   ar/*                                          coll-to-comm{symm-algo=ALGO},comm-plan-pools, each ALGO
#   selftest                                      coll-to-comm,comm-plan-pools
#   tf/*_symm_small (TP > 1, @tp symm_mem)        the full pipeline; coll-sequence-parallel,
#                                                 coll-fuse-matmul{ignore-cost=true} + full;
#                                                 coll-sequence-parallel,coll-fuse-matmul + full
# Prints one Markdown table row per program (`| program | N | pipelines | identical |`) and
# writes the outputs to DIR/sim/. Exit 1 if any differs or fails.
#   bench/gpu/sim_multi_gpu.sh [DIR] [N]
# COMMLIR_BIN=/path/to/target/release: where commlir-run and commlir-opt are (default
# target/release of this checkout).
set -uo pipefail
n=${2:-8}
dir=${1:-.gpubench-mg$n}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${COMMLIR_BIN:-$root/target/release}
run=$bin/commlir-run
opt=$bin/commlir-opt
mkdir -p "$dir/sim"
sched='comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools'
full="coll-to-comm,$sched"
bad=0
# sim SRC LABEL PIPELINE...: digests of SRC against SRC after each PIPELINE (func.func passes).
sim() {
  local src=$1 label=$2 b ref p i=0 names="" ok=yes
  shift 2
  b=$(basename "$src" .mlir)
  ref="$dir/sim/$b.ref.txt"
  if ! "$run" "$src" --ranks "$n" >"$ref" 2>&1 || ! grep -q digest= "$ref"; then
    ok="no (source fails: $(grep -m1 -i error "$ref"))"
  else
    for p in "$@"; do
      i=$((i + 1))
      local ir="$dir/sim/$b.p$i.mlir" o="$dir/sim/$b.p$i.txt"
      names="$names${names:+; }${p%%|*}"
      if ! "$opt" "$src" --pass-pipeline="builtin.module(func.func(${p#*|}))" -o "$ir" 2>"$o"; then
        ok="no (${p%%|*}: $(grep -m1 error "$o"))"; break
      fi
      if ! "$run" "$ir" --ranks "$n" >"$o" 2>&1; then
        ok="no (${p%%|*}: $(grep -m1 -i error "$o"))"; break
      fi
      if ! cmp -s "$ref" "$o"; then ok="no (${p%%|*} differs)"; break; fi
    done
  fi
  [ "$ok" = yes ] || bad=1
  echo "| $label | $n | $names | $ok |"
}
echo "| program | N | pipelines against the source | digests identical |"
echo "|---|---|---|---|"
for op in all_reduce all_gather reduce_scatter all_to_all; do
  sim "$dir/colls_src/${op}_1MiB.mlir" "${op} 1 MiB" "full|$full"
done
for bytes in 4096 16384 65536 262144 1048576 4194304 16777216; do
  f="$dir/ar/ar_$bytes.mlir"
  sim "$f" "all_reduce $bytes B symm_mem" "full|$full" \
    "one-shot|coll-to-comm{symm-algo=one-shot},comm-plan-pools" \
    "two-shot|coll-to-comm{symm-algo=two-shot},comm-plan-pools" \
    "auto|coll-to-comm{symm-algo=auto},comm-plan-pools" \
    "nccl|coll-to-comm{symm-algo=nccl},comm-plan-pools"
done
sim "$dir/selftest/selftest_$n.mlir" "symm self-test G=$n" "full|$full" "plain|coll-to-comm,comm-plan-pools"
for f in "$dir"/tf/*_small.mlir; do
  b=$(basename "$f" .mlir)
  case $b in
    *_symm_small) sim "$f" "${b%_small} 64x256x1024" "full|$full" \
      "sp+fuse{ignore-cost}|coll-sequence-parallel,coll-fuse-matmul{ignore-cost=true},$full" \
      "sp+fuse|coll-sequence-parallel,coll-fuse-matmul,$full" ;;
    *) sim "$f" "${b%_small} 64x256x1024" "full|$full" ;;
  esac
done
exit $bad
