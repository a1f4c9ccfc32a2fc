# Sourced by the run_*.sh scripts after env.sh, with `dir` (from bench/gpu/prepare.sh) and
# `out` set: the log they write and the `--check` sweeps they share.
#   . "$here/lib.sh"
R="$dir/commlir-run"
mkdir -p "$out"
log="$out/log.txt"
say() { echo "$@" | tee -a "$log"; }
say "== machine"; nvidia-smi -L 2>&1 | tee -a "$log"; date -u | tee -a "$log"

# check_probe NAME RANKS: `--check` of probe NAME (DIR/probe/NAME.commlir against NAME.mlir).
check_probe() {
  say "\$ commlir-run probe/$1.commlir --ranks $2 --check"
  timeout 120 "$R" "$dir/probe/$1.commlir" --backend cuda --ranks "$2" --check --check-against "$dir/probe/$1.mlir" 2>&1 | grep -E '^check: |error|element' | tee -a "$log"
}

# check_probes: `--check` of every compiled probe, on 1 rank (transcendentals) or 2.
check_probes() {
  local p b
  say "== probes"
  for p in "$dir"/probe/*.commlir; do
    b=$(basename "$p" .commlir)
    case $b in transcendental*) check_probe "$b" 1 ;; *) check_probe "$b" 2 ;; esac
  done
}

# check_programs: `--check` of every example under both pipelines, the small TP and FSDP
# transformers under both, and the upstream MLIR programs, on 2 ranks.
check_programs() {
  local a b t p
  for a in "$dir"/examples/*.commlir "$dir"/examples_nosched/*.commlir; do
    b=$(basename "$a" .commlir)
    say "\$ commlir-run $(basename "$(dirname "$a")")/$b.commlir --check"
    timeout 60 "$R" "$a" --backend cuda --ranks 2 --check --check-against "$dir/src/$b.mlir" 2>&1 | grep -E '^check: |error' | tee -a "$log"
  done
  for t in tf/tp4_small.full tf/tp4_small.plain tf/fsdp4_small.full tf/fsdp4_small.plain; do
    p=$(basename "$t" | cut -d. -f1)
    say "\$ commlir-run $t.commlir --check --check-against tf/$p.mlir"
    timeout 60 "$R" "$dir/$t.commlir" --backend cuda --ranks 2 --check --check-against "$dir/tf/$p.mlir" 2>&1 | grep -E '^check: |error|element' | tee -a "$log"
  done
  for a in "$dir"/upstream/*.commlir; do
    b=$(basename "$a" .commlir)
    say "\$ commlir-run upstream/$b.commlir --check"
    timeout 60 "$R" "$a" --backend cuda --ranks 2 --check --check-against "$dir/upstream/$b.ref.mlir" 2>&1 | grep -E '^check: |error' | tee -a "$log"
  done
}

# time_steps LABEL PROGRAM...: `time(events)` of each DIR/PROGRAM.commlir, 30 timed calls after
# 5 warm-up, one line `LABEL,PROGRAM,time(events): T us` each.
time_steps() {
  local label=$1 t o
  shift
  for t in "$@"; do
    o=$(timeout 120 "$R" "$dir/$t.commlir" --backend cuda --ranks 2 --bench-iters 30 --warmup 5 2>&1)
    say "$label,$t,$(echo "$o" | grep '^time(events)' | sed 's/ per call.*//'),$(echo "$o" | grep '^device memory' | sed 's/ (rank.*//')$(echo "$o" | grep -m1 -i error)"
  done
}
