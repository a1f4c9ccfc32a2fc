#!/usr/bin/env bash
# Scale of `coll-fuse-matmul` (docs/benchmarks.md, "Scale of coll-fuse-matmul").
#
# Generates programs of about 15k, 50k and 150k ops made of fusable all-gather → matmul and
# matmul → reduce-scatter patterns on a `symm_mem` group (`gen_fuse_matmul N`: one function,
# 13 ops per block, every pattern fused), then runs
#   commlir-opt f.mlir --pass-pipeline='builtin.module(func.func(coll-fuse-matmul))' --mlir-timing
# RUNS times per size, interleaved round by round (one warm-up round first), and prints the
# medians of the pass's own time (the `CollFuseMatmul` line of --mlir-timing) and of the whole
# run, with t(150k) / t(15k) of the pass (10× the ops: goal ≤ 12).
#
# BASE=/path/to/another/commlir-opt times that binary too, in the same rounds (before/after
# comparisons on a shared machine), and checks that both print the same output.
#
# Usage: bench/fuse_scale.sh            (RUNS=5 SIZES="15000 50000 150000" BASE=)
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
SIZES=${SIZES:-"15000 50000 150000"}
BASE=${BASE:-}
PIPELINE='builtin.module(func.func(coll-fuse-matmul))'

cargo build --release -q -p commlir-opt -p commlir-passes --example gen_fuse_matmul
OPT=target/release/commlir-opt
GEN=target/release/examples/gen_fuse_matmul

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

BINS="new"
declare -A bin=([new]="$OPT")
if [ -n "$BASE" ]; then
    BINS="base new"
    bin[base]="$BASE"
fi

for n in $SIZES; do
    "$GEN" "$n" >"$work/f$n.mlir"
    if [ -n "$BASE" ]; then
        "$BASE" "$work/f$n.mlir" --pass-pipeline="$PIPELINE" -o "$work/base$n.out"
        "$OPT" "$work/f$n.mlir" --pass-pipeline="$PIPELINE" -o "$work/new$n.out"
        cmp -s "$work/base$n.out" "$work/new$n.out" || {
            echo "error: outputs differ at $n ops" >&2
            exit 1
        }
    fi
done

# one BIN N: appends the pass's time and the whole run's wall time (s) to their lists.
one() {
    local t0 t1 pass
    t0=$(date +%s%N)
    pass=$("${bin[$1]}" "$work/f$2.mlir" --pass-pipeline="$PIPELINE" --mlir-timing -o /dev/null 2>&1 |
        awk '/CollFuseMatmul/ { print $1 }')
    t1=$(date +%s%N)
    echo "$pass" >>"$work/pass.$1.$2"
    awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.4f\n", ns / 1e9 }' >>"$work/wall.$1.$2"
}

# median FILE: the median of the numbers in FILE, one per line.
median() {
    sort -g "$1" | awk '{ t[NR] = $1 } END { printf "%.4f\n", (t[int((NR + 1) / 2)] + t[int(NR / 2) + 1]) / 2 }'
}

for r in $(seq 0 "$RUNS"); do
    for n in $SIZES; do
        for b in $BINS; do
            one "$b" "$n"
        done
    done
    if [ "$r" -eq 0 ]; then
        rm -f "$work"/pass.* "$work"/wall.*
    fi
done

printf '%-6s %8s %12s %12s\n' binary ops "pass (s)" "run (s)"
for b in $BINS; do
    for n in $SIZES; do
        printf '%-6s %8s %12s %12s\n' "$b" "$n" "$(median "$work/pass.$b.$n")" "$(median "$work/wall.$b.$n")"
    done
done
first=${SIZES%% *}
last=${SIZES##* }
for b in $BINS; do
    awk -v a="$(median "$work/pass.$b.$first")" -v z="$(median "$work/pass.$b.$last")" -v b="$b" \
        -v f="$first" -v l="$last" 'BEGIN { printf "%s: pass t(%s) / t(%s) = %.1f\n", b, l, f, z / a }'
done
