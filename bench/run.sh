#!/usr/bin/env bash
# Times, in the same run, commlir-opt against mlir-opt (MLIR 22) reading, verifying and
# printing the same generated 200k-op module, and prints the ratios (DESIGN §7: benchmarks
# report ratios measured in one run, never a timed test).
#
# The module is written three ways (bench/src/main.rs `--form`): the generic form, the custom
# form (how commlir prints and people write) and a mix of both. commlir-opt reads each;
# mlir-opt reads the generic form (it has no custom syntax for our ops). All three must print
# byte-identically, and mlir-opt must read our output back to its own.
#
#   bench/run.sh                      # what `make bench` runs (after `make build`)
#   BENCH_OPS=50000 BENCH_RUNS=3 bench/run.sh
#
# Environment: BENCH_OPS (default 200000), BENCH_RUNS (default 5), COMMLIR_OPT (default
# target/release/commlir-opt), MLIR_OPT (default /usr/lib/llvm-22/bin/mlir-opt).
# Uses hyperfine when installed (`make setup-bench`), else the median of BENCH_RUNS rounds,
# each timing every command once (interleaved, so that load on the machine hits all alike).
set -euo pipefail
cd "$(dirname "$0")/.."

OPS=${BENCH_OPS:-200000}
RUNS=${BENCH_RUNS:-5}
OPT=${COMMLIR_OPT:-target/release/commlir-opt}
MLIR_OPT=${MLIR_OPT:-/usr/lib/llvm-22/bin/mlir-opt}
OUT=bench/out
FORMS="generic custom mixed"
mkdir -p "$OUT"

[ -x "$OPT" ] || { echo "bench: $OPT not found: run 'make build'" >&2; exit 1; }
[ -x "$MLIR_OPT" ] || { echo "bench: $MLIR_OPT not found: run 'make setup'" >&2; exit 1; }

for form in $FORMS; do
  input=$OUT/gen-$OPS-$form.mlir
  if [ ! -s "$input" ]; then
    cargo run --quiet --release --manifest-path bench/Cargo.toml -- --ops "$OPS" --form "$form" -o "$input"
  fi
  echo "input ($form): $input ($(wc -c < "$input") bytes, $(wc -l < "$input") lines)"
done

FLAGS="--allow-unregistered-dialect --mlir-print-op-generic"
ours() { echo "$OPT $FLAGS $OUT/gen-$OPS-$1.mlir -o $OUT/ours-$1.mlir"; }
THEIRS="$MLIR_OPT $FLAGS $OUT/gen-$OPS-generic.mlir -o $OUT/mlir.mlir"

# All must succeed; the three forms must print the same module, and mlir-opt must read our
# output back to its own output.
for form in $FORMS; do $(ours "$form"); done
$THEIRS
for form in custom mixed; do
  cmp -s "$OUT/ours-generic.mlir" "$OUT/ours-$form.mlir" ||
    { echo "bench: the $form form prints differently from the generic form" >&2; exit 1; }
done
if ! $MLIR_OPT --allow-unregistered-dialect --mlir-print-op-generic "$OUT/ours-generic.mlir" | cmp -s - "$OUT/mlir.mlir"; then
  echo "bench: warning: mlir-opt does not read commlir-opt's output back to its own output" >&2
fi

report() {  # report NAME OURS THEIRS: one line per form
  printf '%-8s commlir-opt %.3f s, mlir-opt (generic) %.3f s; mlir-opt / commlir-opt = %.2fx\n' \
    "$1" "$2" "$3" "$(echo "$3 / $2" | bc -l)"
}

if command -v hyperfine >/dev/null; then
  args=()
  for form in $FORMS; do args+=(-n "commlir-opt $form" "$(ours "$form")"); done
  hyperfine --warmup 1 --runs "$RUNS" --export-json "$OUT/hyperfine.json" \
    "${args[@]}" -n mlir-opt "$THEIRS"
  for form in $FORMS; do
    read -r o t < <(python3 - "$OUT/hyperfine.json" "commlir-opt $form" <<'PY'
import json, sys
r = {x["command"]: x["median"] for x in json.load(open(sys.argv[1]))["results"]}
print(r[sys.argv[2]], r["mlir-opt"])
PY
)
    report "$form" "$o" "$t"
  done
else
  median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
  time_once() { local s e; s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
  declare -A times
  for _ in $(seq "$RUNS"); do
    for form in $FORMS; do times[$form]+="$(time_once $(ours "$form")) "; done
    times[mlir]+="$(time_once $THEIRS) "
  done
  t=$(printf '%s\n' ${times[mlir]} | median)
  echo "median of $RUNS interleaved rounds:"
  for form in $FORMS; do
    report "$form" "$(printf '%s\n' ${times[$form]} | median)" "$t"
  done
fi

# Peak memory, one run each (GNU time, when installed).
if [ -x /usr/bin/time ]; then
  for form in $FORMS; do
    /usr/bin/time -f "peak RSS commlir-opt $form: %M KiB" $(ours "$form") 2>&1 >/dev/null | tail -1
  done
  /usr/bin/time -f "peak RSS mlir-opt generic: %M KiB" $THEIRS 2>&1 >/dev/null | tail -1
fi
