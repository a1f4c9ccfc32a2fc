//! Views (slice, permute, transpose, broadcast and their compositions) and concats absorbed
//! into the fused elementwise kernels that read them (`fusion`, `kernels::fused`), against the
//! sim backend on the host JIT (`common::kernel_check`): random inputs over each type's whole
//! range (NaN payloads included: kernels that only move data copy bits), 16-byte aligned
//! buffers (the vector loop: vector, shared and per-lane reads, one concat operand per vector)
//! and misaligned ones (the scalar loop). Every result must be the sim's bytes (or value,
//! where LLVM may flip a NaN's sign). The lowered programs are also checked for what fused:
//! kernel counts and names, values that several ops of one chain read (computed once per
//! element) included.

mod common;
use commlir_codegen::kernels::index_map::{Access, IndexMap, ViewIndex};
use common::kernel_check::{check, check_within};
use common::launches;

const FLOATS: [&str; 4] = ["f16", "bf16", "f32", "f64"];
const INTS: [&str; 4] = ["i1", "i8", "i32", "i64"];

/// The rotary embedding as PyTorch exports it (`x·cos + rotate_half(x)·sin`, the heads
/// permuted out of the projection's output): `b×s×h×d` in, `b×h×s×d` out.
fn rotary(t: &str, (b, s, h, d): (usize, usize, usize, usize)) -> String {
    let half = d / 2;
    let xin = format!("tensor<{b}x{s}x{h}x{d}x{t}>");
    let x = format!("tensor<{b}x{h}x{s}x{d}x{t}>");
    let hx = format!("tensor<{b}x{h}x{s}x{half}x{t}>");
    let tab = format!("tensor<{s}x{d}x{t}>");
    format!(
        "func.func @f(%q: {xin}, %cos: {tab}, %sin: {tab}) -> {x} {{
  %p = compute.permute %q {{perm = array<i64: 0, 2, 1, 3>}} : ({xin}) -> {x}
  %cb = compute.broadcast %cos : ({tab}) -> {x}
  %a = compute.mul %p, %cb : {x}
  %s1 = compute.slice %p {{dim = 3 : i64, start = {half} : i64, size = {half} : i64}} : ({x}) -> {hx}
  %n = compute.neg %s1 : {hx}
  %s2 = compute.slice %p {{dim = 3 : i64, start = 0 : i64, size = {half} : i64}} : ({x}) -> {hx}
  %c = compute.concat %n, %s2 {{dim = 3 : i64}} : ({hx}, {hx}) -> {x}
  %sb = compute.broadcast %sin : ({tab}) -> {x}
  %m = compute.mul %c, %sb : {x}
  %o = compute.add %a, %m : {x}
  return %o : {x}
}}"
    )
}

#[test]
fn rotary_embedding_is_one_kernel() {
    // Head dims with halves a multiple of every vector width, of none (5: one concat operand
    // per vector is impossible, so the scalar loop), one row, one head.
    for t in FLOATS {
        for dims in [(1, 8, 2, 64), (2, 7, 3, 10), (1, 1, 1, 16), (1, 3, 1, 2)] {
            let text = rotary(t, dims);
            assert_eq!(launches(&text), ["mul_neg_concat_mul_add"], "{t} {dims:?}");
            // Values must be equal; a NaN's sign may differ (LLVM folds `a + (-x)·s` into
            // `a - x·s`, which gives a NaN operand the other sign).
            check_within(&text, 2, 0);
        }
    }
}

#[test]
fn slices_permutes_and_transposes_fuse_into_chains() {
    for t in FLOATS.iter().chain(&INTS) {
        let text = format!(
            "func.func @f(%x: tensor<3x5x8x{t}>, %y: tensor<5x3x8x{t}>, %z: tensor<8x5x{t}>, %w: tensor<4x6x16x{t}>, %v: tensor<6x2x{t}>) -> (tensor<5x3x8x{t}>, tensor<5x8x{t}>, tensor<4x6x5x{t}>, tensor<2x6x{t}>) {{
  %p = compute.permute %x {{perm = array<i64: 1, 0, 2>}} : (tensor<3x5x8x{t}>) -> tensor<5x3x8x{t}>
  %a = compute.add %p, %y : tensor<5x3x8x{t}>
  %s = compute.slice %x {{dim = 0 : i64, start = 1 : i64, size = 1 : i64}} : (tensor<3x5x8x{t}>) -> tensor<1x5x8x{t}>
  %sr = compute.reshape %s : (tensor<1x5x8x{t}>) -> tensor<5x8x{t}>
  %zt = compute.transpose %z : (tensor<8x5x{t}>) -> tensor<5x8x{t}>
  %b = compute.mul %sr, %zt : tensor<5x8x{t}>
  %ws = compute.slice %w {{dim = 2 : i64, start = 3 : i64, size = 5 : i64}} : (tensor<4x6x16x{t}>) -> tensor<4x6x5x{t}>
  %c = compute.neg %ws : tensor<4x6x5x{t}>
  %vt = compute.transpose %v : (tensor<6x2x{t}>) -> tensor<2x6x{t}>
  %d = compute.sub %vt, %vt : tensor<2x6x{t}>
  return %a, %b, %c, %d : tensor<5x3x8x{t}>, tensor<5x8x{t}>, tensor<4x6x5x{t}>, tensor<2x6x{t}>
}}"
        );
        assert_eq!(launches(&text), ["add", "reshape_mul", "neg", "sub"], "{t}");
        check(&text, 2);
    }
}

#[test]
fn views_of_views_compose() {
    // A slice of a permute, a transpose of a transpose (the identity, which the IR may fold
    // away), a broadcast of a slice of a transpose, and a reshape that merges a transposed view's swapped dims (no single strided
    // map: the maps apply one after the other).
    for t in FLOATS.iter().chain(&INTS) {
        let text = format!(
            "func.func @f(%x: tensor<2x6x4x{t}>, %y: tensor<4x2x3x{t}>, %m: tensor<6x7x{t}>, %n: tensor<6x7x{t}>, %r: tensor<3x5x{t}>, %k: tensor<4x8x3x{t}>, %u: tensor<5x6x{t}>) -> (tensor<4x2x3x{t}>, tensor<6x7x{t}>, tensor<4x8x3x{t}>, tensor<30x{t}>) {{
  %p = compute.permute %x {{perm = array<i64: 2, 0, 1>}} : (tensor<2x6x4x{t}>) -> tensor<4x2x6x{t}>
  %s = compute.slice %p {{dim = 2 : i64, start = 2 : i64, size = 3 : i64}} : (tensor<4x2x6x{t}>) -> tensor<4x2x3x{t}>
  %a = compute.add %s, %y : tensor<4x2x3x{t}>
  %t1 = compute.transpose %m : (tensor<6x7x{t}>) -> tensor<7x6x{t}>
  %t2 = compute.transpose %t1 : (tensor<7x6x{t}>) -> tensor<6x7x{t}>
  %b = compute.mul %t2, %n : tensor<6x7x{t}>
  %rs = compute.slice %r {{dim = 1 : i64, start = 1 : i64, size = 3 : i64}} : (tensor<3x5x{t}>) -> tensor<3x3x{t}>
  %rt = compute.transpose %rs : (tensor<3x3x{t}>) -> tensor<3x3x{t}>
  %rsl = compute.slice %rt {{dim = 0 : i64, start = 0 : i64, size = 1 : i64}} : (tensor<3x3x{t}>) -> tensor<1x3x{t}>
  %rb = compute.broadcast %rsl : (tensor<1x3x{t}>) -> tensor<4x8x3x{t}>
  %c = compute.add %rb, %k : tensor<4x8x3x{t}>
  %ut = compute.transpose %u : (tensor<5x6x{t}>) -> tensor<6x5x{t}>
  %ur = compute.reshape %ut : (tensor<6x5x{t}>) -> tensor<30x{t}>
  %d = compute.neg %ur : tensor<30x{t}>
  return %a, %b, %c, %d : tensor<4x2x3x{t}>, tensor<6x7x{t}>, tensor<4x8x3x{t}>, tensor<30x{t}>
}}"
        );
        assert_eq!(launches(&text), ["add", "mul", "add", "reshape_neg"], "{t}");
        check(&text, 2);
    }
}

#[test]
fn movement_only_kernels_copy_bits() {
    // The permute after attention and its reshapes: one gather, NaN payloads intact; a
    // slice of a transpose returned: one gather; a concat of slices of one argument.
    for t in FLOATS.iter().chain(&INTS) {
        let text = format!(
            "func.func @f(%x: tensor<1x4x6x8x{t}>, %m: tensor<5x7x{t}>, %c: tensor<3x10x{t}>) -> (tensor<6x32x{t}>, tensor<5x5x{t}>, tensor<3x10x{t}>) {{
  %p = compute.permute %x {{perm = array<i64: 0, 2, 1, 3>}} : (tensor<1x4x6x8x{t}>) -> tensor<1x6x4x8x{t}>
  %r = compute.reshape %p : (tensor<1x6x4x8x{t}>) -> tensor<1x6x32x{t}>
  %r2 = compute.reshape %r : (tensor<1x6x32x{t}>) -> tensor<6x32x{t}>
  %t1 = compute.transpose %m : (tensor<5x7x{t}>) -> tensor<7x5x{t}>
  %t2 = compute.slice %t1 {{dim = 0 : i64, start = 1 : i64, size = 5 : i64}} : (tensor<7x5x{t}>) -> tensor<5x5x{t}>
  %a = compute.slice %c {{dim = 1 : i64, start = 6 : i64, size = 4 : i64}} : (tensor<3x10x{t}>) -> tensor<3x4x{t}>
  %b = compute.slice %c {{dim = 1 : i64, start = 0 : i64, size = 6 : i64}} : (tensor<3x10x{t}>) -> tensor<3x6x{t}>
  %k = compute.concat %a, %b {{dim = 1 : i64}} : (tensor<3x4x{t}>, tensor<3x6x{t}>) -> tensor<3x10x{t}>
  return %r2, %t2, %k : tensor<6x32x{t}>, tensor<5x5x{t}>, tensor<3x10x{t}>
}}"
        );
        assert_eq!(
            launches(&text),
            [
                "permute_reshape_reshape",
                "transpose_slice",
                "slice_slice_concat"
            ],
            "{t}"
        );
        check(&text, 2);
    }
}

#[test]
fn concats_select_their_operand_per_element() {
    // A concat at the root of a chain, concats of arguments and of chains along an inner and
    // the outer dim, two concats in one chain (four variants), operands whose boundaries are
    // vector-aligned (16 × 8-bit, 8 × 16-bit lanes) and ones that are not.
    for t in FLOATS.iter().chain(&INTS) {
        let text = format!(
            "func.func @f(%a: tensor<4x16x{t}>, %b: tensor<4x16x{t}>, %c: tensor<3x5x{t}>, %d: tensor<3x2x{t}>, %e: tensor<3x7x{t}>, %g: tensor<2x3x7x{t}>, %h: tensor<1x3x7x{t}>) -> (tensor<4x32x{t}>, tensor<3x7x{t}>, tensor<3x3x7x{t}>) {{
  %na = compute.neg %a : tensor<4x16x{t}>
  %k = compute.concat %na, %b {{dim = 1 : i64}} : (tensor<4x16x{t}>, tensor<4x16x{t}>) -> tensor<4x32x{t}>
  %dn = compute.neg %d : tensor<3x2x{t}>
  %k1 = compute.concat %c, %dn {{dim = 1 : i64}} : (tensor<3x5x{t}>, tensor<3x2x{t}>) -> tensor<3x7x{t}>
  %k2 = compute.concat %dn, %c {{dim = 1 : i64}} : (tensor<3x2x{t}>, tensor<3x5x{t}>) -> tensor<3x7x{t}>
  %x = compute.add %k1, %e : tensor<3x7x{t}>
  %y = compute.mul %x, %k2 : tensor<3x7x{t}>
  %gh = compute.concat %g, %h {{dim = 0 : i64}} : (tensor<2x3x7x{t}>, tensor<1x3x7x{t}>) -> tensor<3x3x7x{t}>
  %z = compute.neg %gh : tensor<3x3x7x{t}>
  return %k, %y, %z : tensor<4x32x{t}>, tensor<3x7x{t}>, tensor<3x3x7x{t}>
}}"
        );
        let l = launches(&text);
        assert_eq!(l[0], "neg_concat", "{t}");
        // `%dn` has two readers: stored once, read by both concats.
        assert_eq!(
            &l[1..],
            ["neg", "concat_concat_add_mul", "concat_neg"],
            "{t}"
        );
        check_within(&text, 2, 0);
    }
}

#[test]
fn views_read_elsewhere_keep_their_kernels() {
    // A permute also read by a matmul and a slice returned: their kernels stay, the chains
    // still read through the maps.
    for t in ["f32", "bf16"] {
        let text = format!(
            "func.func @f(%x: tensor<4x8x{t}>, %k: tensor<4x3x{t}>, %y: tensor<8x4x{t}>) -> (tensor<8x4x{t}>, tensor<8x3x{t}>, tensor<2x4x{t}>) {{
  %p = compute.transpose %x : (tensor<4x8x{t}>) -> tensor<8x4x{t}>
  %a = compute.add %p, %y : tensor<8x4x{t}>
  %m = compute.matmul %p, %k : (tensor<8x4x{t}>, tensor<4x3x{t}>) -> tensor<8x3x{t}>
  %s = compute.slice %a {{dim = 0 : i64, start = 2 : i64, size = 2 : i64}} : (tensor<8x4x{t}>) -> tensor<2x4x{t}>
  return %a, %m, %s : tensor<8x4x{t}>, tensor<8x3x{t}>, tensor<2x4x{t}>
}}"
        );
        assert_eq!(launches(&text), ["transpose", "add", "slice"], "{t}");
        check_within(&text, 2, 0);
    }
    // A transpose only a matmul reads is the GEMM's transposed operand: it reads the
    // transpose's operand buffer, so that slice (of a transpose) keeps its kernel.
    let text = "func.func @f(%w: tensor<4x8xf32>, %x: tensor<3x2xf32>) -> tensor<3x8xf32> {
  %t0 = compute.transpose %w : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %s = compute.slice %t0 {dim = 1 : i64, start = 1 : i64, size = 2 : i64} : (tensor<8x4xf32>) -> tensor<8x2xf32>
  %t2 = compute.transpose %s : (tensor<8x2xf32>) -> tensor<2x8xf32>
  %m = compute.matmul %x, %t2 : (tensor<3x2xf32>, tensor<2x8xf32>) -> tensor<3x8xf32>
  return %m : tensor<3x8xf32>
}";
    assert_eq!(launches(text), ["transpose_slice"]);
    check_within(text, 2, 0);
}

#[test]
fn view_index_access_classes() {
    // The Llama block's head permute reads whole vectors; a slice at an odd start, per lane.
    let p = IndexMap::identity(&[1, 4096, 32, 128])
        .permute(&[0, 2, 1, 3])
        .unwrap();
    let v = ViewIndex {
        maps: vec![p.clone()],
    };
    assert_eq!(v.access(8), Access::Vector);
    let s = ViewIndex {
        maps: vec![p.slice(3, 64, 64).unwrap()],
    };
    assert_eq!(s.access(8), Access::Vector);
    let odd = ViewIndex {
        maps: vec![p.slice(3, 1, 64).unwrap()],
    };
    assert_eq!(odd.access(8), Access::PerLane);
    // A concat operand over the concat's result: `c - 64` along the dim, still vectors.
    let piece = s.concat_piece(&[1, 32, 4096, 64], 3, 64, 128);
    assert_eq!(piece.access(8), Access::Vector);
}

#[test]
fn values_read_twice_within_one_chain_are_computed_once() {
    // SwiGLU as exported (`silu(x.float())` with the cast read by sigmoid and the product),
    // the MLP's gate times its up projection; and a value read by two ops of one chain
    // through a broadcast and directly. Values stored: only each chain's result.
    for t in ["bf16", "f16", "f32"] {
        let x = format!("tensor<3x40x{t}>");
        let xf = "tensor<3x40xf32>";
        let text = format!(
            "func.func @f(%g: {x}, %u: {x}, %a: tensor<40x{t}>, %b: {x}) -> ({x}, {x}) {{
  %gc = compute.cast %g : ({x}) -> {xf}
  %sg = compute.sigmoid %gc : {xf}
  %si = compute.mul %gc, %sg : {xf}
  %sc = compute.cast %si : ({xf}) -> {x}
  %y = compute.mul %sc, %u : {x}
  %e = compute.exp %a : tensor<40x{t}>
  %eb = compute.broadcast %e : (tensor<40x{t}>) -> {x}
  %n = compute.neg %b : {x}
  %p = compute.mul %n, %eb : {x}
  %q = compute.add %p, %n : {x}
  return %y, %q : {x}, {x}
}}"
        );
        assert_eq!(
            launches(&text),
            ["cast_sigmoid_mul_cast_mul", "exp", "neg_mul_add"],
            "{t}"
        );
        // sigmoid and exp are polynomials: within an ulp.
        check_within(&text, 2, 1);
    }
}
