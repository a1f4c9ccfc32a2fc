#!/usr/bin/env bash
# Scale of the scheduling pipeline (docs/benchmarks.md, "Scale of the scheduling pipeline").
#
# Generates FSDP-like programs of 10k and 100k ops (`gen_fsdp N`, converted to the generic
# form), then times, in this one command so that both see the same machine load:
#   - commlir-opt running the full scheduling pipeline (parse, five passes with the default
#     verification after each, print), and
#   - mlir-opt-22 merely parsing and printing the same generic file,
# each RUNS times (hyperfine when installed, else a loop), and prints the medians with the two
# ratios the scheduling issue sets goals for: pipeline / mlir-opt at each size (goal < 1) and
# t(100k) / t(10k) of the pipeline (goal <= 12).
#
# Usage: bench/scale.sh            (RUNS=7 SIZES="10000 100000" MLIR_OPT=mlir-opt-22)
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-7}
SIZES=${SIZES:-"10000 100000"}
MLIR_OPT=${MLIR_OPT:-mlir-opt-22}
PIPELINE='builtin.module(func.func(coll-to-comm,comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools))'

command -v "$MLIR_OPT" >/dev/null || {
    echo "error: $MLIR_OPT not found (set MLIR_OPT)" >&2
    exit 1
}
cargo build --release -q -p commlir-opt -p commlir-passes --example gen_fsdp
OPT=target/release/commlir-opt
GEN=target/release/examples/gen_fsdp

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# median_of CMD...: median wall time in seconds of RUNS runs of CMD (output discarded).
median_of() {
    if command -v hyperfine >/dev/null; then
        hyperfine -N --style none --warmup 1 --runs "$RUNS" \
            --export-csv "$work/h.csv" "$(printf '%q ' "$@")" >/dev/null
        # Columns: command,mean,stddev,median,user,system,min,max; the command (a quoted
        # pipeline) may hold commas, so count from the end.
        awk -F, 'NR == 2 { printf "%.3f\n", $(NF - 4) }' "$work/h.csv"
    else
        "$@" >/dev/null # warm-up
        for _ in $(seq "$RUNS"); do
            local t0 t1
            t0=$(date +%s%N)
            "$@" >/dev/null
            t1=$(date +%s%N)
            echo $(((t1 - t0) / 1000))
        done | sort -n | awk '{ t[NR] = $1 } END { printf "%.3f\n", t[int((NR + 1) / 2)] / 1e6 }'
    fi
}

declare -A pipe mlir
for n in $SIZES; do
    "$GEN" "$n" >"$work/f$n.mlir"
    "$OPT" "$work/f$n.mlir" --mlir-print-op-generic -o "$work/f$n.gen.mlir"
    pipe[$n]=$(median_of "$OPT" "$work/f$n.gen.mlir" --pass-pipeline="$PIPELINE" -o /dev/null)
    mlir[$n]=$(median_of "$MLIR_OPT" --allow-unregistered-dialect --mlir-print-op-generic \
        "$work/f$n.gen.mlir" -o /dev/null)
done

echo "median of $RUNS runs, wall time ($(command -v hyperfine >/dev/null && echo hyperfine || echo loop))"
echo
echo "| ops | commlir-opt pipeline | $MLIR_OPT parse + print only | pipeline / mlir-opt |"
echo "|---|---|---|---|"
for n in $SIZES; do
    awk -v n="$n" -v p="${pipe[$n]}" -v m="${mlir[$n]}" \
        'BEGIN { printf "| %d | %.3f s | %.3f s | %.2f |\n", n, p, m, p / m }'
done
set -- $SIZES
if [ $# -ge 2 ]; then
    first=$1
    last=${!#}
    echo
    awk -v a="$first" -v b="$last" -v ta="${pipe[$first]}" -v tb="${pipe[$last]}" \
        -v ma="${mlir[$first]}" -v mb="${mlir[$last]}" \
        'BEGIN { printf "t(%d) / t(%d): pipeline %.1f, mlir-opt %.1f (ops ratio %.0f)\n", b, a, tb / ta, mb / ma, b / a }'
fi
