//! The generic passes (`cse`, `dce`, `symbol-dce`, `strip-debuginfo`, `test-options`,
//! `test-count-ops`) on IR built with the Builder, run through the pass manager so that the
//! result is verified after each pass.

use commlir_ir::pass::{parse_pipeline, PassManager};
use commlir_ir::{BlockId, Builder, Context, FloatKind, LocKind, OpId, OpState, Type};

/// A module and its body block.
fn module(ctx: &mut Context) -> (OpId, BlockId) {
    commlir_passes::link();
    let loc = ctx.unknown_loc();
    let mut st = OpState::new(ctx.ident("builtin.module"), loc);
    st.num_regions = 1;
    let m = ctx.create_op(st);
    let body = ctx.new_block(&[]);
    ctx.append_block(ctx.op_regions(m)[0], body);
    (m, body)
}

/// A `func.func` (private or public) with an entry block; returns the function and the block.
fn func(
    ctx: &mut Context,
    module_body: BlockId,
    name: &str,
    private: bool,
    args: &[Type],
    results: &[Type],
) -> (OpId, BlockId) {
    let fty = ctx.function_type(args.to_vec(), results.to_vec());
    let mut attrs = vec![
        (ctx.ident("sym_name"), ctx.str_attr(name)),
        (ctx.ident("function_type"), ctx.type_attr(fty)),
    ];
    if private {
        attrs.push((ctx.ident("sym_visibility"), ctx.str_attr("private")));
    }
    let loc = ctx.file_loc("t.mlir", 1, 1);
    let mut st = OpState::new(ctx.ident("func.func"), loc);
    st.num_regions = 1;
    st.attrs = attrs;
    let f = ctx.create_op(st);
    ctx.append_op(module_body, f);
    let entry = ctx.new_block(args);
    ctx.append_block(ctx.op_regions(f)[0], entry);
    (f, entry)
}

fn tensor(ctx: &mut Context) -> Type {
    let f32 = ctx.float_type(FloatKind::F32);
    ctx.tensor_type(&[4], f32)
}

fn run(ctx: &mut Context, m: OpId, pipeline: &str) -> PassManager {
    let mut pm = PassManager::from_pipeline(parse_pipeline(pipeline).unwrap());
    if let Err(d) = pm.run(ctx, m) {
        panic!(
            "{pipeline}: {:?}",
            d.iter().map(|d| &d.message).collect::<Vec<_>>()
        );
    }
    pm
}

fn op_names(ctx: &Context, block: BlockId) -> Vec<String> {
    ctx.block_ops(block)
        .map(|o| ctx.op_name(o).to_string())
        .collect()
}

#[test]
fn cse_merges_equal_pure_ops_and_drops_dead_ones() {
    let mut ctx = Context::new();
    let (m, body) = module(&mut ctx);
    let t = tensor(&mut ctx);
    let (_, entry) = func(&mut ctx, body, "f", false, &[t, t], &[t]);
    let (a, b) = (ctx.block_args(entry)[0], ctx.block_args(entry)[1]);
    let cost = ctx.int_attr(5, 64);
    let mut bld = Builder::at_end(&mut ctx, entry);
    let x = bld.create_value("compute.add", &[a, b], t, &[]);
    let y = bld.create_value("compute.add", &[a, b], t, &[]);
    let z = bld.create_value("compute.add", &[a, b], t, &[("cost_ns", cost)]);
    bld.create_value("compute.neg", &[a], t, &[]); // dead
    let s = bld.create_value("compute.mul", &[x, y], t, &[]);
    let r = bld.create_value("compute.mul", &[s, z], t, &[]);
    bld.create("func.return", &[r], &[], &[]);
    let pm = run(&mut ctx, m, "builtin.module(cse)");
    assert_eq!(
        op_names(&ctx, entry),
        [
            "compute.add",
            "compute.add",
            "compute.mul",
            "compute.mul",
            "func.return"
        ]
    );
    let mul = ctx.block_ops(entry).nth(2).unwrap();
    assert_eq!(ctx.operands(mul), [x, x]);
    let report = pm.statistics_report();
    assert!(
        report.contains("(S) 1 num-cse'd - Number of operations CSE'd"),
        "{report}"
    );
    assert!(
        report.contains("(S) 1 num-dce'd - Number of operations DCE'd"),
        "{report}"
    );
}

#[test]
fn dce_erases_dead_chains_only() {
    let mut ctx = Context::new();
    let (m, body) = module(&mut ctx);
    let t = tensor(&mut ctx);
    let (_, entry) = func(&mut ctx, body, "f", false, &[t], &[t]);
    let a = ctx.block_args(entry)[0];
    let mut bld = Builder::at_end(&mut ctx, entry);
    let n = bld.create_value("compute.neg", &[a], t, &[]);
    let e = bld.create_value("compute.exp", &[n], t, &[]);
    bld.create_value("compute.relu", &[e], t, &[]); // the dead chain ends here
    let kept = bld.create_value("compute.tanh", &[a], t, &[]);
    bld.create("func.return", &[kept], &[], &[]);
    let pm = run(&mut ctx, m, "builtin.module(dce)");
    assert_eq!(op_names(&ctx, entry), ["compute.tanh", "func.return"]);
    assert!(pm.statistics_report().contains("(S) 3 num-erased"));
}

#[test]
fn symbol_dce_erases_unreachable_private_functions() {
    let mut ctx = Context::new();
    let (m, body) = module(&mut ctx);
    let t = tensor(&mut ctx);
    for (name, private, callee) in [
        ("main", false, Some("used")),
        ("used", true, None),
        ("dead", true, Some("dead_callee")),
        ("dead_callee", true, None),
    ] {
        let (_, entry) = func(&mut ctx, body, name, private, &[t], &[t]);
        let a = ctx.block_args(entry)[0];
        let callee_ref = callee.map(|c| ctx.symbol_ref(c));
        let mut bld = Builder::at_end(&mut ctx, entry);
        let r = match callee_ref {
            Some(c) => bld.create_value("func.call", &[a], t, &[("callee", c)]),
            None => a,
        };
        bld.create("func.return", &[r], &[], &[]);
    }
    let pm = run(&mut ctx, m, "builtin.module(symbol-dce)");
    let names: Vec<_> = ctx
        .block_ops(body)
        .map(|f| ctx.symbol_name(f).unwrap().to_string())
        .collect();
    assert_eq!(names, ["main", "used"]);
    assert!(pm
        .statistics_report()
        .contains("(S) 2 num-dce'd - Number of symbols DCE'd"));
}

#[test]
fn strip_debuginfo_makes_every_location_unknown() {
    let mut ctx = Context::new();
    let (m, body) = module(&mut ctx);
    let t = tensor(&mut ctx);
    let (f, entry) = func(&mut ctx, body, "f", false, &[t], &[t]);
    let a = ctx.block_args(entry)[0];
    let l = ctx.file_loc("t.mlir", 2, 3);
    ctx.set_value_loc(a, l);
    let mut bld = Builder::at_end(&mut ctx, entry);
    bld.loc = l;
    let n = bld.create_value("compute.neg", &[a], t, &[]);
    bld.create("func.return", &[n], &[], &[]);
    run(&mut ctx, m, "builtin.module(strip-debuginfo)");
    let mut ops = Vec::new();
    ctx.walk(m, |o| ops.push(o));
    assert!(ops
        .iter()
        .all(|&o| matches!(ctx.loc_kind(ctx.op_loc(o)), LocKind::Unknown)));
    assert!(matches!(
        ctx.loc_kind(ctx.value_loc(a).unwrap()),
        LocKind::Unknown
    ));
    assert!(matches!(ctx.loc_kind(ctx.op_loc(f)), LocKind::Unknown));
}

#[test]
fn test_options_records_parsed_options() {
    let mut ctx = Context::new();
    let (m, _) = module(&mut ctx);
    run(
        &mut ctx,
        m,
        "builtin.module(test-options{flag count=3 name={a b} list=1,2,3})",
    );
    let a = ctx.get_attr(m, "test.options").unwrap();
    assert_eq!(
        ctx.attr_as_str(a),
        Some("count=3 flag=true list=1,2,3 name={a b}")
    );
    run(&mut ctx, m, "builtin.module(test-options)");
    let a = ctx.get_attr(m, "test.options").unwrap();
    assert_eq!(ctx.attr_as_str(a), Some("count=0 flag=false name="));
}

#[test]
fn test_count_ops_nests_on_functions() {
    let mut ctx = Context::new();
    let (m, body) = module(&mut ctx);
    let t = tensor(&mut ctx);
    for name in ["f", "g"] {
        let (_, entry) = func(&mut ctx, body, name, false, &[t], &[t]);
        let a = ctx.block_args(entry)[0];
        Builder::at_end(&mut ctx, entry).create("func.return", &[a], &[], &[]);
    }
    let pm = run(&mut ctx, m, "builtin.module(test-count-ops)");
    assert_eq!(
        pm.pipeline().to_pipeline_string(),
        "builtin.module(func.func(test-count-ops))"
    );
    let report = pm.statistics_report();
    assert!(
        report.contains("'func.func' Pipeline\n  TestCountOps\n    (S) 2 num-funcs"),
        "{report}"
    );
    assert!(report.contains("(S) 2 num-ops"), "{report}");
}
