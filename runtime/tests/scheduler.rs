//! The collective engine and scheduler with synthetic per-rank programs (orders that SPMD
//! text cannot express): deadlocks are reported, not hung on; mismatches name both ops.
//! Plus whole-program behaviour: determinism, calls, error diagnostics.

mod common;

use commlir_ir::{OpId, OpState};
use commlir_runtime::sim::collective::{CollKind, CollSpec, ReduceOp};
use commlir_runtime::sim::engine::{CollId, Engine};
use commlir_runtime::sim::groups::Communicator;
use commlir_runtime::sim::scheduler::{run_ranks, Progress, RankTask};
use commlir_runtime::{ElemType, SimError, Tensor, TensorType};
use common::Prog;

#[derive(Clone)]
enum Step {
    /// Issue an all-reduce of the given kind on a communicator, from an op.
    Issue(Communicator, ReduceOp, OpId),
    /// Wait for the collective issued by step `i`.
    Wait(usize, OpId),
}

struct Script<'c> {
    ctx: &'c commlir_ir::Context,
    rank: usize,
    steps: Vec<Step>,
    pc: usize,
    issued: Vec<Option<CollId>>,
}

impl RankTask for Script<'_> {
    fn resume(&mut self, engine: &mut Engine) -> Result<Progress, SimError> {
        while let Some(step) = self.steps.get(self.pc).cloned() {
            match step {
                Step::Issue(comm, op, at) => {
                    let x = Tensor::splat(
                        TensorType {
                            elem: ElemType::F32,
                            shape: vec![2],
                        },
                        self.rank as f64,
                    );
                    let spec = CollSpec {
                        kind: CollKind::AllReduce(op),
                        inputs: vec![x.ty.clone()],
                    };
                    let id = engine.issue(self.ctx, self.rank, &comm, spec, at, vec![x])?;
                    self.issued[self.pc] = Some(id);
                }
                Step::Wait(i, at) => {
                    let id = self.issued[i].expect("waits on an issued collective");
                    if !engine.is_complete(id) {
                        return Ok(Progress::Blocked { at, on: id });
                    }
                }
            }
            self.pc += 1;
        }
        Ok(Progress::Finished)
    }
}

/// A context with a few located ops to attribute the synthetic steps to.
fn ops(p: &mut Prog, names: &[&str]) -> Vec<OpId> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let name = p.ctx.ident(n);
            let loc = p.ctx.file_loc("synthetic.mlir", i as u32 + 1, 3);
            p.ctx.create_op(OpState::new(name, loc))
        })
        .collect()
}

fn comm(group: &str, group_op: OpId, members: &[usize]) -> Communicator {
    Communicator {
        group_op,
        group: group.into(),
        index: 0,
        members: members.to_vec(),
    }
}

fn run(p: &Prog, programs: Vec<Vec<Step>>) -> Result<(), SimError> {
    let mut tasks: Vec<Script> = programs
        .into_iter()
        .enumerate()
        .map(|(rank, steps)| Script {
            ctx: &p.ctx,
            rank,
            issued: vec![None; steps.len()],
            steps,
            pc: 0,
        })
        .collect();
    let mut engine = Engine::new(tasks.len());
    run_ranks(&mut tasks, &mut engine)
}

#[test]
fn rank_divergent_order_across_groups_is_a_deadlock() {
    let mut p = Prog::new();
    let o = ops(
        &mut p,
        &[
            "coll.group",
            "coll.group",
            "comm.all_reduce",
            "comm.all_reduce",
            "comm.wait",
        ],
    );
    let (a, b) = (comm("a", o[0], &[0, 1]), comm("b", o[1], &[0, 1]));
    // Rank 0 issues on @a then @b; rank 1 on @b then @a. Both are fully issued, but each is
    // queued behind the other on one of the two comm streams: real NCCL hangs here.
    let r0 = vec![
        Step::Issue(a.clone(), ReduceOp::Sum, o[2]),
        Step::Issue(b.clone(), ReduceOp::Sum, o[3]),
        Step::Wait(1, o[4]),
    ];
    let r1 = vec![
        Step::Issue(b, ReduceOp::Sum, o[3]),
        Step::Issue(a, ReduceOp::Sum, o[2]),
        Step::Wait(1, o[4]),
    ];
    let err = run(&p, vec![r0, r1]).unwrap_err();
    let SimError::Deadlock { blocked } = &err else {
        panic!("expected a deadlock, got {err}")
    };
    assert_eq!(blocked.len(), 2);
    let text = commlir_ir::SourceMgr::default().render(&p.ctx, &err.to_diagnostic(&p.ctx));
    assert!(
        text.starts_with("synthetic.mlir:5:3: error: deadlock: ranks 0, 1 are blocked"),
        "{text}"
    );
    assert!(text.contains("rank 0 is blocked at 'comm.wait' waiting for 'comm.all_reduce' (collective #0 on group @b [ranks 0, 1]), stuck behind 'comm.all_reduce' (collective #0 on group @a [ranks 0, 1])"), "{text}");
}

#[test]
fn cyclic_subgroup_waits_are_a_deadlock_naming_missing_ranks() {
    let mut p = Prog::new();
    let o = ops(
        &mut p,
        &[
            "coll.group",
            "coll.group",
            "coll.all_reduce",
            "coll.all_reduce",
            "coll.wait_tensor",
        ],
    );
    // @a = [[0,1],[2,3]], @b = [[1,2],[3,0]]; every rank waits on its first collective before
    // issuing the second, and the first ones form a cycle.
    let a01 = comm("a", o[0], &[0, 1]);
    let b12 = Communicator {
        index: 0,
        ..comm("b", o[1], &[1, 2])
    };
    let b30 = Communicator {
        index: 1,
        ..comm("b", o[1], &[3, 0])
    };
    let a23 = Communicator {
        index: 1,
        ..comm("a", o[0], &[2, 3])
    };
    let prog = |first: &Communicator, second: &Communicator, f: usize, s: usize| {
        vec![
            Step::Issue(first.clone(), ReduceOp::Sum, o[f]),
            Step::Wait(0, o[4]),
            Step::Issue(second.clone(), ReduceOp::Sum, o[s]),
        ]
    };
    let programs = vec![
        prog(&a01, &b30, 2, 3),
        prog(&b12, &a01, 3, 2),
        prog(&a23, &b12, 2, 3),
        prog(&b30, &a23, 3, 2),
    ];
    let err = run(&p, programs).unwrap_err();
    let text = commlir_ir::SourceMgr::default().render(&p.ctx, &err.to_diagnostic(&p.ctx));
    assert!(text.contains("rank 0 is blocked at 'coll.wait_tensor' waiting for 'coll.all_reduce' (collective #0 on group @a [ranks 0, 1]), which rank 1 has not issued"), "{text}");
    assert!(text.contains("rank 3 is blocked"), "{text}");
}

#[test]
fn members_disagreeing_is_a_mismatch_naming_both_ops() {
    let mut p = Prog::new();
    let o = ops(
        &mut p,
        &[
            "coll.group",
            "coll.all_reduce",
            "coll.all_reduce",
            "coll.wait_tensor",
        ],
    );
    let g = comm("tp", o[0], &[0, 1]);
    let r0 = vec![
        Step::Issue(g.clone(), ReduceOp::Sum, o[1]),
        Step::Wait(0, o[3]),
    ];
    let r1 = vec![Step::Issue(g, ReduceOp::Max, o[2]), Step::Wait(0, o[3])];
    let err = run(&p, vec![r0, r1]).unwrap_err();
    let text = commlir_ir::SourceMgr::default().render(&p.ctx, &err.to_diagnostic(&p.ctx));
    assert!(text.starts_with("synthetic.mlir:3:3: error: 'coll.all_reduce' op does not match collective #0 on group @tp: rank 0 issued all_reduce(sum) of (tensor<2xf32>), rank 1 issued all_reduce(max) of (tensor<2xf32>)"), "{text}");
    assert!(
        text.contains("synthetic.mlir:2:3: note: rank 0 issued it here"),
        "{text}"
    );
}

#[test]
fn matching_orders_complete_in_any_issue_order() {
    let mut p = Prog::new();
    let o = ops(
        &mut p,
        &[
            "coll.group",
            "coll.group",
            "coll.all_reduce",
            "coll.wait_tensor",
        ],
    );
    let (a, b) = (comm("a", o[0], &[0, 1]), comm("b", o[1], &[0, 1]));
    let prog = || {
        vec![
            Step::Issue(a.clone(), ReduceOp::Sum, o[2]),
            Step::Issue(b.clone(), ReduceOp::Sum, o[2]),
            Step::Wait(1, o[3]),
            Step::Wait(0, o[3]),
        ]
    };
    run(&p, vec![prog(), prog()]).unwrap();
}

/// A small program mixing compute, collectives and a call.
fn mlp() -> Prog {
    let mut p = Prog::new();
    p.group("tp", 2, None, false);
    let (x_t, w_t, h_t) = (
        p.t(&[4, 8], "bf16"),
        p.t(&[8, 16], "bf16"),
        p.t(&[4, 16], "bf16"),
    );
    let (sum, g) = (p.s("sum"), p.sym("tp"));
    // @layer is private: @main is the only public function, so it is the default entry.
    let hx = p.func("layer", &[h_t]);
    let hy = p.op1("compute.gelu", &[hx[0]], h_t, &[]);
    p.ret(&[hy]);
    let vis = p.s("private");
    let layer = p.ctx.lookup_symbol(p.module, "layer").unwrap();
    p.ctx.set_attr(layer, "sym_visibility", vis);
    let args = p.func("main", &[x_t, w_t]);
    let h = p.op1("compute.matmul", &args, h_t, &[]);
    let callee = p.sym("layer");
    let a = p.op1("func.call", &[h], h_t, &[("callee", callee)]);
    let r = p.op1(
        "coll.all_reduce",
        &[a],
        h_t,
        &[("reduce_op", sum), ("group", g)],
    );
    let y = p.op1("coll.wait_tensor", &[r], h_t, &[]);
    p.ret(&[y]);
    p
}

#[test]
fn runs_are_deterministic_and_depend_on_the_seed() {
    let p = mlp();
    let a = p.lines(4);
    assert_eq!(a, p.lines(4));
    assert_eq!(a.lines().count(), 4);
    assert!(
        a.starts_with("rank 0 result 0: tensor<4x16xbf16> digest="),
        "{a}"
    );
    let lines: Vec<&str> = a.lines().collect();
    // Ranks 0 and 1 share a subgroup, so they hold the same all-reduced result.
    assert_eq!(lines[0]["rank 0".len()..], lines[1]["rank 1".len()..]);
    assert_ne!(lines[0]["rank 0".len()..], lines[2]["rank 2".len()..]);
    let other = commlir_runtime::sim::try_run(
        &p.ctx,
        p.module,
        &commlir_runtime::SimOptions {
            ranks: 4,
            seed: 7,
            entry: None,
        },
    )
    .unwrap();
    assert_ne!(
        commlir_runtime::format_results(&other, commlir_runtime::PrintMode::Digest),
        a
    );
}

#[test]
fn errors_are_diagnostics_at_the_op() {
    // An unsupported op.
    let mut p = Prog::new();
    let t = p.t(&[2], "f32");
    let x = p.func("main", &[t])[0];
    let y = p.op1("test.mystery", &[x], t, &[]);
    p.ret(&[y]);
    assert_eq!(
        p.error(2).trim_end(),
        "test.mlir:3:5: error: 'test.mystery' op cannot be executed by the sim backend"
    );

    // Reading an in-flight value.
    let mut p = Prog::new();
    p.group("g", 2, None, false);
    let t = p.t(&[2], "f32");
    let (sum, g) = (p.s("sum"), p.sym("g"));
    let x = p.func("main", &[t])[0];
    let r = p.op1(
        "coll.all_reduce",
        &[x],
        t,
        &[("reduce_op", sum), ("group", g)],
    );
    let y = p.op1("compute.neg", &[r], t, &[]);
    p.ret(&[y]);
    assert!(p
        .error(2)
        .contains("'compute.neg' op reads operand #0 while it is in flight"));

    // A missing entry function.
    let p = mlp();
    let e = commlir_runtime::sim::run(
        &p.ctx,
        p.module,
        &commlir_runtime::SimOptions {
            entry: Some("nope".into()),
            ..Default::default()
        },
    );
    assert_eq!(e.unwrap_err().message, "no function named @nope to run");
}
