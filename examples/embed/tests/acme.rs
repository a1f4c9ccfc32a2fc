//! The embedder's op through commlir's whole flow: comm-buffer realization by
//! `coll-to-comm`, the cost hook in the report, the scheduling passes' collective order,
//! code and string pipelines, the verifier's diagnostics, and building with a `Builder`.

use commlir::dialect::{buffer_encoding, group_of, CommBufferKind, Trait};
use commlir::{build, Builder, Context, Module, OpId};
use commlir_embed_example::{
    build_all_gather_matmul, estimate_ns, link, pipeline, ALL_GATHER_MATMUL, PIPELINE, PROGRAM,
};

fn parse(text: &str) -> Module {
    link();
    Module::parse("block.mlir", text).unwrap_or_else(|e| panic!("{e}"))
}

/// The ops of the (only) function, in program order.
fn body_ops(m: &Module) -> Vec<OpId> {
    let ctx = m.context();
    let mut ops = Vec::new();
    ctx.walk(m.op(), |op| {
        if ctx
            .parent_op(op)
            .is_some_and(|p| ctx.op_name(p) == "func.func")
        {
            ops.push(op);
        }
    });
    ops
}

fn find(m: &Module, name: &str) -> OpId {
    body_ops(m)
        .into_iter()
        .find(|&op| m.context().op_name(op) == name)
        .unwrap_or_else(|| panic!("no {name} in\n{}", m.print()))
}

/// Position of the first op named `name` in the function body.
fn position(m: &Module, name: &str) -> usize {
    let ops = body_ops(m);
    ops.iter()
        .position(|&op| m.context().op_name(op) == name)
        .unwrap_or_else(|| panic!("no {name} in\n{}", m.print()))
}

/// The collectives of the function, in program order: (op name, group).
fn collectives(m: &Module) -> Vec<(String, String)> {
    let ctx = m.context();
    body_ops(m)
        .into_iter()
        .filter(|&op| ctx.op_has_trait(op, Trait::Collective))
        .map(|op| {
            let group = group_of(ctx, op).map(|g| g.name).unwrap_or_default();
            (ctx.op_name(op).to_string(), group)
        })
        .collect()
}

#[test]
fn the_dialect_is_registered_through_the_umbrella_crate() {
    link();
    let ctx = Context::new();
    assert!(ctx.is_dialect_registered("acme"));
    let def = ctx.op_def_by_name(ALL_GATHER_MATMUL).expect("registered");
    assert!(def.has_trait(Trait::MemRead) && def.has_trait(Trait::Blocking));
    assert!(def.cost.is_some());
}

#[test]
fn coll_to_comm_realizes_the_declared_operand_in_symmetric_memory() {
    let mut m = parse(PROGRAM);
    m.run_pipeline("builtin.module(func.func(coll-to-comm{one-shot-threshold=0}))")
        .unwrap_or_else(|e| panic!("{e}"));
    let ctx = m.context();
    let op = find(&m, ALL_GATHER_MATMUL);
    let a = ctx.operand(op, 0);
    let enc = buffer_encoding(ctx, ctx.value_type(a)).expect("`a` is a comm buffer");
    assert_eq!(
        (enc.kind, enc.group.as_str()),
        (CommBufferKind::SymmMem, "tp")
    );
    // The producer (gelu) writes the buffer directly: no copy was needed.
    let producer = ctx.defining_op(a).expect("produced by an op");
    assert_eq!(ctx.op_name(producer), "compute.gelu");
    // `b` is not declared: it stays an ordinary tensor.
    assert!(buffer_encoding(ctx, ctx.value_type(ctx.operand(op, 1))).is_none());
    // The module still verifies with the comm-buffer operand (the op's own verifier accepts
    // the buffer of the declared kind and group).
    m.verify().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_function_argument_is_copied_into_a_comm_buffer() {
    // Built with the Builder: `a` is a function argument, which coll-to-comm cannot place,
    // so it copies it into symmetric memory right before the op.
    link();
    let mut ctx = Context::new();
    let module = build::module(&mut ctx);
    build::group(&mut ctx, module, "tp", 4, true);
    let a_ty = commlir::parse_type(&mut ctx, "tensor<16x64xf32>").unwrap();
    let w_ty = commlir::parse_type(&mut ctx, "tensor<64x32xf32>").unwrap();
    let c_ty = commlir::parse_type(&mut ctx, "tensor<64x32xf32>").unwrap();
    let (_f, entry) = build::func(&mut ctx, module, "f", &[a_ty, w_ty], &[c_ty]);
    let (a, w) = (ctx.block_args(entry)[0], ctx.block_args(entry)[1]);
    let mut b = Builder::at_end(&mut ctx, entry);
    let c = build_all_gather_matmul(&mut b, a, w, "tp", 4);
    build::ret(&mut b, &[c]);
    commlir::verify(&ctx, module).unwrap_or_else(|e| panic!("{e}"));

    let mut m = Module::from_parts(ctx, module);
    assert!(
        m.print().contains("%0 = acme.all_gather_matmul %arg0, %arg1 {group = @tp} : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>"),
        "{}",
        m.print()
    );
    m.run_pipeline("builtin.module(func.func(coll-to-comm))")
        .unwrap_or_else(|e| panic!("{e}"));
    let out = m.print();
    assert!(
        out.contains("%0 = compute.clone %arg0 : (tensor<16x64xf32>) -> tensor<16x64xf32, #comm.buffer<symm_mem, @tp>>"),
        "{out}"
    );
    assert!(
        out.contains("%1 = acme.all_gather_matmul %0, %arg1"),
        "{out}"
    );
}

#[test]
fn the_cost_hook_prices_the_op_in_the_report() {
    let m = parse(PROGRAM);
    let report = m.report();
    let f = &report.functions[0];
    let acme = f
        .collectives
        .iter()
        .find(|c| c.op == ALL_GATHER_MATMUL)
        .expect("the fused op is reported as a collective");
    // Group of 2, a = 64x1024 bf16 (128 KiB), b = 1024x512: the hook's estimate.
    // (The report gives durations as end - start, hence the tolerance.)
    let close = |x: f64, y: f64| (x - y).abs() < 1e-6 * y.abs().max(1.0);
    let want = estimate_ns(2, 64, 1024, 512, 64 * 1024 * 2);
    assert!(close(acme.comm_ns, want), "{} vs {want}", acme.comm_ns);
    assert_eq!(acme.group, "tp");
    // Blocking: the compute stream waits for all of it.
    assert!(
        close(acme.exposed_ns, want),
        "{} vs {want}",
        acme.exposed_ns
    );
    // The hook is read where the estimate is needed; nothing is written into the IR.
    assert!(!m.print().contains("cost_ns"), "{}", m.print());

    // A costlier kernel (a `cost_ns` override wins over the hook) lengthens the makespan and
    // the exposed communication by exactly the difference: the op is on the critical path.
    let slow = 100_000.0;
    let m_slow = parse(&PROGRAM.replace(
        "{group = @tp} : (tensor<64x1024xbf16>",
        "{cost_ns = 100000 : i64, group = @tp} : (tensor<64x1024xbf16>",
    ));
    let slow_report = m_slow.report();
    let s = &slow_report.functions[0];
    assert!(
        close(s.makespan_ns - f.makespan_ns, slow - want),
        "{} -> {}",
        f.makespan_ns,
        s.makespan_ns
    );
    assert!(
        close(s.exposed_comm_ns - f.exposed_comm_ns, slow - want),
        "{} -> {}",
        f.exposed_comm_ns,
        s.exposed_comm_ns
    );
    // The user's override stays on the op.
    assert!(m_slow.print().contains("cost_ns = 100000 : i64"));
}

#[test]
fn scheduling_keeps_the_collective_order_and_overlaps_communication() {
    let mut lowered = parse(PROGRAM);
    lowered
        .run_pipeline("builtin.module(func.func(coll-to-comm{one-shot-threshold=0}))")
        .unwrap_or_else(|e| panic!("{e}"));
    let mut scheduled = parse(PROGRAM);
    scheduled
        .run(&mut pipeline().unwrap())
        .unwrap_or_else(|e| panic!("{e}"));

    // SPMD safety: the same collectives in the same order, the fused op among them.
    let order = collectives(&lowered);
    assert_eq!(
        order,
        [
            (ALL_GATHER_MATMUL.to_string(), "tp".to_string()),
            ("comm.all_gather".to_string(), "tp".to_string()),
            ("comm.all_reduce".to_string(), "tp".to_string()),
        ]
    );
    assert_eq!(collectives(&scheduled), order);

    // The weight all-gather moved up to the fused op (an earlier collective on its group
    // stops it) and the all-reduce's wait sank below the independent compute.
    let p = |name| position(&scheduled, name);
    assert!(
        p("comm.all_gather") < p("compute.silu"),
        "{}",
        scheduled.print()
    );
    assert!(p(ALL_GATHER_MATMUL) < p("comm.all_gather"));
    let out = scheduled.print();
    let last_wait = out.rfind("comm.wait").unwrap();
    let last_matmul = out.rfind("compute.matmul").unwrap();
    assert!(last_matmul < last_wait, "{out}");

    // The timeline agrees: less exposed communication, a shorter step, same peak memory.
    let (before, after) = (lowered.report(), scheduled.report());
    let (b, a) = (&before.functions[0], &after.functions[0]);
    assert!(a.exposed_comm_ns < b.exposed_comm_ns, "{b:?}\n{a:?}");
    assert!(a.makespan_ns < b.makespan_ns, "{b:?}\n{a:?}");
    assert!(a.peak_memory_bytes <= b.peak_memory_bytes);
    // comm-plan-pools ran: one symmetric-memory pool for the group.
    assert_eq!(a.pools.len(), 1);
    assert!(a.pools[0].planned && a.pools[0].kind == "symm_mem");
}

#[test]
fn code_and_string_pipelines_are_the_same() {
    let from_code = pipeline().unwrap();
    let from_string = commlir::Pipeline::parse(PIPELINE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        from_code.to_pipeline_string(),
        from_string.to_pipeline_string()
    );

    let mut a = parse(PROGRAM);
    a.run(&mut pipeline().unwrap()).unwrap();
    let mut b = parse(PROGRAM);
    b.run_pipeline(PIPELINE).unwrap();
    assert_eq!(a.print(), b.print());
}

/// Parses `body` inside a function whose arguments are `a: 64x1024`, `b: 1024x512` (bf16),
/// with groups `@tp` (symm_mem) and `@dp` (without); returns the error.
fn verify_error(body: &str) -> commlir::Diagnostics {
    let text = format!(
        "coll.group @tp {{size = 2 : i64, symm_mem}}\n\
         coll.group @dp {{size = 2 : i64}}\n\
         func.func @f(%a: tensor<64x1024xbf16>, %b: tensor<1024x512xbf16>, %n: tensor<64x1024xbf16, #comm.buffer<nccl, @tp>>) {{\n\
         {body}\n\
         return\n\
         }}\n"
    );
    link();
    Module::parse("bad.mlir", &text).expect_err("must not verify")
}

#[test]
fn the_verifier_rejects_malformed_uses() {
    // Wrong result shape: rendered in MLIR's shape, with the line and a caret under the
    // op's location (its first result, as in MLIR).
    let e = verify_error(
        "  %c = acme.all_gather_matmul %a, %b {group = @tp} : (tensor<64x1024xbf16>, tensor<1024x512xbf16>) -> tensor<64x512xbf16>",
    );
    assert_eq!(
        e.to_string(),
        "bad.mlir:4:3: error: 'acme.all_gather_matmul' op result must be 128x512 (group @tp has size 2), got tensor<64x512xbf16>\n\
         \x20 %c = acme.all_gather_matmul %a, %b {group = @tp} : (tensor<64x1024xbf16>, tensor<1024x512xbf16>) -> tensor<64x512xbf16>\n\
         \x20 ^\n"
    );
    assert_eq!(e.list[0].position, Some(("bad.mlir".to_string(), 4, 3)));

    // A group without symmetric memory cannot host the op.
    let e = verify_error(
        "  %c = acme.all_gather_matmul %a, %b {group = @dp} : (tensor<64x1024xbf16>, tensor<1024x512xbf16>) -> tensor<128x512xbf16>",
    );
    assert_eq!(
        e.list[0].message,
        "'acme.all_gather_matmul' op group @dp must enable symmetric memory (symm_mem)"
    );

    // `a` already in a comm buffer of the wrong kind.
    let e = verify_error(
        "  %c = acme.all_gather_matmul %n, %b {group = @tp} : (tensor<64x1024xbf16, #comm.buffer<nccl, @tp>>, tensor<1024x512xbf16>) -> tensor<128x512xbf16>",
    );
    assert!(
        e.list[0]
            .message
            .contains("operand 'a' must be a #comm.buffer<symm_mem, @tp> tensor"),
        "{e}"
    );

    // The declared constraints are checked before the op's verifier: a missing group.
    let e = verify_error(
        "  %c = acme.all_gather_matmul %a, %b : (tensor<64x1024xbf16>, tensor<1024x512xbf16>) -> tensor<128x512xbf16>",
    );
    assert!(
        e.list[0].message.contains("requires attribute 'group'"),
        "{e}"
    );
}
