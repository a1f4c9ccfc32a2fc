//! commlir and real MLIR: import, export and commlir passes in a melior pass pipeline, each
//! checked by MLIR's own verifier and by running the programs on the sim backend.

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::pass::{parse_pipeline, PassManager as CommlirPassManager};
use commlir_ir::printer::{print_op, PrintOptions};
use commlir_ir::{Context, OpId};
use commlir_mlir_interop::{
    add_pipeline, commlir_pass, export_mlir, import_mlir, ExportOptions, MlirSession,
};
use commlir_runtime::{format_results, PrintMode, SimOptions};
use melior::ir::operation::OperationLike;
use melior::pass::PassManager;

/// An upstream SPMD program on a 2x2 grid, in the custom syntax of `shard` and `arith`.
const SHARD: &str = r#"shard.grid @grid0(shape = 2x2)
func.func @f(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<8x8xf32> {
  %s = arith.addf %x, %y : tensor<4x8xf32>
  %r = shard.all_reduce %s on @grid0 grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf32>
  %g = shard.all_gather %r on @grid0 grid_axes = [0] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %c = arith.constant dense<2.0> : tensor<8x8xf32>
  %m = arith.mulf %g, %c : tensor<8x8xf32>
  %t = shard.all_to_all %m on @grid0 grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<8x8xf32> -> tensor<16x4xf32>
  %b = shard.broadcast %t on @grid0 grid_axes = [0, 1] root = [1, 0] : (tensor<16x4xf32>) -> tensor<16x4xf32>
  %o = shard.reduce_scatter %b on @grid0 grid_axes = [0] reduction = max scatter_axis = 1 : tensor<16x4xf32> -> tensor<16x2xf32>
  %w = shard.all_gather %o on @grid0 grid_axes = [0] gather_axis = 1 : tensor<16x2xf32> -> tensor<16x4xf32>
  %e = math.exp %w : tensor<16x4xf32>
  %z = arith.subf %e, %w : tensor<16x4xf32>
  %q = shard.all_reduce %z on @grid0 grid_axes = [1, 0] : tensor<16x4xf32> -> tensor<16x4xf32>
  %v = shard.all_gather %q on @grid0 grid_axes = [1] gather_axis = 0 : tensor<16x4xf32> -> tensor<32x4xf32>
  %h = shard.all_to_all %v on @grid0 grid_axes = [0] split_axis = 0 concat_axis = 0 : tensor<32x4xf32> -> tensor<32x4xf32>
  %k = tensor.extract_slice %h[0, 0] [8, 4] [1, 1] : tensor<32x4xf32> to tensor<8x4xf32>
  return %m : tensor<8x8xf32>
}
"#;

fn sim(ctx: &Context, m: OpId, ranks: usize) -> String {
    let r = commlir_runtime::run(
        ctx,
        m,
        &SimOptions {
            ranks,
            entry: None,
            seed: 3,
        },
    )
    .unwrap_or_else(|d| {
        panic!(
            "sim: {}\n{}",
            d.message,
            print_op(ctx, m, &PrintOptions::default())
        )
    });
    format_results(&r, PrintMode::Full)
}

fn run(ctx: &mut Context, m: OpId, pipeline: &str) {
    let mut pm = CommlirPassManager::from_pipeline(parse_pipeline(pipeline).unwrap());
    if let Err(ds) = pm.run(ctx, m) {
        panic!(
            "{pipeline}: {:?}",
            ds.iter().map(|d| &d.message).collect::<Vec<_>>()
        );
    }
}

fn parse(ctx: &mut Context, text: &str) -> OpId {
    commlir_mlir_interop::link();
    let m = parse_source(ctx, "t.mlir", text.as_bytes(), &ParseOptions::default())
        .unwrap_or_else(|d| panic!("{}\n{text}", d.message));
    commlir_ir::verify::verify(ctx, m).unwrap_or_else(|ds| panic!("{:?}\n{text}", ds[0].message));
    m
}

#[test]
fn imported_shard_program_runs_like_the_hand_written_one() {
    commlir_mlir_interop::link();
    let mut ctx = Context::new();
    let m = import_mlir(&mut ctx, "up.mlir", SHARD.replace("  %k = tensor.extract_slice %h[0, 0] [8, 4] [1, 1] : tensor<32x4xf32> to tensor<8x4xf32>\n", "").as_str())
        .unwrap_or_else(|ds| panic!("{:?}", ds.iter().map(|d| &d.message).collect::<Vec<_>>()));
    // Upstream locations survive the crossing.
    let with_locs = print_op(
        &ctx,
        m,
        &PrintOptions {
            generic: false,
            debug_info: true,
        },
    );
    assert!(with_locs.contains("loc(\"up.mlir\":4:8)"), "{with_locs}");
    run(
        &mut ctx,
        m,
        "builtin.module(shard-to-coll,func.func(arith-to-compute))",
    );
    let out = print_op(&ctx, m, &PrintOptions::default());
    assert!(
        !out.contains("shard.") && !out.contains("arith.") && !out.contains("math."),
        "{out}"
    );
    commlir_ir::verify::verify(&ctx, m).unwrap();
    let converted = sim(&ctx, m, 4);
    // The same computation, written by hand with coll ops (the columns of the 2x2 grid are
    // ranks {0, 2} and {1, 3}; the rows are consecutive, the default layout).
    let mut hctx = Context::new();
    let h = parse(
        &mut hctx,
        r#"coll.group @rows {size = 2 : i64}
coll.group @cols {size = 2 : i64, ranks = [[0, 2], [1, 3]]}
func.func @f(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<8x8xf32> {
  %s = compute.add %x, %y : tensor<4x8xf32>
  %r0 = coll.all_reduce %s {reduce_op = "sum", group = @rows} : tensor<4x8xf32>
  %r = coll.wait_tensor %r0 : tensor<4x8xf32>
  %g0 = coll.all_gather_into_tensor %r {group = @cols} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %g = coll.wait_tensor %g0 : tensor<8x8xf32>
  %c = compute.fill {value = 2.0 : f64} : tensor<8x8xf32>
  %m = compute.mul %g, %c : tensor<8x8xf32>
  return %m : tensor<8x8xf32>
}
"#,
    );
    let hand = sim(&hctx, h, 4);
    assert_eq!(converted, hand);
    // Lowered, scheduled and planned, it still computes the same.
    run(
        &mut ctx,
        m,
        "builtin.module(func.func(coll-to-comm,comm-reorder-peak-memory,comm-sink-waits-iterative,comm-plan-pools))",
    );
    assert_eq!(sim(&ctx, m, 4), hand);
}

#[test]
fn ops_commlir_does_not_convert_stay_as_upstream_ops() {
    let mut ctx = Context::new();
    let m = import_mlir(&mut ctx, "up.mlir", SHARD).unwrap();
    let out = print_op(&ctx, m, &PrintOptions::default());
    assert!(out.contains("\"tensor.extract_slice\""), "{out}");
    assert!(out.contains("static_sizes = array<i64: 8, 4>"), "{out}");
}

#[test]
fn import_errors_are_mlir_diagnostics_located_in_the_source() {
    let mut ctx = Context::new();
    let ds = import_mlir(
        &mut ctx,
        "bad.mlir",
        "func.func @f(%a: i32) -> i32 {\n  %0 = arith.addf %a, %a : i32\n  return %0 : i32\n}\n",
    )
    .unwrap_err();
    let (f, l, c) = commlir_ir::diag::file_line_col(&ctx, ds[0].loc).unwrap();
    assert_eq!((f.as_str(), l, c), ("bad.mlir", 2, 8));
    assert!(
        ds[0].message.contains("must be floating-point-like"),
        "{}",
        ds[0].message
    );
    let ds = import_mlir(
        &mut ctx,
        "syntax.mlir",
        "func.func @f() {\n  return %x : i32\n}\n",
    )
    .unwrap_err();
    let (f, l, _) = commlir_ir::diag::file_line_col(&ctx, ds[0].loc).unwrap();
    assert_eq!((f.as_str(), l), ("syntax.mlir", 2));
}

#[test]
fn export_is_verified_by_mlir_and_imports_back_unchanged() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/fsdp_layer.mlir"
    ))
    .unwrap();
    let mut ctx = Context::new();
    let m = parse(&mut ctx, &text);
    run(
        &mut ctx,
        m,
        "builtin.module(func.func(coll-to-comm,comm-sink-waits-iterative,comm-plan-pools))",
    );
    let before = print_op(&ctx, m, &PrintOptions::default());
    let exported = export_mlir(&mut ctx, m, ExportOptions::default()).unwrap();
    // Real MLIR reads and verifies what we wrote.
    let session = MlirSession::new();
    let op = session.parse_op("exported.mlir", &exported).unwrap();
    session.verify(&op).unwrap();
    let mut back = Context::new();
    let b = import_mlir(&mut back, "exported.mlir", &exported).unwrap();
    commlir_ir::verify::verify(&back, b).unwrap();
    assert_eq!(print_op(&back, b, &PrintOptions::default()), before);
}

/// A module real MLIR parses: upstream ops in their syntax, commlir's in the generic form.
const MIXED: &str = r#"module {
  "coll.group"() {size = 2 : i64, sym_name = "tp"} : () -> ()
  func.func @step(%x: tensor<16x64xf32>, %w: tensor<64x64xf32>) -> tensor<16x64xf32> {
    %a = "compute.matmul"(%x, %w) : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
    %r = "coll.all_reduce"(%a) {group = @tp, reduce_op = "sum"} : (tensor<16x64xf32>) -> tensor<16x64xf32>
    %b = "compute.matmul"(%x, %w) : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
    %c = "compute.relu"(%b) : (tensor<16x64xf32>) -> tensor<16x64xf32>
    %y = "coll.wait_tensor"(%r) : (tensor<16x64xf32>) -> tensor<16x64xf32>
    %z = "compute.add"(%y, %c) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
    return %z : tensor<16x64xf32>
  }
}
"#;

#[test]
fn commlir_passes_run_inside_a_melior_pipeline() {
    let session = MlirSession::new();
    let context = session.context();
    let mut before = Context::new();
    let bm = import_mlir(&mut before, "mixed.mlir", MIXED).unwrap();
    let expected = sim(&before, bm, 2);

    let mut module =
        melior::ir::Module::from_operation(session.parse_op("mixed.mlir", MIXED).unwrap()).unwrap();
    let pm = PassManager::new(context);
    add_pipeline(
        &pm,
        "builtin.module(canonicalize,func.func(coll-to-comm,comm-sink-waits-iterative),cse,commlir.comm-plan-pools)",
    )
    .unwrap();
    pm.run(&mut module).unwrap();
    assert!(
        module.as_operation().verify(),
        "MLIR's verifier rejects the result"
    );
    let printed = module.as_operation().to_string();
    assert!(printed.contains("\"comm.pool\""), "{printed}");
    assert!(
        printed.contains("\"comm.all_reduce_start\"") || printed.contains("comm.all_reduce"),
        "{printed}"
    );
    assert!(!printed.contains("\"coll.all_reduce\""), "{printed}");
    // Same results on the sim backend as the program before the MLIR pipeline.
    let mut after = Context::new();
    let am = import_mlir(&mut after, "after.mlir", &printed).unwrap();
    assert_eq!(sim(&after, am, 2), expected);

    // A single wrapped pass, added by hand.
    let mut module =
        melior::ir::Module::from_operation(session.parse_op("mixed.mlir", MIXED).unwrap()).unwrap();
    let pm = PassManager::new(context);
    pm.add_pass(commlir_pass("func.func(coll-to-comm)").unwrap());
    pm.run(&mut module).unwrap();
    assert!(module.as_operation().verify());
    assert!(!module
        .as_operation()
        .to_string()
        .contains("\"coll.all_reduce\""));
}

#[test]
fn commlir_failures_fail_the_mlir_pass_with_a_located_error() {
    let session = MlirSession::new();
    let text = "\"shard.grid\"() <{shape = array<i64: 2>, sym_name = \"g\"}> : () -> ()\nfunc.func @f(%x: tensor<4xi32>) -> tensor<4xi32> {\n  %0 = \"shard.all_reduce\"(%x) <{grid = @g, grid_axes = array<i16: 0>, reduction = #shard<partial bitwise_or>}> : (tensor<4xi32>) -> tensor<4xi32>\n  return %0 : tensor<4xi32>\n}\n";
    let mut module = session.parse_file("fail.mlir", text).unwrap();
    let pm = PassManager::new(session.context());
    add_pipeline(&pm, "shard-to-coll").unwrap();
    assert!(pm.run(&mut module).is_err());
    let ds = session.take_diagnostics();
    let d = ds
        .iter()
        .find(|d| d.message.contains("bitwise_or"))
        .expect("the commlir error");
    assert_eq!(d.file_loc, Some(("fail.mlir".to_string(), 3, 8)));
    assert!(commlir_pass("no-such-pass").is_err());
    assert!(add_pipeline(&pm, "func.func(coll-to-comm").is_err());
}

#[test]
fn hostile_input_gets_a_diagnostic_not_a_crash() {
    // MLIR's parser recurses on nesting (mlir-opt overflows its stack at these depths).
    for deep in [
        format!(
            "func.func @f(%a: {}i32{}) {{ return }}",
            "tuple<".repeat(200_000),
            ">".repeat(200_000)
        ),
        format!("func.func @f() {{{}}}", "\"t.op\"() ({".repeat(100_000)),
        "[".repeat(1_000_000),
    ] {
        let mut ctx = Context::new();
        let ds = import_mlir(&mut ctx, "deep.mlir", &deep).unwrap_err();
        assert!(
            ds[0].message.contains("nesting deeper than 1000"),
            "{}",
            ds[0].message
        );
        let (f, l, _) = commlir_ir::diag::file_line_col(&ctx, ds[0].loc).unwrap();
        assert_eq!((f.as_str(), l), ("deep.mlir", 1));
    }
    // Just under the limit goes through MLIR (on its own large stack).
    let mut ctx = Context::new();
    let ok = format!(
        "func.func @f(%a: {}i32{}) {{ return }}",
        "tuple<".repeat(990),
        ">".repeat(990)
    );
    import_mlir(&mut ctx, "ok.mlir", &ok).unwrap();
    // Garbage and empty input.
    for text in [
        "\u{0}\u{1}garbage",
        "}}}}",
        "func.func @f(",
        "\"unterminated",
    ] {
        let mut ctx = Context::new();
        assert!(import_mlir(&mut ctx, "g.mlir", text).is_err(), "{text:?}");
    }
    let mut ctx = Context::new();
    let m = import_mlir(&mut ctx, "empty.mlir", "").unwrap();
    assert_eq!(print_op(&ctx, m, &PrintOptions::default()), "module {\n}\n");
}
