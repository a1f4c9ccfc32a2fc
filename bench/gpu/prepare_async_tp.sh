#!/usr/bin/env bash
# Builds, on a machine with LLVM, what bench/gpu/run_async_tp.sh needs on the GPU machine, into
# DIR (default .gpubench-atp; travels by carry):
#  - the stripped runner and async_tp_torch.py;
#  - micro/: the fused-op micro-benchmarks on `@tp {size = 2, symm_mem}`, bf16, A row-sharded
#    (T/2 rows per rank), at tokens x hidden x ffn = 2048x4096x16384, 8192x4096x16384 and
#    8192x8192x28672 (and 64x256x1024, small enough for --check):
#      ag_<shape>_{fused,unfused,auto,mm}: symm.fused_all_gather_matmul of the A shard (T/2 x H)
#        with the local column shard B (H x F/2); all_gather_into_tensor + wait_tensor + matmul;
#        that sequence through coll-fuse-matmul (the cost model's choice); the matmul alone
#        (T x H . H x F/2);
#      rs_<shape>_{fused,unfused,auto,mm}: symm.fused_matmul_reduce_scatter of (T x F/2) .
#        (F/2 x H), scatter dim 0; matmul + reduce_scatter_tensor + wait_tensor; that sequence
#        through coll-fuse-matmul; the matmul alone;
#      {ag,rs}_<shape>_fusedk: the fused op with its chunks moved by the transfer kernel's
#        blocks instead of copy engines (COMMLIR_FUSED_TRANSFER=kernel);
#      ag_<shape>_fusedp: the all-gather pulling the peers' shards out of their pools
#        (COMMLIR_FUSED_AG=pull) instead of pushing its own into theirs;
#      rs_<shape>_fused{1,2,4}: the reduce-scatter accumulating in that many row blocks
#        (COMMLIR_FUSED_PARTS; 1 = reduced after the last GEMM);
#    all compiled with builtin.module(func.func(coll-to-comm,comm-plan-pools)) (auto: with
#    coll-fuse-matmul in front);
#  - tf/: the 4-layer TP transformer (gen_transformer tp 4 TOKENS 4096 16384, bf16) at the
#    benchmark size (big: 2048 tokens) and at a size the sim checks (small: 64 256 1024):
#      tp4_<sz>.plain   no symm_mem, the full pipeline without sequence parallelism or fusion
#                       (what run_steps.sh measures as tf/tp4_big.full);
#      tp4_<sz>.symm    @tp with symm_mem, the same pipeline;
#      tp4_<sz>.sp      @tp with symm_mem, coll-sequence-parallel + coll-fuse-matmul (the cost
#                       model decides what fuses) in front of the full pipeline;
#      tp4_<sz>.spf     the same with coll-fuse-matmul{ignore-cost=true} (every pattern fused);
#      tp4_<sz>.sp2     sp with every reduce-scatter accumulating in 2 row blocks;
#      tp4_<sz>.spn     sp with the residual adds as kernels of their own instead of the
#                       reduce-scatters' epilogues (COMMLIR_FUSED_EPILOGUE=0).
#   bench/gpu/prepare_async_tp.sh [DIR]
# COMMLIR_BIN=/path/to/target/release uses binaries built elsewhere (commlir-run, commlir-opt,
# commlir-translate, examples/gen_transformer) instead of building them here.
set -euo pipefail
dir=${1:-.gpubench-atp}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if [ -n "${COMMLIR_BIN:-}" ]; then
  bin=$COMMLIR_BIN
else
  cargo build --release -p commlir-run -p commlir-translate -p commlir-opt
  cargo build --release -p commlir-passes --example gen_transformer
  bin=target/release
fi
tr=$bin/commlir-translate
gen=$bin/examples/gen_transformer
rm -rf "$dir" && mkdir -p "$dir"/{micro,tf}
cp "$bin/commlir-run" "$dir/" && strip "$dir/commlir-run"
cp bench/gpu/async_tp_torch.py "$dir/"

plain_mm='builtin.module(func.func(coll-to-comm,comm-plan-pools))'
auto_mm='builtin.module(func.func(coll-fuse-matmul,coll-to-comm,comm-plan-pools))'
head='module {
  coll.group @tp {size = 2 : i64, symm_mem}'
# build SRC PIPELINE OUT: compiles SRC to the artifact OUT; a program the compiler rejects is
# named in DIR/not_built.txt with the first error line, and the others are still built.
build() {
  local err
  if ! err=$($tr "$1" --pass-pipeline="$2" --emit=artifact -o "$3" 2>&1); then
    rm -f "$3"
    echo "$(basename "$3"): $(echo "$err" | grep -m1 error)" | tee -a "$dir/not_built.txt" >&2
  fi
}
# micro NAME PIPELINE: writes DIR/micro/NAME.mlir from stdin and compiles it.
micro() {
  cat >"$dir/micro/$1.mlir"
  build "$dir/micro/$1.mlir" "$2" "$dir/micro/$1.commlir"
}
for shape in 64x256x1024 2048x4096x16384 8192x4096x16384 8192x8192x28672; do
  IFS=x read -r t h f <<<"$shape"
  t2=$((t / 2)) f2=$((f / 2))
  a_sh="tensor<${t2}x${h}xbf16>" a_full="tensor<${t}x${h}xbf16>" b_col="tensor<${h}x${f2}xbf16>"
  y_ag="tensor<${t}x${f2}xbf16>"
  micro "ag_${shape}_fused" "$plain_mm" <<MLIR
$head
  func.func @main(%a: $a_sh, %b: $b_col) -> $y_ag {
    %y = symm.fused_all_gather_matmul %a, %b {group = @tp} : ($a_sh, $b_col) -> $y_ag
    return %y : $y_ag
  }
}
MLIR
  unfused_ag="$head
  func.func @main(%a: $a_sh, %b: $b_col) -> $y_ag {
    %g = coll.all_gather_into_tensor %a {group = @tp} : ($a_sh) -> $a_full
    %ga = coll.wait_tensor %g : $a_full
    %y = compute.matmul %ga, %b : ($a_full, $b_col) -> $y_ag
    return %y : $y_ag
  }
}"
  micro "ag_${shape}_unfused" "$plain_mm" <<<"$unfused_ag"
  micro "ag_${shape}_auto" "$auto_mm" <<<"$unfused_ag"
  micro "ag_${shape}_mm" "$plain_mm" <<MLIR
$head
  func.func @main(%a: $a_full, %b: $b_col) -> $y_ag {
    %y = compute.matmul %a, %b : ($a_full, $b_col) -> $y_ag
    return %y : $y_ag
  }
}
MLIR
  a_rs="tensor<${t}x${f2}xbf16>" b_row="tensor<${f2}x${h}xbf16>" p_rs="tensor<${t}x${h}xbf16>"
  y_rs="tensor<${t2}x${h}xbf16>"
  micro "rs_${shape}_fused" "$plain_mm" <<MLIR
$head
  func.func @main(%a: $a_rs, %b: $b_row) -> $y_rs {
    %y = symm.fused_matmul_reduce_scatter %a, %b {reduce_op = "sum", scatter_dim = 0 : i64, group = @tp} : ($a_rs, $b_row) -> $y_rs
    return %y : $y_rs
  }
}
MLIR
  unfused_rs="$head
  func.func @main(%a: $a_rs, %b: $b_row) -> $y_rs {
    %p = compute.matmul %a, %b : ($a_rs, $b_row) -> $p_rs
    %r = coll.reduce_scatter_tensor %p {group = @tp, reduce_op = \"sum\"} : ($p_rs) -> $y_rs
    %y = coll.wait_tensor %r : $y_rs
    return %y : $y_rs
  }
}"
  micro "rs_${shape}_unfused" "$plain_mm" <<<"$unfused_rs"
  micro "rs_${shape}_auto" "$auto_mm" <<<"$unfused_rs"
  micro "rs_${shape}_mm" "$plain_mm" <<MLIR
$head
  func.func @main(%a: $a_rs, %b: $b_row) -> $p_rs {
    %y = compute.matmul %a, %b : ($a_rs, $b_row) -> $p_rs
    return %y : $p_rs
  }
}
MLIR
  # The fused ops again with the transfer kernel's blocks moving the chunks instead of copy
  # engines (codegen/src/lower_to_rt/fused_matmul.rs).
  for side in ag rs; do
    COMMLIR_FUSED_TRANSFER=kernel build "$dir/micro/${side}_${shape}_fused.mlir" "$plain_mm" \
      "$dir/micro/${side}_${shape}_fusedk.commlir"
  done
  # The all-gather pulling each peer's shard out of its pool (after the clone of the argument
  # into it) instead of pushing its own into the peers (fusedp).
  COMMLIR_FUSED_AG=pull build "$dir/micro/ag_${shape}_fused.mlir" "$plain_mm" \
    "$dir/micro/ag_${shape}_fusedp.commlir"
  # The reduce-scatter with its chunks in N row blocks accumulated onto the peer's partial
  # (fused<N>; 1: the final reduction after the last GEMM, whatever the chunk size).
  for parts in 1 2 4; do
    COMMLIR_FUSED_PARTS=$parts build "$dir/micro/rs_${shape}_fused.mlir" "$plain_mm" \
      "$dir/micro/rs_${shape}_fused$parts.commlir"
  done
done

# The 4-layer TP transformer, with and without sequence parallelism and fusion.
sched='comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools'
full="builtin.module(func.func(coll-to-comm,$sched))"
sp="builtin.module(func.func(coll-sequence-parallel,coll-fuse-matmul,coll-to-comm,$sched))"
spf="builtin.module(func.func(coll-sequence-parallel,coll-fuse-matmul{ignore-cost=true},coll-to-comm,$sched))"
for sz in "big 2048 4096 16384" "small 64 256 1024"; do
  set -- $sz
  $gen tp 4 "$2" "$3" "$4" >"$dir/tf/tp4_$1.mlir"
  $gen tp 4 "$2" "$3" "$4" bf16 symm >"$dir/tf/tp4_$1_symm.mlir"
  build "$dir/tf/tp4_$1.mlir" "$full" "$dir/tf/tp4_$1.plain.commlir"
  build "$dir/tf/tp4_$1_symm.mlir" "$full" "$dir/tf/tp4_$1.symm.commlir"
  build "$dir/tf/tp4_$1_symm.mlir" "$sp" "$dir/tf/tp4_$1.sp.commlir"
  build "$dir/tf/tp4_$1_symm.mlir" "$spf" "$dir/tf/tp4_$1.spf.commlir"
  COMMLIR_FUSED_PARTS=2 build "$dir/tf/tp4_$1_symm.mlir" "$sp" "$dir/tf/tp4_$1.sp2.commlir"
  COMMLIR_FUSED_EPILOGUE=0 build "$dir/tf/tp4_$1_symm.mlir" "$sp" "$dir/tf/tp4_$1.spn.commlir"
  # What the SP/fusion pipeline made of it, for the log (ops counted at the coll/symm level).
  for v in sp spf; do
    p=$sp; [ $v = spf ] && p=$spf
    $bin/commlir-opt "$dir/tf/tp4_$1_symm.mlir" --pass-pipeline="${p%%,coll-to-comm*}))" 2>/dev/null |
      grep -oE '(coll|symm)\.[a-z_]+' | grep -v 'coll\.group\|coll\.replicated' | sort | uniq -c |
      awk -v n="tp4_$1.$v" '{s = s sprintf(" %s=%s", $2, $1)} END {print n ":" s}' >>"$dir/tf/ops.txt" || true
  done
done
cat "$dir/tf/ops.txt"
echo "$(ls "$dir"/micro/*.commlir "$dir"/tf/*.commlir | wc -l) artifacts in $dir ($(du -sh "$dir" | cut -f1))"
if [ -s "$dir/not_built.txt" ]; then
  echo "NOT BUILT ($(wc -l <"$dir/not_built.txt")): see $dir/not_built.txt; run_async_tp.sh skips them" >&2
  exit 1
fi
