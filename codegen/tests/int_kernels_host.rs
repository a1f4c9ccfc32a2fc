//! Integer kernels against the sim backend, without a GPU: each program is lowered and its
//! kernels compiled as for the GPU, then the optimized kernel IR is retargeted to the host
//! (the `ptx_kernel` convention and address spaces dropped, the `%tid`/`%ntid`/`%ctaid`/
//! `%nctaid` reads replaced by one thread of one block, which the grid-stride loops make a
//! valid launch) and run by LLVM's JIT on random inputs over the full range of each type.
//! The lowered `rt` program (`rt.alloc`, `rt.launch`, `rt.free`, `return`) is executed by a
//! small host loop; the results must equal the sim's `compute` semantics byte for byte, with
//! 16-byte aligned buffers (the vector paths) and misaligned ones (the scalar fallbacks). The
//! harness is `common::kernel_check`.
//!
//! What this does not cover: the NVPTX instruction selection of the same IR (the lit tests
//! check the PTX, `commlir-run --backend cuda --check` the GPU).

mod common;
use common::kernel_check::check;

#[test]
fn arithmetic_wraps_and_compares_by_signedness() {
    for t in [
        "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64", "si32",
    ] {
        check(
            &format!(
                "func.func @f(%a: tensor<67x{t}>, %b: tensor<67x{t}>) -> (tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>) {{
  %0 = compute.add %a, %b : tensor<67x{t}>
  %1 = compute.mul %0, %b : tensor<67x{t}>
  %2 = compute.sub %1, %a : tensor<67x{t}>
  %3 = compute.maximum %a, %b : tensor<67x{t}>
  %4 = compute.minimum %3, %2 : tensor<67x{t}>
  %5 = compute.neg %a : tensor<67x{t}>
  %6 = compute.relu %5 : tensor<67x{t}>
  return %1, %4, %6 : tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>
}}"
            ),
            4,
        );
    }
}

#[test]
fn division_truncates_and_min_by_minus_one_wraps() {
    // Divisors `max(b, 1)` (never zero: the sim rejects that) and their negations, so
    // `MIN / -1` occurs (the special inputs put MIN in `a` and 1 in `b`).
    for t in ["i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"] {
        check(
            &format!(
                "func.func @f(%a: tensor<67x{t}>, %b: tensor<67x{t}>) -> (tensor<67x{t}>, tensor<67x{t}>) {{
  %one = compute.fill {{value = 1.0 : f64}} : tensor<67x{t}>
  %d = compute.maximum %b, %one : tensor<67x{t}>
  %q = compute.div %a, %d : tensor<67x{t}>
  %n = compute.neg %d : tensor<67x{t}>
  %r = compute.div %a, %n : tensor<67x{t}>
  return %q, %r : tensor<67x{t}>, tensor<67x{t}>
}}"
            ),
            4,
        );
    }
}

/// [`check`] of one cast from `from` to `to` (35 elements: no multiple of a vector width).
fn check_cast(from: &str, to: &str) {
    check(
        &format!(
            "func.func @f(%a: tensor<35x{from}>) -> tensor<35x{to}> {{
  %0 = compute.cast %a : (tensor<35x{from}>) -> tensor<35x{to}>
  return %0 : tensor<35x{to}>
}}"
        ),
        3,
    );
}

#[test]
fn casts_between_integers_and_floats() {
    let ints = ["i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"];
    let floats = ["f16", "bf16", "f32", "f64"];
    for a in ints {
        for b in ints.iter().chain(&floats) {
            check_cast(a, b);
        }
    }
    for a in floats {
        for b in ints {
            check_cast(a, b);
        }
    }
}

#[test]
fn fills_reductions_and_data_movement() {
    for t in ["i8", "i32", "i64", "ui16"] {
        check(
            &format!(
                "func.func @f(%a: tensor<6x5x7x{t}>, %b: tensor<6x3x7x{t}>) -> (tensor<6x7x{t}>, tensor<6x5x{t}>, tensor<6x7x5x{t}>, tensor<6x2x7x{t}>, tensor<6x8x7x{t}>, tensor<6x5x7x{t}>) {{
  %0 = compute.reduce_sum %a {{dim = 1 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x7x{t}>
  %1 = compute.reduce_sum %a {{dim = 2 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x5x{t}>
  %2 = compute.transpose %a : (tensor<6x5x7x{t}>) -> tensor<6x7x5x{t}>
  %3 = compute.slice %a {{dim = 1 : i64, start = 2 : i64, size = 2 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x2x7x{t}>
  %4 = compute.concat %a, %b {{dim = 1 : i64}} : (tensor<6x5x7x{t}>, tensor<6x3x7x{t}>) -> tensor<6x8x7x{t}>
  %f = compute.fill {{value = -1.0e30 : f64}} : tensor<6x5x7x{t}>
  %5 = compute.add %a, %f : tensor<6x5x7x{t}>
  return %0, %1, %2, %3, %4, %5 : tensor<6x7x{t}>, tensor<6x5x{t}>, tensor<6x7x5x{t}>, tensor<6x2x7x{t}>, tensor<6x8x7x{t}>, tensor<6x5x7x{t}>
}}"
            ),
            2,
        );
    }
}

#[test]
fn fused_chain_across_types() {
    check(
        "func.func @f(%a: tensor<93xi8>, %b: tensor<93xbf16>, %c: tensor<93xui32>) -> (tensor<93xf32>, tensor<93xi16>) {
  %0 = compute.cast %a : (tensor<93xi8>) -> tensor<93xi32>
  %1 = compute.cast %b : (tensor<93xbf16>) -> tensor<93xi32>
  %2 = compute.mul %0, %1 : tensor<93xi32>
  %3 = compute.cast %c : (tensor<93xui32>) -> tensor<93xi32>
  %4 = compute.add %2, %3 : tensor<93xi32>
  %5 = compute.cast %4 : (tensor<93xi32>) -> tensor<93xbf16>
  %6 = compute.cast %5 : (tensor<93xbf16>) -> tensor<93xf32>
  %7 = compute.cast %4 : (tensor<93xi32>) -> tensor<93xi16>
  return %6, %7 : tensor<93xf32>, tensor<93xi16>
}",
        4,
    );
}

/// The spellings of `i1`: all three hold 0 or 1 (true is 1, not -1) in the sim and are one
/// byte, 0 or 1, in the kernels' buffers.
const BOOLS: [&str; 3] = ["i1", "si1", "ui1"];

#[test]
fn i1_arithmetic_is_mod_2_and_compares_unsigned() {
    // 67 elements: four 16-byte vectors and a scalar tail when aligned, all scalar when not.
    // add/sub are xor, mul and minimum are and, maximum is or, neg and relu are the identity
    // (a signed reading would make 1 the smaller value, -1). The divisor is 1 (the sim
    // rejects a division by zero).
    for t in BOOLS {
        check(
            &format!(
                "func.func @f(%a: tensor<67x{t}>, %b: tensor<67x{t}>, %c: tensor<67x{t}>) -> (tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>) {{
  %0 = compute.add %a, %b : tensor<67x{t}>
  %1 = compute.mul %0, %c : tensor<67x{t}>
  %2 = compute.sub %1, %a : tensor<67x{t}>
  %3 = compute.maximum %a, %b : tensor<67x{t}>
  %4 = compute.minimum %3, %c : tensor<67x{t}>
  %5 = compute.neg %a : tensor<67x{t}>
  %6 = compute.relu %5 : tensor<67x{t}>
  %7 = compute.sub %6, %b : tensor<67x{t}>
  %one = compute.fill {{value = 1.0 : f64}} : tensor<67x{t}>
  %d = compute.maximum %b, %one : tensor<67x{t}>
  %q = compute.div %c, %d : tensor<67x{t}>
  %8 = compute.maximum %a, %c : tensor<67x{t}>
  %9 = compute.minimum %b, %c : tensor<67x{t}>
  return %2, %4, %7, %q, %8, %9 : tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>, tensor<67x{t}>
}}"
            ),
            4,
        );
    }
}

#[test]
fn i1_casts_to_and_from_every_type() {
    // i1 -> int zero-extends (true is 1), int -> i1 keeps the low bit, i1 -> float is 0.0 /
    // 1.0, float -> i1 truncates toward zero and saturates to [0, 1] with NaN -> 0 (the
    // random floats include 0.5, 0.99, 1, 1.5, -0.5, -1, 2, NaN and +-inf).
    let others = [
        "i1", "si1", "ui1", "i8", "ui8", "i16", "i32", "ui32", "i64", "ui64", "f16", "bf16", "f32",
        "f64",
    ];
    for a in BOOLS {
        for b in others {
            for (x, y) in [(a, b), (b, a)] {
                check_cast(x, y);
            }
        }
    }
}

#[test]
fn i1_fills_reductions_and_data_movement() {
    // Fills convert like casts (0.5 -> 0, 1.5 -> 1, -3 -> 0, 1e30 -> 1); reduce_sum is the
    // parity along a strided and along the contiguous dimension; clone is a plain 16-byte
    // vector copy; transpose/slice/concat move bytes.
    for t in BOOLS {
        check(
            &format!(
                "func.func @f(%a: tensor<6x5x7x{t}>, %b: tensor<6x3x7x{t}>) -> (tensor<6x7x{t}>, tensor<6x5x{t}>, tensor<6x7x5x{t}>, tensor<6x2x7x{t}>, tensor<6x8x7x{t}>, tensor<6x5x7x{t}>, tensor<6x5x7x{t}>, tensor<6x5x7x{t}>, tensor<210x{t}>, tensor<6x5x7x{t}>) {{
  %0 = compute.reduce_sum %a {{dim = 1 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x7x{t}>
  %1 = compute.reduce_sum %a {{dim = 2 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x5x{t}>
  %2 = compute.transpose %a : (tensor<6x5x7x{t}>) -> tensor<6x7x5x{t}>
  %3 = compute.slice %a {{dim = 1 : i64, start = 2 : i64, size = 2 : i64}} : (tensor<6x5x7x{t}>) -> tensor<6x2x7x{t}>
  %4 = compute.concat %a, %b {{dim = 1 : i64}} : (tensor<6x5x7x{t}>, tensor<6x3x7x{t}>) -> tensor<6x8x7x{t}>
  %f = compute.fill {{value = 0.5 : f64}} : tensor<6x5x7x{t}>
  %5 = compute.add %a, %f : tensor<6x5x7x{t}>
  %g = compute.fill {{value = 1.5 : f64}} : tensor<6x5x7x{t}>
  %6 = compute.add %a, %g : tensor<6x5x7x{t}>
  %h = compute.fill {{value = -3.0 : f64}} : tensor<6x5x7x{t}>
  %k = compute.fill {{value = 1.0e30 : f64}} : tensor<6x5x7x{t}>
  %7 = compute.maximum %h, %k : tensor<6x5x7x{t}>
  %8 = compute.reshape %a : (tensor<6x5x7x{t}>) -> tensor<210x{t}>
  %9 = compute.clone %a : tensor<6x5x7x{t}>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<6x7x{t}>, tensor<6x5x{t}>, tensor<6x7x5x{t}>, tensor<6x2x7x{t}>, tensor<6x8x7x{t}>, tensor<6x5x7x{t}>, tensor<6x5x7x{t}>, tensor<6x5x7x{t}>, tensor<210x{t}>, tensor<6x5x7x{t}>
}}"
            ),
            2,
        );
    }
    // A long parity (one thread per lane walks 1000 elements) and a plain copy of 16-byte
    // vectors with a tail.
    check(
        "func.func @f(%a: tensor<3x1000xi1>) -> (tensor<3xi1>, tensor<3x1000xi1>) {
  %0 = compute.reduce_sum %a {dim = 1 : i64} : (tensor<3x1000xi1>) -> tensor<3xi1>
  %1 = compute.clone %a : tensor<3x1000xi1>
  return %0, %1 : tensor<3xi1>, tensor<3x1000xi1>
}",
        3,
    );
}

#[test]
fn i1_fused_chain_across_types() {
    // A mask applied to floats, comparisons of floats and integers turned into i1 and
    // combined, and i1 widened back into integer and float arithmetic, in one kernel each.
    check(
        "func.func @f(%x: tensor<93xf32>, %m: tensor<93xi1>, %c: tensor<93xi8>, %h: tensor<93xbf16>, %u: tensor<93xui1>) -> (tensor<93xf32>, tensor<93xi32>, tensor<93xbf16>, tensor<93xf64>) {
  %0 = compute.cast %m : (tensor<93xi1>) -> tensor<93xf32>
  %1 = compute.mul %x, %0 : tensor<93xf32>
  %2 = compute.cast %x : (tensor<93xf32>) -> tensor<93xi1>
  %3 = compute.cast %c : (tensor<93xi8>) -> tensor<93xi1>
  %4 = compute.maximum %2, %3 : tensor<93xi1>
  %5 = compute.minimum %4, %m : tensor<93xi1>
  %6 = compute.cast %5 : (tensor<93xi1>) -> tensor<93xi32>
  %7 = compute.cast %c : (tensor<93xi8>) -> tensor<93xi32>
  %8 = compute.add %6, %7 : tensor<93xi32>
  %9 = compute.cast %h : (tensor<93xbf16>) -> tensor<93xi1>
  %10 = compute.sub %9, %m : tensor<93xi1>
  %11 = compute.cast %10 : (tensor<93xi1>) -> tensor<93xbf16>
  %12 = compute.cast %u : (tensor<93xui1>) -> tensor<93xi8>
  %13 = compute.neg %12 : tensor<93xi8>
  %14 = compute.cast %13 : (tensor<93xi8>) -> tensor<93xf64>
  return %1, %8, %11, %14 : tensor<93xf32>, tensor<93xi32>, tensor<93xbf16>, tensor<93xf64>
}",
        4,
    );
}
