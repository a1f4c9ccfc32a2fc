//! `compute.attention` lowered for the GPU (two `rt.gemm`s around the generated
//! `rt.attention_softmax` kernel) and run on the host against the sim: the GEMMs' geometry
//! (transposes, leading dimensions, strides, f32 scores from f16/bf16 operands), the scale,
//! the causal mask and the softmax kernel's vector, scalar and streaming paths.
//! The inputs are tame (scores of a few units, positive values), since attention on random
//! bit patterns is NaN everywhere; the kernel's exp is a polynomial, so results are compared
//! within a few ulp.

mod common;
use commlir_runtime::inputs::SplitMix64;
use commlir_runtime::{ElemType, Tensor, TensorType};
use common::kernel_check::check_inputs_within;

fn uniform(shape: &[usize], elem: ElemType, lo: f64, hi: f64, g: &mut SplitMix64) -> Tensor {
    let ty = TensorType {
        elem,
        shape: shape.to_vec(),
    };
    let vals: Vec<f64> = (0..ty.numel())
        .map(|_| lo + (hi - lo) * (g.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        .collect();
    Tensor::from_f64(ty, &vals)
}

fn shape_str(s: &[usize], t: &str) -> String {
    let dims: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("tensor<{}x{t}>", dims.join("x"))
}

/// Attention of `q: lead×lq×d`, `k: lead×lk×d`, `v: lead×lk×dv` in `t`, two input sets.
fn attend(
    lead: &[usize],
    (lq, lk, d, dv): (usize, usize, usize, usize),
    t: &str,
    causal: bool,
    ulps: u32,
) {
    let elem = match t {
        "f32" => ElemType::F32,
        "bf16" => ElemType::BF16,
        "f16" => ElemType::F16,
        _ => unreachable!(),
    };
    let with = |a: usize, b: usize| {
        let mut s = lead.to_vec();
        s.extend([a, b]);
        s
    };
    let (sq, sk, sv, so) = (with(lq, d), with(lk, d), with(lk, dv), with(lq, dv));
    let scale = 1.0 / (d as f64).sqrt();
    let attrs = if causal {
        format!("{{causal, scale = {scale:.17e} : f64}}")
    } else {
        format!("{{scale = {scale:.17e} : f64}}")
    };
    let (tq, tk, tv, to) = (
        shape_str(&sq, t),
        shape_str(&sk, t),
        shape_str(&sv, t),
        shape_str(&so, t),
    );
    let text = format!(
        "func.func @f(%q: {tq}, %k: {tk}, %v: {tv}) -> {to} {{
  %o = compute.attention %q, %k, %v {attrs} : ({tq}, {tk}, {tv}) -> {to}
  return %o : {to}
}}"
    );
    let sets = (0..2)
        .map(|r| {
            let mut g = SplitMix64::new(0xa77 + r);
            vec![
                uniform(&sq, elem, -2.0, 2.0, &mut g),
                uniform(&sk, elem, -2.0, 2.0, &mut g),
                uniform(&sv, elem, 0.5, 1.5, &mut g),
            ]
        })
        .collect();
    check_inputs_within(&text, sets, ulps);
}

#[test]
fn attention_matches_the_sim_in_every_float_type() {
    // Rows of 16 keys: 16-byte vectors (f32 scores, 4 per vector).
    for t in ["f32", "bf16", "f16"] {
        attend(&[2, 3], (16, 16, 8, 8), t, false, 4);
        attend(&[2, 3], (16, 16, 8, 8), t, true, 4);
    }
}

#[test]
fn attention_rows_in_registers() {
    // The host runs one thread per block, so only a row of one vector (4 f32 scores) takes
    // the registers path here; the GPU check (bench/gpu/attention_check.mlir) runs the rest.
    for t in ["f32", "bf16"] {
        attend(&[2, 3], (6, 4, 8, 8), t, false, 4);
        attend(&[2, 3], (4, 4, 8, 8), t, true, 4);
    }
}

#[test]
fn attention_with_unequal_lengths_and_value_width() {
    // 13 keys (not a whole number of vectors: the scalar path), 17 queries, dv ≠ d, causal
    // with more queries than keys (late rows see every key).
    for t in ["f32", "bf16"] {
        attend(&[3], (17, 13, 8, 5), t, false, 4);
        attend(&[3], (17, 13, 8, 5), t, true, 4);
        attend(&[1, 2, 2], (5, 9, 4, 6), t, true, 4);
    }
}

#[test]
fn causal_attention_of_many_rows() {
    // 512 queries, each row reading only the scores up to its position.
    attend(&[2], (512, 512, 8, 4), "bf16", true, 4);
    // f32 rows of up to 512 probabilities, each a few ulp from the sim's (the kernel's exp
    // is a polynomial): their weighted sums drift by more than a few ulp.
    attend(&[1], (512, 512, 4, 4), "f32", true, 32);
}

#[test]
fn attention_rows_longer_than_the_registers_stream() {
    // 8200 keys: more than the softmax kernel keeps in registers (8 vectors of 4 f32 per
    // thread at 256 threads), so the row is streamed three times.
    attend(&[1], (2, 8200, 4, 4), "bf16", true, 4);
    attend(&[1], (2, 8200, 4, 4), "f32", false, 4);
}
