//! Function types are built from their element types (each distinct element text parsed
//! once) instead of by running the grammar over the whole signature: the result must be the
//! type the grammar builds, and anything the shortcut does not take (comments, odd spacing,
//! errors) must still go through the grammar with the same diagnostics.

use commlir_ir::parser::{parse_attr, parse_type};
use commlir_ir::printer::type_to_string;
use commlir_ir::{AttrKind, Context, TypeKind};

/// The function type with these element texts, built one element at a time.
fn expected(ctx: &mut Context, inputs: &[&str], results: &[&str]) -> commlir_ir::Type {
    let inputs = inputs.iter().map(|t| parse_type(ctx, t).unwrap()).collect();
    let results = results
        .iter()
        .map(|t| parse_type(ctx, t).unwrap())
        .collect();
    ctx.function_type(inputs, results)
}

#[test]
fn function_types_match_their_elements() {
    let mut ctx = Context::new();
    let cases: &[(&str, &[&str], &[&str])] = &[
        ("() -> ()", &[], &[]),
        ("(i32) -> f32", &["i32"], &["f32"]),
        ("( i32 ,f32 )->( index )", &["i32", "f32"], &["index"]),
        (
            "(tensor<4x?xf32>, tensor<8xbf16, #comm.buffer<nccl, @tp>>, i1) -> (tensor<8xbf16>, i64)",
            &["tensor<4x?xf32>", "tensor<8xbf16, #comm.buffer<nccl, @tp>>", "i1"],
            &["tensor<8xbf16>", "i64"],
        ),
        (
            "((i32) -> i64, (f32, f32) -> (f32)) -> ((i1) -> i1)",
            &["(i32) -> i64", "(f32, f32) -> (f32)"],
            &["(i1) -> i1"],
        ),
        ("(tuple<i32, f32>) -> !d.t<1, 2>", &["tuple<i32, f32>"], &["!d.t<1, 2>"]),
    ];
    for (text, inputs, results) in cases {
        let want = expected(&mut ctx, inputs, results);
        let got = parse_type(&mut ctx, text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        assert_eq!(
            got,
            want,
            "{text}: {} vs {}",
            type_to_string(&ctx, got),
            type_to_string(&ctx, want)
        );
        let attr = parse_attr(&mut ctx, text).unwrap();
        assert!(
            matches!(ctx.attr_kind(attr), AttrKind::Type(t) if *t == want),
            "{text}"
        );
    }
}

#[test]
fn what_the_shortcut_leaves_goes_through_the_grammar() {
    let mut ctx = Context::new();
    // A comment inside the signature: only the grammar skips it.
    let t = parse_type(&mut ctx, "(i32, // first\n f32) -> i1").unwrap();
    assert_eq!(t, expected(&mut ctx, &["i32", "f32"], &["i1"]));
    assert!(matches!(ctx.type_kind(t), TypeKind::Function { .. }));
    // Invalid signatures are reported by the grammar, pointing into the text.
    for bad in [
        "(i32, ) -> i1",
        "(i32) -> ",
        "(i32) i1",
        "(i32 -> i1",
        "(i32) -> (i1",
        "(i32) -> i1 i1",
        "(i32) -> (i1) -> i1",
        "(tensor<4xf32) -> i1",
    ] {
        let e = parse_type(&mut ctx, bad).expect_err(bad);
        assert!(e.loc != ctx.unknown_loc(), "{bad}: {}", e.message);
    }
}
