#!/usr/bin/env bash
# Builds, on a machine with LLVM, what bench/gpu/run_multi_gpu.sh needs on an N-GPU machine
# (N = 4 or 8), into DIR (default .gpubench-mg<N>):
#  - the stripped runner, symm_selftest, and the PyTorch references (symm_torch.py,
#    steps_transformer.py, a2a_torch.py);
#  - colls/: all_reduce, all_gather, reduce_scatter and all_to_all 1 MiB to 1 GiB on a group of
#    N (gen_collectives.sh, sources in colls_src/), full pipeline;
#  - ar/: the bf16 all-reduce on `@tp {size = N, symm_mem}`, 4 KiB to 16 MiB, compiled for each
#    symm-algo (one-shot, two-shot, auto = the cost model's choice, nccl);
#  - selftest/: the symm self-test program at G = N (gen_symm_selftest.py N);
#  - tf/: the 4-layer transformers of gen_transformer_nd.py, TPxDP on N ranks: tpNdp1 (TP=N),
#    tp4dp1 (TP=4; on 8 ranks two TP groups), tp1dpN (FSDP=N), tp2dp<N/2> and (N=8) tp4dp2
#    (the 2-D programs: @tp consecutive, @dp strided), at the benchmark size (big: 2048 tokens,
#    hidden 4096, ffn 16384) and at a size the sim checks (small: 64 256 1024):
#      NAME_SZ.full  the full pipeline;
#      NAME_SZ.sp    (TP > 1) @tp with symm_mem, coll-sequence-parallel + coll-fuse-matmul in
#                    front of the full pipeline (NAME_symm_SZ.mlir is its source);
#      NAME_SZ.spf   the same with coll-fuse-matmul{ignore-cost=true};
#    and the cost model's prediction of every big step (`commlir-opt --comm-report`, makespan_ns
#    of the function after the same pipeline) in DIR/predicted.csv;
#  - check.list: "ARTIFACT SOURCE" of every small program run_multi_gpu.sh `--check`s (colls at
#    1 MiB, all of ar/, the self-test, the small transformers).
# A program the compiler rejects is named in DIR/not_built.txt with the first error line; the
# others are still built and the script exits 1 at the end.
#   bench/gpu/prepare_multi_gpu.sh [DIR] [N]
# COMMLIR_BIN=/path/to/target/release uses binaries built elsewhere (commlir-run, commlir-opt,
# commlir-translate, examples/symm_selftest) instead of building them here.
set -euo pipefail
n=${2:-8}
dir=${1:-.gpubench-mg$n}
case $n in 2|4|8) ;; *) echo "N must be 2, 4 or 8 (got $n)" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if [ -n "${COMMLIR_BIN:-}" ]; then
  bin=$COMMLIR_BIN
else
  cargo build --release -p commlir-run -p commlir-translate -p commlir-opt
  cargo build --release -p commlir-runtime --example symm_selftest
  bin=target/release
fi
tr=$bin/commlir-translate
opt=$bin/commlir-opt
rm -rf "$dir" && mkdir -p "$dir"/{colls,ar,selftest,tf}
cp "$bin/commlir-run" "$dir/" && strip "$dir/commlir-run"
if [ -x "$bin/examples/symm_selftest" ]; then
  cp "$bin/examples/symm_selftest" "$dir/" && strip "$dir/symm_selftest"
fi
cp bench/gpu/symm_torch.py bench/gpu/steps_transformer.py bench/gpu/a2a_torch.py "$dir/"
echo "$n" >"$dir/world_size"
: >"$dir/check.list"

sched='comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools'
full="builtin.module(func.func(coll-to-comm,$sched))"
sp="builtin.module(func.func(coll-sequence-parallel,coll-fuse-matmul,coll-to-comm,$sched))"
spf="builtin.module(func.func(coll-sequence-parallel,coll-fuse-matmul{ignore-cost=true},coll-to-comm,$sched))"
# build SRC PIPELINE OUT: compiles SRC to the artifact OUT; a rejected program is named in
# DIR/not_built.txt with the first error line.
build() {
  local err
  if ! err=$($tr "$1" --pass-pipeline="$2" --emit=artifact -o "$3" 2>&1); then
    rm -f "$3"
    echo "$(basename "$3"): $(echo "$err" | grep -m1 error)" | tee -a "$dir/not_built.txt" >&2
    return 1
  fi
}
# checked ARTIFACT SOURCE: adds a small program to check.list (paths relative to DIR).
checked() { [ -e "$dir/$1" ] && echo "$1 $2" >>"$dir/check.list"; return 0; }

# Single collectives on a group of N.
bench/gpu/gen_collectives.sh "$dir/colls_src" "$n" all_reduce,all_gather,reduce_scatter,all_to_all
for f in "$dir"/colls_src/*.mlir; do
  b=$(basename "$f" .mlir)
  build "$f" "$full" "$dir/colls/$b.commlir" || true
done
for op in all_reduce all_gather reduce_scatter all_to_all; do
  checked "colls/${op}_1MiB.commlir" "colls_src/${op}_1MiB.mlir"
done

# Symmetric-memory all-reduce latency programs.
for bytes in 4096 16384 65536 262144 1048576 4194304 16777216; do
  e=$((bytes / 2))
  src="$dir/ar/ar_$bytes.mlir"
  cat >"$src" <<MLIR
module {
  coll.group @tp {size = $n : i64, symm_mem}
  func.func @main(%x: tensor<${e}xbf16>) -> tensor<${e}xbf16> {
    %r = coll.all_reduce %x {reduce_op = "sum", group = @tp} : tensor<${e}xbf16>
    %y = coll.wait_tensor %r : tensor<${e}xbf16>
    return %y : tensor<${e}xbf16>
  }
}
MLIR
  for algo in one-shot two-shot auto nccl; do
    build "$src" "builtin.module(func.func(coll-to-comm{symm-algo=$algo},comm-plan-pools))" \
      "$dir/ar/ar_${bytes}_$algo.commlir" || true
    checked "ar/ar_${bytes}_$algo.commlir" "ar/ar_$bytes.mlir"
  done
done

# The symm kernels' self-test at G = N (symm_selftest on one GPU; --check on N).
python3 bench/gpu/gen_symm_selftest.py "$n" >"$dir/selftest/selftest_$n.mlir"
build "$dir/selftest/selftest_$n.mlir" "builtin.module(func.func(coll-to-comm,comm-plan-pools))" \
  "$dir/selftest/selftest_$n.commlir" || true
checked "selftest/selftest_$n.commlir" "selftest/selftest_$n.mlir"

# Transformer steps: TP x DP = N.
specs="$n:1 1:$n 2:$((n / 2))"
[ "$n" = 8 ] && specs="$specs 4:1 4:2"
echo "program,pipeline,makespan_ns" >"$dir/predicted.csv"
# predict NAME SRC PIPELINE LABEL: the cost model's makespan of SRC after PIPELINE.
predict() {
  local rep="$dir/tf/$1.report.json" ms
  if $opt "$2" --pass-pipeline="$3" --comm-report "$rep" -o /dev/null 2>/dev/null; then
    ms=$(python3 -c 'import json,sys; print(max(f["makespan_ns"] for f in json.load(open(sys.argv[1]))["functions"]))' "$rep")
    echo "$1,$4,$ms" >>"$dir/predicted.csv"
  else
    echo "$1,$4,?" >>"$dir/predicted.csv"
  fi
}
for spec in $specs; do
  IFS=: read -r t d <<<"$spec"
  name=tp${t}dp$d
  for sz in "big 2048 4096 16384" "small 64 256 1024"; do
    set -- $sz
    python3 bench/gpu/gen_transformer_nd.py "$t" "$d" 4 "$2" "$3" "$4" >"$dir/tf/${name}_$1.mlir"
    build "$dir/tf/${name}_$1.mlir" "$full" "$dir/tf/${name}_$1.full.commlir" || true
    [ "$1" = big ] && predict "${name}_big.full" "$dir/tf/${name}_big.mlir" "$full" full
    [ "$1" = small ] && checked "tf/${name}_small.full.commlir" "tf/${name}_small.mlir"
    if [ "$t" -gt 1 ]; then
      python3 bench/gpu/gen_transformer_nd.py "$t" "$d" 4 "$2" "$3" "$4" bf16 symm >"$dir/tf/${name}_symm_$1.mlir"
      for v in sp spf; do
        p=$sp; [ $v = spf ] && p=$spf
        build "$dir/tf/${name}_symm_$1.mlir" "$p" "$dir/tf/${name}_$1.$v.commlir" || true
        [ "$1" = big ] && predict "${name}_big.$v" "$dir/tf/${name}_symm_big.mlir" "$p" "$v"
        [ "$1" = small ] && checked "tf/${name}_small.$v.commlir" "tf/${name}_symm_small.mlir"
      done
    fi
  done
done
cat "$dir/predicted.csv"
echo "$(find "$dir" -name '*.commlir' | wc -l) artifacts, $(wc -l <"$dir/check.list") small programs to check, in $dir ($(du -sh "$dir" | cut -f1))"
if [ -s "$dir/not_built.txt" ]; then
  echo "NOT BUILT ($(wc -l <"$dir/not_built.txt")): see $dir/not_built.txt" >&2
  exit 1
fi
