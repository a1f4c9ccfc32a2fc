//! Generated programs (every compute and coll op, before and after lowering) round-trip
//! through both textual forms with locations: custom → generic → custom is the identity and
//! printing is a fixed point.

mod common;

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::printer::{print_op, PrintOptions};
use commlir_ir::Context;
use commlir_testgen::{random_program, GenConfig};

fn reparse(text: &str, opts: &PrintOptions) -> String {
    let mut ctx = Context::new();
    let m = parse_source(
        &mut ctx,
        "gen.mlir",
        text.as_bytes(),
        &ParseOptions::default(),
    )
    .unwrap_or_else(|d| panic!("{}\n{text}", d.message));
    commlir_ir::verify::verify(&ctx, m).unwrap_or_else(|d| panic!("{:?}\n{text}", d[0].message));
    print_op(&ctx, m, opts)
}

#[test]
fn generated_programs_round_trip_in_both_forms() {
    let custom = PrintOptions {
        generic: false,
        debug_info: true,
    };
    let generic = PrintOptions {
        generic: true,
        debug_info: true,
    };
    for seed in 0..40 {
        let text = random_program(
            seed,
            &GenConfig {
                ranks: 2 + 2 * (seed as usize % 2),
                ops: 40,
                with_costs: true,
                ..GenConfig::default()
            },
        );
        let mut ctx = Context::new();
        let m = common::parse(&mut ctx, &text);
        for lowered in [false, true] {
            if lowered {
                common::run_pipeline(
                    &mut ctx,
                    m,
                    "builtin.module(func.func(coll-to-comm))",
                    &text,
                );
            }
            let c1 = print_op(&ctx, m, &custom);
            let g1 = print_op(&ctx, m, &generic);
            assert_eq!(
                reparse(&c1, &custom),
                c1,
                "seed {seed}: custom form is not a fixed point"
            );
            assert_eq!(
                reparse(&g1, &generic),
                g1,
                "seed {seed}: generic form is not a fixed point"
            );
            assert_eq!(
                reparse(&g1, &custom),
                c1,
                "seed {seed}: generic → custom changed the program"
            );
            assert_eq!(
                reparse(&c1, &generic),
                g1,
                "seed {seed}: custom → generic changed the program"
            );
        }
    }
}
