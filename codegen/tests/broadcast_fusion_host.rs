//! Broadcasts absorbed into the fused elementwise kernels that read them (`fusion`: the kernel
//! reads the broadcast's operand at each element's source index, `kernels::BroadcastIndex`)
//! against the sim backend on the host JIT (`common::kernel_check`): random inputs over each
//! type's whole range, 16-byte aligned buffers (the vector loop: a vector load, one load shared
//! by the lanes, or a load per lane, by shape) and misaligned ones (the scalar loop). Every
//! element type must give the sim's bytes.

mod common;
use commlir_codegen::kernels::{collapse, Access, BroadcastIndex};
use common::kernel_check::{check, check_within};

const FLOATS: [&str; 4] = ["f16", "bf16", "f32", "f64"];
const INTS: [&str; 6] = ["i1", "i8", "i32", "i64", "ui8", "ui64"];

/// (operand shape, result shape): leading dims added, size-1 dims repeated in the middle, the
/// innermost dim repeated, scalars and all-1 operands, identity; runs of the operand that are
/// and are not a multiple of every vector width (2 to 16 elements).
const CASES: [(&str, &str); 14] = [
    ("5", "3x7x5"),
    ("32", "3x32"),
    ("4x16", "2x3x4x16"),
    ("3x1x5", "2x3x4x5"),
    ("2x1x16", "2x6x16"),
    ("6x1", "6x16"),
    ("4x1", "4x3"),
    ("1x8x1", "5x8x32"),
    ("", "67"),
    ("", "2x3x16"),
    ("1x1", "5x16"),
    ("16x1x32", "16x2x32"),
    ("3x40", "3x40"),
    ("7x1x1", "2x7x3x16"),
];

fn ty(shape: &str, t: &str) -> String {
    if shape.is_empty() {
        format!("tensor<{t}>")
    } else {
        format!("tensor<{shape}x{t}>")
    }
}

/// `f(a_k, x_k) = x_k + broadcast(a_k)` for every case, one fused kernel each.
fn chains(t: &str) -> String {
    let (mut params, mut body, mut rets, mut rtys) = (vec![], String::new(), vec![], vec![]);
    for (k, (s, r)) in CASES.iter().enumerate() {
        let (st, rt) = (ty(s, t), ty(r, t));
        params.push(format!("%a{k}: {st}"));
        params.push(format!("%x{k}: {rt}"));
        body += &format!("  %b{k} = compute.broadcast %a{k} : ({st}) -> {rt}\n");
        body += &format!("  %y{k} = compute.add %x{k}, %b{k} : {rt}\n");
        rets.push(format!("%y{k}"));
        rtys.push(rt);
    }
    format!(
        "func.func @f({}) -> ({}) {{\n{body}  return {} : {}\n}}",
        params.join(", "),
        rtys.join(", "),
        rets.join(", "),
        rtys.join(", ")
    )
}

#[test]
fn broadcasts_fuse_into_chains_for_every_element_type() {
    for t in FLOATS.iter().chain(&INTS) {
        check(&chains(t), 2);
    }
}

#[test]
fn broadcast_masks_select_and_chains_mix_broadcasts() {
    // An i1 mask (a compare's result, and an argument) broadcast into selects; a chain that
    // reads one broadcast twice, two broadcasts of one operand, and an argument both directly
    // and through an identity broadcast;
    // a broadcast read through a reshape (its index is the broadcast's own shape's); a mask
    // both returned (materialized for the return) and read by a select. Then the RMSNorm
    // pattern: an f32 column and a bf16 weight row broadcast into one chain.
    for t in FLOATS.iter().chain(&INTS) {
        let t1 = ty("4x16", t);
        let t3 = ty("2x4x16", t);
        check(
            &format!(
                "func.func @f(%p: {t1}, %q: {t1}, %x: {t3}, %y: {t3}, %c: tensor<4x1xi1>, %w: tensor<16x{t}>, %v: tensor<8x{t}>, %z: tensor<8x8x{t}>) -> ({t3}, {t3}, tensor<2x4x16xi1>, tensor<8x8x{t}>) {{
  %m = compute.compare %p, %q {{predicate = \"lt\"}} : ({t1}, {t1}) -> tensor<4x16xi1>
  %mb = compute.broadcast %m : (tensor<4x16xi1>) -> tensor<2x4x16xi1>
  %s0 = compute.select %mb, %x, %y : (tensor<2x4x16xi1>, {t3}, {t3}) -> {t3}
  %cb = compute.broadcast %c : (tensor<4x1xi1>) -> tensor<2x4x16xi1>
  %s1 = compute.select %cb, %s0, %x : (tensor<2x4x16xi1>, {t3}, {t3}) -> {t3}
  %wb = compute.broadcast %w : (tensor<16x{t}>) -> {t3}
  %wb2 = compute.broadcast %w : (tensor<16x{t}>) -> {t3}
  %u = compute.add %x, %wb : {t3}
  %u2 = compute.mul %u, %wb : {t3}
  %u3 = compute.sub %u2, %wb2 : {t3}
  %xb = compute.broadcast %x : ({t3}) -> {t3}
  %u4 = compute.add %u3, %xb : {t3}
  %vb = compute.broadcast %v : (tensor<8x{t}>) -> tensor<2x4x8x{t}>
  %vr = compute.reshape %vb : (tensor<2x4x8x{t}>) -> tensor<8x8x{t}>
  %o = compute.add %vr, %z : tensor<8x8x{t}>
  return %s1, %u4, %mb, %o : {t3}, {t3}, tensor<2x4x16xi1>, tensor<8x8x{t}>
}}"
            ),
            2,
        );
    }
    for t in ["bf16", "f16"] {
        check(
            &format!(
                "func.func @f(%x: tensor<3x4x64xf32>, %r: tensor<3x4x1xf32>, %w: tensor<64x{t}>) -> tensor<3x4x64x{t}> {{
  %rb = compute.broadcast %r : (tensor<3x4x1xf32>) -> tensor<3x4x64xf32>
  %n = compute.mul %x, %rb : tensor<3x4x64xf32>
  %c = compute.cast %n : (tensor<3x4x64xf32>) -> tensor<3x4x64x{t}>
  %wb = compute.broadcast %w : (tensor<64x{t}>) -> tensor<3x4x64x{t}>
  %o = compute.mul %c, %wb : tensor<3x4x64x{t}>
  return %o : tensor<3x4x64x{t}>
}}"
            ),
            3,
        );
    }
}

#[test]
fn broadcast_read_by_a_matmul_or_a_reduction_is_still_materialized() {
    // %b feeds two chains (each reads %w), a matmul and a return: its own kernel stays for
    // those (values compared: the host GEMM's NaN may carry another payload).
    for t in FLOATS {
        check_within(
            &format!(
                "func.func @f(%w: tensor<16x{t}>, %x: tensor<8x16x{t}>, %k: tensor<16x4x{t}>, %y: tensor<8x16x{t}>) -> (tensor<8x16x{t}>, tensor<8x4x{t}>, tensor<8x16x{t}>, tensor<8x16x{t}>) {{
  %b = compute.broadcast %w : (tensor<16x{t}>) -> tensor<8x16x{t}>
  %p = compute.mul %x, %b : tensor<8x16x{t}>
  %m = compute.matmul %b, %k : (tensor<8x16x{t}>, tensor<16x4x{t}>) -> tensor<8x4x{t}>
  %q = compute.sub %y, %b : tensor<8x16x{t}>
  %r = compute.neg %q : tensor<8x16x{t}>
  return %p, %m, %r, %b : tensor<8x16x{t}>, tensor<8x4x{t}>, tensor<8x16x{t}>, tensor<8x16x{t}>
}}"
            ),
            2,
            0,
        );
    }
    // A reduction reads the broadcast (floats: values, a NaN's payload may differ).
    for t in FLOATS.iter().chain(&INTS) {
        check_within(
            &format!(
                "func.func @f(%w: tensor<5x1x{t}>, %x: tensor<5x24x{t}>) -> (tensor<5x24x{t}>, tensor<24x{t}>) {{
  %b = compute.broadcast %w : (tensor<5x1x{t}>) -> tensor<5x24x{t}>
  %p = compute.add %x, %b : tensor<5x24x{t}>
  %m = compute.reduce_max %b {{dim = 0 : i64}} : (tensor<5x24x{t}>) -> tensor<24x{t}>
  return %p, %m : tensor<5x24x{t}>, tensor<24x{t}>
}}"
            ),
            2,
            0,
        );
    }
}

#[test]
fn broadcast_index_and_vector_access() {
    // Rotary tables, RMSNorm weights and the rsqrt column of the Llama block.
    let cos = BroadcastIndex::new(&[4096, 128], &[1, 32, 4096, 128]).unwrap();
    assert_eq!(cos.dims, [(32, 0), (4096 * 128, 1)]);
    assert_eq!(cos.access(8), Access::Vector);
    let w = BroadcastIndex::new(&[4096], &[1, 4096, 4096]).unwrap();
    assert_eq!(w.dims, [(4096, 0), (4096, 1)]);
    let r = BroadcastIndex::new(&[1, 4096, 1], &[1, 4096, 4096]).unwrap();
    assert_eq!(r.dims, [(4096, 1), (4096, 0)]);
    assert_eq!(r.access(8), Access::Shared);
    let s = BroadcastIndex::new(&[], &[3, 5]).unwrap();
    assert_eq!(s.access(4), Access::Shared);
    assert_eq!(s.source(14), 0);
    let odd = BroadcastIndex::new(&[5], &[3, 7, 5]).unwrap();
    assert_eq!(odd.access(4), Access::PerLane);
    assert_eq!(
        BroadcastIndex::new(&[4, 1], &[4, 8]).unwrap().access(16),
        Access::PerLane
    );
    // The collapsed index equals the definition on every element.
    for (src, out) in [
        (&[3, 1, 5][..], &[2, 3, 4, 5][..]),
        (&[7, 1, 1], &[2, 7, 3, 16]),
        (&[1, 8, 1], &[5, 8, 32]),
        (&[2, 3], &[2, 3]),
    ] {
        let m = BroadcastIndex::new(src, out).unwrap();
        let n: i64 = out.iter().product();
        for j in 0..n as u64 {
            let mut rest = j;
            let mut want = 0u64;
            let mut stride = 1u64;
            for d in (0..out.len()).rev() {
                let i = rest % out[d] as u64;
                rest /= out[d] as u64;
                if let Some(k) = (d + src.len()).checked_sub(out.len()) {
                    if src[k] != 1 {
                        want += i * stride;
                    }
                    stride *= src[k] as u64;
                }
            }
            assert_eq!(m.source(j), want, "{src:?} -> {out:?} at {j}");
        }
    }
    // A permute's dims: contiguous runs merge, size-1 dims vanish.
    assert_eq!(
        collapse(vec![(2, 60), (1, 7), (3, 20), (4, 5), (5, 1)]),
        [(120, 1)]
    );
    assert_eq!(collapse(vec![(4, 1), (3, 4)]), [(4, 1), (3, 4)]);
}
