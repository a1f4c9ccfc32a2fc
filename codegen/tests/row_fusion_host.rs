//! Row reductions fused with the chains around them (`fusion`, *Row reductions*;
//! `kernels::rows`): RMSNorm as PyTorch exports it is one kernel, checked against the sim
//! backend on the host JIT (`common::kernel_check`) for every float type, row lengths that are
//! and are not multiples of the vector width (the vector walks with and without the row in
//! registers, the scalar walk), one row, broadcast weights, reduce_max, and reductions without
//! an epilogue. On the host a block is one thread, which walks each row in order: the sim's
//! summation order, so the values are the sim's (a NaN's sign may differ, LLVM reassociates
//! negations); on the GPU the block's sum order differs, as for the standalone reduce_sum.

mod common;
use commlir_runtime::inputs::SplitMix64;
use commlir_runtime::{ElemType, Tensor, TensorType};
use common::kernel_check::{check_inputs_within, check_within};
use common::launches;

fn elem(t: &str) -> ElemType {
    match t {
        "f32" => ElemType::F32,
        "bf16" => ElemType::BF16,
        "f16" => ElemType::F16,
        _ => unreachable!(),
    }
}

fn uniform(shape: &[usize], e: ElemType, lo: f64, hi: f64, g: &mut SplitMix64) -> Tensor {
    let ty = TensorType {
        elem: e,
        shape: shape.to_vec(),
    };
    let vals: Vec<f64> = (0..ty.numel())
        .map(|_| lo + (hi - lo) * (g.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        .collect();
    Tensor::from_f64(ty, &vals)
}

/// RMSNorm of `b×rows×len` activations of type `t` with a weight of `len`, as exported from
/// PyTorch (`x.float()`, `pow(2).mean(-1, keepdim)`, `+ eps`, `rsqrt`, back to `t`, `* w`).
fn rmsnorm(t: &str, (b, rows, len): (usize, usize, usize)) -> String {
    let xt = format!("tensor<{b}x{rows}x{len}x{t}>");
    let xf = format!("tensor<{b}x{rows}x{len}xf32>");
    let mr = format!("tensor<{b}x{rows}xf32>");
    let m1 = format!("tensor<{b}x{rows}x1xf32>");
    let inv = 1.0 / len as f64;
    format!(
        "func.func @f(%x: {xt}, %w: tensor<{len}x{t}>) -> {xt} {{
  %xc = compute.cast %x : ({xt}) -> {xf}
  %p = compute.mul %xc, %xc : {xf}
  %s = compute.reduce_sum %p {{dim = 2 : i64}} : ({xf}) -> {mr}
  %m = compute.scale %s {{factor = {inv:.17e} : f64}} : {mr}
  %mv = compute.reshape %m : ({mr}) -> {m1}
  %e = compute.fill {{value = 1.0e-06 : f64}} : {m1}
  %a = compute.add %mv, %e : {m1}
  %r = compute.rsqrt %a : {m1}
  %rb = compute.broadcast %r : ({m1}) -> {xf}
  %n = compute.mul %xc, %rb : {xf}
  %nc = compute.cast %n : ({xf}) -> {xt}
  %wb = compute.broadcast %w : (tensor<{len}x{t}>) -> {xt}
  %y = compute.mul %nc, %wb : {xt}
  return %y : {xt}
}}"
    )
}

const SIZES: [(usize, usize, usize); 6] = [
    // One vector per row (the row in registers even with the host's one-thread block),
    // rows a multiple of every vector width (the streaming vector walk), lengths that are
    // not (the scalar walk), one row, a long row.
    (1, 3, 8),
    (2, 5, 64),
    (1, 4, 10),
    (1, 1, 16),
    (1, 1, 13),
    (1, 2, 1000),
];

#[test]
fn rmsnorm_is_one_kernel() {
    for t in ["bf16", "f16", "f32"] {
        for dims in SIZES {
            let text = rmsnorm(t, dims);
            assert_eq!(
                launches(&text),
                ["cast_mul_reduce_sum_scale_reshape_fill_add_rsqrt_mul_cast_mul"],
                "{t} {dims:?}"
            );
            // Tame activations (the values a network sees) and the whole range.
            let (b, rows, len) = dims;
            let sets = (0..2)
                .map(|r| {
                    let mut g = SplitMix64::new(0x4a5 + r);
                    vec![
                        uniform(&[b, rows, len], elem(t), -3.0, 3.0, &mut g),
                        uniform(&[len], elem(t), 0.5, 1.5, &mut g),
                    ]
                })
                .collect();
            check_inputs_within(&text, sets, 0);
            check_within(&text, 2, 0);
        }
    }
}

#[test]
fn reductions_with_and_without_epilogues() {
    for t in ["bf16", "f32"] {
        for (rows, len) in [(3, 16), (2, 7), (1, 8)] {
            let x = format!("tensor<{rows}x{len}x{t}>");
            let r = format!("tensor<{rows}x{t}>");
            let r1 = format!("tensor<{rows}x1x{t}>");
            // x - max(x) along the row (a softmax's first step), then exp; the sum of
            // squares alone (stored per row); a per-row chain without an epilogue; a per-row
            // value that is also returned (the epilogue stays a kernel of its own).
            let text = format!(
                "func.func @f(%x: {x}, %y: {x}, %z: {x}) -> ({x}, {r}, {r}, {x}, {r1}) {{
  %m = compute.reduce_max %x {{dim = 1 : i64}} : ({x}) -> {r}
  %mv = compute.reshape %m : ({r}) -> {r1}
  %mb = compute.broadcast %mv : ({r1}) -> {x}
  %d = compute.sub %x, %mb : {x}
  %e = compute.exp %d : {x}
  %q = compute.mul %y, %y : {x}
  %s = compute.reduce_sum %q {{dim = 1 : i64}} : ({x}) -> {r}
  %zn = compute.neg %z : {x}
  %s2 = compute.reduce_sum %zn {{dim = 1 : i64}} : ({x}) -> {r}
  %s3 = compute.scale %s2 {{factor = 0.5 : f64}} : {r}
  %s4 = compute.reduce_sum %y {{dim = 1 : i64}} : ({x}) -> {r}
  %s4v = compute.reshape %s4 : ({r}) -> {r1}
  %s4b = compute.broadcast %s4v : ({r1}) -> {x}
  %u = compute.mul %z, %s4b : {x}
  return %e, %s, %s3, %u, %s4v : {x}, {r}, {r}, {x}, {r1}
}}"
            );
            assert_eq!(
                launches(&text),
                [
                    "reduce_max_reshape_sub_exp",
                    "mul_reduce_sum",
                    "neg_reduce_sum_scale",
                    "reduce_sum_reshape",
                    "mul"
                ],
                "{t} {rows}x{len}"
            );
            check_within(&text, 2, 0);
            let sets = (0..2)
                .map(|s| {
                    let mut g = SplitMix64::new(0x77 + s);
                    (0..3)
                        .map(|_| uniform(&[rows, len], elem(t), -2.0, 2.0, &mut g))
                        .collect()
                })
                .collect();
            // exp is a polynomial: within an ulp.
            check_inputs_within(&text, sets, 1);
        }
    }
}

#[test]
fn what_does_not_join_a_row_kernel() {
    // A prologue value also returned is stored by its own kernel and read back; a reduction
    // along a dim that is not the last stays on its own; a prologue value the epilogue reads
    // transposed (another row's element) is stored too.
    let text = "func.func @f(%x: tensor<4x8xf32>, %v: tensor<8x4xf32>, %q: tensor<4x4xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4x4xf32>) {
  %c = compute.neg %x : tensor<4x8xf32>
  %s = compute.reduce_sum %c {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>
  %sv = compute.reshape %s : (tensor<4xf32>) -> tensor<4x1xf32>
  %sb = compute.broadcast %sv : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %y = compute.div %c, %sb : tensor<4x8xf32>
  %k = compute.reduce_sum %v {dim = 0 : i64} : (tensor<8x4xf32>) -> tensor<4xf32>
  %w = compute.exp %q : tensor<4x4xf32>
  %m = compute.reduce_max %w {dim = 1 : i64} : (tensor<4x4xf32>) -> tensor<4xf32>
  %mv = compute.reshape %m : (tensor<4xf32>) -> tensor<4x1xf32>
  %mb = compute.broadcast %mv : (tensor<4x1xf32>) -> tensor<4x4xf32>
  %wt = compute.transpose %w : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %o = compute.sub %wt, %mb : tensor<4x4xf32>
  return %c, %y, %k, %o : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4x4xf32>
}";
    assert_eq!(
        launches(text),
        [
            "neg",
            "reduce_sum_reshape_div",
            "reduce_sum",
            "exp",
            "reduce_max_reshape_sub"
        ]
    );
    check_within(text, 2, 1);
}
