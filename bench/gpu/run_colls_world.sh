. bench/gpu/env.sh
R=.gpubench/gpu/commlir-run
for rep in 1 2; do
$R --nccl-baseline all_reduce,all_gather,reduce_scatter --ranks 2 --sizes-mib 1,4,16 --bench-iters 100 --warmup 10 --buffers registered 2>&1 | sed 's/ (100 calls.*//'
for op in all_reduce all_gather reduce_scatter; do for mib in 1 4 16; do
  o=$(timeout 60 $R .gpubench/gpu/colls/${op}_${mib}MiB.commlir --backend cuda --ranks 2 --bench-iters 100 --warmup 10 2>&1)
  echo "commlir,$op,${mib}MiB,$(echo "$o" | grep '^time' | sed 's/ per call.*//' | tr '\n' ' ')$(echo "$o" | grep -m1 -i error)"
done; done
done
for a in .gpubench/gpu/examples/*.commlir; do b=$(basename $a .commlir); echo "check $b: $(timeout 60 $R $a --backend cuda --ranks 2 --check --check-against .gpubench/gpu/src/$b.mlir 2>&1 | grep -E '^check|error')"; done
echo "check tp4_small: $(timeout 60 $R .gpubench/gpu/tf/tp4_small.full.commlir --backend cuda --ranks 2 --check --check-against .gpubench/gpu/tf/tp4_small.mlir 2>&1 | grep -E '^check|error')"
o=$(timeout 120 $R .gpubench/gpu/tf/tp4_big.full.commlir --backend cuda --ranks 2 --bench-iters 30 --warmup 5 2>&1); echo "tp4_big: $(echo "$o" | grep '^time(events)' | sed 's/ per call.*//')"
o=$(timeout 120 $R .gpubench/gpu/tf/fsdp4_big.full.commlir --backend cuda --ranks 2 --bench-iters 30 --warmup 5 2>&1); echo "fsdp4_big: $(echo "$o" | grep '^time(events)' | sed 's/ per call.*//')"
