//! The kernels of the model ops (broadcast, permute, reduce_max, compare, select, iota, sin,
//! cos, log, sigmoid) against the sim backend on the host JIT (`common::kernel_check`):
//! random inputs over each type's whole range (NaN and infinities included), aligned and
//! misaligned buffers. Data movement, reductions, masks and iota must be identical byte for
//! byte; sin/cos/log (f64 polynomials against libm) and sigmoid (the kernels' exp) within a
//! few ulp. bf16/f16 sigmoid is not run here: its exp uses the GPU's `ex2.approx`, which the
//! host has no equivalent of.

mod common;
use common::kernel_check::{check, check_within};

const FLOATS: [&str; 4] = ["f16", "bf16", "f32", "f64"];
const INTS: [&str; 6] = ["i1", "i8", "i32", "i64", "ui8", "ui64"];

#[test]
fn broadcast_and_permute_move_every_element_type() {
    for t in FLOATS.iter().chain(&INTS) {
        check(
            &format!(
                "func.func @f(%a: tensor<3x1x5x{t}>, %b: tensor<5x{t}>, %c: tensor<2x3x4x5x{t}>) -> (tensor<2x3x4x5x{t}>, tensor<3x7x5x{t}>, tensor<5x2x4x3x{t}>, tensor<2x4x3x5x{t}>, tensor<3x5x{t}>) {{
  %0 = compute.broadcast %a : (tensor<3x1x5x{t}>) -> tensor<2x3x4x5x{t}>
  %1 = compute.broadcast %b : (tensor<5x{t}>) -> tensor<3x7x5x{t}>
  %2 = compute.permute %c {{perm = array<i64: 3, 0, 2, 1>}} : (tensor<2x3x4x5x{t}>) -> tensor<5x2x4x3x{t}>
  %3 = compute.permute %c {{perm = array<i64: 0, 2, 1, 3>}} : (tensor<2x3x4x5x{t}>) -> tensor<2x4x3x5x{t}>
  %4 = compute.broadcast %a : (tensor<3x1x5x{t}>) -> tensor<3x1x5x{t}>
  %5 = compute.reshape %4 : (tensor<3x1x5x{t}>) -> tensor<3x5x{t}>
  return %0, %1, %2, %3, %5 : tensor<2x3x4x5x{t}>, tensor<3x7x5x{t}>, tensor<5x2x4x3x{t}>, tensor<2x4x3x5x{t}>, tensor<3x5x{t}>
}}"
            ),
            2,
        );
    }
}

#[test]
fn reduce_max_propagates_nan_and_compares_by_signedness() {
    // Along a strided dim, the contiguous last dim and the leading dim; NaN in a lane wins
    // (as a NaN: the payload is `llvm.maximum`'s, hence values, not bytes, for floats).
    for t in FLOATS.iter().chain(&INTS) {
        check_within(
            &format!(
                "func.func @f(%a: tensor<6x5x7x{t}>) -> (tensor<6x7x{t}>, tensor<6x5x{t}>, tensor<5x7x{t}>) {{
  %0 = compute.reduce_max %a {{dim = 1 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x7x{t}>
  %1 = compute.reduce_max %a {{dim = 2 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x5x{t}>
  %2 = compute.reduce_max %a {{dim = 0 : i64}} : (tensor<6x5x7x{t}>) -> tensor<5x7x{t}>
  return %0, %1, %2 : tensor<6x7x{t}>, tensor<6x5x{t}>, tensor<5x7x{t}>
}}"
            ),
            3,
            0,
        );
    }
}

#[test]
fn compare_and_select_fuse_with_nan_and_unsigned_semantics() {
    // 67 elements: vector lanes and a scalar tail. Every predicate, the masks combined by
    // select, and a float select on the comparison, all in fused chains.
    for t in FLOATS.iter().chain(&INTS) {
        let preds = ["eq", "ne", "lt", "le", "gt", "ge"];
        let mut body = String::new();
        let mut rets = Vec::new();
        for (i, p) in preds.iter().enumerate() {
            body += &format!(
                "  %c{i} = compute.compare %a, %b {{predicate = \"{p}\"}} : (tensor<67x{t}>, tensor<67x{t}>) -> tensor<67xi1>\n"
            );
            body += &format!(
                "  %s{i} = compute.select %c{i}, %a, %b : (tensor<67xi1>, tensor<67x{t}>, tensor<67x{t}>) -> tensor<67x{t}>\n"
            );
            rets.push(format!("%s{i}"));
        }
        body += "  %m = compute.select %c0, %c1, %c2 : tensor<67xi1>\n";
        let types = vec![format!("tensor<67x{t}>"); rets.len()].join(", ");
        check(
            &format!(
                "func.func @f(%a: tensor<67x{t}>, %b: tensor<67x{t}>) -> ({types}, tensor<67xi1>, tensor<67xi1>) {{\n{body}  return {}, %m, %c3 : {types}, tensor<67xi1>, tensor<67xi1>\n}}",
                rets.join(", ")
            ),
            4,
        );
    }
}

#[test]
fn iota_converts_like_the_sim() {
    // bf16 and f16 round large indices, i8 and i1 wrap, every dim position.
    for t in FLOATS.iter().chain(&INTS) {
        check(
            &format!(
                "func.func @f() -> (tensor<3x300x{t}>, tensor<3x300x{t}>, tensor<2x3x4x{t}>) {{
  %0 = compute.iota {{dim = 1 : i64}} : tensor<3x300x{t}>
  %1 = compute.iota {{dim = 0 : i64}} : tensor<3x300x{t}>
  %2 = compute.iota {{dim = 2 : i64}} : tensor<2x3x4x{t}>
  return %0, %1, %2 : tensor<3x300x{t}>, tensor<3x300x{t}>, tensor<2x3x4x{t}>
}}"
            ),
            1,
        );
    }
}

/// Inputs kept to |x| < 1e4 (a rotary embedding's angles are position × frequency), larger
/// ones replaced by 0.5: the polynomials' range reduction is exact there.
fn bounded(t: &str) -> String {
    format!(
        "  %lim = compute.fill {{value = 1.0e4 : f64}} : tensor<67x{t}>
  %nlim = compute.fill {{value = -1.0e4 : f64}} : tensor<67x{t}>
  %half = compute.fill {{value = 0.5 : f64}} : tensor<67x{t}>
  %lo = compute.compare %a, %lim {{predicate = \"lt\"}} : (tensor<67x{t}>, tensor<67x{t}>) -> tensor<67xi1>
  %hi = compute.compare %a, %nlim {{predicate = \"gt\"}} : (tensor<67x{t}>, tensor<67x{t}>) -> tensor<67xi1>
  %in = compute.select %lo, %hi, %lo : tensor<67xi1>
  %x = compute.select %in, %a, %half : (tensor<67xi1>, tensor<67x{t}>, tensor<67x{t}>) -> tensor<67x{t}>
"
    )
}

#[test]
fn sin_cos_log_within_one_ulp_of_libm() {
    // f16/bf16/f32: the f64 helpers rounded to f32, then to the element type, against libm's
    // f32 values rounded the same way: equal but for double-rounding ties (one ulp). f64:
    // a few f64 ulp against libm's f64. log also sees every sign, zero, subnormal and inf.
    for (t, ulps) in [("f16", 1), ("bf16", 1), ("f32", 1), ("f64", 4)] {
        check_within(
            &format!(
                "func.func @f(%a: tensor<67x{t}>) -> (tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>) {{
{}  %0 = compute.sin %x : tensor<67x{t}>
  %1 = compute.cos %x : tensor<67x{t}>
  %2 = compute.log %a : tensor<67x{t}>
  %3 = compute.log %x : tensor<67x{t}>
  return %0, %1, %2, %3 : tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>
}}",
                bounded(t)
            ),
            6,
            ulps,
        );
    }
}

#[test]
fn sigmoid_within_a_few_ulp() {
    // The kernels' exp (a polynomial within ~2 ulp of f32) against libm's, through 1 + e^-x
    // and a division; saturates to 0 and 1, NaN stays NaN.
    for (t, ulps) in [("f32", 4), ("f64", 4)] {
        check_within(
            &format!(
                "func.func @f(%a: tensor<67x{t}>) -> tensor<67x{t}> {{
  %0 = compute.sigmoid %a : tensor<67x{t}>
  return %0 : tensor<67x{t}>
}}"
            ),
            6,
            ulps,
        );
    }
}

#[test]
fn sin_cos_log_on_dense_ranges() {
    // 4099 evenly spaced arguments (odd: vectors and a tail): x = k·0.37 − 700 over about
    // [−700, 817] for sin/cos (many periods, every quadrant), x = k·0.013 + 1e-3 for log, and
    // their products with 1e3 (sin/cos arguments to 8e5, where an f32 ulp is 0.06).
    for (t, ulps) in [("bf16", 1), ("f32", 1), ("f64", 4)] {
        check_within(
            &format!(
                "func.func @f() -> (tensor<4099x{t}>, tensor<4099x{t}>, tensor<4099x{t}>, tensor<4099x{t}>, tensor<4099x{t}>) {{
  %k = compute.iota {{dim = 0 : i64}} : tensor<4099x{t}>
  %s = compute.scale %k {{factor = 0.37 : f64}} : tensor<4099x{t}>
  %o = compute.fill {{value = -700.0 : f64}} : tensor<4099x{t}>
  %x = compute.add %s, %o : tensor<4099x{t}>
  %0 = compute.sin %x : tensor<4099x{t}>
  %1 = compute.cos %x : tensor<4099x{t}>
  %xl = compute.scale %x {{factor = 1000.0 : f64}} : tensor<4099x{t}>
  %2 = compute.sin %xl : tensor<4099x{t}>
  %3 = compute.cos %xl : tensor<4099x{t}>
  %l = compute.scale %k {{factor = 0.013 : f64}} : tensor<4099x{t}>
  %e = compute.fill {{value = 1.0e-3 : f64}} : tensor<4099x{t}>
  %y = compute.add %l, %e : tensor<4099x{t}>
  %4 = compute.log %y : tensor<4099x{t}>
  return %0, %1, %2, %3, %4 : tensor<4099x{t}>, tensor<4099x{t}>, tensor<4099x{t}>, tensor<4099x{t}>, tensor<4099x{t}>
}}"
            ),
            1,
            ulps,
        );
    }
}

#[test]
fn permute_and_broadcast_move_16_byte_vectors() {
    // Innermost dim kept and 16 elements long: whole 16-byte vectors (one for i8/i1, two for
    // bf16, four for f32, eight for f64) on aligned buffers, the scalar loop on misaligned ones.
    for t in FLOATS.iter().chain(&INTS) {
        check(
            &format!(
                "func.func @f(%a: tensor<2x3x4x16x{t}>, %b: tensor<3x1x16x{t}>) -> (tensor<2x4x3x16x{t}>, tensor<4x3x2x16x{t}>, tensor<2x3x4x16x{t}>) {{
  %0 = compute.permute %a {{perm = array<i64: 0, 2, 1, 3>}} : (tensor<2x3x4x16x{t}>) -> tensor<2x4x3x16x{t}>
  %1 = compute.permute %a {{perm = array<i64: 2, 1, 0, 3>}} : (tensor<2x3x4x16x{t}>) -> tensor<4x3x2x16x{t}>
  %2 = compute.broadcast %b : (tensor<3x1x16x{t}>) -> tensor<2x3x4x16x{t}>
  return %0, %1, %2 : tensor<2x4x3x16x{t}>, tensor<4x3x2x16x{t}>, tensor<2x3x4x16x{t}>
}}"
            ),
            2,
        );
    }
}
