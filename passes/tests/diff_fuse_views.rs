//! Differential tests of `coll-fuse-matmul` through views: programs whose collectives reach
//! their matmuls through reshapes and slice/concat groups (as PyTorch's sequence-parallel
//! exports do) give the same sim digests before and after the pass, on 2 and 4 ranks; the
//! patterns whose rank blocks are whole rows of the matmul are fused, the others are not.
//! The exported small Llama block runs through the whole comm pipeline unchanged as well.

mod common;

use common::{parse, print, run_pipeline, sim};

const FUSE: &str = "builtin.module(func.func(coll-fuse-matmul{ignore-cost=true}))";

/// The number of ops named `name` in `ir`.
fn count(ir: &str, name: &str) -> usize {
    ir.matches(&format!(" {name} ")).count()
}

/// Runs `text` on the sim before and after `pipeline`; returns the rewritten IR.
fn check(text: &str, pipeline: &str, ranks: usize) -> String {
    let mut ctx = commlir_ir::Context::new();
    let m = parse(&mut ctx, text);
    let before = sim(&ctx, m, ranks, 5);
    assert!(!before.starts_with("error"), "{before}\n{text}");
    run_pipeline(&mut ctx, m, pipeline, text);
    commlir_ir::verify::verify(&ctx, m)
        .unwrap_or_else(|_| panic!("invalid after the pipeline:\n{}", print(&ctx, m)));
    let ir = print(&ctx, m);
    assert_eq!(before, sim(&ctx, m, ranks, 5), "digests changed:\n{ir}");
    ir
}

/// Gather side on `g` ranks: a 1×4×16 shard reaches two matmuls through reshapes (K = 16,
/// and K = 32 for the second), one `b` a transpose defined after the first matmul, and an
/// elementwise user of the gathered tensor after them.
fn gather_views(g: usize) -> String {
    let m = 4 * g;
    let m2 = 2 * g;
    format!(
        r#"module {{
  coll.group @tp {{size = {g} : i64, symm_mem}}
  func.func @f(%x: tensor<1x4x16xf32>, %w1: tensor<16x8xf32>, %w2t: tensor<8x16xf32>, %w3: tensor<32x8xf32>) -> (tensor<{m}x8xf32>, tensor<{m}x8xf32>, tensor<{g}x4x16xf32>, tensor<{m2}x8xf32>) {{
    %ga = coll.all_gather_into_tensor %x {{group = @tp}} : (tensor<1x4x16xf32>) -> tensor<{g}x4x16xf32>
    %w = coll.wait_tensor %ga : tensor<{g}x4x16xf32>
    %v = compute.reshape %w : (tensor<{g}x4x16xf32>) -> tensor<1x{m}x16xf32>
    %v1 = compute.reshape %v : (tensor<1x{m}x16xf32>) -> tensor<{m}x16xf32>
    %m1 = compute.matmul %v1, %w1 : (tensor<{m}x16xf32>, tensor<16x8xf32>) -> tensor<{m}x8xf32>
    %t = compute.transpose %w2t : (tensor<8x16xf32>) -> tensor<16x8xf32>
    %v2 = compute.reshape %v : (tensor<1x{m}x16xf32>) -> tensor<{m}x16xf32>
    %m2 = compute.matmul %v2, %t : (tensor<{m}x16xf32>, tensor<16x8xf32>) -> tensor<{m}x8xf32>
    %e = compute.exp %w : tensor<{g}x4x16xf32>
    %v3 = compute.reshape %w : (tensor<{g}x4x16xf32>) -> tensor<{m2}x32xf32>
    %m3 = compute.matmul %v3, %w3 : (tensor<{m2}x32xf32>, tensor<32x8xf32>) -> tensor<{m2}x8xf32>
    return %m1, %m2, %e, %m3 : tensor<{m}x8xf32>, tensor<{m}x8xf32>, tensor<{g}x4x16xf32>, tensor<{m2}x8xf32>
  }}
}}"#
    )
}

/// Gather side, left alone: K = 8 does not divide a 12-element shard, and batch 2 where the
/// slice/concat puts the rank blocks of one batch row side by side.
fn gather_not_fused(g: usize) -> String {
    let m = 3 * g / 2;
    let (b4, s8, rb) = (2 * g, 4 * g, 8 * g);
    let mut slices = String::new();
    let mut names = Vec::new();
    for r in 0..g {
        slices += &format!(
            "    %s{r} = compute.slice %wb {{dim = 0 : i64, start = {} : i64, size = 2 : i64}} : (tensor<{b4}x4x16xf32>) -> tensor<2x4x16xf32>\n",
            2 * r
        );
        names.push(format!("%s{r}"));
    }
    let tys = vec!["tensor<2x4x16xf32>"; g].join(", ");
    let names = names.join(", ");
    format!(
        r#"module {{
  coll.group @tp {{size = {g} : i64, symm_mem}}
  func.func @f(%x: tensor<1x3x4xf32>, %b: tensor<8x8xf32>, %xb: tensor<2x4x16xf32>, %b2: tensor<16x8xf32>) -> (tensor<{m}x8xf32>, tensor<{rb}x8xf32>) {{
    %ga = coll.all_gather_into_tensor %x {{group = @tp}} : (tensor<1x3x4xf32>) -> tensor<{g}x3x4xf32>
    %w = coll.wait_tensor %ga : tensor<{g}x3x4xf32>
    %v = compute.reshape %w : (tensor<{g}x3x4xf32>) -> tensor<{m}x8xf32>
    %mm = compute.matmul %v, %b : (tensor<{m}x8xf32>, tensor<8x8xf32>) -> tensor<{m}x8xf32>
    %gb = coll.all_gather_into_tensor %xb {{group = @tp}} : (tensor<2x4x16xf32>) -> tensor<{b4}x4x16xf32>
    %wb = coll.wait_tensor %gb : tensor<{b4}x4x16xf32>
{slices}    %c = compute.concat {names} {{dim = 1 : i64}} : ({tys}) -> tensor<2x{s8}x16xf32>
    %vb = compute.reshape %c : (tensor<2x{s8}x16xf32>) -> tensor<{rb}x16xf32>
    %mb = compute.matmul %vb, %b2 : (tensor<{rb}x16xf32>, tensor<16x8xf32>) -> tensor<{rb}x8xf32>
    return %mm, %mb : tensor<{m}x8xf32>, tensor<{rb}x8xf32>
  }}
}}"#
    )
}

/// Reduce-scatter side: product → reshape → `batch`×(4·G)×8 → G slices of 4 sequence rows
/// (in the order `order`) → concat on dim 0 → reduce-scatter. A layout identity only for
/// batch 1 in rank order.
fn scatter_views(g: usize, batch: usize, order: &[usize]) -> String {
    let s = 4 * g;
    let rows = batch * s;
    let mut slices = String::new();
    let mut names = Vec::new();
    for (i, r) in order.iter().enumerate() {
        slices += &format!(
            "    %s{i} = compute.slice %r {{dim = 1 : i64, start = {} : i64, size = 4 : i64}} : (tensor<{batch}x{s}x8xf32>) -> tensor<{batch}x4x8xf32>\n",
            4 * r
        );
        names.push(format!("%s{i}"));
    }
    let tys = vec![format!("tensor<{batch}x4x8xf32>"); g].join(", ");
    let names = names.join(", ");
    let gb = g * batch;
    format!(
        r#"module {{
  coll.group @tp {{size = {g} : i64, symm_mem}}
  func.func @f(%a: tensor<{rows}x16xf32>, %b: tensor<16x8xf32>) -> tensor<{batch}x4x8xf32> {{
    %p = compute.matmul %a, %b : (tensor<{rows}x16xf32>, tensor<16x8xf32>) -> tensor<{rows}x8xf32>
    %r = compute.reshape %p : (tensor<{rows}x8xf32>) -> tensor<{batch}x{s}x8xf32>
{slices}    %c = compute.concat {names} {{dim = 0 : i64}} : ({tys}) -> tensor<{gb}x4x8xf32>
    %rs = coll.reduce_scatter_tensor %c {{reduce_op = "sum", group = @tp}} : (tensor<{gb}x4x8xf32>) -> tensor<{batch}x4x8xf32>
    %w = coll.wait_tensor %rs : tensor<{batch}x4x8xf32>
    return %w : tensor<{batch}x4x8xf32>
  }}
}}"#
    )
}

#[test]
fn gather_views_fuse_with_unchanged_digests() {
    for g in [2, 4] {
        let ir = check(&gather_views(g), FUSE, g);
        // Both K = 16 matmuls join one fused op; the K = 32 view needs another `a` and stays.
        assert_eq!(count(&ir, "symm.fused_all_gather_matmul"), 1, "{ir}");
        assert_eq!(count(&ir, "compute.matmul"), 1, "{ir}");
        assert!(ir.contains("return_a"), "{ir}");
        let ir = check(&gather_not_fused(g), FUSE, g);
        assert_eq!(count(&ir, "symm.fused_all_gather_matmul"), 0, "{ir}");
    }
}

#[test]
fn scatter_views_fuse_only_as_layout_identities() {
    for g in [2, 4] {
        let in_order: Vec<usize> = (0..g).collect();
        let ir = check(&scatter_views(g, 1, &in_order), FUSE, g);
        assert_eq!(count(&ir, "symm.fused_matmul_reduce_scatter"), 1, "{ir}");
        assert_eq!(count(&ir, "compute.concat"), 0, "{ir}");
        let swapped: Vec<usize> = (0..g).rev().collect();
        let ir = check(&scatter_views(g, 1, &swapped), FUSE, g);
        assert_eq!(count(&ir, "symm.fused_matmul_reduce_scatter"), 0, "{ir}");
        let ir = check(&scatter_views(g, 2, &in_order), FUSE, g);
        assert_eq!(count(&ir, "symm.fused_matmul_reduce_scatter"), 0, "{ir}");
    }
}

const LLAMA_SP: &str = include_str!("inputs/llama_block_sp_tp2.mlir");

/// The exported sequence-parallel Llama block: both all-gathers (attention q/k/v and MLP
/// w1/w3) and both reduce-scatters (wo and w2) fuse through the exporter's views, and the sim
/// results stay bit-identical, after the fusion alone and through the comm pipeline.
#[test]
fn exported_llama_sp_block_fuses_through_views() {
    let ir = check(LLAMA_SP, FUSE, 2);
    assert_eq!(count(&ir, "symm.fused_all_gather_matmul"), 2, "{ir}");
    assert_eq!(count(&ir, "symm.fused_matmul_reduce_scatter"), 2, "{ir}");
    assert_eq!(count(&ir, "coll.all_gather_into_tensor"), 0, "{ir}");
    assert_eq!(count(&ir, "coll.reduce_scatter_tensor"), 0, "{ir}");
    // q, k and v share one gather, w1 and w3 the other.
    assert!(
        ir.contains("symm.fused_all_gather_matmul %")
            && ir.contains(":3 = symm.fused_all_gather_matmul"),
        "{ir}"
    );
    let full = "builtin.module(func.func(coll-fuse-matmul{ignore-cost=true},coll-to-comm,\
        comm-overlap-schedule,comm-plan-pools))";
    let ir = check(LLAMA_SP, full, 2);
    assert_eq!(count(&ir, "symm.fused_all_gather_matmul"), 2, "{ir}");
}
