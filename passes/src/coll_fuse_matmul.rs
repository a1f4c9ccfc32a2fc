//! `coll-fuse-matmul`: fuses an all-gather with the matmuls that consume it, and a matmul
//! with the reduce-scatter of its product, into the pipelined `symm` ops (Inductor's
//! micro-pipeline TP pass, on `coll` IR).
//!
//! - `all_gather_into_tensor` → `wait_tensor` → `matmul(s)` with the gathered tensor as the
//!   left operand becomes one `symm.fused_all_gather_matmul` with one `b` per matmul, placed
//!   at the first matmul. Other users of the gathered tensor read the op's `return_a` result,
//!   so they must come after it: a user before the first matmul leaves the pattern alone.
//! - `matmul` → `reduce_scatter_tensor` → `wait_tensor` (the product used only there) becomes
//!   `symm.fused_matmul_reduce_scatter` at the reduce-scatter.
//!
//! Only on groups with `symm_mem`. The fused op occupies the position of one collective of
//! the pattern and no collective lies between the old and the new position, so the order of
//! collectives on every group is unchanged. A pattern is fused only when the cost model says
//! the pipeline beats the unfused sequence (matmul + collective, with `cost_ns` overrides
//! honoured), unless `ignore-cost` is set. The sim semantics of the fused ops are the unfused
//! sequences, so results are bit-identical.

use crate::analysis::cost::{op_cost, pipelined_ns, Machine};
use crate::schedule::body_block;
use commlir_dialects::coll::group_of;
use commlir_dialects::shape::value_tensor_view;
use commlir_ir::pass::{
    Anchor, OptionDef, OptionKind, Pass, PassEnv, PassInfo, PassOptions, StatisticDef,
};
use commlir_ir::{Attr, BlockId, Builder, Context, Diagnostic, OpId, Trait, Value};

commlir_ir::register_pass!(
    /// `coll-fuse-matmul`.
    pub COLL_FUSE_MATMUL = PassInfo {
        argument: "coll-fuse-matmul",
        name: "CollFuseMatmul",
        summary: "Fuse all-gather→matmul and matmul→reduce-scatter into pipelined symm ops",
        description: "On groups with `symm_mem`: an all-gather whose waited result is the left \
            operand of matmuls becomes `symm.fused_all_gather_matmul` (one `b` per matmul; the \
            gathered tensor is returned for its other users), and a matmul whose product is only \
            reduce-scattered becomes `symm.fused_matmul_reduce_scatter`, when the cost model \
            says the pipeline wins.",
        anchor: Anchor::FUNC,
        options: &[
            OptionDef::new(
                "ignore-cost",
                OptionKind::Bool,
                "false",
                "Fuse every pattern, even where the cost model says fusing loses",
            ),
            crate::analysis::machine::MACHINE_OPTION,
        ],
        statistics: &[
            StatisticDef::new("fused-all-gather", "All-gathers fused with their matmuls"),
            StatisticDef::new("fused-reduce-scatter", "Matmuls fused with their reduce-scatters"),
            StatisticDef::new("kept-by-cost", "Patterns left alone because fusing loses"),
        ],
        create: |o: &PassOptions| Ok(Box::new(FuseMatmul {
            ignore_cost: o.get_bool("ignore-cost"),
            machine: crate::analysis::machine::from_option(o.get_str("machine"))?,
        })),
    }
);

struct FuseMatmul {
    ignore_cost: bool,
    /// The `machine` option's machine (`None`: the module's or the default).
    machine: Option<Machine>,
}

/// What one run did.
#[derive(Default)]
struct Stats {
    all_gather: u64,
    reduce_scatter: u64,
    kept_by_cost: u64,
}

impl Pass for FuseMatmul {
    fn info(&self) -> &'static PassInfo {
        &COLL_FUSE_MATMUL
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let mut stats = Stats::default();
        if let Some(block) = body_block(ctx, op) {
            let machine = crate::analysis::machine::for_op(ctx, op, self.machine.as_ref())?;
            fuse_block(ctx, block, &machine, self.ignore_cost, &mut stats);
        }
        env.add_stat("fused-all-gather", stats.all_gather);
        env.add_stat("fused-reduce-scatter", stats.reduce_scatter);
        env.add_stat("kept-by-cost", stats.kept_by_cost);
        Ok(())
    }
}

fn fuse_block(
    ctx: &mut Context,
    block: BlockId,
    machine: &Machine,
    ignore_cost: bool,
    stats: &mut Stats,
) {
    let candidates: Vec<OpId> = ctx
        .block_ops(block)
        .filter(|&o| {
            matches!(
                ctx.op_name(o),
                "coll.all_gather_into_tensor" | "coll.reduce_scatter_tensor"
            )
        })
        .collect();
    for op in candidates {
        let Some(plan) = (match ctx.op_name(op) {
            "coll.all_gather_into_tensor" => match_all_gather(ctx, block, op),
            _ => match_reduce_scatter(ctx, block, op),
        }) else {
            continue;
        };
        if !ignore_cost && !plan.wins(ctx, machine) {
            stats.kept_by_cost += 1;
            continue;
        }
        if plan.gather {
            stats.all_gather += 1;
        } else {
            stats.reduce_scatter += 1;
        }
        plan.apply(ctx);
    }
}

/// A matched pattern and how to rewrite it.
struct Plan {
    gather: bool,
    /// The collective and its wait.
    coll: OpId,
    wait: OpId,
    /// The matmuls folded in, in program order.
    matmuls: Vec<OpId>,
    /// The fused op goes right before this op.
    at: OpId,
    /// All-gather side: the waited result has users other than the fused matmuls.
    return_a: bool,
}

/// The group of collective `op`, if it enables symmetric memory (and its size).
fn symm_group_size(ctx: &Context, op: OpId) -> Option<u64> {
    group_of(ctx, op)
        .ok()
        .filter(|g| g.symm_mem)
        .map(|g| g.size.max(1) as u64)
}

/// The only user of `v`, if it is a `coll.wait_tensor` in `block`.
fn sole_wait(ctx: &Context, block: BlockId, v: Value) -> Option<OpId> {
    match ctx.uses(v) {
        [u] if ctx.op_name(u.op) == "coll.wait_tensor" && ctx.op_parent(u.op) == Some(block) => {
            Some(u.op)
        }
        _ => None,
    }
}

fn is_matrix(ctx: &Context, v: Value) -> bool {
    value_tensor_view(ctx, v).is_some_and(|t| t.shape.len() == 2)
}

/// Whether `v` is available right before `at` (in `block`).
fn available_before(ctx: &Context, block: BlockId, v: Value, at: OpId) -> bool {
    match ctx.defining_op(v) {
        None => ctx.value_block(v) == Some(block),
        Some(d) => ctx.op_parent(d) == Some(block) && ctx.is_before_in_block(d, at),
    }
}

/// Whether a collective lies strictly between `from` and `to` (program order, same block).
fn collective_between(ctx: &Context, from: OpId, to: OpId) -> bool {
    let mut cur = ctx.next_op(from);
    while let Some(o) = cur {
        if o == to {
            return false;
        }
        if ctx.op_has_trait(o, Trait::Collective) {
            return true;
        }
        cur = ctx.next_op(o);
    }
    false
}

fn match_all_gather(ctx: &Context, block: BlockId, ag: OpId) -> Option<Plan> {
    symm_group_size(ctx, ag)?;
    if ctx.operands(ag).len() != 1 || !is_matrix(ctx, ctx.operand(ag, 0)) {
        return None;
    }
    let wait = sole_wait(ctx, block, ctx.result(ag, 0))?;
    let y = ctx.result(wait, 0);
    let mut lhs_matmuls: Vec<OpId> = ctx
        .uses(y)
        .iter()
        .filter(|u| {
            u.index == 0
                && ctx.op_name(u.op) == "compute.matmul"
                && ctx.op_parent(u.op) == Some(block)
        })
        .map(|u| u.op)
        .filter(|&m| is_matrix(ctx, ctx.operand(m, 1)))
        .collect();
    lhs_matmuls.sort_by(|a, b| {
        if a == b {
            std::cmp::Ordering::Equal
        } else if ctx.is_before_in_block(*a, *b) {
            std::cmp::Ordering::Less
        } else {
            std::cmp::Ordering::Greater
        }
    });
    lhs_matmuls.dedup();
    let at = *lhs_matmuls.first()?;
    // Every `b` must exist where the fused op goes; a matmul whose `b` comes later stays.
    let matmuls: Vec<OpId> = lhs_matmuls
        .into_iter()
        .filter(|&m| available_before(ctx, block, ctx.operand(m, 1), at))
        .collect();
    // Other users read the returned gathered tensor, which exists only from `at` on.
    let others: Vec<OpId> = ctx
        .uses(y)
        .iter()
        .map(|u| u.op)
        .filter(|o| !matmuls.contains(o))
        .collect();
    if others
        .iter()
        .any(|&o| ctx.op_parent(o) != Some(block) || ctx.is_before_in_block(o, at))
    {
        return None;
    }
    // Moving the all-gather down to `at` must not pass another collective.
    if collective_between(ctx, ag, at) {
        return None;
    }
    Some(Plan {
        gather: true,
        coll: ag,
        wait,
        matmuls,
        at,
        return_a: !others.is_empty(),
    })
}

fn match_reduce_scatter(ctx: &Context, block: BlockId, rs: OpId) -> Option<Plan> {
    symm_group_size(ctx, rs)?;
    if ctx.operands(rs).len() != 1 {
        return None;
    }
    let op_ok = ctx
        .inherent_attr(rs, "reduce_op")
        .and_then(|a| ctx.attr_as_str(a))
        .is_some_and(|r| r == "sum" || r == "avg");
    let x = ctx.operand(rs, 0);
    let mm = ctx
        .defining_op(x)
        .filter(|&m| ctx.op_name(m) == "compute.matmul" && ctx.op_parent(m) == Some(block))?;
    if !op_ok
        || ctx.uses(x).len() != 1
        || !is_matrix(ctx, ctx.operand(mm, 0))
        || !is_matrix(ctx, ctx.operand(mm, 1))
    {
        return None;
    }
    let wait = sole_wait(ctx, block, ctx.result(rs, 0))?;
    Some(Plan {
        gather: false,
        coll: rs,
        wait,
        matmuls: vec![mm],
        at: rs,
        return_a: false,
    })
}

impl Plan {
    /// Whether the pipelined op beats the unfused sequence under the cost model.
    fn wins(&self, ctx: &Context, machine: &Machine) -> bool {
        let g = symm_group_size(ctx, self.coll).unwrap_or(1);
        let mm: f64 = self
            .matmuls
            .iter()
            .map(|&m| op_cost(ctx, machine, m).ns())
            .sum();
        let comm = op_cost(ctx, machine, self.coll).ns();
        // The chunks cut the product's rows (dim 0 of the matmul's result).
        let rows = self
            .matmuls
            .first()
            .and_then(|&m| value_tensor_view(ctx, ctx.result(m, 0)))
            .and_then(|t| t.shape.first().copied())
            .unwrap_or(1) as f64;
        pipelined_ns(machine, mm, comm, g, rows) < mm + comm
    }

    fn apply(&self, ctx: &mut Context) {
        let group: Attr = ctx
            .inherent_attr(self.coll, "group")
            .expect("matched collectives have a group");
        let a = ctx.operand(self.coll, 0);
        if self.gather {
            let y = ctx.result(self.wait, 0);
            let mut operands = vec![a];
            let mut types = Vec::new();
            if self.return_a {
                types.push(ctx.value_type(y));
            }
            for &m in &self.matmuls {
                operands.push(ctx.operand(m, 1));
                types.push(ctx.value_type(ctx.result(m, 0)));
            }
            let mut attrs = vec![("group", group)];
            if self.return_a {
                let u = ctx.unit_attr();
                attrs.push(("return_a", u));
            }
            let loc = ctx.op_loc(self.coll);
            let mut b = Builder::before(ctx, self.at);
            b.loc = loc;
            let fused = b.create("symm.fused_all_gather_matmul", &operands, &types, &attrs);
            let first = usize::from(self.return_a);
            if self.return_a {
                let r = ctx.result(fused, 0);
                ctx.replace_all_uses(y, r);
            }
            for (i, &m) in self.matmuls.iter().enumerate() {
                let r = ctx.result(fused, first + i);
                ctx.replace_all_uses(ctx.result(m, 0), r);
            }
            for &m in &self.matmuls {
                ctx.erase_op(m);
            }
        } else {
            let mm = self.matmuls[0];
            let (lhs, rhs) = (ctx.operand(mm, 0), ctx.operand(mm, 1));
            let reduce_op = ctx
                .inherent_attr(self.coll, "reduce_op")
                .expect("matched reduce-scatters have a reduce_op");
            let dim = ctx.int_attr(0, 64);
            let ty = ctx.value_type(ctx.result(self.wait, 0));
            let fused = Builder::before(ctx, self.at).create(
                "symm.fused_matmul_reduce_scatter",
                &[lhs, rhs],
                &[ty],
                &[
                    ("reduce_op", reduce_op),
                    ("scatter_dim", dim),
                    ("group", group),
                ],
            );
            let r = ctx.result(fused, 0);
            ctx.replace_all_uses(ctx.result(self.wait, 0), r);
            ctx.erase_op(self.wait);
            ctx.erase_op(self.coll);
            ctx.erase_op(mm);
            return;
        }
        ctx.erase_op(self.wait);
        ctx.erase_op(self.coll);
    }
}
