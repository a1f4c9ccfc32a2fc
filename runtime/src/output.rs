//! Results and their textual form: the lines `commlir-run` prints and the differential tests
//! compare, `rank R result I: <type> digest=<hex> sum=<float> max_abs=<float>`.
//!
//! The digest is 64-bit FNV-1a over the elements' bit patterns in their element type
//! (little-endian), so two runs agree on a digest exactly when they agree on every bit. The
//! type is printed without any comm-buffer encoding, so a program prints the same lines
//! before and after `coll-to-comm`.

use crate::numeric;
use crate::tensor::{Data, ElemType, Tensor};
use std::fmt::Write as _;

/// The results of the entry function on one rank.
#[derive(Clone, Debug, PartialEq)]
pub struct RankResults {
    pub rank: usize,
    pub results: Vec<Tensor>,
}

/// How much of each result to print.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PrintMode {
    /// One summary line per result.
    #[default]
    Digest,
    /// The summary line, then every element.
    Full,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The little-endian bytes of every element, in the element type's width.
fn for_each_element_bytes(t: &Tensor, mut f: impl FnMut(&[u8])) {
    match (&t.data, t.ty.elem) {
        (Data::F32(v), ElemType::F16) => v
            .iter()
            .for_each(|x| f(&numeric::f16_bits(f64::from(*x)).to_le_bytes())),
        (Data::F32(v), ElemType::BF16) => v
            .iter()
            .for_each(|x| f(&numeric::bf16_bits(f64::from(*x)).to_le_bytes())),
        (Data::F32(v), _) => v.iter().for_each(|x| f(&x.to_le_bytes())),
        (Data::F64(v), _) => v.iter().for_each(|x| f(&x.to_le_bytes())),
        (Data::Int(v), e) => {
            let w = e.byte_width();
            v.iter().for_each(|x| f(&x.to_le_bytes()[..w]));
        }
    }
}

/// 64-bit FNV-1a of the tensor's element bit patterns.
pub fn digest(t: &Tensor) -> u64 {
    let mut h = FNV_OFFSET;
    for_each_element_bytes(t, |bytes| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(FNV_PRIME);
        }
    });
    h
}

/// `(sum, max_abs)` of the elements, in f64 and ascending order; NaN if any element is NaN.
pub fn summary(t: &Tensor) -> (f64, f64) {
    let mut sum = 0.0f64;
    let mut max_abs = 0.0f64;
    for i in 0..t.numel() {
        let v = t.data.get_f64(i, t.ty.elem);
        sum += v;
        max_abs = if v.is_nan() || max_abs.is_nan() {
            f64::NAN
        } else {
            max_abs.max(v.abs())
        };
    }
    (sum, max_abs)
}

/// The summary line of result `index` of `rank`.
pub fn result_line(rank: usize, index: usize, t: &Tensor) -> String {
    let (sum, max_abs) = summary(t);
    format!(
        "rank {rank} result {index}: {} digest={:016x} sum={sum:.6e} max_abs={max_abs:.6e}",
        t.ty,
        digest(t)
    )
}

/// The elements, comma-separated: floats in their shortest exact decimal form.
fn elements_text(t: &Tensor) -> String {
    let mut s = String::new();
    for i in 0..t.numel() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = match &t.data {
            Data::F32(v) => write!(s, "{:?}", v[i]),
            Data::F64(v) => write!(s, "{:?}", v[i]),
            Data::Int(_) => write!(s, "{}", t.data.get_f64(i, t.ty.elem)),
        };
    }
    s
}

/// Every rank's results, one line each (plus the elements under [`PrintMode::Full`]), ranks
/// ascending, each line ending in a newline.
pub fn format_results(results: &[RankResults], mode: PrintMode) -> String {
    let mut out = String::new();
    for rr in results {
        for (i, t) in rr.results.iter().enumerate() {
            out.push_str(&result_line(rr.rank, i, t));
            out.push('\n');
            if mode == PrintMode::Full {
                let _ = writeln!(out, "  [{}]", elements_text(t));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::TensorType;

    #[test]
    fn digest_hashes_element_bits_in_the_element_type() {
        let ty = TensorType {
            elem: ElemType::BF16,
            shape: vec![2],
        };
        let t = Tensor::from_f64(ty, &[1.0, -2.0]);
        // FNV-1a over 80 3f 00 c0.
        let mut h = FNV_OFFSET;
        for b in [0x80u8, 0x3f, 0x00, 0xc0] {
            h ^= u64::from(b);
            h = h.wrapping_mul(FNV_PRIME);
        }
        assert_eq!(digest(&t), h);
        assert_eq!(
            result_line(1, 0, &t),
            format!("rank 1 result 0: tensor<2xbf16> digest={h:016x} sum=-1.000000e0 max_abs=2.000000e0")
        );
    }
}
