#!/usr/bin/env bash
# Times, in the same run, commlir-opt against mlir-opt (MLIR 22) reading and printing the same
# generated 200k-op generic-form file, and prints the ratio (DESIGN §7: benchmarks report
# ratios measured in one run, never a timed test).
#
#   bench/run.sh                      # what `make bench` runs (after `make build`)
#   BENCH_OPS=50000 BENCH_RUNS=3 bench/run.sh
#
# Environment: BENCH_OPS (default 200000), BENCH_RUNS (default 5), COMMLIR_OPT (default
# target/release/commlir-opt), MLIR_OPT (default /usr/lib/llvm-22/bin/mlir-opt).
# Uses hyperfine when installed (`make setup-bench`), else the median of BENCH_RUNS runs.
set -euo pipefail
cd "$(dirname "$0")/.."

OPS=${BENCH_OPS:-200000}
RUNS=${BENCH_RUNS:-5}
OPT=${COMMLIR_OPT:-target/release/commlir-opt}
MLIR_OPT=${MLIR_OPT:-/usr/lib/llvm-22/bin/mlir-opt}
OUT=bench/out
INPUT=$OUT/gen-$OPS.mlir
mkdir -p "$OUT"

[ -x "$OPT" ] || { echo "bench: $OPT not found: run 'make build'" >&2; exit 1; }
[ -x "$MLIR_OPT" ] || { echo "bench: $MLIR_OPT not found: run 'make setup'" >&2; exit 1; }

if [ ! -s "$INPUT" ]; then
  cargo run --quiet --release --manifest-path bench/Cargo.toml -- --ops "$OPS" -o "$INPUT"
fi
echo "input: $INPUT ($(wc -c < "$INPUT") bytes, $(wc -l < "$INPUT") lines)"

FLAGS="--allow-unregistered-dialect --mlir-print-op-generic"
OURS="$OPT $FLAGS $INPUT -o $OUT/ours.mlir"
THEIRS="$MLIR_OPT $FLAGS $INPUT -o $OUT/mlir.mlir"

# Both must succeed, and mlir-opt must read our output back to the same module.
$OURS
$THEIRS
if ! $MLIR_OPT --allow-unregistered-dialect --mlir-print-op-generic "$OUT/ours.mlir" | cmp -s - "$OUT/mlir.mlir"; then
  echo "bench: warning: mlir-opt does not read commlir-opt's output back to its own output" >&2
fi

if command -v hyperfine >/dev/null; then
  hyperfine --warmup 1 --runs "$RUNS" --export-json "$OUT/hyperfine.json" \
    -n commlir-opt "$OURS" -n mlir-opt "$THEIRS"
  python3 - "$OUT/hyperfine.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
ours, theirs = r["commlir-opt"]["median"], r["mlir-opt"]["median"]
print(f"median: commlir-opt {ours:.3f} s, mlir-opt {theirs:.3f} s; "
      f"ratio commlir-opt / mlir-opt = {ours / theirs:.2f}")
PY
else
  median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
  time_once() { local s e; s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
  ours_t=(); theirs_t=()
  for _ in $(seq "$RUNS"); do   # interleaved, so that load on the machine hits both alike
    ours_t+=("$(time_once $OURS)")
    theirs_t+=("$(time_once $THEIRS)")
  done
  o=$(printf '%s\n' "${ours_t[@]}" | median)
  t=$(printf '%s\n' "${theirs_t[@]}" | median)
  printf 'median of %d runs: commlir-opt %.3f s, mlir-opt %.3f s; ratio commlir-opt / mlir-opt = %.2f\n' \
    "$RUNS" "$o" "$t" "$(echo "$o / $t" | bc -l)"
fi

# Peak memory, one run each (GNU time, when installed).
if [ -x /usr/bin/time ]; then
  for pair in "commlir-opt|$OURS" "mlir-opt|$THEIRS"; do
    /usr/bin/time -f "peak RSS ${pair%%|*}: %M KiB" ${pair#*|} 2>&1 >/dev/null | tail -1
  done
fi
