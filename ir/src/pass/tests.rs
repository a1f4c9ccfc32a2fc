//! Unit tests of the pass manager: pipeline parsing and printing, error columns, implicit
//! nesting, the registry, statistics, verification after passes and instrumentation, using
//! test passes registered only in this test binary.

use super::*;
use crate::builder::Builder;
use crate::context::{Context, OpState};
use crate::diag::Diagnostic;
use crate::entity::OpId;
use std::cell::RefCell;
use std::rc::Rc;

crate::register_pass!(
    TEST_MODULE = PassInfo {
        argument: "test-pm-module",
        name: "TestPmModule",
        summary: "module pass with options of every kind",
        description: "",
        anchor: Anchor::MODULE,
        options: &[
            OptionDef::bool("b", false, "bool"),
            OptionDef::new("i", OptionKind::Int, "-1", "int"),
            OptionDef::new("u", OptionKind::UInt, "7", "uint"),
            OptionDef::new("f", OptionKind::Float, "0.25", "float"),
            OptionDef::new("s", OptionKind::String, "", "string"),
            OptionDef::new("e", OptionKind::Enum(&["x", "y"]), "x", "enum"),
            OptionDef::new("l", OptionKind::IntList, "", "int list"),
            OptionDef::new("sl", OptionKind::StringList, "", "string list"),
        ],
        statistics: &[],
        create: |o| {
            if o.get_int("i") == 13 {
                return Err("i must not be 13".into());
            }
            Ok(Box::new(Nop(&TEST_MODULE)))
        },
    }
);

crate::register_pass!(
    TEST_FUNC = PassInfo {
        argument: "test-pm-func",
        name: "TestPmFunc",
        summary: "function pass counting its runs",
        description: "",
        anchor: Anchor::FUNC,
        options: &[],
        statistics: &[
            StatisticDef::new("visited", "Functions visited"),
            StatisticDef::new("big", "A big number")
        ],
        create: |_| Ok(Box::new(CountFuncs)),
    }
);

crate::register_pass!(
    TEST_ANY = PassInfo {
        argument: "test-pm-any",
        name: "TestPmAny",
        summary: "op-agnostic pass doing nothing",
        description: "",
        anchor: Anchor::Any,
        options: &[],
        statistics: &[],
        create: |_| Ok(Box::new(Nop(&TEST_ANY))),
    }
);

crate::register_pass!(
    TEST_FAIL = PassInfo {
        argument: "test-pm-fail",
        name: "TestPmFail",
        summary: "function pass failing on @bad",
        description: "",
        anchor: Anchor::FUNC,
        options: &[],
        statistics: &[],
        create: |_| Ok(Box::new(FailOnBad)),
    }
);

crate::register_pass!(
    TEST_BREAK = PassInfo {
        argument: "test-pm-break",
        name: "TestPmBreak",
        summary: "function pass that leaves invalid IR (a use before its definition)",
        description: "",
        anchor: Anchor::FUNC,
        options: &[],
        statistics: &[],
        create: |_| Ok(Box::new(Break)),
    }
);

crate::register_pass!(
    TEST_MOVE_BACK = PassInfo {
        argument: "test-pm-move-back",
        name: "TestPmMoveBack",
        summary: "module pass that moves its first op to the end and back, and says so",
        description: "",
        anchor: Anchor::MODULE,
        options: &[OptionDef::bool(
            "lie",
            false,
            "break the IR but still claim no change"
        )],
        statistics: &[],
        create: |o| Ok(Box::new(MoveBack {
            lie: o.get_bool("lie")
        })),
    }
);

/// Leaves the IR as it found it and marks it unchanged (with `lie`, breaks it first).
struct MoveBack {
    lie: bool,
}
impl Pass for MoveBack {
    fn info(&self) -> &'static PassInfo {
        &TEST_MOVE_BACK
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let body = ctx.region_blocks(ctx.op_regions(op)[0])[0];
        if let (Some(first), Some(last)) = (ctx.block_first(body), ctx.block_last(body)) {
            if first != last {
                let second = ctx.next_op(first).expect("two ops");
                ctx.move_after(first, last);
                ctx.move_before(first, second);
            }
        }
        if self.lie {
            let func = ctx.block_first(body).expect("a function");
            Break.run(ctx, func, env)?;
        }
        env.mark_unchanged();
        Ok(())
    }
}

struct Nop(&'static PassInfo);
impl Pass for Nop {
    fn info(&self) -> &'static PassInfo {
        self.0
    }
    fn run(&mut self, _: &mut Context, _: OpId, _: &mut PassEnv<'_>) -> Result<(), Diagnostic> {
        Ok(())
    }
}

struct CountFuncs;
impl Pass for CountFuncs {
    fn info(&self) -> &'static PassInfo {
        &TEST_FUNC
    }
    fn run(&mut self, _: &mut Context, _: OpId, env: &mut PassEnv<'_>) -> Result<(), Diagnostic> {
        env.add_stat("visited", 1);
        env.add_stat("big", 1000);
        Ok(())
    }
}

struct FailOnBad;
impl Pass for FailOnBad {
    fn info(&self) -> &'static PassInfo {
        &TEST_FAIL
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        env.emit(Diagnostic::remark(
            ctx.op_loc(op),
            format!("visiting @{}", ctx.symbol_name(op).unwrap_or("")),
        ));
        if ctx.symbol_name(op) == Some("bad") {
            return Err(ctx.op_error(op, "is bad"));
        }
        Ok(())
    }
}

struct Break;
impl Pass for Break {
    fn info(&self) -> &'static PassInfo {
        &TEST_BREAK
    }
    fn run(&mut self, ctx: &mut Context, op: OpId, _: &mut PassEnv<'_>) -> Result<(), Diagnostic> {
        // A use before its definition in an SSA region (the function is registered in this
        // test's context): the dominance check fails.
        let body = ctx.region_blocks(ctx.op_regions(op)[0])[0];
        let Some(first) = ctx.block_first(body) else {
            return Ok(());
        };
        let ty = ctx.index_type();
        let v = Builder::before(ctx, first).create_value("test.def", &[], ty, &[]);
        let user = Builder::before(ctx, first).create("test.use", &[v], &[], &[]);
        let def = ctx.defining_op(v).expect("op result");
        ctx.move_after(def, user);
        Ok(())
    }
}

/// A module holding one empty `func.func` per name. The func dialect lives in another crate,
/// so the ops are unregistered here; the context allows that.
fn module_with_funcs(ctx: &mut Context, names: &[&str]) -> OpId {
    ctx.allow_unregistered = true;
    let loc = ctx.unknown_loc();
    let mut st = OpState::new(ctx.ident("builtin.module"), loc);
    st.num_regions = 1;
    let module = ctx.create_op(st);
    let body = ctx.new_block(&[]);
    ctx.append_block(ctx.op_regions(module)[0], body);
    for name in names {
        let sym = ctx.str_attr(name);
        let mut b = Builder::at_end(ctx, body);
        let mut st = OpState::new(b.ctx.ident("func.func"), loc);
        st.num_regions = 1;
        st.attrs = vec![(b.ctx.ident("sym_name"), sym)];
        let f = b.create_state(st);
        let entry = ctx.new_block(&[]);
        ctx.append_block(ctx.op_regions(f)[0], entry);
        Builder::at_end(ctx, entry).create("func.return", &[], &[], &[]);
    }
    module
}

fn canonical(text: &str) -> String {
    parse_pipeline(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .to_pipeline_string()
}

#[test]
fn registry_finds_registered_passes() {
    let r = PassRegistry::global();
    assert!(r.get("test-pm-func").is_some());
    assert!(r.get("no-such-pass").is_none());
    let names: Vec<_> = r.passes().map(|p| p.argument).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}

#[test]
fn pipelines_round_trip_in_canonical_form() {
    assert_eq!(
        canonical("builtin.module(func.func(test-pm-func),test-pm-module{b i=3 s={a b} l=1,2 f=1.5 e=y})"),
        "builtin.module(func.func(test-pm-func),test-pm-module{b=true e=y f=1.500000e+00 i=3 l=1,2 s={a b} u=7})"
    );
    assert_eq!(
        canonical(" any ( test-pm-any , func.func( ) ) "),
        "any(test-pm-any,func.func())"
    );
    assert_eq!(canonical("builtin.module()"), "builtin.module()");
    assert_eq!(canonical(""), "any()");
    assert_eq!(
        canonical("builtin.module(test-pm-module{sl='a b',c s=\"x,y\" u=0x10})"),
        "builtin.module(test-pm-module{b=false e=x f=2.500000e-01 i=-1 s={x,y} sl={a b},c u=16})"
    );
    for text in [
        "builtin.module(func.func(test-pm-func,test-pm-any),test-pm-module{b=true e=y f=1.500000e+00 i=3 l=1,2 s={a b} u=7})",
        "builtin.module(test-pm-module{b=false e=x f=2.500000e-01 i=-1 s={x,y} sl={a b},c u=16})",
    ] {
        assert_eq!(canonical(text), text, "printing is a fixed point");
    }
}

#[test]
fn passes_nest_implicitly_on_their_anchor() {
    assert_eq!(
        canonical("builtin.module(test-pm-func,test-pm-func,test-pm-any,test-pm-func)"),
        "builtin.module(func.func(test-pm-func,test-pm-func),test-pm-any,func.func(test-pm-func))"
    );
    assert_eq!(
        canonical("any(test-pm-func)"),
        "any(func.func(test-pm-func))"
    );
    let err = parse_pipeline("builtin.module(func.func(test-pm-module))").unwrap_err();
    assert_eq!(err.offset(), 25);
    assert!(
        err.to_string().contains("restricted to 'builtin.module'"),
        "{err}"
    );
}

#[test]
fn errors_point_at_their_column() {
    let cases: &[(&str, usize, &str)] = &[
        ("test-pm-any", 0, "wrapped with the anchor operation type"),
        (
            "builtin.module(nope)",
            15,
            "'nope' does not refer to a registered pass",
        ),
        (
            "builtin.module(test-pm-any test-pm-any)",
            27,
            "expected ',' or ')'",
        ),
        ("builtin.module(test-pm-any", 26, "expected ',' or ')'"),
        ("builtin.module(,)", 15, "expected a pass or pipeline name"),
        ("builtin.module(test-pm-module{b", 29, "missing closing '}'"),
        (
            "builtin.module(test-pm-module{b i=x})",
            32,
            "'x' is not an integer",
        ),
        (
            "builtin.module(test-pm-module{zz=1})",
            30,
            "no such option 'zz'",
        ),
        (
            "builtin.module(test-pm-module{e=z})",
            30,
            "'z' is not one of x, y",
        ),
        (
            "builtin.module(test-pm-module{s=\"ab})",
            29,
            "missing closing '}'",
        ),
        (
            "builtin.module(test-pm-module{i=13})",
            15,
            "i must not be 13",
        ),
        ("builtin.module() x", 17, "unexpected text"),
    ];
    for (text, at, msg) in cases {
        let e = parse_pipeline(text).unwrap_err();
        assert_eq!(e.offset(), *at, "{text}: {e}");
        assert!(e.to_string().contains(msg), "{text}: {e}");
    }
    let rendered = parse_pipeline("builtin.module(nope)")
        .unwrap_err()
        .render("builtin.module(nope)");
    assert_eq!(
        rendered,
        "MLIR Textual PassPipeline Parser:1:16: error: 'nope' does not refer to a registered pass or pass pipeline\n\
         builtin.module(nope)\n               ^\n"
    );
}

#[test]
fn statistics_accumulate_over_functions() {
    let mut ctx = Context::new();
    let m = module_with_funcs(&mut ctx, &["a", "b", "c"]);
    let mut pm = PassManager::from_pipeline(
        parse_pipeline("builtin.module(test-pm-func,test-pm-any)").unwrap(),
    );
    pm.run(&mut ctx, m).unwrap();
    let report = pm.statistics_report();
    let body: Vec<&str> = report.lines().skip(3).collect();
    assert_eq!(
        body,
        [
            "'func.func' Pipeline",
            "  TestPmFunc",
            "    (S)    3 visited - Functions visited",
            "    (S) 3000 big - A big number",
            "TestPmAny",
        ]
    );
}

#[test]
fn failures_stop_the_pipeline_and_keep_diagnostics() {
    let mut ctx = Context::new();
    let m = module_with_funcs(&mut ctx, &["a", "bad", "c"]);
    let mut pm = PassManager::from_pipeline(
        parse_pipeline("builtin.module(test-pm-fail,test-pm-func)").unwrap(),
    );
    let diags = pm.run(&mut ctx, m).unwrap_err();
    let msgs: Vec<_> = diags.iter().map(|d| d.message.as_str()).collect();
    // Every function runs (as with mlir-opt's threads), then the pipeline stops; the two
    // passes share one nested pipeline, so the second one ran on @a and @c only.
    assert_eq!(
        msgs,
        [
            "visiting @a",
            "visiting @bad",
            "'func.func' op is bad",
            "visiting @c"
        ]
    );
    assert!(
        pm.statistics_report().contains("(S)    2 visited"),
        "{}",
        pm.statistics_report()
    );
}

/// A stand-in `func.func` (the func dialect lives in another crate): registered, its region is
/// an SSA region where dominance is checked (regions of unregistered ops may be graph regions).
static TEST_FUNC_DEF: crate::opdef::OpDef = crate::opdef::OpDef {
    name: "func.func",
    regions: Some(1),
    traits: &[crate::opdef::Trait::IsolatedFromAbove],
    ..crate::opdef::OpDef::EMPTY
};

#[test]
fn verify_each_catches_broken_ir_unless_disabled() {
    let mut ctx = Context::new();
    ctx.register_op(&TEST_FUNC_DEF);
    let m = module_with_funcs(&mut ctx, &["a"]);
    let mut pm =
        PassManager::from_pipeline(parse_pipeline("builtin.module(test-pm-break)").unwrap());
    let diags = pm.run(&mut ctx, m).unwrap_err();
    assert!(
        diags[0].message.contains("does not dominate"),
        "{}",
        diags[0].message
    );

    let mut ctx = Context::new();
    let m = module_with_funcs(&mut ctx, &["a"]);
    let mut pm =
        PassManager::from_pipeline(parse_pipeline("builtin.module(test-pm-break)").unwrap());
    pm.verify_each = false;
    assert!(pm.run(&mut ctx, m).unwrap().is_empty());
}

#[test]
fn root_anchor_must_match() {
    let mut ctx = Context::new();
    let m = module_with_funcs(&mut ctx, &[]);
    let mut pm = PassManager::from_pipeline(parse_pipeline("func.func(test-pm-any)").unwrap());
    let d = pm.run(&mut ctx, m).unwrap_err();
    assert_eq!(
        d[0].message,
        "can't run 'func.func' pass manager on 'builtin.module' op"
    );
}

#[derive(Default)]
struct Recorder(Rc<RefCell<Vec<String>>>);
impl PassInstrumentation for Recorder {
    fn before_pipeline(&mut self, anchor: &str, _: usize, _: &Context, _: OpId) {
        self.0.borrow_mut().push(format!("enter {anchor}"));
    }
    fn after_pipeline(&mut self, anchor: &str, _: usize, _: &Context, _: OpId) {
        self.0.borrow_mut().push(format!("leave {anchor}"));
    }
    fn before_pass(&mut self, p: PassRef<'_>, ctx: &Context, op: OpId) {
        self.0
            .borrow_mut()
            .push(format!("before {} on {}", p.info.argument, ctx.op_name(op)));
    }
    fn after_pass(&mut self, p: PassRef<'_>, _: &Context, _: OpId) {
        self.0
            .borrow_mut()
            .push(format!("after {}", p.info.argument));
    }
    fn after_pass_failed(&mut self, p: PassRef<'_>, _: &Context, _: OpId) {
        self.0
            .borrow_mut()
            .push(format!("failed {}", p.info.argument));
    }
    fn before_verify(&mut self, _: &Context, _: OpId) {
        self.0.borrow_mut().push("verify".into());
    }
}

#[test]
fn instrumentation_sees_every_event_in_order() {
    let mut ctx = Context::new();
    let m = module_with_funcs(&mut ctx, &["a", "bad"]);
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut pm = PassManager::from_pipeline(
        parse_pipeline("builtin.module(test-pm-any,test-pm-fail)").unwrap(),
    );
    pm.add_instrumentation(Box::new(Recorder(log.clone())));
    let _ = pm.run(&mut ctx, m);
    assert_eq!(
        *log.borrow(),
        [
            "before test-pm-any on builtin.module",
            "after test-pm-any",
            "verify",
            "enter func.func",
            "before test-pm-fail on func.func",
            "after test-pm-fail",
            "verify",
            "leave func.func",
            "enter func.func",
            "before test-pm-fail on func.func",
            "failed test-pm-fail",
            "leave func.func",
        ]
    );
}

#[test]
fn ir_printing_after_change_skips_unchanged_passes() {
    let mut ctx = Context::new();
    let m = module_with_funcs(&mut ctx, &["a"]);
    let out = Rc::new(RefCell::new(String::new()));
    let sink = out.clone();
    let config = IrPrintConfig {
        after_all: true,
        after_change: true,
        before: vec!["test-pm-break".into()],
        ..IrPrintConfig::default()
    };
    let mut pm = PassManager::from_pipeline(
        parse_pipeline("builtin.module(test-pm-func,test-pm-break)").unwrap(),
    );
    pm.verify_each = false;
    pm.add_instrumentation(Box::new(IrPrinter::new(
        config,
        Box::new(move |s| sink.borrow_mut().push_str(s)),
    )));
    pm.run(&mut ctx, m).unwrap();
    let headers: Vec<String> = out
        .borrow()
        .lines()
        .filter(|l| l.starts_with("// -----//"))
        .map(String::from)
        .collect();
    assert_eq!(
        headers,
        [
            "// -----// IR Dump Before TestPmBreak (test-pm-break) //----- //",
            "// -----// IR Dump After TestPmBreak (test-pm-break) //----- //",
        ]
    );
}

#[test]
fn fingerprint_sees_moves_and_attribute_changes() {
    let mut ctx = Context::new();
    let m = module_with_funcs(&mut ctx, &["a", "b"]);
    let fp0 = fingerprint::fingerprint(&ctx, m);
    assert_eq!(fp0, fingerprint::fingerprint(&ctx, m));
    let body = ctx.region_blocks(ctx.op_regions(m)[0])[0];
    let first = ctx.block_first(body).unwrap();
    let last = ctx.block_last(body).unwrap();
    ctx.move_after(first, last);
    let fp1 = fingerprint::fingerprint(&ctx, m);
    assert_ne!(fp0, fp1);
    let u = ctx.unit_attr();
    ctx.set_attr(m, "x", u);
    assert_ne!(fp1, fingerprint::fingerprint(&ctx, m));
}

#[test]
fn unchanged_ir_is_not_verified_again_but_changed_ir_is() {
    let mut ctx = Context::new();
    ctx.register_op(&TEST_FUNC_DEF);
    let m = module_with_funcs(&mut ctx, &["a", "b"]);
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut pm = PassManager::from_pipeline(
        parse_pipeline("builtin.module(test-pm-move-back,test-pm-break)").unwrap(),
    );
    pm.add_instrumentation(Box::new(Recorder(log.clone())));
    // The pass that changed the IR is verified even right after one that did not.
    let diags = pm.run(&mut ctx, m).unwrap_err();
    assert!(
        diags[0].message.contains("does not dominate"),
        "{}",
        diags[0].message
    );
    assert_eq!(
        *log.borrow(),
        [
            "before test-pm-move-back on builtin.module",
            "after test-pm-move-back",
            "enter func.func",
            "before test-pm-break on func.func",
            "after test-pm-break",
            "verify",
            "leave func.func",
            "enter func.func",
            "before test-pm-break on func.func",
            "after test-pm-break",
            "verify",
            "leave func.func",
        ]
    );
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "marked the IR unchanged but changed it")]
fn a_false_unchanged_claim_is_caught_in_debug_builds() {
    let mut ctx = Context::new();
    ctx.register_op(&TEST_FUNC_DEF);
    let m = module_with_funcs(&mut ctx, &["a"]);
    let mut pm = PassManager::from_pipeline(
        parse_pipeline("builtin.module(test-pm-move-back{lie=true})").unwrap(),
    );
    let _ = pm.run(&mut ctx, m);
}

crate::register_pass!(
    TEST_REORDER = PassInfo {
        argument: "test-pm-reorder",
        name: "TestPmReorder",
        summary: "function pass that moves one op within its block and says it only reordered",
        description: "",
        anchor: Anchor::FUNC,
        options: &[OptionDef::new(
            "move",
            OptionKind::Enum(&[
                "none",
                "swap",
                "first-last",
                "use-early",
                "ret-early",
                "lie"
            ]),
            "none",
            "which op to move (`lie`: set an attribute too)"
        )],
        statistics: &[],
        create: |o| Ok(Box::new(Reorder(o.get_str("move").to_string()))),
    }
);

/// Moves one op of the function's body (see [`reorder_body`] for the body it expects) and
/// marks the IR reordered only; `none` moves nothing and marks it unchanged as well.
struct Reorder(String);
impl Pass for Reorder {
    fn info(&self) -> &'static PassInfo {
        &TEST_REORDER
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let body = ctx.region_blocks(ctx.op_regions(op)[0])[0];
        let ops: Vec<OpId> = ctx.block_ops(body).collect();
        let [first, a, b, user, ret] = ops[..] else {
            panic!("unexpected body");
        };
        match self.0.as_str() {
            "none" => env.mark_unchanged(),
            // %0 and %1 are independent: a valid permutation.
            "swap" => ctx.move_after(a, b),
            "first-last" => ctx.move_before(first, ret),
            "use-early" => ctx.move_before(user, a),
            "ret-early" => ctx.move_before(ret, a),
            "lie" => {
                ctx.move_after(a, b);
                let u = ctx.unit_attr();
                ctx.set_attr(a, "x", u);
            }
            m => panic!("unknown move {m}"),
        }
        env.mark_reordered_only();
        Ok(())
    }
}

thread_local! {
    /// Calls of the `verify` hooks of `test.counted` and `test.first` on this thread.
    static VERIFIED: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// An op whose verifier only counts its calls.
static TEST_COUNTED_DEF: crate::opdef::OpDef = crate::opdef::OpDef {
    name: "test.counted",
    operands: &[crate::opdef::ArgDef::variadic(
        "in",
        crate::opdef::TypeConstraint::Any,
    )],
    results: &[crate::opdef::ArgDef::variadic(
        "out",
        crate::opdef::TypeConstraint::Any,
    )],
    verify: Some(|_, _| {
        VERIFIED.with(|v| v.set((v.get().0 + 1, v.get().1)));
        Ok(())
    }),
    ..crate::opdef::OpDef::EMPTY
};

/// An op that must come first in its block: its verifier reads the order of its siblings.
static TEST_FIRST_DEF: crate::opdef::OpDef = crate::opdef::OpDef {
    name: "test.first",
    traits: &[crate::opdef::Trait::OrderSensitiveVerifier],
    verify: Some(|ctx, op| {
        VERIFIED.with(|v| v.set((v.get().0, v.get().1 + 1)));
        match ctx.op_parent(op).and_then(|b| ctx.block_first(b)) {
            Some(f) if f != op => Err(ctx.op_error(op, "must come first in its block")),
            _ => Ok(()),
        }
    }),
    ..crate::opdef::OpDef::EMPTY
};

static TEST_RET_DEF: crate::opdef::OpDef = crate::opdef::OpDef {
    name: "test.ret",
    traits: &[crate::opdef::Trait::Terminator],
    ..crate::opdef::OpDef::EMPTY
};

/// A module holding `@f`, whose body [`Reorder`] rearranges; every op is registered, the
/// function's region is an SSA region that needs a terminator.
fn reorder_body(ctx: &mut Context) -> OpId {
    for def in [
        &TEST_FUNC_DEF,
        &TEST_COUNTED_DEF,
        &TEST_FIRST_DEF,
        &TEST_RET_DEF,
    ] {
        ctx.register_op(def);
    }
    let text = r#"
"func.func"() ({
  "test.first"() : () -> ()
  %0 = "test.counted"() : () -> index
  %1 = "test.counted"() : () -> index
  "test.counted"(%0, %1) : (index, index) -> ()
  "test.ret"() : () -> ()
}) {sym_name = "f"} : () -> ()
"#;
    let m = crate::parser::parse_source(
        ctx,
        "reorder.mlir",
        text.as_bytes(),
        &crate::parser::ParseOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{}", e.message));
    crate::verify::verify(ctx, m).unwrap_or_else(|e| panic!("{}", e[0].message));
    m
}

/// Runs `test-pm-reorder{move=MOVE}` on the function of [`reorder_body`]: the pass manager's
/// diagnostics, the full verifier's on the IR it left, and the calls of the `test.counted`
/// and `test.first` verifiers during the run.
fn run_reorder(mv: &str) -> (Vec<String>, Vec<String>, (usize, usize)) {
    let mut ctx = Context::new();
    let m = reorder_body(&mut ctx);
    let mut pm = PassManager::from_pipeline(
        parse_pipeline(&format!(
            "builtin.module(func.func(test-pm-reorder{{move={mv}}}))"
        ))
        .unwrap(),
    );
    VERIFIED.with(|v| v.set((0, 0)));
    let got = pm.run(&mut ctx, m).err().unwrap_or_default();
    let calls = VERIFIED.with(|v| v.get());
    let body = ctx.region_blocks(ctx.op_regions(m)[0])[0];
    let f = ctx.block_first(body).unwrap();
    let full = crate::verify::verify(&ctx, f).err().unwrap_or_default();
    let render = |ds: Vec<Diagnostic>| ds.iter().map(|d| format!("{d:?}")).collect();
    (render(got), render(full), calls)
}

#[test]
fn a_valid_reorder_is_verified_by_order_checks_only() {
    let (got, full, calls) = run_reorder("swap");
    assert!(got.is_empty() && full.is_empty(), "{got:?} {full:?}");
    // Only the order-sensitive op's verifier ran.
    assert_eq!(calls, (0, 1));
}

#[test]
fn a_reorder_breaking_dominance_gets_the_full_verifiers_error() {
    let (got, full, _) = run_reorder("use-early");
    assert!(
        got[0].contains("operand #0 does not dominate this use"),
        "{got:?}"
    );
    assert_eq!(got, full);
}

#[test]
fn a_reorder_moving_a_terminator_gets_the_full_verifiers_errors() {
    let (got, full, _) = run_reorder("ret-early");
    // The function's block ends with a non-terminator, and the terminator is not last.
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].contains("block with no terminator"), "{got:?}");
    assert!(got[1].contains("must be the last operation"), "{got:?}");
    assert_eq!(got, full);
}

#[test]
fn an_order_sensitive_op_is_fully_verified_after_a_reorder() {
    let (got, full, calls) = run_reorder("first-last");
    assert!(got[0].contains("must come first in its block"), "{got:?}");
    assert_eq!(got, full);
    assert_eq!(calls, (0, 1));
}

#[test]
fn unchanged_takes_precedence_over_reordered_only() {
    let mut ctx = Context::new();
    let m = reorder_body(&mut ctx);
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut pm = PassManager::from_pipeline(
        parse_pipeline("builtin.module(func.func(test-pm-reorder{move=none}))").unwrap(),
    );
    pm.add_instrumentation(Box::new(Recorder(log.clone())));
    pm.run(&mut ctx, m).unwrap();
    assert!(!log.borrow().iter().any(|e| e == "verify"), "{log:?}");
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "pass 'test-pm-reorder' marked the IR reordered-only but changed it")]
fn a_false_reordered_only_claim_is_caught_in_debug_builds() {
    run_reorder("lie");
}

#[test]
fn unordered_fingerprint_sees_changes_but_not_moves() {
    let mut ctx = Context::new();
    let m = module_with_funcs(&mut ctx, &["a", "b"]);
    let fp0 = fingerprint::unordered_fingerprint(&ctx, m);
    let body = ctx.region_blocks(ctx.op_regions(m)[0])[0];
    let first = ctx.block_first(body).unwrap();
    let last = ctx.block_last(body).unwrap();
    ctx.move_after(first, last);
    assert_eq!(fp0, fingerprint::unordered_fingerprint(&ctx, m));
    // Moving a function's terminator into the other function changes block membership.
    let f_body = |ctx: &Context, f| ctx.region_blocks(ctx.op_regions(f)[0])[0];
    let ret = ctx.block_first(f_body(&ctx, first)).unwrap();
    let other = ctx.block_first(f_body(&ctx, last)).unwrap();
    ctx.move_before(ret, other);
    assert_ne!(fp0, fingerprint::unordered_fingerprint(&ctx, m));
}

// ----- the analysis cache ---------------------------------------------------------------

crate::register_pass!(
    TEST_ANALYSIS = PassInfo {
        argument: "test-pm-analysis",
        name: "TestPmAnalysis",
        summary: "stores, reads or invalidates a cached analysis",
        description: "",
        anchor: Anchor::Any,
        options: &[OptionDef::new(
            "mode",
            OptionKind::Enum(&["store", "read", "touch", "touch-store", "touch-a"]),
            "read",
            "what to do"
        )],
        statistics: &[
            StatisticDef::new("hit", "Cached analyses found"),
            StatisticDef::new("miss", "Cached analyses missing")
        ],
        create: |o| Ok(Box::new(AnalysisPass(o.get_str("mode").to_string()))),
    }
);

/// A cached analysis of a test op: the op it was computed for.
struct Seen(OpId);

/// `store`: caches `Seen` without changing the IR; `read`: counts hits (checking the value)
/// and misses; `touch`: changes the op (an attribute); `touch-store`: changes it, then
/// stores; `touch-a`: changes only the function named `a`.
struct AnalysisPass(String);
impl Pass for AnalysisPass {
    fn info(&self) -> &'static PassInfo {
        &TEST_ANALYSIS
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let touch = |ctx: &mut Context| {
            let n = ctx.int_attr(1, 64);
            ctx.set_attr(op, "test.touched", n);
        };
        match self.0.as_str() {
            "store" => {
                env.cache_analysis(op, Seen(op));
                env.mark_unchanged();
            }
            "read" => {
                match env.cached_analysis::<Seen>(op) {
                    Some(s) => {
                        assert_eq!(s.0, op);
                        env.add_stat("hit", 1);
                    }
                    None => env.add_stat("miss", 1),
                }
                env.mark_unchanged();
            }
            "touch" => touch(ctx),
            "touch-store" => {
                touch(ctx);
                env.cache_analysis(op, Seen(op));
            }
            "touch-a" => {
                if ctx.symbol_name(op) == Some("a") {
                    touch(ctx);
                } else {
                    env.mark_unchanged();
                }
            }
            m => unreachable!("mode {m}"),
        }
        Ok(())
    }
}

/// Runs `pipeline` on a module of functions `a` and `b`; returns (hits, misses).
fn analysis_hits(pipeline: &str) -> (u64, u64) {
    let mut ctx = Context::new();
    let m = module_with_funcs(&mut ctx, &["a", "b"]);
    let mut pm = PassManager::from_pipeline(parse_pipeline(pipeline).unwrap());
    pm.run(&mut ctx, m).unwrap();
    // Sums the `(S) N hit` / `(S) N miss` lines of every instance.
    let (mut hit, mut miss) = (0, 0);
    for line in pm.statistics_report().lines() {
        let mut w = line.split_whitespace();
        if w.next() != Some("(S)") {
            continue;
        }
        let n: u64 = w.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        match w.next() {
            Some("hit") => hit += n,
            Some("miss") => miss += n,
            _ => {}
        }
    }
    (hit, miss)
}

#[test]
fn cached_analyses_reach_later_passes_until_invalidated() {
    let f = |p: &str| analysis_hits(&format!("builtin.module(func.func({p}))"));
    // Stored by one pass, found by the next (each function its own).
    assert_eq!(f("test-pm-analysis{mode=store},test-pm-analysis"), (2, 0));
    // Nothing stored.
    assert_eq!(f("test-pm-analysis"), (0, 2));
    // A pass that changed the function in between drops it...
    assert_eq!(
        f("test-pm-analysis{mode=store},test-pm-analysis{mode=touch},test-pm-analysis"),
        (0, 2)
    );
    // ...unless it stored it itself after its change...
    assert_eq!(
        f("test-pm-analysis{mode=touch-store},test-pm-analysis"),
        (2, 0)
    );
    // ...and a change to one function leaves the other's.
    assert_eq!(
        f("test-pm-analysis{mode=store},test-pm-analysis{mode=touch-a},test-pm-analysis"),
        (1, 1)
    );
    // A change to the enclosing module drops the functions' analyses too.
    assert_eq!(
        analysis_hits(
            "builtin.module(func.func(test-pm-analysis{mode=store}),test-pm-analysis{mode=touch},\
             func.func(test-pm-analysis))"
        ),
        (0, 2)
    );
    // A module analysis goes when a function inside changes.
    assert_eq!(
        analysis_hits(
            "builtin.module(test-pm-analysis{mode=store},func.func(test-pm-analysis{mode=touch-a}),\
             test-pm-analysis)"
        ),
        (0, 1)
    );
}

#[test]
fn a_pass_run_by_hand_caches_nothing() {
    let mut ctx = Context::new();
    let m = module_with_funcs(&mut ctx, &["a"]);
    let mut stats = Statistics::new(TEST_ANALYSIS.statistics);
    let mut diags = Vec::new();
    let mut env = PassEnv::new(&mut stats, &mut diags, m);
    env.cache_analysis(m, Seen(m));
    assert!(env.cached_analysis::<Seen>(m).is_none());
}
