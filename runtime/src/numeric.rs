//! Bit-exact conversions between `f64`/`f32` and the 16-bit float formats (f16, bf16).
//!
//! The sim backend stores f16/bf16 elements as `f32` values that are exactly representable in
//! the narrow format; these helpers round to that set (round-to-nearest-even, overflow to
//! infinity, gradual underflow) and produce the narrow bit patterns the digests hash. They are
//! written against the IEEE layout directly so that no rounding happens twice: the input is
//! always exact (`f32 → f64` is exact), and a single rounding step produces the result.

/// Layout of a binary floating-point format narrower than `f64`.
#[derive(Clone, Copy, Debug)]
struct Format {
    exp_bits: u32,
    mant_bits: u32,
}

const F16: Format = Format {
    exp_bits: 5,
    mant_bits: 10,
};
const BF16: Format = Format {
    exp_bits: 8,
    mant_bits: 7,
};

/// `2^n` for `n` in the normal `f64` exponent range, exactly.
fn exp2i(n: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&n));
    f64::from_bits(((n + 1023) as u64) << 52)
}

impl Format {
    fn bias(self) -> i32 {
        (1 << (self.exp_bits - 1)) - 1
    }
    fn max_field(self) -> u64 {
        (1 << self.exp_bits) - 1
    }
    fn sign_bit(self) -> u64 {
        1 << (self.exp_bits + self.mant_bits)
    }

    /// Rounds `x` to this format (RNE) and returns its bit pattern.
    fn encode(self, x: f64) -> u64 {
        let bits = x.to_bits();
        let sign = if bits >> 63 != 0 { self.sign_bit() } else { 0 };
        if x.is_nan() {
            // Canonical quiet NaN: a read-before-write or 0/0 hashes the same everywhere.
            return sign | (self.max_field() << self.mant_bits) | (1 << (self.mant_bits - 1));
        }
        if x.is_infinite() {
            return sign | (self.max_field() << self.mant_bits);
        }
        if x == 0.0 {
            return sign;
        }
        let raw_exp = ((bits >> 52) & 0x7ff) as i32;
        let (mant, exp) = if raw_exp == 0 {
            // f64 subnormals are far below any narrow format's range: they round to zero.
            return sign;
        } else {
            ((bits & ((1 << 52) - 1)) | (1 << 52), raw_exp - 1023)
        };
        let emin = 1 - self.bias();
        // Number of low mantissa bits dropped; larger for results in the subnormal range.
        let shift = 52 - self.mant_bits as i32 + (emin - exp).max(0);
        if shift > 54 {
            return sign;
        }
        let shift = shift as u32;
        let kept = mant >> shift;
        let rem = mant & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        let q = if rem > half || (rem == half && kept & 1 == 1) {
            kept + 1
        } else {
            kept
        };
        // A carry out of the mantissa lands in the exponent field by construction, both for
        // normals (field + q - hidden) and for subnormals becoming the smallest normal.
        let magnitude = if exp >= emin {
            (((exp + self.bias()) as u64) << self.mant_bits) + q - (1 << self.mant_bits)
        } else {
            q
        };
        if magnitude >= self.max_field() << self.mant_bits {
            return sign | (self.max_field() << self.mant_bits);
        }
        sign | magnitude
    }

    /// The value of a bit pattern of this format.
    fn decode(self, bits: u64) -> f64 {
        let negative = bits & self.sign_bit() != 0;
        let field = (bits >> self.mant_bits) & self.max_field();
        let frac = bits & ((1 << self.mant_bits) - 1);
        let magnitude = if field == self.max_field() {
            if frac == 0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        } else if field == 0 {
            frac as f64 * exp2i(1 - self.bias() - self.mant_bits as i32)
        } else {
            ((1u64 << self.mant_bits) | frac) as f64
                * exp2i(field as i32 - self.bias() - self.mant_bits as i32)
        };
        if negative {
            -magnitude
        } else {
            magnitude
        }
    }
}

/// The f16 bit pattern nearest to `x` (round-to-nearest-even).
pub fn f16_bits(x: f64) -> u16 {
    F16.encode(x) as u16
}

/// The value of an f16 bit pattern.
pub fn f16_value(bits: u16) -> f64 {
    F16.decode(u64::from(bits))
}

/// The bf16 bit pattern nearest to `x` (round-to-nearest-even).
pub fn bf16_bits(x: f64) -> u16 {
    BF16.encode(x) as u16
}

/// The value of a bf16 bit pattern.
pub fn bf16_value(bits: u16) -> f64 {
    BF16.decode(u64::from(bits))
}

/// `x` rounded to the nearest f16 value.
pub fn round_f16(x: f64) -> f32 {
    f16_value(f16_bits(x)) as f32
}

/// `x` rounded to the nearest bf16 value.
pub fn round_bf16(x: f64) -> f32 {
    bf16_value(bf16_bits(x)) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even() {
        // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
        assert_eq!(round_bf16(1.0 + 2f64.powi(-8)), 1.0);
        // 1 + 3·2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
        assert_eq!(round_bf16(1.0 + 3.0 * 2f64.powi(-8)), 1.0 + 2f32.powi(-6));
        assert_eq!(
            round_bf16(1.0 + 2f64.powi(-8) + 2f64.powi(-20)),
            1.0 + 2f32.powi(-7)
        );
        assert_eq!(bf16_bits(1.0), 0x3f80);
        assert_eq!(bf16_bits(-2.0), 0xc000);
        assert_eq!(bf16_bits(f64::NAN), 0x7fc0);
        assert_eq!(bf16_bits(1e39), 0x7f80);
        assert_eq!(bf16_bits(f64::from(f32::MAX)), 0x7f80);
    }

    #[test]
    fn f16_matches_known_patterns() {
        assert_eq!(f16_bits(1.0), 0x3c00);
        assert_eq!(f16_bits(65504.0), 0x7bff);
        assert_eq!(f16_bits(65520.0), 0x7c00); // halfway to the next binade: overflows
        assert_eq!(f16_bits(2f64.powi(-24)), 0x0001); // smallest subnormal
        assert_eq!(f16_bits(2f64.powi(-25)), 0x0000); // tie to even (zero)
        assert_eq!(f16_bits(3.0 * 2f64.powi(-26)), 0x0001);
        assert_eq!(f16_bits(-0.0), 0x8000);
        assert_eq!(f16_value(0x3555), 0.333251953125);
        assert_eq!(round_f16(1.0 / 3.0), 0.333_251_95);
    }

    #[test]
    fn encode_decode_round_trips_every_pattern() {
        for b in 0..=u16::MAX {
            for (enc, dec) in [
                (f16_bits as fn(f64) -> u16, f16_value as fn(u16) -> f64),
                (bf16_bits, bf16_value),
            ] {
                let v = dec(b);
                if v.is_nan() {
                    continue;
                }
                assert_eq!(enc(v), b, "pattern {b:#06x}");
            }
        }
    }
}
