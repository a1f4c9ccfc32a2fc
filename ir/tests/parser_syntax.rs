//! The parser on every syntax element of DESIGN §3, checked through the Context API.

use commlir_ir::diag::file_line_col;
use commlir_ir::parser::{parse_attr, parse_source, parse_type, ParseOptions};
use commlir_ir::{
    AttrKind, Context, DenseElem, FloatKind, FloatValue, IntValue, LocKind, OpId, Signedness,
    TypeKind, Value, ValueDef, DYNAMIC,
};

fn parse_with(src: &str, unregistered: bool) -> Result<(Context, OpId), String> {
    let mut ctx = Context::new();
    ctx.allow_unregistered = unregistered;
    match parse_source(&mut ctx, "t.mlir", src.as_bytes(), &ParseOptions::default()) {
        Ok(m) => Ok((ctx, m)),
        Err(d) => {
            let (_, l, c) = file_line_col(&ctx, d.loc).unwrap_or_default();
            Err(format!("{l}:{c}: {}", d.message))
        }
    }
}

fn parse(src: &str) -> (Context, OpId) {
    parse_with(src, true).unwrap_or_else(|e| panic!("{e}"))
}

fn parse_err(src: &str) -> String {
    match parse_with(src, true) {
        Ok(_) => panic!("expected an error for:\n{src}"),
        Err(e) => e,
    }
}

/// Ops of the module body, in order.
fn body_ops(ctx: &Context, m: OpId) -> Vec<OpId> {
    let r = ctx.op_regions(m)[0];
    let b = ctx.region_blocks(r)[0];
    ctx.block_ops(b).collect()
}

/// Every op under `m` (pre-order, not `m`) with the given name.
fn find(ctx: &Context, m: OpId, name: &str) -> Vec<OpId> {
    let mut v = Vec::new();
    ctx.walk(m, |o| {
        if o != m && ctx.op_name(o) == name {
            v.push(o)
        }
    });
    v
}

fn flc(ctx: &Context, l: commlir_ir::Loc) -> (String, u32, u32) {
    match ctx.loc_kind(l) {
        LocKind::FileLineCol { file, line, col } => (ctx.ident_str(*file).to_string(), *line, *col),
        k => panic!("not a file location: {k:?}"),
    }
}

// ----- generic form ---------------------------------------------------------------------------

#[test]
fn generic_op_full() {
    let src = r#"
"t.def"() : () -> () loc("x.mlir":1:1)
%0:2 = "t.pair"() : () -> (i32, f32)
%a, %b:2 = "t.three"(%0#1, %0#0) <{p = 1 : i64}> {z = "s", a} : (f32, i32) -> (i8, i16, i32)
"t.use"(%b#1, %a) : (i32, i8) -> ()
"#;
    let (ctx, m) = parse(src);
    let ops = body_ops(&ctx, m);
    assert_eq!(ops.len(), 4);
    let (pair, three, use_) = (ops[1], ops[2], ops[3]);
    assert_eq!(ctx.op_name(three), "t.three");
    assert_eq!(
        ctx.operands(three),
        &[ctx.result(pair, 1), ctx.result(pair, 0)]
    );
    assert_eq!(ctx.results(three).len(), 3);
    assert_eq!(
        ctx.operands(use_),
        &[ctx.result(three, 2), ctx.result(three, 0)]
    );
    let p = ctx.get_prop(three, "p").unwrap();
    assert_eq!(ctx.attr_as_i64(p), Some(1));
    assert!(ctx.get_attr(three, "p").is_none());
    let names: Vec<_> = ctx
        .attrs(three)
        .iter()
        .map(|(k, _)| ctx.ident_str(*k))
        .collect();
    assert_eq!(names, ["a", "z"]);
    assert_eq!(
        ctx.attr_kind(ctx.get_attr(three, "a").unwrap()),
        &AttrKind::Unit
    );
    assert_eq!(flc(&ctx, ctx.op_loc(ops[0])), ("x.mlir".into(), 1, 1));
    // Default locations: file:line:col of the op's first token (its results).
    assert_eq!(flc(&ctx, ctx.op_loc(pair)), ("t.mlir".into(), 3, 1));
    assert_eq!(flc(&ctx, ctx.op_loc(three)), ("t.mlir".into(), 4, 1));
    // Several top-level ops: an implicit module at file:0:0.
    assert_eq!(ctx.op_name(m), "builtin.module");
    assert_eq!(flc(&ctx, ctx.op_loc(m)), ("t.mlir".into(), 0, 0));
}

#[test]
fn regions_blocks_successors_and_forward_references() {
    let src = r#"
"t.func"() ({
^bb0(%x: i32 loc("arg":1:2), %c: i1):
  "t.cond_br"(%c, %x)[^bb2, ^bb1] : (i1, i32) -> ()
^bb1:
  "t.br"(%y)[^bb2] : (i32) -> ()
^bb2(%z: i32):
  %y = "t.def"(%z) : (i32) -> i32
  "t.ret"() : () -> ()
}, {
}) : () -> ()
"#;
    let (ctx, m) = parse(src);
    let f = body_ops(&ctx, m)[0];
    let regions = ctx.op_regions(f);
    assert_eq!(regions.len(), 2);
    assert!(ctx.region_blocks(regions[1]).is_empty());
    let blocks = ctx.region_blocks(regions[0]).to_vec();
    assert_eq!(blocks.len(), 3);
    let br = find(&ctx, m, "t.cond_br")[0];
    assert_eq!(ctx.successors(br), &[blocks[2], blocks[1]]);
    let args = ctx.block_args(blocks[0]);
    assert_eq!(
        ctx.value_loc(args[0]).map(|l| flc(&ctx, l)),
        Some(("arg".into(), 1, 2))
    );
    // A block argument without a loc gets the position of its name.
    assert_eq!(
        ctx.value_loc(args[1]).map(|l| flc(&ctx, l)),
        Some(("t.mlir".into(), 3, 30))
    );
    // The forward reference %y resolves to the later definition.
    let def = find(&ctx, m, "t.def")[0];
    let jump = find(&ctx, m, "t.br")[0];
    assert_eq!(ctx.operands(jump)[0], ctx.result(def, 0));
    assert_eq!(ctx.uses(ctx.result(def, 0)).len(), 1);
    assert_eq!(ctx.operands(def)[0], ctx.block_args(blocks[2])[0]);
    // No placeholder op survives in the IR.
    assert!(find(&ctx, m, "builtin.unresolved_forward_reference").is_empty());
}

#[test]
fn value_scoping() {
    // Names defined in a region are gone after it; a sibling region may reuse them.
    let ok = r#"
%a = "t.a"() : () -> i32
"t.r"() ({
  %b = "t.b"(%a) : (i32) -> i32
}, {
  %b = "t.b"(%a) : (i32) -> i32
}) : () -> ()
"#;
    parse(ok);
    let leaked =
        "\"t.r\"() ({\n  %b = \"t.b\"() : () -> i32\n}) : () -> ()\n\"t.u\"(%b) : (i32) -> ()\n";
    assert_eq!(parse_err(leaked), "4:7: use of undeclared SSA value name");
    // Redefining a visible name in a nested (not isolated) region is an error, as in MLIR.
    let shadow =
        "%a = \"t.a\"() : () -> i32\n\"t.r\"() ({\n  %a = \"t.b\"() : () -> i32\n}) : () -> ()\n";
    assert_eq!(parse_err(shadow), "3:3: redefinition of SSA value '%a'");
    // Inside an op isolated from above (func.func) the outer names are invisible and may be reused.
    let isolated = r#"
%a = "t.a"() : () -> i32
func.func @f(%a: f32) -> f32 {
  return %a : f32
}
"#;
    parse(isolated);
    let invisible =
        "%a = \"t.a\"() : () -> i32\nfunc.func @f() {\n  \"t.u\"(%a) : (i32) -> ()\n  return\n}\n";
    assert_eq!(
        parse_err(invisible),
        "3:9: use of undeclared SSA value name"
    );
}

#[test]
fn value_errors() {
    assert_eq!(
        parse_err("\"t.u\"(%x) : (i32) -> ()"),
        "1:7: use of undeclared SSA value name"
    );
    assert_eq!(
        parse_err("%x = \"t.a\"() : () -> f32\n\"t.u\"(%x) : (i32) -> ()"),
        "2:7: use of value '%x' expects different type than prior uses: 'i32' vs 'f32'"
    );
    assert_eq!(
        parse_err("%x = \"t.a\"() : () -> f32\n%x = \"t.a\"() : () -> f32"),
        "2:1: redefinition of SSA value '%x'"
    );
    assert_eq!(
        parse_err("%x, %y = \"t.a\"() : () -> f32"),
        "1:1: operation defines 1 results but was provided 2 to bind"
    );
    assert_eq!(
        parse_err("\"t.a\"() : (i32) -> f32"),
        "1:11: expected 0 operand types but had 1"
    );
    assert_eq!(parse_err("\"t.a\"() : i32"), "1:11: expected function type");
    assert_eq!(
        parse_err("\"t.r\"() ({\n  \"t.br\"()[^bb9] : () -> ()\n}) : () -> ()"),
        "2:12: reference to an undefined block"
    );
    assert_eq!(
        parse_err("\"t.r\"() ({\n^bb1:\n  \"t.x\"() : () -> ()\n^bb1:\n  \"t.x\"() : () -> ()\n}) : () -> ()"),
        "4:1: redefinition of block '^bb1'"
    );
    // A forward reference whose definition has another type.
    let e = parse_err(
        "\"t.r\"() ({\n  \"t.u\"(%v) : (i32) -> ()\n  %v = \"t.d\"() : () -> f32\n}) : () -> ()",
    );
    assert_eq!(e, "3:3: definition of SSA value '%v#0' has type f32");
}

// ----- custom forms ---------------------------------------------------------------------------

#[test]
fn uniform_custom_form() {
    let src = r#"
module {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @mlp(%x: tensor<8x16xbf16>, %w: tensor<16x4xbf16>) -> tensor<8x4xbf16> {
    %h = compute.matmul %x, %w : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16>
    %r = coll.all_reduce %h {reduce_op = "sum", group = @tp} : tensor<8x4xbf16>
    %p:2 = t.split %r#0 <{axis = 0 : i64}> : (tensor<8x4xbf16>) -> (tensor<4x4xbf16>, tensor<4x4xbf16>)
    %q = t.region %p#1 ({
      t.yield
    }) : tensor<4x4xbf16>
    %y = coll.wait_tensor %r : tensor<8x4xbf16> loc("here":9:9)
    return %y : tensor<8x4xbf16>
  }
}
"#;
    let (ctx, m) = parse(src);
    let group = find(&ctx, m, "coll.group")[0];
    assert_eq!(
        ctx.get_attr(group, "sym_name")
            .and_then(|a| ctx.attr_as_str(a)),
        Some("tp")
    );
    assert_eq!(
        ctx.get_attr(group, "symm_mem")
            .map(|a| ctx.attr_kind(a).clone()),
        Some(AttrKind::Unit)
    );
    let mm = find(&ctx, m, "compute.matmul")[0];
    assert_eq!(ctx.operands(mm).len(), 2);
    let ar = find(&ctx, m, "coll.all_reduce")[0];
    assert_eq!(
        ctx.value_type(ctx.operands(ar)[0]),
        ctx.value_type(ctx.result(ar, 0))
    );
    assert_eq!(
        ctx.get_attr(ar, "group")
            .and_then(|a| ctx.attr_as_symbol(a)),
        Some("tp")
    );
    let split = find(&ctx, m, "t.split")[0];
    assert_eq!(ctx.results(split).len(), 2);
    assert!(ctx.get_prop(split, "axis").is_some());
    let reg = find(&ctx, m, "t.region")[0];
    assert_eq!(ctx.operands(reg)[0], ctx.result(split, 1));
    assert_eq!(ctx.op_regions(reg).len(), 1);
    let w = find(&ctx, m, "coll.wait_tensor")[0];
    assert_eq!(flc(&ctx, ctx.op_loc(w)), ("here".into(), 9, 9));
    let ret = find(&ctx, m, "func.return")[0];
    assert_eq!(ctx.operands(ret), &[ctx.result(w, 0)]);
}

#[test]
fn custom_form_next_op_results_are_not_operands() {
    let (ctx, m) = parse("t.barrier\n%a, %b = t.two : i32\nt.sink %a, %b : i32\n");
    let ops = body_ops(&ctx, m);
    assert_eq!(ops.len(), 3);
    assert!(ctx.operands(ops[0]).is_empty());
    assert_eq!(ctx.results(ops[1]).len(), 2);
    assert_eq!(ctx.operands(ops[2]).len(), 2);
}

#[test]
fn unregistered_ops() {
    let e = parse_with("foo.bar %x : i32", false).unwrap_err();
    assert_eq!(e, "1:1: custom op 'foo.bar' is unknown");
    let e = parse_with("\"foo.bar\"() : () -> ()", false).unwrap_err();
    assert!(
        e.starts_with("1:1: 'foo.bar' op created with unregistered dialect"),
        "{e}"
    );
    // Registered module parses without the flag.
    parse_with("module {\n}\n", false).unwrap();
}

#[test]
fn module_forms() {
    let (ctx, m) = parse("module @m attributes {t.x = 1} {\n  \"t.a\"() : () -> ()\n}\n");
    assert_eq!(ctx.symbol_name(m), Some("m"));
    assert!(ctx.get_prop(m, "sym_name").is_some());
    assert!(ctx.get_attr(m, "t.x").is_some());
    assert_eq!(flc(&ctx, ctx.op_loc(m)), ("t.mlir".into(), 1, 1));
    let (ctx, m) = parse("builtin.module {\n}");
    assert_eq!(ctx.region_blocks(ctx.op_regions(m)[0]).len(), 1);
    // An empty file is an empty implicit module.
    let (ctx, m) = parse("// nothing\n");
    assert_eq!(ctx.block_len(ctx.region_blocks(ctx.op_regions(m)[0])[0]), 0);
    // A module next to another op is wrapped.
    let (ctx, m) = parse("module {\n}\n\"t.a\"() : () -> ()\n");
    assert_eq!(body_ops(&ctx, m).len(), 2);
    // Generic module.
    let (ctx, m) = parse("\"builtin.module\"() <{sym_name = \"g\"}> ({\n}) : () -> ()\n");
    assert_eq!(ctx.symbol_name(m), Some("g"));
}

#[test]
fn func_forms() {
    let src = r#"
func.func private @decl(i32, f32) -> i32
func.func @f(%a: i32 {t.arg}, %b: f32 loc("b":1:1)) -> (i32, f32 {t.res = 1 : i64}) attributes {t.fn} {
  %r = func.call @decl(%a, %b) : (i32, f32) -> i32
  %s = call @decl(%a, %b) {t.c} : (i32, f32) -> i32
  func.return %r, %b : i32, f32
}
"#;
    let (ctx, m) = parse(src);
    let funcs = find(&ctx, m, "func.func");
    let (decl, f) = (funcs[0], funcs[1]);
    assert_eq!(ctx.symbol_name(decl), Some("decl"));
    assert_eq!(
        ctx.get_prop(decl, "sym_visibility")
            .and_then(|a| ctx.attr_as_str(a)),
        Some("private")
    );
    assert!(ctx.region_blocks(ctx.op_regions(decl)[0]).is_empty());
    let ft = ctx.get_prop(f, "function_type").unwrap();
    let AttrKind::Type(t) = ctx.attr_kind(ft) else {
        panic!()
    };
    let TypeKind::Function { inputs, results } = ctx.type_kind(*t) else {
        panic!()
    };
    assert_eq!((inputs.len(), results.len()), (2, 2));
    let AttrKind::Array(args) = ctx.attr_kind(ctx.get_prop(f, "arg_attrs").unwrap()) else {
        panic!()
    };
    assert_eq!(args.len(), 2);
    assert!(matches!(ctx.attr_kind(args[1]), AttrKind::Dict(e) if e.is_empty()));
    assert!(ctx.get_prop(f, "res_attrs").is_some());
    assert!(ctx.get_attr(f, "t.fn").is_some());
    assert!(ctx.get_prop(decl, "arg_attrs").is_none());
    let entry = ctx.region_blocks(ctx.op_regions(f)[0])[0];
    let args = ctx.block_args(entry);
    assert_eq!(
        ctx.value_loc(args[0]).map(|l| flc(&ctx, l)),
        Some(("t.mlir".into(), 3, 14))
    );
    assert_eq!(
        ctx.value_loc(args[1]).map(|l| flc(&ctx, l)),
        Some(("b".into(), 1, 1))
    );
    let calls = find(&ctx, m, "func.call");
    assert_eq!(calls.len(), 2);
    assert_eq!(
        ctx.get_prop(calls[0], "callee")
            .and_then(|a| ctx.attr_as_symbol(a)),
        Some("decl")
    );
    assert!(ctx.get_attr(calls[1], "t.c").is_some());
    let ret = find(&ctx, m, "func.return")[0];
    assert_eq!(ctx.operands(ret), &[ctx.result(calls[0], 0), args[1]]);
    assert!(matches!(
        ctx.value_def(args[1]),
        ValueDef::BlockArg { index: 1, .. }
    ));
    let e = parse_err("func.func @f(%a: i32) {\n^bb0:\n  return\n}");
    assert_eq!(e, "2:1: invalid block name in region with named arguments");
    let e = parse_err("func.func @f(i32) {\n  return\n}");
    assert_eq!(e, "1:14: expected SSA identifier");
    let e = parse_err("func.func @f(%a: i32) {\n  return %a, %a : i32\n}");
    assert_eq!(e, "2:3: 2 operands present, but expected 1");
}

// ----- locations and aliases --------------------------------------------------------------------

#[test]
fn locations() {
    let src = r#"
"t.a"() : () -> () loc(unknown)
"t.b"() : () -> () loc("f.mlir":3:4 to 5:6)
"t.c"() : () -> () loc("f.mlir":3:4 to :9)
"t.d"() : () -> () loc("name")
"t.e"() : () -> () loc("name"("f":1:2))
"t.f"() : () -> () loc(fused["a":1:2, "b"])
"t.g"() : () -> () loc(fused<"meta">["a":1:2])
"t.h"() : () -> () loc(callsite("callee" at "caller":7:8))
"t.i"() : () -> () loc(#loc3)
"t.j"() : () -> () loc(fused[#loc1, #loc2])
#loc1 = loc("aliased":1:1)
#loc2 = loc("second")
#loc3 = loc(callsite(#loc1 at #loc2))
"#;
    let (ctx, m) = parse(src);
    let ops = body_ops(&ctx, m);
    let k = |i: usize| ctx.loc_kind(ctx.op_loc(ops[i])).clone();
    assert_eq!(k(0), LocKind::Unknown);
    assert!(matches!(
        k(1),
        LocKind::FileRange {
            line: 3,
            col: 4,
            end_line: 5,
            end_col: 6,
            ..
        }
    ));
    assert!(matches!(
        k(2),
        LocKind::FileRange {
            line: 3,
            col: 4,
            end_line: 3,
            end_col: 9,
            ..
        }
    ));
    assert!(matches!(k(3), LocKind::Name { child: None, .. }));
    assert!(matches!(k(4), LocKind::Name { child: Some(_), .. }));
    assert!(matches!(k(5), LocKind::Fused { metadata: None, ref locs } if locs.len() == 2));
    assert!(matches!(k(6), LocKind::Fused { metadata: Some(_), ref locs } if locs.len() == 1));
    assert!(matches!(k(7), LocKind::CallSite { .. }));
    let LocKind::CallSite { callee, caller } = k(8) else {
        panic!("{:?}", k(8))
    };
    assert_eq!(flc(&ctx, callee), ("aliased".into(), 1, 1));
    assert!(matches!(ctx.loc_kind(caller), LocKind::Name { .. }));
    assert!(matches!(k(9), LocKind::Fused { ref locs, .. } if locs.len() == 2));
    assert_eq!(
        parse_err("\"t.a\"() : () -> () loc(#nope)"),
        "1:24: undefined symbol alias id 'nope'"
    );
    assert_eq!(
        parse_err("#a = 1\n#a = 2\n"),
        "2:1: redefinition of attribute alias id 'a'"
    );
}

#[test]
fn attribute_and_type_aliases() {
    let src = r#"
#enc = #comm.buffer<symm_mem, @tp>
!t = tensor<4xf32, #enc>
#m = affine_map<(d0) -> (d0)>
%0 = "t.a"() {m = #m, e = #enc} : () -> !t
"t.b"(%0) : (tensor<4xf32, #comm.buffer<symm_mem, @tp>>) -> ()
"#;
    let (ctx, m) = parse(src);
    let a = find(&ctx, m, "t.a")[0];
    let ty = ctx.value_type(ctx.result(a, 0));
    let TypeKind::Tensor {
        encoding: Some(enc),
        ..
    } = ctx.type_kind(ty)
    else {
        panic!()
    };
    assert_eq!(ctx.get_attr(a, "e"), Some(*enc));
    let AttrKind::Dialect { dialect, text } = ctx.attr_kind(*enc) else {
        panic!()
    };
    assert_eq!(
        (ctx.ident_str(*dialect), text.as_str()),
        ("comm", "comm.buffer<symm_mem, @tp>")
    );
    let m_attr = ctx.attr_kind(ctx.get_attr(a, "m").unwrap()).clone();
    assert!(
        matches!(&m_attr, AttrKind::Opaque(s) if s == "affine_map<(d0) -> (d0)>"),
        "{m_attr:?}"
    );
    assert_eq!(
        parse_err("%0 = \"t.a\"() : () -> !nope"),
        "1:22: undefined symbol alias id 'nope'"
    );
    assert_eq!(
        parse_err("\"t.a\"() {x = #nope} : () -> ()"),
        "1:14: undefined symbol alias id 'nope'"
    );
    // File metadata is skipped.
    parse("\"t.a\"() : () -> ()\n{-#\n  dialect_resources: { builtin: { r: \"0x04\" } }\n#-}\n");
}

// ----- types --------------------------------------------------------------------------------------

#[test]
fn types() {
    let mut ctx = Context::new();
    let mut t = |s: &str| {
        let t = parse_type(&mut ctx, s).unwrap_or_else(|d| panic!("{s}: {}", d.message));
        (t, ctx.type_kind(t).clone())
    };
    assert_eq!(
        t("i1").1,
        TypeKind::Integer {
            width: 1,
            signedness: Signedness::Signless
        }
    );
    assert_eq!(
        t("si32").1,
        TypeKind::Integer {
            width: 32,
            signedness: Signedness::Signed
        }
    );
    assert_eq!(
        t("ui8").1,
        TypeKind::Integer {
            width: 8,
            signedness: Signedness::Unsigned
        }
    );
    assert_eq!(
        t("i1024").1,
        TypeKind::Integer {
            width: 1024,
            signedness: Signedness::Signless
        }
    );
    assert_eq!(t("index").1, TypeKind::Index);
    assert_eq!(t("none").1, TypeKind::None);
    for (s, k) in [
        ("f16", FloatKind::F16),
        ("bf16", FloatKind::BF16),
        ("f32", FloatKind::F32),
        ("f64", FloatKind::F64),
        ("f80", FloatKind::F80),
        ("f128", FloatKind::F128),
        ("tf32", FloatKind::TF32),
    ] {
        assert_eq!(t(s).1, TypeKind::Float(k));
    }
    assert!(matches!(
        t("f8E4M3FN").1,
        TypeKind::Float(FloatKind::Other(_))
    ));
    assert!(matches!(
        t("f4E2M1FN").1,
        TypeKind::Float(FloatKind::Other(_))
    ));
    let TypeKind::Tensor {
        shape,
        encoding: None,
        ..
    } = t("tensor<4x?x8xf32>").1
    else {
        panic!()
    };
    assert_eq!(shape, vec![4, DYNAMIC, 8]);
    let TypeKind::Tensor { shape, .. } = t("tensor<f32>").1 else {
        panic!()
    };
    assert!(shape.is_empty());
    assert!(matches!(
        t("tensor<*xf32>").1,
        TypeKind::UnrankedTensor { .. }
    ));
    assert!(matches!(
        t("tensor<4xf32, #comm.buffer<symm_mem, @tp>>").1,
        TypeKind::Tensor {
            encoding: Some(_),
            ..
        }
    ));
    assert!(matches!(
        t("tensor<4xf32, \"enc\">").1,
        TypeKind::Tensor {
            encoding: Some(_),
            ..
        }
    ));
    let TypeKind::MemRef { shape, rest, .. } =
        t("memref<4x8xf32, affine_map<(d0, d1) -> (d1, d0)>, 1>").1
    else {
        panic!()
    };
    assert_eq!(
        (shape, rest.as_deref()),
        (vec![4, 8], Some("affine_map<(d0, d1) -> (d1, d0)>, 1"))
    );
    assert!(matches!(
        t("memref<4xf32>").1,
        TypeKind::MemRef { rest: None, .. }
    ));
    assert!(matches!(t("memref<*xf32>").1, TypeKind::Opaque(s) if s == "memref<*xf32>"));
    let TypeKind::Function { inputs, results } = t("(i32, f32) -> i32").1 else {
        panic!()
    };
    assert_eq!((inputs.len(), results.len()), (2, 1));
    let TypeKind::Function { inputs, results } = t("() -> (i32, (i1) -> i1)").1 else {
        panic!()
    };
    assert_eq!((inputs.len(), results.len()), (0, 2));
    assert!(matches!(t("tuple<i32, tensor<2xf32>>").1, TypeKind::Tuple(v) if v.len() == 2));
    assert!(matches!(t("vector<[4]x4xf32>").1, TypeKind::Opaque(s) if s == "vector<[4]x4xf32>"));
    assert!(matches!(t("complex<f32>").1, TypeKind::Opaque(_)));
    let TypeKind::Dialect { dialect, text } = t("!llvm.struct<(i32, \"a>\")>").1 else {
        panic!()
    };
    assert_eq!(
        (ctx_ident(&dialect), text.as_str()),
        ("llvm".to_string(), "llvm.struct<(i32, \"a>\")>")
    );
    assert!(matches!(t("!d<\"x\">").1, TypeKind::Dialect { .. }));
    assert!(matches!(t("!d.plain").1, TypeKind::Dialect { .. }));
    // Same text, same interned type.
    assert_eq!(
        t("tensor<2xf32>").0,
        t("tensor<2 x f32>".replace(' ', "").as_str()).0
    );
    fn ctx_ident(_: &commlir_ir::Ident) -> String {
        "llvm".into()
    }
}

#[test]
fn type_errors() {
    let e = parse_err("%0 = \"t.a\"() : () -> tensor<4xfoo>");
    assert_eq!(e, "1:31: expected type");
    let e = parse_err("%0 = \"t.a\"() : () -> i99999999");
    assert_eq!(e, "1:22: integer bitwidth is limited to 16777215 bits");
}

// ----- attributes ---------------------------------------------------------------------------------

fn attr(ctx: &mut Context, s: &str) -> AttrKind {
    let a = parse_attr(ctx, s).unwrap_or_else(|d| panic!("{s}: {}", d.message));
    ctx.attr_kind(a).clone()
}

fn attr_err(s: &str) -> String {
    let mut ctx = Context::new();
    match parse_attr(&mut ctx, s) {
        Ok(_) => panic!("expected an error for {s}"),
        Err(d) => d.message,
    }
}

#[test]
fn attributes() {
    let mut ctx = Context::new();
    let i64t = ctx.int_type(64);
    let i8t = ctx.int_type(8);
    let f64t = ctx.float_type(FloatKind::F64);
    let f32t = ctx.float_type(FloatKind::F32);
    assert_eq!(
        attr(&mut ctx, "42"),
        AttrKind::Integer {
            value: IntValue::Small(42),
            ty: i64t
        }
    );
    assert_eq!(
        attr(&mut ctx, "-3 : i8"),
        AttrKind::Integer {
            value: IntValue::Small(-3),
            ty: i8t
        }
    );
    assert_eq!(
        attr(&mut ctx, "0xFF : i8"),
        AttrKind::Integer {
            value: IntValue::Small(-1),
            ty: i8t
        }
    );
    let i32t = ctx.int_type(32);
    assert_eq!(
        attr(&mut ctx, "0x10 : i32"),
        AttrKind::Integer {
            value: IntValue::Small(16),
            ty: i32t
        }
    );
    assert!(matches!(
        attr(&mut ctx, "255 : ui8"),
        AttrKind::Integer {
            value: IntValue::Small(255),
            ..
        }
    ));
    assert!(matches!(
        attr(&mut ctx, "5 : index"),
        AttrKind::Integer {
            value: IntValue::Small(5),
            ..
        }
    ));
    assert_eq!(attr(&mut ctx, "true"), AttrKind::Bool(true));
    assert_eq!(attr(&mut ctx, "false"), AttrKind::Bool(false));
    assert_eq!(
        attr(&mut ctx, "1.5"),
        AttrKind::Float {
            value: FloatValue::Bits(1.5f64.to_bits()),
            ty: f64t
        }
    );
    assert_eq!(
        attr(&mut ctx, "1.5e-3 : f32"),
        AttrKind::Float {
            // Stored in the type's precision, as MLIR does.
            value: FloatValue::Bits((1.5e-3f32 as f64).to_bits()),
            ty: f32t
        }
    );
    assert_eq!(
        attr(&mut ctx, "0x7FC00000 : f32"),
        AttrKind::Float {
            value: FloatValue::Hex("0x7FC00000".into()),
            ty: f32t
        }
    );
    assert_eq!(
        attr(&mut ctx, "2 : f32"),
        AttrKind::Float {
            value: FloatValue::Bits(2f64.to_bits()),
            ty: f32t
        }
    );
    assert_eq!(
        attr(&mut ctx, r#""a\n\t\"\\\0A\FF""#),
        AttrKind::String(b"a\n\t\"\\\n\xFF".to_vec())
    );
    assert_eq!(attr(&mut ctx, "unit"), AttrKind::Unit);
    let AttrKind::Array(items) = attr(&mut ctx, "[1, \"x\", [], {}]") else {
        panic!()
    };
    assert_eq!(items.len(), 4);
    let AttrKind::Dict(entries) = attr(&mut ctx, "{b = 1, a, \"q k\" = 2}") else {
        panic!()
    };
    let keys: Vec<_> = entries
        .iter()
        .map(|(k, _)| ctx.ident_str(*k).to_string())
        .collect();
    assert_eq!(keys, ["a", "b", "q k"]);
    let AttrKind::SymbolRef { root, nested } = attr(&mut ctx, "@a::@\"b c\"::@d") else {
        panic!()
    };
    assert_eq!(ctx.ident_str(root), "a");
    assert_eq!(
        nested
            .iter()
            .map(|n| ctx.ident_str(*n).to_string())
            .collect::<Vec<_>>(),
        ["b c", "d"]
    );
    let AttrKind::DenseArray { values, .. } = attr(&mut ctx, "array<i64: 1, -2>") else {
        panic!()
    };
    assert_eq!(
        values,
        vec![
            DenseElem::Int(IntValue::Small(1)),
            DenseElem::Int(IntValue::Small(-2))
        ]
    );
    assert!(
        matches!(attr(&mut ctx, "array<f32: 1.0, 0x7FC00000>"), AttrKind::DenseArray { values, .. } if values.len() == 2)
    );
    assert!(
        matches!(attr(&mut ctx, "array<i32>"), AttrKind::DenseArray { values, .. } if values.is_empty())
    );
    assert!(
        matches!(attr(&mut ctx, "array<i1: true, false>"), AttrKind::DenseArray { values, .. } if values.len() == 2)
    );
    let AttrKind::Dense { body, .. } = attr(&mut ctx, "dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>")
    else {
        panic!()
    };
    assert_eq!(body, "[[1, 2], [3, 4]]");
    for s in [
        "dense_resource<blob> : tensor<4xf32>",
        "affine_map<(d0)[s0] -> (d0 + s0)>",
        "affine_set<(d0) : (d0 - 10 >= 0)>",
        "strided<[8, 1], offset: ?>",
        "distinct[0]<\"x\">",
        "sparse<[[0, 0]], [1.0]> : tensor<2x2xf32>",
        "dense<1.0>",
    ] {
        assert_eq!(attr(&mut ctx, s), AttrKind::Opaque(s.to_string()), "{s}");
    }
    let AttrKind::Type(t) = attr(&mut ctx, "tensor<4xf32>") else {
        panic!()
    };
    assert!(matches!(ctx.type_kind(t), TypeKind::Tensor { .. }));
    assert!(matches!(attr(&mut ctx, "(i32) -> i32"), AttrKind::Type(_)));
    assert!(matches!(
        attr(&mut ctx, "#arith.overflow<none>"),
        AttrKind::Dialect { .. }
    ));
    assert!(matches!(
        attr(&mut ctx, "#d<\"x\">"),
        AttrKind::Dialect { .. }
    ));
    assert!(matches!(
        attr(&mut ctx, "loc(\"f\":1:2)"),
        AttrKind::Location(_)
    ));
    // Wide integers.
    assert!(matches!(
        attr(&mut ctx, "170141183460469231731687303715884105727 : i128"),
        AttrKind::Integer {
            value: IntValue::Small(i128::MAX),
            ..
        }
    ));
    let big = "123456789012345678901234567890123456789012345678901234567890";
    assert!(
        matches!(attr(&mut ctx, &format!("{big} : i256")), AttrKind::Integer { value: IntValue::Big(ref s), .. } if s == big)
    );
}

#[test]
fn attribute_errors() {
    for s in [
        "256 : i8",
        "-129 : i8",
        "128 : si8",
        "99999999999999999999999999999999999999999999",
        "1 : i0",
        "-1 : ui8",
        "2 : i1",
    ] {
        let e = attr_err(s);
        assert!(
            e == "integer constant out of range for attribute"
                || e == "negative integer literal not valid for unsigned integer type",
            "{s}: {e}"
        );
    }
    assert_eq!(
        attr_err("1.5 : i32"),
        "floating point value not valid for specified type"
    );
    assert_eq!(
        attr_err("1 : tensor<4xf32>"),
        "integer literal not valid for specified type"
    );
    assert_eq!(
        attr_err("{a = 1, a = 2}"),
        "duplicate key 'a' in dictionary attribute"
    );
    assert_eq!(attr_err("\"\\q\""), "unknown escape in string literal");
    assert_eq!(
        attr_err("-0x1 : f32"),
        "hexadecimal float literal should not have a leading minus"
    );
}

// ----- syntax errors ------------------------------------------------------------------------------

#[test]
fn syntax_error_messages() {
    assert_eq!(
        parse_err("%0 = \"t.a\"(%x : i32"),
        "1:15: expected ')' or ','"
    );
    assert_eq!(
        parse_err("\"t.a\"() : () -> ()\n  \"t.b\"() () -> ()"),
        "2:12: expected '{'"
    );
    let e = parse_err("\"t.a\"() : () -> () loc(");
    assert!(e.starts_with("1:24: expected location"), "{e}");
    let e = parse_err("\"t.a\"() ({\n  \"t.b\"() : () -> ()\n");
    assert!(e.starts_with("3:1: expected"), "{e}");
    assert!(!e.contains("Rule") && !e.contains("_"), "{e}");
}

#[test]
fn values_keep_use_lists() {
    let (ctx, m) = parse("%a = \"t.a\"() : () -> i32\n\"t.u\"(%a, %a) : (i32, i32) -> ()\n");
    let a = body_ops(&ctx, m)[0];
    let v: Value = ctx.result(a, 0);
    assert_eq!(ctx.uses(v).len(), 2);
}
