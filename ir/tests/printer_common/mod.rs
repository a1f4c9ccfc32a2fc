//! Shared helpers of the printer tests: op definitions standing in for the dialects (the
//! `commlir-dialects` crate depends on this one, so the tests cannot use it) and a
//! representative module built through the Context API.

#![allow(dead_code)]

use commlir_ir::{
    AttrKind, Builder, Context, DenseElem, FloatKind, FloatValue, IntValue, LocKind, OpDef, OpId,
    OpState, Syntax, Trait, Type, TypeKind, Value, DYNAMIC,
};

pub static FUNC: OpDef = OpDef {
    name: "func.func",
    regions: Some(1),
    traits: &[Trait::IsolatedFromAbove, Trait::Symbol],
    syntax: Syntax::Func,
    ..OpDef::EMPTY
};
pub static RETURN: OpDef = OpDef {
    name: "func.return",
    traits: &[Trait::Terminator, Trait::ReturnLike],
    syntax: Syntax::Return,
    ..OpDef::EMPTY
};
pub static CALL: OpDef = OpDef {
    name: "func.call",
    syntax: Syntax::Call,
    ..OpDef::EMPTY
};
pub static GROUP: OpDef = OpDef {
    name: "coll.group",
    traits: &[Trait::Symbol],
    ..OpDef::EMPTY
};
pub static ALL_REDUCE: OpDef = OpDef {
    name: "coll.all_reduce",
    ..OpDef::EMPTY
};
pub static COALESCED: OpDef = OpDef {
    name: "coll.all_reduce_coalesced",
    ..OpDef::EMPTY
};
pub static WAIT: OpDef = OpDef {
    name: "coll.wait_tensor",
    ..OpDef::EMPTY
};
pub static MATMUL: OpDef = OpDef {
    name: "compute.matmul",
    ..OpDef::EMPTY
};
pub static FILL: OpDef = OpDef {
    name: "compute.fill",
    ..OpDef::EMPTY
};
pub static REGION_OP: OpDef = OpDef {
    name: "compute.region",
    regions: None,
    ..OpDef::EMPTY
};
pub static BARRIER: OpDef = OpDef {
    name: "coll.barrier",
    ..OpDef::EMPTY
};

/// A context that knows the stand-in ops and accepts unregistered ones.
pub fn context() -> Context {
    let mut ctx = Context::new();
    for def in [
        &FUNC,
        &RETURN,
        &CALL,
        &GROUP,
        &ALL_REDUCE,
        &COALESCED,
        &WAIT,
        &MATMUL,
        &FILL,
        &REGION_OP,
        &BARRIER,
    ] {
        ctx.register_op(def);
    }
    ctx.allow_unregistered = true;
    ctx
}

/// Creates `builtin.module` with one empty block; returns (module, block).
pub fn module(ctx: &mut Context, loc: commlir_ir::Loc) -> (OpId, commlir_ir::BlockId) {
    let name = ctx.ident("builtin.module");
    let mut st = OpState::new(name, loc);
    st.num_regions = 1;
    let m = ctx.create_op(st);
    let b = ctx.new_block(&[]);
    let r = ctx.op_regions(m)[0];
    ctx.append_block(r, b);
    (m, b)
}

/// Appends `func.func @name` to `block`; returns (func, entry block or None for a declaration).
pub fn func(
    ctx: &mut Context,
    block: commlir_ir::BlockId,
    name: &str,
    (inputs, results): (&[Type], &[Type]),
    extra: &[(&str, commlir_ir::Attr)],
    declaration: bool,
    line: u32,
) -> (OpId, Option<commlir_ir::BlockId>) {
    let fty = ctx.function_type(inputs.to_vec(), results.to_vec());
    let fty = ctx.type_attr(fty);
    let sym = ctx.str_attr(name);
    let loc = ctx.file_loc("test.mlir", line, 3);
    let mut b = Builder::at_end(ctx, block);
    b.loc = loc;
    let mut attrs = vec![("function_type", fty), ("sym_name", sym)];
    attrs.extend_from_slice(extra);
    let name_id = b.ctx.ident("func.func");
    let mut st = OpState::new(name_id, loc);
    st.attrs = attrs.iter().map(|(k, v)| (b.ctx.ident(k), *v)).collect();
    st.num_regions = 1;
    let f = b.create_state(st);
    if declaration {
        return (f, None);
    }
    let entry = ctx.new_block(inputs);
    let r = ctx.op_regions(f)[0];
    ctx.append_block(r, entry);
    for (i, v) in ctx.block_args(entry).to_vec().into_iter().enumerate() {
        let l = ctx.file_loc("test.mlir", line, 20 + 10 * i as u32);
        ctx.set_value_loc(v, l);
    }
    (f, Some(entry))
}

/// Appends an op with a `test.mlir:line:5` location.
pub fn op(
    ctx: &mut Context,
    block: commlir_ir::BlockId,
    name: &str,
    operands: &[Value],
    results: &[Type],
    attrs: &[(&str, commlir_ir::Attr)],
    line: u32,
) -> OpId {
    let loc = ctx.file_loc("test.mlir", line, 5);
    let mut b = Builder::at_end(ctx, block);
    b.loc = loc;
    b.create(name, operands, results, attrs)
}

/// A float attribute.
pub fn float_attr(ctx: &mut Context, v: f64, k: FloatKind) -> commlir_ir::Attr {
    let ty = ctx.float_type(k);
    ctx.attr(AttrKind::Float {
        value: FloatValue::Bits(v.to_bits()),
        ty,
    })
}

/// Every attribute form the IR models, as `(name, attr)` pairs.
pub fn attr_zoo(ctx: &mut Context) -> Vec<(&'static str, commlir_ir::Attr)> {
    let i1 = ctx.int_type(1);
    let i64t = ctx.int_type(64);
    let f32t = ctx.float_type(FloatKind::F32);
    let idx = ctx.index_type();
    let t4 = ctx.tensor_type(&[4], f32t);
    let mut v = Vec::new();
    v.push(("unit_flag", ctx.unit_attr()));
    let unit = ctx.unit_attr();
    v.push(("unit_in_array", ctx.attr(AttrKind::Array(vec![unit]))));
    v.push(("bool_t", ctx.attr(AttrKind::Bool(true))));
    v.push((
        "bool_i1",
        ctx.attr(AttrKind::Integer {
            value: IntValue::Small(0),
            ty: i1,
        }),
    ));
    v.push(("int", ctx.int_attr(42, 64)));
    v.push(("int_neg8", ctx.int_attr(-3, 8)));
    v.push((
        "int_index",
        ctx.attr(AttrKind::Integer {
            value: IntValue::Small(5),
            ty: idx,
        }),
    ));
    let big = IntValue::Big("340282366920938463463374607431768211456".into());
    let i256 = ctx.int_type(256);
    v.push((
        "int_big",
        ctx.attr(AttrKind::Integer {
            value: big,
            ty: i256,
        }),
    ));
    v.push(("f_one", float_attr(ctx, 1.0, FloatKind::F64)));
    v.push(("f_tenth32", float_attr(ctx, 0.1f32 as f64, FloatKind::F32)));
    v.push(("f_big", float_attr(ctx, 1.5e300, FloatKind::F64)));
    v.push(("f_small", float_attr(ctx, -2.5e-7, FloatKind::F64)));
    v.push(("f_nan32", float_attr(ctx, f64::NAN, FloatKind::F32)));
    v.push((
        "f_inf64",
        float_attr(ctx, f64::NEG_INFINITY, FloatKind::F64),
    ));
    v.push(("f_half", float_attr(ctx, 0.333251953125, FloatKind::F16)));
    let bf16 = ctx.float_type(FloatKind::BF16);
    v.push((
        "f_hex",
        ctx.attr(AttrKind::Float {
            value: FloatValue::Hex("0x7FC1".into()),
            ty: bf16,
        }),
    ));
    v.push((
        "str",
        ctx.attr(AttrKind::String(b"a \"q\" \\ b\n\tc\x01\xff".to_vec())),
    ));
    v.push(("str_empty", ctx.str_attr("")));
    v.push(("type_attr", ctx.type_attr(t4)));
    let a1 = ctx.int_attr(1, 64);
    let a2 = ctx.str_attr("two");
    let inner = ctx.attr(AttrKind::Array(vec![a1, a2]));
    v.push(("array", ctx.attr(AttrKind::Array(vec![inner, a1]))));
    v.push(("array_empty", ctx.attr(AttrKind::Array(vec![]))));
    let k1 = ctx.ident("b");
    let k2 = ctx.ident("a");
    let k3 = ctx.ident("needs quote");
    v.push(("dict", ctx.dict_attr(vec![(k1, a1), (k2, unit), (k3, a2)])));
    v.push(("dict_empty", ctx.dict_attr(vec![])));
    v.push(("sym", ctx.symbol_ref("tp")));
    v.push(("sym_quoted", ctx.symbol_ref("has space")));
    let (r, n) = (ctx.ident("a"), ctx.ident("b"));
    v.push((
        "sym_nested",
        ctx.attr(AttrKind::SymbolRef {
            root: r,
            nested: vec![n],
        }),
    ));
    let vals = vec![
        DenseElem::Int(IntValue::Small(1)),
        DenseElem::Int(IntValue::Small(-2)),
    ];
    v.push((
        "dense_array",
        ctx.attr(AttrKind::DenseArray {
            elem: i64t,
            values: vals,
        }),
    ));
    v.push((
        "dense_array_empty",
        ctx.attr(AttrKind::DenseArray {
            elem: i64t,
            values: vec![],
        }),
    ));
    let bools = vec![
        DenseElem::Int(IntValue::Small(1)),
        DenseElem::Int(IntValue::Small(0)),
    ];
    v.push((
        "dense_array_i1",
        ctx.attr(AttrKind::DenseArray {
            elem: i1,
            values: bools,
        }),
    ));
    let fl = vec![
        DenseElem::Float(FloatValue::Bits(1.5f64.to_bits())),
        DenseElem::Float(FloatValue::Bits(f64::NAN.to_bits())),
    ];
    v.push((
        "dense_array_f32",
        ctx.attr(AttrKind::DenseArray {
            elem: f32t,
            values: fl,
        }),
    ));
    v.push((
        "dense",
        ctx.attr(AttrKind::Dense {
            body: "[1.0, 2.0, 3.0, 4.0]".into(),
            ty: t4,
        }),
    ));
    let d = ctx.ident("x");
    v.push((
        "dialect_attr",
        ctx.attr(AttrKind::Dialect {
            dialect: d,
            text: "x.thing<1, \"s\">".into(),
        }),
    ));
    v.push((
        "opaque_attr",
        ctx.attr(AttrKind::Opaque("affine_map<(d0) -> (d0)>".into())),
    ));
    let l = ctx.file_loc("zoo.mlir", 1, 2);
    v.push(("loc_attr", ctx.attr(AttrKind::Location(l))));
    v
}

/// Every type form the IR models.
pub fn type_zoo(ctx: &mut Context) -> Vec<Type> {
    let f32t = ctx.float_type(FloatKind::F32);
    let i32t = ctx.int_type(32);
    let mut v = vec![
        i32t,
        ctx.ty(TypeKind::Integer {
            width: 8,
            signedness: commlir_ir::Signedness::Signed,
        }),
        ctx.ty(TypeKind::Integer {
            width: 16,
            signedness: commlir_ir::Signedness::Unsigned,
        }),
        ctx.index_type(),
        ctx.none_type(),
        ctx.float_type(FloatKind::F16),
        ctx.float_type(FloatKind::BF16),
        f32t,
        ctx.float_type(FloatKind::F64),
        ctx.tensor_type(&[4, DYNAMIC], f32t),
        ctx.tensor_type(&[], f32t),
        ctx.ty(TypeKind::UnrankedTensor { elem: f32t }),
        ctx.ty(TypeKind::MemRef {
            shape: vec![4, 8],
            elem: f32t,
            rest: None,
        }),
        ctx.ty(TypeKind::MemRef {
            shape: vec![4],
            elem: f32t,
            rest: Some("strided<[1]>".into()),
        }),
        ctx.function_type(vec![], vec![]),
        ctx.function_type(vec![i32t], vec![i32t]),
        ctx.function_type(vec![i32t], vec![i32t, f32t]),
        ctx.ty(TypeKind::Tuple(vec![])),
        ctx.ty(TypeKind::Tuple(vec![i32t, f32t])),
        ctx.ty(TypeKind::Opaque("vector<4xf32>".into())),
        ctx.ty(TypeKind::Opaque("complex<f32>".into())),
    ];
    let d = ctx.ident("x");
    v.push(ctx.ty(TypeKind::Dialect {
        dialect: d,
        text: "x.handle<\"a\">".into(),
    }));
    let inner = ctx.function_type(vec![i32t], vec![i32t]);
    v.push(ctx.function_type(vec![inner], vec![inner]));
    let sm = ctx.ident("comm");
    let enc = ctx.attr(AttrKind::Dialect {
        dialect: sm,
        text: "comm.buffer<symm_mem, @tp>".into(),
    });
    v.push(ctx.ty(TypeKind::Tensor {
        shape: vec![4],
        elem: f32t,
        encoding: Some(enc),
    }));
    v
}

/// Every location form the IR models.
pub fn loc_zoo(ctx: &mut Context) -> Vec<commlir_ir::Loc> {
    let f = ctx.ident("f.mlir");
    let a = ctx.file_loc("a.mlir", 1, 2);
    let b = ctx.file_loc("b.mlir", 3, 4);
    let name = ctx.ident("fused_name");
    let meta = ctx.str_attr("meta");
    let unknown = ctx.unknown_loc();
    vec![
        ctx.unknown_loc(),
        a,
        ctx.loc(LocKind::FileRange {
            file: f,
            line: 1,
            col: 2,
            end_line: 3,
            end_col: 4,
        }),
        ctx.loc(LocKind::FileRange {
            file: f,
            line: 1,
            col: 2,
            end_line: 1,
            end_col: 9,
        }),
        ctx.loc(LocKind::Name { name, child: None }),
        ctx.loc(LocKind::Name {
            name,
            child: Some(a),
        }),
        ctx.loc(LocKind::Name {
            name,
            child: Some(unknown),
        }),
        ctx.loc(LocKind::Fused {
            metadata: None,
            locs: vec![a, b],
        }),
        // (MLIR drops unknown locations from fused ones when it builds them.)
        ctx.loc(LocKind::Fused {
            metadata: Some(meta),
            locs: vec![b, a],
        }),
        ctx.loc(LocKind::CallSite {
            callee: a,
            caller: b,
        }),
    ]
}

/// A representative module: a group, a function with collectives, an unregistered op with a
/// multi-block region, a declaration, a call, and an op carrying every attribute form.
pub fn sample_module(ctx: &mut Context) -> OpId {
    let mloc = ctx.file_loc("test.mlir", 1, 1);
    let (m, body) = module(ctx, mloc);
    let bf16 = ctx.float_type(FloatKind::BF16);
    let f32t = ctx.float_type(FloatKind::F32);
    let i32t = ctx.int_type(32);
    let i1 = ctx.int_type(1);
    let x_t = ctx.tensor_type(&[8, 16], bf16);
    let w_t = ctx.tensor_type(&[16, 32], bf16);
    let y_t = ctx.tensor_type(&[8, 32], bf16);

    let size = ctx.int_attr(2, 64);
    let unit = ctx.unit_attr();
    let tp_name = ctx.str_attr("tp");
    op(
        ctx,
        body,
        "coll.group",
        &[],
        &[],
        &[("sym_name", tp_name), ("size", size), ("symm_mem", unit)],
        2,
    );

    let donated = {
        let k = ctx.ident("x.donated");
        let d = ctx.dict_attr(vec![(k, unit)]);
        let empty = ctx.dict_attr(vec![]);
        ctx.attr(AttrKind::Array(vec![d, empty]))
    };
    let (_, entry) = func(
        ctx,
        body,
        "mlp",
        (&[x_t, w_t], &[y_t]),
        &[("arg_attrs", donated)],
        false,
        3,
    );
    let entry = entry.unwrap();
    let args = ctx.block_args(entry).to_vec();
    let mm = op(
        ctx,
        entry,
        "compute.matmul",
        &[args[0], args[1]],
        &[y_t],
        &[],
        4,
    );
    let h = ctx.result(mm, 0);
    let tp = ctx.symbol_ref("tp");
    let sum = ctx.str_attr("sum");
    let cost = ctx.int_attr(1200, 64);
    let ar = op(
        ctx,
        entry,
        "coll.all_reduce",
        &[h],
        &[y_t],
        &[("group", tp), ("reduce_op", sum), ("cost_ns", cost)],
        5,
    );
    let r = ctx.result(ar, 0);
    let w = op(ctx, entry, "coll.wait_tensor", &[r], &[y_t], &[], 6);
    let y = ctx.result(w, 0);
    let co = op(
        ctx,
        entry,
        "coll.all_reduce_coalesced",
        &[y, h],
        &[y_t, y_t],
        &[("group", tp), ("reduce_op", sum)],
        7,
    );
    let prop_k = ctx.ident("prop");
    let one = ctx.int_attr(1, 64);
    let props = ctx.dict_attr(vec![(prop_k, one)]);
    ctx.set_properties(co, Some(props));
    let c1 = ctx.result(co, 1);
    let fv = float_attr(ctx, 1.0, FloatKind::F64);
    let fill = op(ctx, entry, "compute.fill", &[], &[y_t], &[("value", fv)], 8);
    let filled = ctx.result(fill, 0);
    op(ctx, entry, "compute.matmul", &[c1, filled], &[x_t], &[], 9);
    op(ctx, entry, "coll.barrier", &[], &[], &[("group", tp)], 10);

    // An unregistered op with two regions, block arguments and branches.
    let loop_name = ctx.ident("x.loop");
    let loc11 = ctx.file_loc("test.mlir", 11, 5);
    let mut st = OpState::new(loop_name, loc11);
    st.operands = vec![y];
    st.result_types = vec![y_t];
    st.num_regions = 2;
    let lp = ctx.create_op(st);
    ctx.append_op(entry, lp);
    let regs = ctx.op_regions(lp).to_vec();
    let bb0 = ctx.new_block(&[f32t, i32t]);
    let bb1 = ctx.new_block(&[i1]);
    let bb2 = ctx.new_block(&[]);
    for b in [bb0, bb1, bb2] {
        ctx.append_block(regs[0], b);
    }
    for (i, v) in ctx.block_args(bb0).to_vec().into_iter().enumerate() {
        let l = ctx.file_loc("test.mlir", 12, 10 + 9 * i as u32);
        ctx.set_value_loc(v, l);
    }
    let a0 = ctx.block_args(bb0)[0];
    let u = op(ctx, bb0, "x.use", &[a0], &[i1], &[], 13);
    let cond = ctx.result(u, 0);
    let br_name = ctx.ident("x.cond_br");
    let mut st = OpState::new(br_name, loc11);
    st.operands = vec![cond, cond];
    st.successors = vec![bb1, bb2];
    let br = ctx.create_op(st);
    ctx.append_op(bb0, br);
    let b1arg = ctx.block_args(bb1)[0];
    let mut st = OpState::new(ctx.ident("x.br"), loc11);
    st.operands = vec![b1arg];
    st.successors = vec![bb1];
    let br2 = ctx.create_op(st);
    ctx.append_op(bb1, br2);
    op(ctx, bb2, "x.yield", &[y, a0], &[], &[], 16);
    // Second region: one empty block.
    let empty = ctx.new_block(&[]);
    ctx.append_block(regs[1], empty);
    let lr = ctx.result(lp, 0);

    let zoo = attr_zoo(ctx);
    op(ctx, entry, "x.attrs", &[], &[], &zoo, 17);
    op(ctx, entry, "func.return", &[lr], &[], &[], 18);

    let priv_ = ctx.str_attr("private");
    func(
        ctx,
        body,
        "decl",
        (&[i32t], &[i32t]),
        &[("sym_visibility", priv_)],
        true,
        20,
    );
    let (_, e2) = func(
        ctx,
        body,
        "caller",
        (&[i32t], &[i32t, f32t]),
        &[],
        false,
        21,
    );
    let e2 = e2.unwrap();
    let a = ctx.block_args(e2)[0];
    let callee = ctx.symbol_ref("decl");
    let call = op(
        ctx,
        e2,
        "func.call",
        &[a],
        &[i32t],
        &[("callee", callee)],
        22,
    );
    let c = ctx.result(call, 0);
    let fz = float_attr(ctx, 0.0, FloatKind::F32);
    let z = op(ctx, e2, "x.const", &[], &[f32t], &[("value", fz)], 23);
    let zv = ctx.result(z, 0);
    op(ctx, e2, "func.return", &[c, zv], &[], &[], 24);
    m
}
