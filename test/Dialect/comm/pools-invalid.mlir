// RUN: commlir-opt %s --split-input-file --verify-diagnostics

coll.group @tp {size = 2 : i64}
func.func @misaligned(%x: tensor<4xf32>) {
  %p = comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 128 : i64} : !comm.pool
  // expected-note @above {{the pool}}
  // expected-error @below {{slot offset 16 is not a multiple of the pool alignment 64}}
  %b = compute.clone %x {comm.slot = array<i64: 16, 16>} : (tensor<4xf32>) -> tensor<4xf32, #comm.buffer<nccl, @tp>>
  comm.pool_release %p : !comm.pool
  return
}

// -----

coll.group @tp {size = 2 : i64}
func.func @outside(%x: tensor<4xf32>) {
  %p = comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 64 : i64} : !comm.pool
  // expected-note @above {{the pool}}
  // expected-error @below {{slot [64, 80) exceeds the pool's 64 bytes}}
  %b = compute.clone %x {comm.slot = array<i64: 64, 16>} : (tensor<4xf32>) -> tensor<4xf32, #comm.buffer<nccl, @tp>>
  comm.pool_release %p : !comm.pool
  return
}

// -----

coll.group @tp {size = 2 : i64}
func.func @too_small(%x: tensor<4xf32>) {
  %p = comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 64 : i64} : !comm.pool
  // expected-note @above {{the pool}}
  // expected-error @below {{slot of 8 bytes is smaller than its buffer (16 bytes)}}
  %b = compute.clone %x {comm.slot = array<i64: 0, 8>} : (tensor<4xf32>) -> tensor<4xf32, #comm.buffer<nccl, @tp>>
  comm.pool_release %p : !comm.pool
  return
}

// -----

coll.group @tp {size = 2 : i64}
func.func @two_pools() {
  %p = comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 64 : i64} : !comm.pool
  // expected-note @above {{the first pool}}
  // expected-error @below {{a second nccl pool of group @tp in one function}}
  %q = comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 64 : i64} : !comm.pool
  comm.pool_release %p : !comm.pool
  comm.pool_release %q : !comm.pool
  return
}

// -----

coll.group @tp {size = 2 : i64}
func.func @unreleased() {
  // expected-error @below {{must be released by exactly one 'comm.pool_release'}}
  %p = comm.pool {alignment = 64 : i64, group = @tp, kind = "nccl", size = 64 : i64} : !comm.pool
  return
}

// -----

coll.group @tp {size = 2 : i64}
func.func @alignment() {
  // expected-error @below {{alignment 48 is not a power of two}}
  %p = comm.pool {alignment = 48 : i64, group = @tp, kind = "nccl", size = 64 : i64} : !comm.pool
  comm.pool_release %p : !comm.pool
  return
}

// -----

func.func @no_group() {
  // expected-error @below {{group @nope does not reference a 'coll.group'}}
  %p = comm.pool {alignment = 64 : i64, group = @nope, kind = "symm_mem", size = 64 : i64} : !comm.pool
  comm.pool_release %p : !comm.pool
  return
}
