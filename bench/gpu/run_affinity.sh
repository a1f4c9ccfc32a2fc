#!/usr/bin/env bash
# Thread placement on 2 GPUs (a few minutes): 1 and 4 MiB collectives, raw NCCL and commlir, with each
# rank's host thread pinned to its GPU's CPUs (`--cpu-affinity gpu`, the default) and unpinned
# (`none`), alternating, 3 reps of 2000 back-to-back calls; plus the machine's topology.
#   bench/gpu/run_affinity.sh DIR     (DIR holds commlir-run and colls/*MiB.commlir)
# Lines: REP,AFFINITY,raw|commlir,OP,MiB,GPU us/call,host us/call
set -uo pipefail
dir=${1:-.gpubench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
R="$dir/commlir-run"
echo "cpus: $(nproc); numa: $(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l) nodes"
for d in /sys/bus/pci/devices/*; do
  [ "$(cat $d/vendor 2>/dev/null)" = 0x10de ] && [ -e $d/local_cpulist ] && \
    echo "gpu $(basename $d): local cpus $(cat $d/local_cpulist), numa node $(cat $d/numa_node)"
done | sort -u | head -8
start=$SECONDS
for rep in 1 2 3; do
  [ $((SECONDS - start)) -gt 200 ] && echo "stopped at ${SECONDS}s" && break
  for aff in gpu none; do
    timeout 60 "$R" --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 1,4 \
      --bench-iters 2000 --warmup 50 --buffers registered --cpu-affinity $aff 2>&1 |
      awk -v rep=$rep -v aff=$aff '/^baseline / { for (i = 1; i <= NF; i++) if ($i == "host") h = $(i + 1)
        printf "%s,%s,raw,%s,%d,%s,%s\n", rep, aff, $2, $3 / 1048576, $6, h } /error/ { print rep "," aff ",error," $0 }'
    for op in all_reduce all_gather reduce_scatter; do for mib in 1 4; do
      o=$(timeout 60 "$R" "$dir/colls/${op}_${mib}MiB.commlir" --backend cuda --ranks 2 --bench-iters 2000 --warmup 50 --cpu-affinity $aff 2>&1)
      t=$(echo "$o" | sed -n 's/^time(events): \([0-9.]*\) us per call.*host enqueue \([0-9.]*\) us.*/\1,\2/p')
      echo "$rep,$aff,commlir,$op,$mib,${t:-?,?}$(echo "$o" | grep -m1 -iE 'error|note' | sed 's/^/,/')"
    done; done
  done
done
echo "done in $((SECONDS - start)) s"
