//! Writes an FSDP-like transformer program of about N ops (custom form) for the scale
//! benchmark: `cargo run --release -p commlir-passes --example gen_fsdp -- N > prog.mlir`.

use commlir_testgen::{transformer_program, Parallelism, TransformerConfig};

fn main() {
    let ops: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    // One FSDP layer is 28 ops (4 gathered weights, attention and MLP blocks, 4 gradients).
    let layers = (ops / 28).max(1);
    let cfg = TransformerConfig {
        tokens: 16,
        hidden: 64,
        ffn: 128,
        ..TransformerConfig::large(Parallelism::Fsdp, layers)
    };
    print!("{}", transformer_program(&cfg));
}
