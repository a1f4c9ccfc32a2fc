// i1 tensors: comm-to-rt rejects a sum or avg reduction of i1 (the sim adds i1 modulo 2, xor;
// NCCL has no bool and its u8 sum of two 1s is 2), through NCCL and through the symmetric-
// memory one-shot all-reduce (sum only); max / min / product are accepted (exact on 0/1
// bytes). Ops without integer semantics are rejected on i1 as on other integers.
// REQUIRES: commlir-translate
// RUN: commlir-translate %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(coll-to-comm,comm-plan-pools))' | FileCheck %s

module @sum {
  coll.group @w {size = 2 : i64}
  func.func @f(%x: tensor<64xi1>) -> tensor<64xi1> {
    // expected-error @below {{comm-to-rt: a sum (or avg) all-reduce of i1 has no NCCL equivalent of the sim's wrapping (xor) semantics; use max (logical or) or min (logical and) (PyTorch reduces a bool SUM as MAX)}}
    %r = coll.all_reduce %x {reduce_op = "sum", group = @w} : (tensor<64xi1>) -> tensor<64xi1>
    %y = coll.wait_tensor %r : tensor<64xi1>
    return %y : tensor<64xi1>
  }
}

// -----

module @avg {
  coll.group @w {size = 2 : i64}
  func.func @f(%x: tensor<64xui1>) -> tensor<32xui1> {
    // expected-error @below {{comm-to-rt: a sum (or avg) reduce-scatter of i1 has no NCCL equivalent}}
    %r = coll.reduce_scatter_tensor %x {reduce_op = "avg", group = @w} : (tensor<64xui1>) -> tensor<32xui1>
    %y = coll.wait_tensor %r : tensor<32xui1>
    return %y : tensor<32xui1>
  }
}

// -----

module @oneshot {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @f(%x: tensor<64xsi1>) -> tensor<64xsi1> {
    // Computed, so coll-to-comm can place it in symmetric memory.
    %z = compute.neg %x : tensor<64xsi1>
    // expected-error @below {{comm-to-rt: a sum (or avg) all-reduce of i1 has no NCCL equivalent}}
    %r = coll.all_reduce %z {reduce_op = "sum", group = @tp} : (tensor<64xsi1>) -> tensor<64xsi1>
    %y = coll.wait_tensor %r : tensor<64xsi1>
    return %y : tensor<64xsi1>
  }
}

// -----

module @exp {
  func.func @f(%x: tensor<4xi1>) -> tensor<4xi1> {
    // expected-error @below {{comm-to-rt: kernels support compute.exp on f16, bf16, f32 and f64 tensors only, not i1}}
    %y = compute.exp %x : tensor<4xi1>
    return %y : tensor<4xi1>
  }
}

// -----

// CHECK: rt.nccl_all_reduce {{.*}}dtype = "u8"{{.*}}reduce_op = "max"
// CHECK: rt.nccl_all_reduce {{.*}}dtype = "u8"{{.*}}reduce_op = "min"
// CHECK: rt.nccl_all_reduce {{.*}}dtype = "u8"{{.*}}reduce_op = "product"
// CHECK: rt.nccl_all_gather {{.*}}dtype = "u8"
module @ok {
  coll.group @w {size = 2 : i64}
  func.func @f(%x: tensor<64xi1>) -> (tensor<64xi1>, tensor<64xi1>, tensor<64xi1>, tensor<128xi1>) {
    %a = coll.all_reduce %x {reduce_op = "max", group = @w} : (tensor<64xi1>) -> tensor<64xi1>
    %aw = coll.wait_tensor %a : tensor<64xi1>
    %b = coll.all_reduce %x {reduce_op = "min", group = @w} : (tensor<64xi1>) -> tensor<64xi1>
    %bw = coll.wait_tensor %b : tensor<64xi1>
    %c = coll.all_reduce %x {reduce_op = "product", group = @w} : (tensor<64xi1>) -> tensor<64xi1>
    %cw = coll.wait_tensor %c : tensor<64xi1>
    %g = coll.all_gather_into_tensor %x {group = @w} : (tensor<64xi1>) -> tensor<128xi1>
    %gw = coll.wait_tensor %g : tensor<128xi1>
    return %aw, %bw, %cw, %gw : tensor<64xi1>, tensor<64xi1>, tensor<64xi1>, tensor<128xi1>
  }
}
