//! Prints a random program: `cargo run -p commlir-testgen --example gen -- SEED OPS RANKS`.
fn main() {
    let a: Vec<u64> = std::env::args()
        .skip(1)
        .map(|s| s.parse().unwrap_or(0))
        .collect();
    let cfg = commlir_testgen::GenConfig {
        ops: a.get(1).copied().unwrap_or(30) as usize,
        ranks: a.get(2).copied().unwrap_or(2) as usize,
        ..Default::default()
    };
    print!(
        "{}",
        commlir_testgen::random_program(a.first().copied().unwrap_or(0), &cfg)
    );
}
