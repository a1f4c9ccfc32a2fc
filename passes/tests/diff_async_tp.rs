//! Differential tests of `coll-sequence-parallel` and `coll-fuse-matmul`: generated TP
//! transformers and random SPMD programs give the same sim digests before and after, on 2
//! and 4 ranks, and peak memory never grows; the generated TP transformers are really
//! rewritten into Megatron's sequence-parallel form, and the result goes through the whole
//! comm pipeline with unchanged digests.

mod common;

use commlir_passes::analysis::buffers::peak_memory;
use commlir_testgen::{
    random_program, transformer_program, GenConfig, Parallelism, TransformerConfig,
};
use common::{bodies, parse, print, run_pipeline, sim};

const PIPELINE: &str =
    "builtin.module(func.func(coll-sequence-parallel,coll-fuse-matmul{ignore-cost=true}))";

/// Runs `text` on the sim before and after the pipeline; returns the rewritten IR.
fn check(text: &str, ranks: usize) -> String {
    let mut ctx = commlir_ir::Context::new();
    let m = parse(&mut ctx, text);
    let before = sim(&ctx, m, ranks, 7);
    assert!(!before.starts_with("error"), "{before}\n{text}");
    let peaks: Vec<u64> = bodies(&ctx, m)
        .iter()
        .map(|b| peak_memory(&ctx, *b))
        .collect();
    run_pipeline(&mut ctx, m, PIPELINE, text);
    commlir_ir::verify::verify(&ctx, m)
        .unwrap_or_else(|_| panic!("invalid after the pipeline:\n{}", print(&ctx, m)));
    let after = sim(&ctx, m, ranks, 7);
    assert_eq!(
        before,
        after,
        "digests changed on {ranks} ranks:\n{}",
        print(&ctx, m)
    );
    let sp_peaks: Vec<u64> = bodies(&ctx, m)
        .iter()
        .map(|b| peak_memory(&ctx, *b))
        .collect();
    let ir = print(&ctx, m);
    // Fusion may only drop the gathered/product intermediates; sequence parallelism is checked
    // by the pass itself; either way the peak must not grow.
    for (b, a) in peaks.iter().zip(&sp_peaks) {
        assert!(a <= b, "peak memory grew from {b} to {a}:\n{ir}");
    }
    ir
}

#[test]
fn tp_transformers_keep_their_digests() {
    for layers in 1..=3 {
        let text = transformer_program(&TransformerConfig::small(Parallelism::Tp, layers));
        for ranks in [2, 4] {
            check(&text, ranks);
        }
    }
    let text = transformer_program(&TransformerConfig::small(Parallelism::Mixed, 2));
    check(&text, 4);
}

/// The number of ops named `name` in `ir`.
fn count(ir: &str, name: &str) -> usize {
    ir.matches(&format!(" {name} ")).count()
}

/// Collectives that sequence parallelism creates or that fusion makes of them.
fn sp_collectives(ir: &str) -> usize {
    [
        "coll.reduce_scatter_tensor",
        "coll.all_gather_into_tensor",
        "coll.all_slice",
        "symm.fused_all_gather_matmul",
        "symm.fused_matmul_reduce_scatter",
    ]
    .iter()
    .map(|n| count(ir, n))
    .sum()
}

/// A TP transformer like `gen_transformer tp LAYERS 2048 4096 16384` at sim-sized shapes.
fn tp_config(layers: usize, norm: bool) -> TransformerConfig {
    TransformerConfig {
        tokens: 16,
        hidden: 32,
        ffn: 64,
        norm,
        ..TransformerConfig::small(Parallelism::Tp, layers)
    }
}

#[test]
fn tp_transformers_become_sequence_parallel() {
    for layers in 1..=4 {
        for norm in [false, true] {
            let text = transformer_program(&tp_config(layers, norm));
            assert!(text.contains("coll.replicated = @tp"), "{text}");
            for ranks in [2, 4] {
                let ir = check(&text, ranks);
                assert!(sp_collectives(&ir) > 0, "not rewritten:\n{ir}");
                // Every all-reduce feeding a residual add becomes a reduce-scatter.
                assert_eq!(count(&ir, "coll.all_reduce"), 0, "{ir}");
            }
        }
    }
}

/// `gen_transformer tp 4 2048 4096 16384 … norm`-shaped programs at 64×256×1024 through
/// sequence parallelism, fusion and the whole comm pipeline: the sim results never change.
#[test]
fn tp_transformer_through_the_full_pipeline() {
    const FULL: &str =
        "builtin.module(func.func(coll-sequence-parallel,coll-fuse-matmul{ignore-cost=true},\
        coll-to-comm,comm-reorder-peak-memory,comm-sink-waits-iterative,comm-reorder-peak-memory,\
        comm-plan-pools))";
    for norm in [false, true] {
        let cfg = TransformerConfig {
            tokens: 64,
            hidden: 256,
            ffn: 1024,
            norm,
            ..TransformerConfig::small(Parallelism::Tp, 4)
        };
        let text = transformer_program(&cfg);
        for ranks in [2, 4] {
            let mut ctx = commlir_ir::Context::new();
            let m = parse(&mut ctx, &text);
            let before = sim(&ctx, m, ranks, 11);
            assert!(!before.starts_with("error"), "{before}");
            run_pipeline(&mut ctx, m, FULL, &text);
            commlir_ir::verify::verify(&ctx, m)
                .unwrap_or_else(|_| panic!("invalid after the pipeline:\n{}", print(&ctx, m)));
            let ir = print(&ctx, m);
            assert_eq!(before, sim(&ctx, m, ranks, 11), "{ir}");
            // Every row-parallel matmul reduce-scatters; every column-parallel matmul but the
            // first (its input is the replicated argument, no gather needed) all-gathers.
            assert_eq!(count(&ir, "symm.fused_matmul_reduce_scatter"), 8, "{ir}");
            assert_eq!(count(&ir, "symm.fused_all_gather_matmul"), 7, "{ir}");
            if norm && ranks == 2 {
                // The Megatron-SP form, for `--nocapture` readers.
                println!("{ir}");
            }
        }
    }
}

#[test]
fn random_programs_keep_their_digests() {
    for seed in 0..24 {
        for ranks in [2, 4] {
            let cfg = GenConfig {
                ranks,
                ..GenConfig::default()
            };
            check(&random_program(seed, &cfg), ranks);
        }
    }
}

/// A replicated residual sliced by `coll.all_slice`, for sum and avg, f32 and bf16: the
/// reduce-scatter + all-gather pair reproduces the all-reduce bit for bit.
#[test]
fn residual_layers_keep_their_digests() {
    for (elem, op) in [
        ("f32", "sum"),
        ("f32", "avg"),
        ("bf16", "sum"),
        ("bf16", "avg"),
    ] {
        for ranks in [2, 4] {
            let text = format!(
                r#"module {{
  coll.group @tp {{size = 2 : i64, symm_mem}}
  func.func @layer(%x: tensor<8x16x{elem}> {{coll.replicated = @tp}}, %h: tensor<8x32x{elem}>, %w2: tensor<32x16x{elem}>, %w3: tensor<16x32x{elem}>) -> (tensor<8x16x{elem}>, tensor<8x32x{elem}>) {{
    %o = compute.matmul %h, %w2 : (tensor<8x32x{elem}>, tensor<32x16x{elem}>) -> tensor<8x16x{elem}>
    %r = coll.all_reduce %o {{reduce_op = "{op}", group = @tp}} : tensor<8x16x{elem}>
    %y = coll.wait_tensor %r : tensor<8x16x{elem}>
    %res = compute.add %y, %x : tensor<8x16x{elem}>
    %n = compute.softmax %res {{dim = 1 : i64}} : tensor<8x16x{elem}>
    %g = compute.gelu %n : tensor<8x16x{elem}>
    %h2 = compute.matmul %g, %w3 : (tensor<8x16x{elem}>, tensor<16x32x{elem}>) -> tensor<8x32x{elem}>
    return %res, %h2 : tensor<8x16x{elem}>, tensor<8x32x{elem}>
  }}
}}"#
            );
            let ir = check(&text, ranks);
            assert!(ir.contains("coll.all_slice"), "{ir}");
            assert!(ir.contains("symm.fused_matmul_reduce_scatter"), "{ir}");
            assert!(ir.contains("symm.fused_all_gather_matmul"), "{ir}");
        }
    }
}
