//! Widening casts recomputed at their readers (`comm-to-rt`'s `rematerialize_upcasts`): a bf16
//! activation upcast once and read early and late (as a training step's forward and backward
//! read it) runs as the sim computes it, and no kernel stores the f32 copy.

mod common;
use common::kernel_check::check_within;
use common::lower;

/// A bf16 input upcast, read by the forward's SiLU right away and, after a long stretch of
/// other work (40 matmuls standing in for the rest of a step), by a late product.
fn step() -> String {
    let mut t = String::from(
        "func.func @f(%x: tensor<8x16xbf16>, %w: tensor<16x16xf32>, %g: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %xf = compute.cast %x : (tensor<8x16xbf16>) -> tensor<8x16xf32>
  %s = compute.sigmoid %xf : tensor<8x16xf32>
  %h0 = compute.mul %xf, %s : tensor<8x16xf32>
",
    );
    for i in 0..40 {
        t += &format!(
            "  %h{} = compute.matmul %h{i}, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>\n",
            i + 1
        );
    }
    t += "  %d = compute.mul %g, %xf : tensor<8x16xf32>
  %e = compute.add %d, %h40 : tensor<8x16xf32>
  return %h40, %e : tensor<8x16xf32>, tensor<8x16xf32>
}";
    t
}

#[test]
fn recomputed_upcasts_run_as_the_sim_computes_them() {
    // Values identical; a NaN (random input bits) may come out of the GEMM with another sign.
    check_within(&step(), 2, 0);
}

#[test]
fn no_kernel_stores_the_wide_copy() {
    let mut ctx = commlir_ir::Context::new();
    let m = lower(&mut ctx, &step(), "builtin.module(func.func(coll-to-comm))");
    let text = commlir_ir::printer::print_op(&ctx, m, &Default::default());
    // The forward's SiLU and the late product each cast in their own fused kernel: the f32
    // copy is never stored, so it is not live across the 40 GEMMs.
    let launches: Vec<&str> = text.lines().filter(|l| l.contains("rt.launch")).collect();
    assert_eq!(launches.len(), 2, "{text}");
    assert!(
        launches.iter().all(|l| l.contains("%arg0")),
        "every kernel reads the bf16 source itself:\n{text}"
    );
}
