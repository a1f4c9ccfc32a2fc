#!/usr/bin/env bash
# Scale of the scheduling pipeline (docs/benchmarks.md, "Scale of the scheduling pipeline").
#
# Generates FSDP-like programs of 10k and 100k ops (`gen_fsdp N`, which writes the custom
# form, and the same program converted to the generic form), then times, in this one command
# so that all see the same machine load:
#   - commlir-opt running the full scheduling pipeline (parse, five passes with the default
#     verification after each, print) on the custom form and on the generic form, and
#   - mlir-opt-22 merely parsing and printing the generic file (it has no custom syntax for
#     our ops),
# each RUNS times, interleaved round by round, and prints the medians with the ratios the
# goals are set on: pipeline / mlir-opt at each size and form (goal < 1) and t(100k) / t(10k)
# of the pipeline (goal <= 12).
#
# Usage: bench/scale.sh            (RUNS=7 SIZES="10000 100000" MLIR_OPT=mlir-opt-22)
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-7}
SIZES=${SIZES:-"10000 100000"}
MLIR_OPT=${MLIR_OPT:-mlir-opt-22}
PIPELINE=${PIPELINE:-'builtin.module(func.func(coll-to-comm,comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,comm-plan-pools))'}

command -v "$MLIR_OPT" >/dev/null || {
    echo "error: $MLIR_OPT not found (set MLIR_OPT)" >&2
    exit 1
}
cargo build --release -q -p commlir-opt -p commlir-passes --example gen_fsdp
OPT=target/release/commlir-opt
GEN=target/release/examples/gen_fsdp

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# wall CMD...: wall seconds of one run of CMD (output discarded).
wall() {
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null
    t1=$(date +%s%N)
    awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.4f\n", ns / 1e9 }'
}

# median FILE: the median of the numbers in FILE, one per line.
median() {
    sort -g "$1" | awk '{ t[NR] = $1 } END { printf "%.3f\n", (t[int((NR + 1) / 2)] + t[int(NR / 2) + 1]) / 2 }'
}

for n in $SIZES; do
    "$GEN" "$n" >"$work/f$n.custom.mlir"
    "$OPT" "$work/f$n.custom.mlir" --mlir-print-op-generic -o "$work/f$n.generic.mlir"
done
# Interleaved: every round times each command once, in the same order, so that the VM's load
# drifts alike over both tools (timing one tool's runs, then the other's, showed swings of
# ±30% between the two blocks); one warm-up round first.
FORMS="custom generic"
for r in $(seq 0 "$RUNS"); do
    for n in $SIZES; do
        for form in $FORMS; do
            p=$(wall "$OPT" "$work/f$n.$form.mlir" --pass-pipeline="$PIPELINE" -o /dev/null)
            [ "$r" -gt 0 ] && echo "$p" >>"$work/pipe$n.$form"
        done
        m=$(wall "$MLIR_OPT" --allow-unregistered-dialect --mlir-print-op-generic "$work/f$n.generic.mlir" -o /dev/null)
        if [ "$r" -gt 0 ]; then
            echo "$m" >>"$work/mlir$n"
            for form in $FORMS; do
                awk -v p="$(tail -1 "$work/pipe$n.$form")" -v m="$m" 'BEGIN { printf "%.4f\n", p / m }' >>"$work/ratio$n.$form"
            done
        fi
    done
done
declare -A pipe mlir ratio
for n in $SIZES; do
    mlir[$n]=$(median "$work/mlir$n")
    for form in $FORMS; do
        pipe[$n.$form]=$(median "$work/pipe$n.$form")
        ratio[$n.$form]=$(median "$work/ratio$n.$form")
    done
done

echo "medians of $RUNS interleaved rounds, wall time"
echo
echo "| ops | input form | commlir-opt pipeline | $MLIR_OPT parse + print only (generic) | ratio of medians | median of per-round ratios |"
echo "|---|---|---|---|---|---|"
for n in $SIZES; do
    for form in $FORMS; do
        awk -v n="$n" -v f="$form" -v p="${pipe[$n.$form]}" -v m="${mlir[$n]}" -v r="${ratio[$n.$form]}" \
            'BEGIN { printf "| %d | %s | %.3f s | %.3f s | %.2f | %.2f |\n", n, f, p, m, p / m, r }'
    done
done
set -- $SIZES
if [ $# -ge 2 ]; then
    first=$1
    last=${!#}
    echo
    for form in $FORMS; do
        awk -v a="$first" -v b="$last" -v f="$form" -v ta="${pipe[$first.$form]}" -v tb="${pipe[$last.$form]}" \
            -v ma="${mlir[$first]}" -v mb="${mlir[$last]}" \
            'BEGIN { printf "t(%d) / t(%d), %s form: pipeline %.1f, mlir-opt %.1f (ops ratio %.0f)\n", b, a, f, tb / ta, mb / ma, b / a }'
    done
fi
