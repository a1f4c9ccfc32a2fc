// Argument and result slots (docs/codegen.md, "Slots"): the copy of an argument into its
// comm-pool slot is skipped when args[i] already is the slot, the copy of a result out of its
// slot (and its allocation) when the caller passed the slot's address in results[j]; the
// manifest lists the pools and slots.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=host-ll > %t.ll
// RUN: FileCheck %s --check-prefix=HOST < %t.ll
// RUN: llc -filetype=obj -relocation-model=pic %t.ll -o %t.o
// RUN: commlir-translate %s --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' --emit=artifact -o %t.commlir
// RUN: %python -c "import sys, json; d=open(sys.argv[1],'rb').read(); i=d.index(b'{'); m=json.JSONDecoder().raw_decode(d[i:].decode('latin-1'))[0]; f=m['functions'][0]; print('pools', f['pools']); print('args', f['arg_slots']); print('results', f['result_slots'])" %t.commlir | FileCheck %s --check-prefix=MANI

module {
  coll.group @w {size = 2 : i64}
  func.func @main(%x: tensor<1024xbf16>) -> tensor<2048xbf16> {
    %r = coll.all_gather_into_tensor %x {group = @w} : (tensor<1024xbf16>) -> tensor<2048xbf16>
    %y = coll.wait_tensor %r : tensor<2048xbf16>
    return %y : tensor<2048xbf16>
  }
}

// HOST-LABEL: define i32 @commlir_fn_main(
// HOST: %[[POOL:.*]] = load ptr, ptr %out
// HOST: %[[SLOT:.*]] = getelementptr inbounds i8, ptr %[[POOL]], i64 4096
// HOST: %argslot = icmp eq ptr %arg0, %[[SLOT]]
// HOST: br i1 %argslot, label %copied, label %copy
// HOST: call i32 %all_gather
// HOST: %[[WANT:.*]] = load ptr, ptr %want
// HOST: %resslot = icmp eq ptr %[[WANT]], %[[POOL]]
// HOST: br i1 %resslot, label %resjoin, label %resalloc
// HOST: %resbuf = phi ptr
// HOST: store ptr %resbuf, ptr %res

// MANI: pools [{'alignment': 64, 'group': 0, 'kind': 'nccl', 'size': 6144}]
// MANI: args [{'bytes': 2048, 'index': 0, 'offset': 4096, 'pool': 0}]
// MANI: results [{'bytes': 4096, 'index': 0, 'offset': 0, 'pool': 0}]
