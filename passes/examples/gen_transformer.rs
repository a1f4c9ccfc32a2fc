//! Prints a transformer program from `commlir_testgen::transformer_program`:
//! `cargo run --release -p commlir-passes --example gen_transformer -- PAR LAYERS TOKENS HIDDEN FFN [ELEM] [symm] [norm]`
//! with PAR one of `tp`, `fsdp`, `mixed`; ELEM defaults to `bf16`; `symm` gives `@tp`
//! symmetric memory, `norm` an RMSNorm before each block (both off by default). The input
//! activations and norm weights are marked `coll.replicated = @tp`. Example (the GPU step-time benchmark):
//! `gen_transformer tp 4 2048 4096 16384 > tp4.mlir`.

use commlir_testgen::{transformer_program, Parallelism, TransformerConfig};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        eprintln!(
            "usage: gen_transformer tp|fsdp|mixed LAYERS TOKENS HIDDEN FFN [ELEM] [symm] [norm]"
        );
        std::process::exit(2);
    }
    let parallelism = match args[0].as_str() {
        "tp" => Parallelism::Tp,
        "fsdp" => Parallelism::Fsdp,
        "mixed" => Parallelism::Mixed,
        p => {
            eprintln!("unknown parallelism `{p}` (tp, fsdp, mixed)");
            std::process::exit(2);
        }
    };
    let num = |i: usize| -> i64 {
        args[i].parse().unwrap_or_else(|_| {
            eprintln!("argument {} (`{}`) is not a number", i + 1, args[i]);
            std::process::exit(2)
        })
    };
    let elem: &'static str = match args.get(5).map(String::as_str) {
        None | Some("bf16") => "bf16",
        Some("f16") => "f16",
        Some("f32") => "f32",
        Some(e) => {
            eprintln!("unsupported element type `{e}` (bf16, f16, f32)");
            std::process::exit(2);
        }
    };
    let cfg = TransformerConfig {
        parallelism,
        layers: num(1) as usize,
        tokens: num(2),
        hidden: num(3),
        ffn: num(4),
        elem,
        symm_mem: args[6.min(args.len())..].iter().any(|a| a == "symm"),
        norm: args[6.min(args.len())..].iter().any(|a| a == "norm"),
    };
    print!("{}", transformer_program(&cfg));
}
