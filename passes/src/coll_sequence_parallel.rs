//! `coll-sequence-parallel`: derives Megatron-style sequence parallelism from a tensor-parallel
//! program. An all-reduce whose waited result flows through row-local ops into matmuls
//! becomes a reduce-scatter (dim 0), the row-local ops run on this rank's rows, and an
//! all-gather restores the full tensor before each consumer that needs it (the matmuls, the
//! function's return, anything else). The all-gather then sits right before the matmul,
//! where `coll-fuse-matmul` can pipeline it.
//!
//! Row-local ops: elementwise unary ops, `scale`, `cast`, `clone`; elementwise binary ops,
//! `compare` and `select` whose other operands are either also on the rows or replicated on
//! the group (a residual add: it is cut to this rank's rows with `coll.all_slice`, legal only
//! because the value is proven identical on every rank); `softmax`, `reduce_sum` and
//! `reduce_max` along a dimension other than 0; `reshape` keeping dim 0; `broadcast` that
//! neither adds nor repeats dim 0; `permute` keeping dim 0 first; `matmul` of rows by a replicated right operand (the broadcast of a
//! norm's per-row factor); `coll.all_slice` of the all-reduce's own result. Together these
//! cover Megatron's layer: the residual stream stays sharded from one reduce-scatter to the
//! next and to the return, norms run on shards, and all-gathers sit before the
//! column-parallel matmuls.
//!
//! Replication analysis: a value is replicated on group `g` when it is a waited all-reduce,
//! all-gather or broadcast on `g`, a function argument marked `coll.replicated = @g`, or
//! computed by compute ops only from values replicated on `g`. Unmarked arguments may differ
//! per rank and are never sliced.
//!
//! The results are bit-identical: the sim's reduce-scatter reduces in rank order and rounds
//! once per element exactly as the all-reduce does, row-local ops compute each row alone,
//! and the all-gather concatenates rows in rank order. The rewrite is kept only if the
//! function's peak memory (the liveness analysis) does not grow. Existing collectives keep
//! their order; the all-reduce's place is taken by the reduce-scatter.

use crate::analysis::buffers::peak_memory;
use crate::schedule::body_block;
use commlir_dialects::coll::{group_of, replicated_arg_group};
use commlir_dialects::shape::{int_attr, value_tensor_view};
use commlir_ir::pass::{Anchor, Pass, PassEnv, PassInfo, StatisticDef};
use commlir_ir::{BlockId, Builder, Context, Diagnostic, OpId, OpState, Value};
use std::collections::{HashMap, HashSet};

commlir_ir::register_pass!(
    /// `coll-sequence-parallel`.
    pub COLL_SEQUENCE_PARALLEL = PassInfo {
        argument: "coll-sequence-parallel",
        name: "CollSequenceParallel",
        summary: "All-reduce → reduce-scatter, row-local ops on shards, all-gather before matmuls",
        description: "An all-reduce whose waited result flows through row-local ops (elementwise, \
            residual adds with replicated operands, softmax / reduce_sum along other dims) into \
            matmuls becomes a reduce-scatter; the row-local ops run on the rows of this rank \
            (replicated operands sliced with `coll.all_slice`) and an all-gather precedes every \
            consumer that needs the full tensor. Only when dim 0 divides by the group size and \
            peak memory does not grow.",
        anchor: Anchor::FUNC,
        options: &[],
        statistics: &[
            StatisticDef::new("rewritten", "All-reduces turned into reduce-scatter + all-gather"),
            StatisticDef::new("kept-by-memory", "Rewrites undone because peak memory would grow"),
        ],
        create: |_| Ok(Box::new(SequenceParallel)),
    }
);

struct SequenceParallel;

impl Pass for SequenceParallel {
    fn info(&self) -> &'static PassInfo {
        &COLL_SEQUENCE_PARALLEL
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let (mut rewritten, mut kept) = (0, 0);
        if let Some(block) = body_block(ctx, op) {
            let ars: Vec<OpId> = ctx
                .block_ops(block)
                .filter(|&o| ctx.op_name(o) == "coll.all_reduce")
                .collect();
            for ar in ars {
                // The analysis is recomputed per candidate: each rewrite adds replicated values.
                let reps = replication(ctx, op, block);
                let Some(plan) = plan(ctx, block, ar, &reps) else {
                    continue;
                };
                if apply(ctx, block, &plan) {
                    rewritten += 1;
                } else {
                    kept += 1;
                }
            }
        }
        env.add_stat("rewritten", rewritten);
        env.add_stat("kept-by-memory", kept);
        Ok(())
    }
}

/// Where a value is known identical on every rank.
#[derive(Clone, PartialEq, Eq, Debug)]
enum Rep {
    /// On every group (constants).
    Everywhere,
    /// On the ranks of this group.
    Group(String),
}

/// The replication analysis of `block` (body of `func`).
fn replication(ctx: &Context, func: OpId, block: BlockId) -> HashMap<Value, Rep> {
    let mut reps = HashMap::new();
    for (i, &a) in ctx.block_args(block).iter().enumerate() {
        if let Some(g) = replicated_arg_group(ctx, func, i) {
            reps.insert(a, Rep::Group(g.to_string()));
        }
    }
    for op in ctx.block_ops(block) {
        let name = ctx.op_name(op);
        let rep = if name == "coll.wait_tensor" {
            ctx.defining_op(ctx.operand(op, 0))
                .filter(|c| {
                    matches!(
                        ctx.op_name(*c),
                        "coll.all_reduce" | "coll.all_gather_into_tensor" | "coll.broadcast"
                    )
                })
                .and_then(|c| group_of(ctx, c).ok())
                .map(|g| Rep::Group(g.name))
        } else if name.starts_with("compute.") {
            // Compute ops are deterministic functions of their operands.
            let mut acc = Some(Rep::Everywhere);
            for v in ctx.operands(op) {
                acc = match (acc, reps.get(v)) {
                    (Some(Rep::Everywhere), Some(r)) => Some(r.clone()),
                    (Some(a), Some(Rep::Everywhere)) => Some(a),
                    (Some(a), Some(r)) if a == *r => Some(a),
                    _ => None,
                };
            }
            acc
        } else {
            None
        };
        if let Some(r) = rep {
            for &v in ctx.results(op) {
                reps.insert(v, r.clone());
            }
        }
    }
    reps
}

/// A planned rewrite of one all-reduce.
struct Plan {
    ar: OpId,
    wait: OpId,
    group: String,
    size: i64,
    /// The row-local ops, in program order.
    region: Vec<OpId>,
}

fn is_unary_rowwise(name: &str) -> bool {
    matches!(
        name,
        "compute.neg"
            | "compute.exp"
            | "compute.relu"
            | "compute.gelu"
            | "compute.silu"
            | "compute.tanh"
            | "compute.sqrt"
            | "compute.rsqrt"
            | "compute.sin"
            | "compute.cos"
            | "compute.sigmoid"
            | "compute.log"
            | "compute.scale"
            | "compute.cast"
            | "compute.clone"
    )
}

fn is_binary_rowwise(name: &str) -> bool {
    matches!(
        name,
        "compute.add"
            | "compute.sub"
            | "compute.mul"
            | "compute.div"
            | "compute.maximum"
            | "compute.minimum"
            | "compute.compare"
            | "compute.select"
    )
}

/// `coll.all_slice` of this rank's dim-0 rows on `group`.
fn is_own_slice(ctx: &Context, op: OpId, group: &str) -> bool {
    ctx.op_name(op) == "coll.all_slice"
        && int_attr(ctx, op, "dim") == Some(0)
        && group_of(ctx, op).is_ok_and(|g| g.name == group)
}

/// `v` when it is the waited all-gather (dim 0, on `group`) of a shard: the shard itself is
/// this rank's slice of `v`, so slicing the gathered value again is a no-op.
fn gathered_shard(ctx: &Context, v: Value, group: &str) -> Option<Value> {
    let wait = ctx
        .defining_op(v)
        .filter(|w| ctx.op_name(*w) == "coll.wait_tensor")?;
    let ag = ctx
        .defining_op(ctx.operand(wait, 0))
        .filter(|a| ctx.op_name(*a) == "coll.all_gather_into_tensor")?;
    group_of(ctx, ag)
        .is_ok_and(|g| g.name == group)
        .then(|| ctx.operand(ag, 0))
}

fn rows(ctx: &Context, v: Value) -> Option<i64> {
    value_tensor_view(ctx, v).and_then(|t| t.shape.first().copied())
}

fn plan(ctx: &Context, block: BlockId, ar: OpId, reps: &HashMap<Value, Rep>) -> Option<Plan> {
    let g = group_of(ctx, ar).ok()?;
    let x = *ctx.operands(ar).first()?;
    let n = rows(ctx, x)?;
    if g.size < 2 || n % g.size != 0 || value_tensor_view(ctx, x)?.encoding.is_some() {
        return None;
    }
    let [u] = ctx.uses(ctx.result(ar, 0)) else {
        return None;
    };
    let wait = u.op;
    if ctx.op_name(wait) != "coll.wait_tensor" || ctx.op_parent(wait) != Some(block) {
        return None;
    }
    let mine = Rep::Group(g.name.clone());
    let replicated =
        |v: &Value| matches!(reps.get(v), Some(r) if *r == mine || *r == Rep::Everywhere);
    let mut sharded: HashSet<Value> = HashSet::from([ctx.result(wait, 0)]);
    let mut region = Vec::new();
    let mut cur = ctx.next_op(wait);
    while let Some(op) = cur {
        cur = ctx.next_op(op);
        let ops = ctx.operands(op);
        if !ops.iter().any(|v| sharded.contains(v)) || ctx.results(op).len() != 1 {
            continue;
        }
        let name = ctx.op_name(op);
        let r = ctx.result(op, 0);
        let row_local = if is_own_slice(ctx, op, &g.name) {
            // This rank's rows of the all-reduce's result are the reduce-scatter's result.
            true
        } else if rows(ctx, r) != Some(n) {
            false
        } else if is_unary_rowwise(name) {
            true
        } else if is_binary_rowwise(name) {
            ops.iter()
                .all(|v| sharded.contains(v) || replicated(v) && rows(ctx, *v) == Some(n))
        } else if matches!(
            name,
            "compute.softmax" | "compute.reduce_sum" | "compute.reduce_max"
        ) {
            int_attr(ctx, op, "dim").is_some_and(|d| d > 0)
        } else if name == "compute.broadcast" {
            // Same rank and the operand already has all rows: only later dims repeat, and
            // each row of the result reads the same row of the operand.
            value_tensor_view(ctx, ops[0])
                .zip(value_tensor_view(ctx, r))
                .is_some_and(|(a, b)| a.shape.len() == b.shape.len())
                && rows(ctx, ops[0]) == Some(n)
        } else if name == "compute.permute" {
            ctx.inherent_attr(op, "perm")
                .and_then(|p| ctx.attr_as_i64_array(p))
                .is_some_and(|p| p.first() == Some(&0))
        } else if name == "compute.reshape" {
            // Row-major order keeps every row's elements together when dim 0 is unchanged.
            rows(ctx, ops[0]) == Some(n)
        } else if name == "compute.matmul" {
            // A (rows) · B (the same on every rank): each output row needs only its own row,
            // e.g. the broadcast of a per-row norm factor over the hidden dim.
            sharded.contains(&ops[0])
                && !sharded.contains(&ops[1])
                && replicated(&ops[1])
                && value_tensor_view(ctx, ops[0]).is_some_and(|t| t.shape.len() == 2)
        } else {
            false
        };
        if row_local {
            sharded.insert(r);
            region.push(op);
        }
    }
    // Worth it when a matmul reads the rows back (that all-gather is what fuses), when only
    // this rank's rows were wanted anyway (an earlier rewrite sliced this all-reduce for the
    // sharded residual stream: the reduce-scatter is half the traffic), or when the chain
    // ends at the function's return (Megatron's final norm on shards, one gather at the end).
    let worth = sharded.iter().any(|v| {
        ctx.uses(*v).iter().any(|u| {
            let name = ctx.op_name(u.op);
            ((u.index == 0 && name == "compute.matmul") || name == "func.return")
                && !region.contains(&u.op)
        })
    }) || region.iter().any(|&o| ctx.op_name(o) == "coll.all_slice");
    if !worth {
        return None;
    }
    Some(Plan {
        ar,
        wait,
        group: g.name,
        size: g.size,
        region,
    })
}

/// `t` with dim 0 divided by `g`.
fn shard_type(ctx: &mut Context, v: Value, g: i64) -> commlir_ir::Type {
    let t = value_tensor_view(ctx, v)
        .expect("planned values are tensors")
        .to_info();
    let mut shape = t.shape.clone();
    shape[0] /= g;
    ctx.tensor_type(&shape, t.elem)
}

/// Rewrites `plan`; returns false (and leaves the function as it was) if peak memory grew.
fn apply(ctx: &mut Context, block: BlockId, plan: &Plan) -> bool {
    let before = peak_memory(ctx, block);
    let group = ctx.symbol_ref(&plan.group);
    let g = plan.size;
    let mut created: Vec<OpId> = Vec::new();
    let mut shard: HashMap<Value, Value> = HashMap::new();
    // The reduce-scatter takes the all-reduce's place.
    let x = ctx.operand(plan.ar, 0);
    let st = shard_type(ctx, x, g);
    let reduce_op = ctx
        .inherent_attr(plan.ar, "reduce_op")
        .expect("verified all-reduces have a reduce_op");
    let mut b = Builder::before(ctx, plan.ar);
    let rs = b.create(
        "coll.reduce_scatter_tensor",
        &[x],
        &[st],
        &[("reduce_op", reduce_op), ("group", group)],
    );
    let rs_v = b.ctx.result(rs, 0);
    let mut b = Builder::before(b.ctx, plan.wait);
    let w = b.create("coll.wait_tensor", &[rs_v], &[st], &[]);
    created.extend([rs, w]);
    shard.insert(ctx.result(plan.wait, 0), ctx.result(w, 0));
    // The row-local ops on the shards, each right before its original.
    let dim0 = ctx.int_attr(0, 64);
    for &op in &plan.region {
        if ctx.op_name(op) == "coll.all_slice" {
            let s = shard[&ctx.operand(op, 0)];
            shard.insert(ctx.result(op, 0), s);
            continue;
        }
        let mut operands = Vec::new();
        for v in ctx.operands(op).to_vec() {
            if let Some(&s) = shard.get(&v) {
                operands.push(s);
            } else if ctx.op_name(op) == "compute.matmul" {
                // The replicated right operand of a row-local matmul is used whole.
                operands.push(v);
            } else if let Some(s) = gathered_shard(ctx, v, &plan.group) {
                operands.push(s);
            } else {
                let t = shard_type(ctx, v, g);
                let sl = Builder::before(ctx, op).create(
                    "coll.all_slice",
                    &[v],
                    &[t],
                    &[("dim", dim0), ("group", group)],
                );
                created.push(sl);
                operands.push(ctx.result(sl, 0));
            }
        }
        let r = ctx.result(op, 0);
        let t = shard_type(ctx, r, g);
        let mut st = OpState::new(ctx.op_name_ident(op), ctx.op_loc(op));
        st.operands = operands;
        st.result_types = vec![t];
        st.attrs = ctx.attrs(op).to_vec();
        st.properties = ctx.properties(op);
        let new = Builder::before(ctx, op).create_state(st);
        created.push(new);
        shard.insert(r, ctx.result(new, 0));
    }
    // An all-gather before the first consumer of each value that needs all rows.
    let mut gathered: Vec<(Value, Value)> = Vec::new();
    let mut sliced: Vec<(Value, Value)> = Vec::new();
    let originals: Vec<Value> = std::iter::once(ctx.result(plan.wait, 0))
        .chain(plan.region.iter().map(|&o| ctx.result(o, 0)))
        .collect();
    for v in originals {
        let mut outside: Vec<OpId> = ctx
            .uses(v)
            .iter()
            .map(|u| u.op)
            .filter(|o| !plan.region.contains(o))
            .collect();
        if outside.is_empty() {
            continue;
        }
        if plan
            .region
            .iter()
            .any(|&o| ctx.result(o, 0) == v && ctx.op_name(o) == "coll.all_slice")
        {
            // Its users wanted this rank's rows: they take the shard itself.
            ctx.replace_all_uses(v, shard[&v]);
            sliced.push((v, shard[&v]));
            continue;
        }
        outside.sort_by(|a, b| {
            if a == b {
                std::cmp::Ordering::Equal
            } else if ctx.is_before_in_block(*a, *b) {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            }
        });
        let t = ctx.value_type(v);
        let mut b = Builder::before(ctx, outside[0]);
        let ag = b.create(
            "coll.all_gather_into_tensor",
            &[shard[&v]],
            &[t],
            &[("group", group)],
        );
        let ag_v = b.ctx.result(ag, 0);
        let mut b = Builder::before(b.ctx, outside[0]);
        let aw = b.create("coll.wait_tensor", &[ag_v], &[t], &[]);
        created.extend([ag, aw]);
        let full = ctx.result(aw, 0);
        ctx.replace_all_uses(v, full);
        gathered.push((v, full));
    }
    // The originals are now dead; unlinked (not yet erased) so the rewrite can be undone.
    let mut old: Vec<OpId> = vec![plan.ar, plan.wait];
    old.extend(&plan.region);
    let prevs: Vec<Option<OpId>> = old.iter().map(|&o| ctx.prev_op(o)).collect();
    for &o in &old {
        ctx.unlink(o);
    }
    if peak_memory(ctx, block) <= before {
        for o in old.into_iter().rev() {
            ctx.erase_op(o);
        }
        return true;
    }
    for (&o, p) in old.iter().zip(prevs) {
        match p {
            Some(p) => ctx.insert_after(p, o),
            None => ctx.prepend_op(block, o),
        }
    }
    for (v, full) in gathered.into_iter().chain(sliced) {
        ctx.replace_all_uses(full, v);
    }
    for o in created.into_iter().rev() {
        ctx.erase_op(o);
    }
    false
}
