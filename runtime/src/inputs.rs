//! Deterministic inputs: the entry function's arguments as a pure function of
//! (seed, rank, argument index), so every run — and every backend — sees the same data.

use crate::tensor::{ElemType, Tensor, TensorType};
use commlir_ir::Signedness;

/// The splitmix64 generator (Steele, Lea and Flood): tiny, fast and well mixed.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting at `state`.
    pub fn new(state: u64) -> Self {
        SplitMix64 { state }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform value in `[-1, 1)` with 53 random bits.
    pub fn next_signed_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * 2f64.powi(-52) - 1.0
    }
}

/// The generator for one argument: the three coordinates are mixed in sequence so that
/// neighbouring seeds, ranks and arguments give unrelated streams.
fn stream(seed: u64, rank: usize, arg: usize) -> SplitMix64 {
    let mut g = SplitMix64::new(seed);
    let a = g.next_u64() ^ rank as u64;
    let mut g = SplitMix64::new(a);
    let b = g.next_u64() ^ arg as u64;
    SplitMix64::new(SplitMix64::new(b).next_u64())
}

/// The rank whose input stream `rank` uses for an argument marked `coll.replicated` on a
/// group laid out as `subgroups`: the first member of `rank`'s subgroup, so that every member
/// generates the same tensor; a rank outside every subgroup keeps its own stream. The sim and
/// cuda backends both generate replicated arguments by this rule, so their inputs agree.
pub fn replicated_input_rank(subgroups: &[Vec<usize>], rank: usize) -> usize {
    subgroups
        .iter()
        .find(|m| m.contains(&rank))
        .and_then(|m| m.first().copied())
        .unwrap_or(rank)
}

/// Argument `arg` of rank `rank` under `seed`: floats uniform in `[-1, 1)` rounded to the
/// element type; integers small (in `[-8, 8)`, `[0, 16)` unsigned, `{0, 1}` for `i1`), so that
/// integer programs neither overflow immediately nor degenerate.
pub fn generate(ty: &TensorType, seed: u64, rank: usize, arg: usize) -> Tensor {
    let mut g = stream(seed, rank, arg);
    let n = ty.numel();
    let values: Vec<f64> = match ty.elem {
        e if e.is_float() => (0..n).map(|_| g.next_signed_unit()).collect(),
        ElemType::Int { width: 1, .. } => (0..n).map(|_| (g.next_u64() & 1) as f64).collect(),
        ElemType::Int {
            signedness: Signedness::Unsigned,
            ..
        } => (0..n).map(|_| (g.next_u64() % 16) as f64).collect(),
        _ => (0..n).map(|_| (g.next_u64() % 16) as f64 - 8.0).collect(),
    };
    Tensor::from_f64(ty.clone(), &values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_depend_on_every_coordinate_and_nothing_else() {
        let ty = TensorType {
            elem: ElemType::BF16,
            shape: vec![16],
        };
        let a = generate(&ty, 0, 0, 0);
        assert_eq!(a, generate(&ty, 0, 0, 0));
        assert_ne!(a, generate(&ty, 1, 0, 0));
        assert_ne!(a, generate(&ty, 0, 1, 0));
        assert_ne!(a, generate(&ty, 0, 0, 1));
        assert!(a.to_f64_vec().iter().all(|v| (-1.0..=1.0).contains(v)));
    }
}
