//! Transposes of transposes around GEMMs, as autograd leaves them around every linear layer
//! (`comm-to-rt`'s `fold_double_transposes`), and pure ops whose results nothing reads
//! (`erase_dead_compute`): run on the host against the sim, and the lowering checked to launch
//! no kernel for them.

mod common;
use common::kernel_check::check;
use common::lower;

const PIPELINE: &str = "builtin.module(func.func(coll-to-comm))";

/// A linear layer's forward and backward the way the exporter traces it: the weight's
/// transpose for the forward, transposed back for the input gradient; the weight gradient
/// computed transposed and transposed back; a permute of rank 3 swapping the last two dims.
const LINEAR: &str = "func.func @f(%x: tensor<6x5xf32>, %w: tensor<7x5xf32>, %g: tensor<6x7xf32>, %z: tensor<2x3x4xf32>) -> (tensor<6x7xf32>, tensor<6x5xf32>, tensor<7x5xf32>, tensor<2x3x4xf32>, tensor<5x7xf32>) {
  %wt = compute.transpose %w : (tensor<7x5xf32>) -> tensor<5x7xf32>
  %y = compute.matmul %x, %wt : (tensor<6x5xf32>, tensor<5x7xf32>) -> tensor<6x7xf32>
  %wtt = compute.transpose %wt : (tensor<5x7xf32>) -> tensor<7x5xf32>
  %dx = compute.matmul %g, %wtt : (tensor<6x7xf32>, tensor<7x5xf32>) -> tensor<6x5xf32>
  %xt = compute.transpose %x : (tensor<6x5xf32>) -> tensor<5x6xf32>
  %dwt = compute.matmul %xt, %g : (tensor<5x6xf32>, tensor<6x7xf32>) -> tensor<5x7xf32>
  %dwtt = compute.transpose %dwt : (tensor<5x7xf32>) -> tensor<7x5xf32>
  %zp = compute.permute %z {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %zpp = compute.permute %zp {perm = array<i64: 0, 2, 1>} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
  %kept = compute.transpose %dwtt : (tensor<7x5xf32>) -> tensor<5x7xf32>
  %dead = compute.transpose %dwt : (tensor<5x7xf32>) -> tensor<7x5xf32>
  %dead2 = compute.neg %dead : tensor<7x5xf32>
  return %y, %dx, %dwtt, %zpp, %kept : tensor<6x7xf32>, tensor<6x5xf32>, tensor<7x5xf32>, tensor<2x3x4xf32>, tensor<5x7xf32>
}";

#[test]
fn double_transposes_run_as_the_sim_computes_them() {
    check(LINEAR, 3);
}

#[test]
fn double_transposes_launch_no_kernel() {
    let mut ctx = commlir_ir::Context::new();
    let m = lower(&mut ctx, LINEAR, PIPELINE);
    let text = commlir_ir::printer::print_op(&ctx, m, &Default::default());
    // The forward's transpose is read by cuBLAS transposed; the transposes of transposes are
    // folded away; the dead chain launches nothing; only the last transpose (of a value that is itself a folded double
    // transpose: a plain transpose of the GEMM result) remains a kernel.
    assert_eq!(text.matches("rt.launch").count(), 1, "{text}");
    assert_eq!(text.matches("rt.gemm").count(), 3, "{text}");
}
