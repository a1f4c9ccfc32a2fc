//! Lexical pieces of the textual format: string escaping, bare identifiers, symbol names,
//! integers and float literals.
//!
//! Everything here appends to a `String`; nothing allocates except float formatting, which
//! reuses a caller-provided scratch buffer.

use crate::types::FloatKind;
use std::fmt::Write as _;

/// Appends `n` in decimal (faster than `write!` for the hot SSA-name path). Most numbers
/// printed are short (SSA names, small constants), so the digits are pushed one by one
/// rather than validated as UTF-8 and copied.
pub(crate) fn push_u64(out: &mut String, mut n: u64) {
    if n < 10 {
        out.push(char::from(b'0' + n as u8));
        return;
    }
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &buf[i..] {
        out.push(char::from(d));
    }
}

/// Appends a signed 128-bit integer in decimal.
pub(crate) fn push_i128(out: &mut String, v: i128) {
    if let Ok(small) = u64::try_from(v) {
        push_u64(out, small);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// Whether `s` can be printed without quotes as an attribute-dictionary key or symbol name:
/// MLIR's bare identifier, `[A-Za-z_][A-Za-z0-9_$.]*`.
pub(crate) fn is_bare_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        _ => return false,
    }
    b[1..]
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.'))
}

/// Appends `bytes` as a quoted MLIR string literal: printable ASCII as is, `\"`, `\\`, `\n`,
/// `\t`, and every other byte as `\XX` (uppercase hex), which the MLIR lexer reads back as
/// that exact byte.
pub(crate) fn push_quoted(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('"');
    // Copy runs of plain characters in one go; most strings need no escaping at all.
    let mut run_start = 0;
    for (i, &c) in bytes.iter().enumerate() {
        let plain = (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\';
        if plain {
            continue;
        }
        // Bytes before `i` are plain ASCII, hence valid UTF-8.
        out.push_str(std::str::from_utf8(&bytes[run_start..i]).unwrap_or_default());
        run_start = i + 1;
        match c {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            _ => {
                out.push('\\');
                out.push(HEX[(c >> 4) as usize] as char);
                out.push(HEX[(c & 15) as usize] as char);
            }
        }
    }
    out.push_str(std::str::from_utf8(&bytes[run_start..]).unwrap_or_default());
    out.push('"');
}

/// Appends a dictionary key: bare when it is an identifier, quoted otherwise.
pub(crate) fn push_key(out: &mut String, key: &str) {
    if is_bare_identifier(key) {
        out.push_str(key);
    } else {
        push_quoted(out, key.as_bytes());
    }
}

/// Appends `@name`, quoting the name when it is not a bare identifier.
pub(crate) fn push_symbol(out: &mut String, name: &str) {
    out.push('@');
    push_key(out, name);
}

/// Exponent and mantissa widths (in bits, without the sign) of an IEEE-like format, plus
/// whether the integer bit is explicit (x87's f80). `None` for formats we cannot encode.
fn ieee_layout(kind: FloatKind) -> Option<(u32, u32, bool)> {
    Some(match kind {
        FloatKind::F16 => (5, 10, false),
        FloatKind::BF16 => (8, 7, false),
        FloatKind::F32 => (8, 23, false),
        FloatKind::TF32 => (8, 10, false),
        FloatKind::F64 => (11, 52, false),
        FloatKind::F80 => (15, 64, true),
        FloatKind::F128 => (15, 112, false),
        FloatKind::Other(_) => return None,
    })
}

/// The bit pattern of a NaN or infinity `v` in format `kind`, keeping the sign and the top
/// bits of the NaN payload (so a quiet NaN stays quiet).
fn special_bits(v: f64, kind: FloatKind) -> u128 {
    let bits = v.to_bits();
    let sign = (bits >> 63) as u128;
    let payload = (bits & ((1u64 << 52) - 1)) as u128; // 52-bit f64 fraction
    let Some((exp_bits, mant_bits, explicit_int)) = ieee_layout(kind) else {
        return bits as u128;
    };
    let frac_bits = if explicit_int {
        mant_bits - 1
    } else {
        mant_bits
    };
    let mut frac = if frac_bits >= 52 {
        payload << (frac_bits - 52)
    } else {
        payload >> (52 - frac_bits)
    };
    if v.is_nan() && frac == 0 {
        // The payload did not survive narrowing: make it the canonical quiet NaN.
        frac = 1u128 << (frac_bits - 1);
    }
    let int_bit = if explicit_int { 1u128 << frac_bits } else { 0 };
    let exp = ((1u128 << exp_bits) - 1) << mant_bits;
    (sign << (exp_bits + mant_bits)) | exp | int_bit | frac
}

/// Appends a float literal that reads back as exactly `v` in format `kind`: the shortest
/// decimal that round-trips (always with a `.` so it lexes as a float), or, for NaN and
/// infinities, which have no decimal spelling, the hex bit pattern of the right width.
pub(crate) fn push_float(out: &mut String, v: f64, kind: FloatKind, scratch: &mut String) {
    if !v.is_finite() {
        let _ = write!(out, "0x{:X}", special_bits(v, kind));
        return;
    }
    scratch.clear();
    // Rust's `{:e}` gives the shortest digits that round-trip in the value's own format, so
    // narrow formats are printed through f32 (f16/bf16 values are exact in f32).
    let narrow = !matches!(kind, FloatKind::F64 | FloatKind::F80 | FloatKind::F128);
    if narrow && (v as f32).is_finite() {
        let _ = write!(scratch, "{:e}", v as f32);
    } else {
        let _ = write!(scratch, "{v:e}");
    }
    let s = scratch.as_str();
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (int_digit, frac_digits) = mant.split_once('.').unwrap_or((mant, ""));
    if neg {
        out.push('-');
    }
    // Positional notation for moderate magnitudes, scientific otherwise.
    if (0..16).contains(&exp) {
        let digits_len = 1 + frac_digits.len();
        out.push_str(int_digit);
        let e = exp as usize;
        if frac_digits.len() <= e {
            out.push_str(frac_digits);
            for _ in digits_len..=e {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            out.push_str(&frac_digits[..e]);
            out.push('.');
            out.push_str(&frac_digits[e..]);
        }
    } else if (-5..0).contains(&exp) {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(int_digit);
        out.push_str(frac_digits);
    } else {
        out.push_str(int_digit);
        out.push('.');
        out.push_str(if frac_digits.is_empty() {
            "0"
        } else {
            frac_digits
        });
        out.push('e');
        if exp < 0 {
            out.push('-');
        } else {
            out.push('+');
        }
        push_u64(out, exp.unsigned_abs() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: f64, k: FloatKind) -> String {
        let mut out = String::new();
        push_float(&mut out, v, k, &mut String::new());
        out
    }

    #[test]
    fn decimal_u64_matches_display() {
        for n in [
            0,
            9,
            10,
            99,
            100,
            12_345,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut out = String::from("x");
            push_u64(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
    }

    #[test]
    fn floats() {
        assert_eq!(f(1.0, FloatKind::F64), "1.0");
        assert_eq!(f(-0.0, FloatKind::F64), "-0.0");
        assert_eq!(f(0.0, FloatKind::F32), "0.0");
        assert_eq!(f(1.5, FloatKind::F32), "1.5");
        assert_eq!(f(100.0, FloatKind::F64), "100.0");
        assert_eq!(f(123.456, FloatKind::F64), "123.456");
        assert_eq!(f(0.1, FloatKind::F64), "0.1");
        assert_eq!(f(0.1f32 as f64, FloatKind::F32), "0.1");
        assert_eq!(f(0.1f32 as f64, FloatKind::F64), "0.10000000149011612");
        assert_eq!(f(1e-7, FloatKind::F64), "1.0e-7");
        assert_eq!(f(0.00012, FloatKind::F64), "0.00012");
        assert_eq!(f(1.5e300, FloatKind::F64), "1.5e+300");
        assert_eq!(f(1e16, FloatKind::F64), "1.0e+16");
        assert_eq!(f(1234567890123456.0, FloatKind::F64), "1234567890123456.0");
        assert_eq!(f(f64::NAN, FloatKind::F32), "0x7FC00000");
        assert_eq!(f(f64::NAN, FloatKind::F64), "0x7FF8000000000000");
        assert_eq!(f(f64::INFINITY, FloatKind::F32), "0x7F800000");
        assert_eq!(f(f64::NEG_INFINITY, FloatKind::F64), "0xFFF0000000000000");
        assert_eq!(f(f64::NAN, FloatKind::F16), "0x7E00");
        assert_eq!(f(f64::NAN, FloatKind::BF16), "0x7FC0");
        assert_eq!(f(f64::INFINITY, FloatKind::F80), "0x7FFF8000000000000000");
        for v in [
            1.0e-310,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
            std::f64::consts::PI,
            2.5e15,
        ] {
            let s = f(v, FloatKind::F64);
            assert!(s.contains('.'), "{s}");
            assert_eq!(s.parse::<f64>().unwrap(), v, "{s}");
        }
    }

    #[test]
    fn strings() {
        let mut out = String::new();
        push_quoted(&mut out, b"a\"b\\c\nd\te\x01\xff z");
        assert_eq!(out, r#""a\"b\\c\nd\te\01\FF z""#);
        assert!(is_bare_identifier("a.b$c_1"));
        assert!(!is_bare_identifier("1a"));
        assert!(!is_bare_identifier("not-id"));
        assert!(!is_bare_identifier(""));
    }
}
