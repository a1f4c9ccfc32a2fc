//! `coll-bucket`'s incremental evaluation against the full one: on generated programs (random
//! SPMD programs, the TP, FSDP and TP+FSDP transformers; four option sets) every trial's
//! makespan (traced and scheduled order) equals the full integer simulation's and its memory
//! (each slot's highest level and the peak, plain and lowered) the buffer model's
//! (`Evaluation::Checked` asserts it), and the pass's output is the same byte for byte as with
//! the full floating-point evaluation.

mod common;

use commlir_ir::{Context, OpId};
use commlir_passes::coll_bucket::{bucket_function, BucketOptions, Evaluation};
use commlir_testgen::{transformer_program, GenConfig, Parallelism, TransformerConfig};

fn run(text: &str, opts: &BucketOptions) -> String {
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, text);
    let mut funcs: Vec<OpId> = Vec::new();
    ctx.walk(m, |op| {
        if ctx.op_name(op) == "func.func" {
            funcs.push(op);
        }
    });
    for f in funcs {
        bucket_function(&mut ctx, f, opts);
    }
    common::print(&ctx, m)
}

const OPTION_SETS: &[(u64, f64, bool)] = &[
    (0, 0.0, false),
    (0, 0.5, false),
    (4096, 0.0, false),
    (0, 10.0, true),
];

fn compare(text: &str, what: &str) {
    for &(bucket_bytes, peak_memory_budget, ignore_cost) in OPTION_SETS {
        let opts = |evaluation| BucketOptions {
            bucket_bytes,
            peak_memory_budget,
            ignore_cost,
            evaluation,
        };
        let full = run(text, &opts(Evaluation::Full));
        let checked = run(text, &opts(Evaluation::Checked));
        assert_eq!(
            checked, full,
            "{what} (bucket-bytes {bucket_bytes}, budget {peak_memory_budget}, ignore-cost {ignore_cost}): incremental and full evaluations differ\ninput:\n{text}"
        );
    }
}

#[test]
fn random_programs() {
    for ranks in [2, 4] {
        for seed in 0..24u64 {
            let cfg = GenConfig {
                ranks,
                ops: 45,
                with_costs: seed % 4 == 3,
                ..GenConfig::default()
            };
            let text = commlir_testgen::random_program(seed, &cfg);
            compare(&text, &format!("random seed {seed} ranks {ranks}"));
        }
    }
}

#[test]
fn transformers() {
    for (par, layers) in [
        (Parallelism::Fsdp, 1),
        (Parallelism::Fsdp, 6),
        (Parallelism::Mixed, 2),
        (Parallelism::Mixed, 6),
        (Parallelism::Tp, 3),
    ] {
        let text = transformer_program(&TransformerConfig::small(par, layers));
        compare(&text, &format!("{par:?} {layers} layers"));
        let text = transformer_program(&TransformerConfig::large(par, layers));
        compare(&text, &format!("{par:?} {layers} layers, large"));
    }
}

/// Larger random programs, where buckets grow longer and runs between the changed slots hold
/// more of the other stream's consumers (waits that cost time included).
#[test]
fn larger_random_programs() {
    for ranks in [2, 4] {
        for seed in 100..124u64 {
            for ops in [120, 300] {
                let cfg = GenConfig {
                    ranks,
                    ops,
                    with_costs: seed % 3 == 1,
                    ..GenConfig::default()
                };
                let text = commlir_testgen::random_program(seed, &cfg);
                compare(
                    &text,
                    &format!("random seed {seed} ranks {ranks} ops {ops}"),
                );
            }
        }
    }
}
