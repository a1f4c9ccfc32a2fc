//! Edge cases of the custom and generic forms: signatures, symbols, properties, structural
//! ops that fall back to the generic form, numbering across regions, and single terms.

mod printer_common;

use commlir_ir::printer::{attr_to_string, loc_body, print_op, type_to_string, PrintOptions};
use commlir_ir::{AttrKind, Context, FloatKind, OpId, OpState};
use printer_common::{context, func, module, op};

const CUSTOM: PrintOptions = PrintOptions {
    generic: false,
    debug_info: false,
};
const GENERIC: PrintOptions = PrintOptions {
    generic: true,
    debug_info: false,
};

/// A module exercising the corners of the uniform form and the structural ops.
fn edge_module(ctx: &mut Context) -> OpId {
    let loc = ctx.unknown_loc();
    let (m, body) = module(ctx, loc);
    let i32t = ctx.int_type(32);
    let f32t = ctx.float_type(FloatKind::F32);
    let fn_t = ctx.function_type(vec![i32t], vec![i32t]);

    // Results only, of one type / of several types; operands only, mixed types.
    let a = op(ctx, body, "compute.fill", &[], &[i32t], &[], 1);
    let a = ctx.result(a, 0);
    let b = op(ctx, body, "compute.fill", &[], &[i32t, f32t], &[], 2);
    let b1 = ctx.result(b, 1);
    op(ctx, body, "coll.barrier", &[a, a], &[], &[], 3);
    op(ctx, body, "coll.barrier", &[a, b1], &[], &[], 4);
    // A function-typed value: the signature must not read as `(i32) -> i32`.
    let f = op(ctx, body, "compute.fill", &[], &[fn_t], &[], 5);
    let fv = ctx.result(f, 0);
    op(ctx, body, "compute.matmul", &[fv], &[fn_t], &[], 6);

    // `sym_name` kept as a property, with another property: `@sym` then `<{...}>`.
    let g = op(ctx, body, "coll.group", &[], &[], &[], 7);
    let (k1, k2) = (ctx.ident("sym_name"), ctx.ident("size"));
    let (v1, v2) = (ctx.str_attr("needs quoting"), ctx.int_attr(4, 64));
    let props = ctx.dict_attr(vec![(k1, v1), (k2, v2)]);
    ctx.set_properties(g, Some(props));

    // A registered op with a region: uniform form with `(region)`.
    let name = ctx.ident("compute.region");
    let mut st = OpState::new(name, loc);
    st.operands = vec![a];
    st.result_types = vec![i32t];
    st.num_regions = 1;
    let r = ctx.create_op(st);
    ctx.append_op(body, r);
    let rb = ctx.new_block(&[i32t]);
    ctx.append_block(ctx.op_regions(r)[0], rb);
    let arg = ctx.block_args(rb)[0];
    op(ctx, rb, "func.return", &[arg], &[], &[], 8);

    // A registered uniform op with successors has no custom spelling: generic.
    let name = ctx.ident("compute.region");
    let mut st = OpState::new(name, loc);
    st.num_regions = 1;
    let br = ctx.create_op(st);
    ctx.append_op(body, br);
    let reg = ctx.op_regions(br)[0];
    let (e, next) = (ctx.new_block(&[]), ctx.new_block(&[]));
    ctx.append_block(reg, e);
    ctx.append_block(reg, next);
    let mut st = OpState::new(ctx.ident("coll.barrier"), loc);
    st.successors = vec![next];
    let jump = ctx.create_op(st);
    ctx.append_op(e, jump);
    op(ctx, next, "x.end", &[], &[], &[], 9);

    // Functions: result attributes, a function-typed result, nested visibility, attributes.
    let res_attrs = {
        let k = ctx.ident("x.res");
        let u = ctx.unit_attr();
        let d = ctx.dict_attr(vec![(k, u)]);
        ctx.attr(AttrKind::Array(vec![d]))
    };
    let nested = ctx.str_attr("nested");
    let extra = ctx.str_attr("v");
    let (_, e1) = func(
        ctx,
        body,
        "res_attrs",
        (&[], &[i32t]),
        &[
            ("res_attrs", res_attrs),
            ("sym_visibility", nested),
            ("x.extra", extra),
        ],
        false,
        10,
    );
    let c = op(ctx, e1.unwrap(), "compute.fill", &[], &[i32t], &[], 11);
    let c = ctx.result(c, 0);
    op(ctx, e1.unwrap(), "func.return", &[c], &[], &[], 12);
    let (_, e2) = func(ctx, body, "returns_fn", (&[fn_t], &[fn_t]), &[], false, 13);
    let p = ctx.block_args(e2.unwrap())[0];
    op(ctx, e2.unwrap(), "func.return", &[p], &[], &[], 14);
    // No results, several blocks: entry label hidden, others labelled.
    let (_, e3) = func(ctx, body, "blocks", (&[i32t], &[]), &[], false, 15);
    let e3 = e3.unwrap();
    let region = ctx.block_parent(e3).unwrap();
    let tail = ctx.new_block(&[i32t]);
    ctx.append_block(region, tail);
    let x = ctx.block_args(e3)[0];
    let mut st = OpState::new(ctx.ident("x.br"), loc);
    st.operands = vec![x];
    st.successors = vec![tail];
    let brop = ctx.create_op(st);
    ctx.append_op(e3, brop);
    op(ctx, tail, "func.return", &[], &[], &[], 16);
    // Entry arguments that disagree with the signature: generic.
    let (_, e4) = func(ctx, body, "mismatch", (&[i32t], &[]), &[], false, 17);
    ctx.add_block_arg(e4.unwrap(), f32t, None);
    op(ctx, e4.unwrap(), "func.return", &[], &[], &[], 18);
    // A call with an extra attribute.
    let callee = ctx.symbol_ref("res_attrs");
    let cost = ctx.int_attr(7, 64);
    op(
        ctx,
        body,
        "func.call",
        &[],
        &[i32t],
        &[("callee", callee), ("cost_ns", cost)],
        19,
    );

    // A named module nested in the top one, with attributes.
    let (inner, ib) = module(ctx, loc);
    ctx.append_op(body, inner);
    let n = ctx.str_attr("inner");
    ctx.set_attr(inner, "sym_name", n);
    let t = ctx.unit_attr();
    ctx.set_attr(inner, "x.flag", t);
    op(ctx, ib, "x.in_module", &[], &[i32t], &[], 20);
    m
}

#[test]
fn custom_edge_cases() {
    let mut ctx = context();
    let m = edge_module(&mut ctx);
    insta::assert_snapshot!(print_op(&ctx, m, &CUSTOM));
}

#[test]
fn generic_edge_cases() {
    let mut ctx = context();
    let m = edge_module(&mut ctx);
    insta::assert_snapshot!(print_op(&ctx, m, &GENERIC));
}

#[test]
fn printing_is_deterministic() {
    let mut ctx = context();
    let m = printer_common::sample_module(&mut ctx);
    for opts in [CUSTOM, GENERIC] {
        assert_eq!(print_op(&ctx, m, &opts), print_op(&ctx, m, &opts));
    }
}

#[test]
fn numbering_follows_mlir() {
    // Custom form: each region continues from its parent's numbering, siblings reuse it.
    // Generic form: one counter, regions taken last-first, as mlir-opt does.
    let mut ctx = context();
    let loc = ctx.unknown_loc();
    let (m, body) = module(&mut ctx, loc);
    let i32t = ctx.int_type(32);
    let top = op(&mut ctx, body, "x.a", &[], &[i32t], &[], 1);
    let _ = top;
    for _ in 0..2 {
        let (_, e) = func(&mut ctx, body, "f", (&[i32t], &[]), &[], false, 2);
        op(&mut ctx, e.unwrap(), "x.b", &[], &[i32t], &[], 3);
        op(&mut ctx, e.unwrap(), "func.return", &[], &[], &[], 4);
    }
    insta::assert_snapshot!(format!(
        "{}\n{}",
        print_op(&ctx, m, &CUSTOM),
        print_op(&ctx, m, &GENERIC)
    ));
}

#[test]
fn unregistered_ops_are_generic_in_custom_form() {
    let mut ctx = context();
    let loc = ctx.unknown_loc();
    let (m, body) = module(&mut ctx, loc);
    let i32t = ctx.int_type(32);
    op(&mut ctx, body, "arith.addi", &[], &[i32t], &[], 1);
    assert_eq!(
        print_op(&ctx, m, &CUSTOM),
        "module {\n  %0 = \"arith.addi\"() : () -> i32\n}\n"
    );
}

#[test]
fn printing_a_nested_op_alone() {
    let mut ctx = context();
    let m = printer_common::sample_module(&mut ctx);
    let mut ar = None;
    ctx.walk(m, |o| {
        if ctx.op_name(o) == "coll.all_reduce" {
            ar = Some(o);
        }
    });
    // Values defined outside the printed op have no name in its scope, as in MLIR.
    assert_eq!(
        print_op(&ctx, ar.unwrap(), &CUSTOM),
        "%0 = coll.all_reduce <<UNKNOWN SSA VALUE>> {cost_ns = 1200 : i64, group = @tp, \
         reduce_op = \"sum\"} : tensor<8x32xbf16>\n"
    );
}

#[test]
fn terms() {
    let mut ctx = context();
    let types: Vec<String> = printer_common::type_zoo(&mut ctx)
        .into_iter()
        .map(|t| type_to_string(&ctx, t))
        .collect();
    let attrs: Vec<String> = printer_common::attr_zoo(&mut ctx)
        .into_iter()
        .map(|(k, a)| format!("{k}: {}", attr_to_string(&ctx, a)))
        .collect();
    let locs: Vec<String> = printer_common::loc_zoo(&mut ctx)
        .into_iter()
        .map(|l| loc_body(&ctx, l))
        .collect();
    insta::assert_snapshot!(format!(
        "{}\n\n{}\n\n{}",
        types.join("\n"),
        attrs.join("\n"),
        locs.join("\n")
    ));
}
