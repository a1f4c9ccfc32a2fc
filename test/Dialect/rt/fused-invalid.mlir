// RUN: commlir-opt %s --split-input-file --verify-diagnostics

// The rt form of a reduce-scatter pipeline with an elementwise epilogue: its attributes come
// together, and it has no accumulating parts.

coll.group @tp {size = 2 : i64, symm_mem}
// expected-error @below {{'epilogue' and 'epilogue_operand' must be given together}}
rt.symm_fused_kernel @s0 {dtype = "bf16", epilogue = @k0, kind = "matmul_reduce_scatter", outer = 1 : i64, reduce_op = "sum", seg = 128 : i64, world = 2 : i64}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
// expected-error @below {{an 'epilogue' is only fused into a matmul_reduce_scatter}}
rt.symm_fused_kernel @s0 {dtype = "bf16", epilogue = @k0, epilogue_operand = 0 : i64, kind = "all_gather_matmul", outer = 1 : i64, seg = 128 : i64, world = 2 : i64}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @f(%w: !rt.pool, %a: memref<16x16xbf16>, %b: memref<16x24xbf16>, %y: memref<8x24xbf16>, %x: memref<8x24xbf16>) {
  // expected-error @below {{epilogue operands without an 'epilogue'}}
  rt.symm_fused_matmul_reduce_scatter %w, %a, %b, %y, %x {a_step = 128 : i64, a_stride = 0 : i64, b_step = 0 : i64, batch = 1 : i64, block = 32 : i64, chunk = 192 : i64, dtype = "bf16", grid = 1 : i64, group = @tp, k = 16 : i64, kernel = @s1, ldb = 24 : i64, m = 8 : i64, n = 24 : i64, offset = 0 : i64, reduce_op = "sum"} : (!rt.pool, memref<16x16xbf16>, memref<16x24xbf16>, memref<8x24xbf16>, memref<8x24xbf16>) -> ()
  return
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @f(%w: !rt.pool, %a: memref<16x16xbf16>, %b: memref<16x24xbf16>, %y: memref<8x24xbf16>, %x: memref<8x24xbf16>) {
  // expected-error @below {{an 'epilogue' requires 'epilogue_grid' and 'epilogue_block'}}
  rt.symm_fused_matmul_reduce_scatter %w, %a, %b, %y, %x {a_step = 128 : i64, a_stride = 0 : i64, b_step = 0 : i64, batch = 1 : i64, block = 32 : i64, chunk = 192 : i64, dtype = "bf16", epilogue = @k0, epilogue_operand = 1 : i64, grid = 1 : i64, group = @tp, k = 16 : i64, kernel = @s1, ldb = 24 : i64, m = 8 : i64, n = 24 : i64, offset = 0 : i64, reduce_op = "sum"} : (!rt.pool, memref<16x16xbf16>, memref<16x24xbf16>, memref<8x24xbf16>, memref<8x24xbf16>) -> ()
  return
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @f(%w: !rt.pool, %a: memref<16x16xbf16>, %b: memref<16x24xbf16>, %y: memref<8x24xbf16>, %x: memref<8x24xbf16>) {
  // expected-error @below {{an 'epilogue' needs the reduction after the last GEMM, not 'parts'}}
  rt.symm_fused_matmul_reduce_scatter %w, %a, %b, %y, %x {a_step = 128 : i64, a_stride = 0 : i64, b_step = 0 : i64, batch = 1 : i64, block = 32 : i64, chunk = 192 : i64, copy_engine, dtype = "bf16", epilogue = @k0, epilogue_block = 256 : i64, epilogue_grid = 1 : i64, epilogue_operand = 1 : i64, grid = 1 : i64, group = @tp, k = 16 : i64, kernel = @s1, ldb = 24 : i64, m = 8 : i64, n = 24 : i64, offset = 0 : i64, parts = 2 : i64, reduce_op = "sum"} : (!rt.pool, memref<16x16xbf16>, memref<16x24xbf16>, memref<8x24xbf16>, memref<8x24xbf16>) -> ()
  return
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @f(%w: !rt.pool, %a: memref<16x16xbf16>, %b: memref<16x24xbf16>, %y: memref<8x24xbf16>, %x: memref<8x24xbf16>) {
  // expected-error @below {{'epilogue_operand' is past the epilogue kernel's inputs}}
  rt.symm_fused_matmul_reduce_scatter %w, %a, %b, %y, %x {a_step = 128 : i64, a_stride = 0 : i64, b_step = 0 : i64, batch = 1 : i64, block = 32 : i64, chunk = 192 : i64, dtype = "bf16", epilogue = @k0, epilogue_block = 256 : i64, epilogue_grid = 1 : i64, epilogue_operand = 2 : i64, grid = 1 : i64, group = @tp, k = 16 : i64, kernel = @s1, ldb = 24 : i64, m = 8 : i64, n = 24 : i64, offset = 0 : i64, reduce_op = "sum"} : (!rt.pool, memref<16x16xbf16>, memref<16x24xbf16>, memref<8x24xbf16>, memref<8x24xbf16>) -> ()
  return
}

// -----

coll.group @tp {size = 2 : i64, symm_mem}
func.func @f(%w: !rt.pool, %a: memref<16x16xbf16>, %b: memref<16x24xbf16>) {
  // expected-error @below {{expected at least 4 operands, but found 3}}
  rt.symm_fused_matmul_reduce_scatter %w, %a, %b {a_step = 128 : i64, a_stride = 0 : i64, b_step = 0 : i64, batch = 1 : i64, block = 32 : i64, chunk = 192 : i64, dtype = "bf16", grid = 1 : i64, group = @tp, k = 16 : i64, kernel = @s1, ldb = 24 : i64, m = 8 : i64, n = 24 : i64, offset = 0 : i64, reduce_op = "sum"} : (!rt.pool, memref<16x16xbf16>, memref<16x24xbf16>) -> ()
  return
}

// -----

// A pushing all-gather writes into its peers' mappings of the receiving pool.
coll.group @dp {size = 2 : i64, symm_mem}
func.func @f(%w: memref<16x32xbf16>, %g: memref<32x32xbf16>) {
  // expected-error @below {{'push_kernel' needs a !rt.pool to receive into, got memref<32x32xbf16>}}
  rt.nccl_all_gather %w, %g {dtype = "bf16", group = @dp, push_kernel = @s0, recv_offset = 0 : i64, send_count = 512 : i64, send_offset = 0 : i64} : (memref<16x32xbf16>, memref<32x32xbf16>) -> ()
  return
}
