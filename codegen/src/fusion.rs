//! Fusion: which `compute` ops of a function body become one kernel.
//!
//! A chain of elementwise ops (unary, binary, compare, select, scale, cast, clone, reshape,
//! fill) whose intermediate results have exactly one reader, the next op of the chain, is
//! evaluated in one kernel: each thread computes the whole chain for its element and only the
//! last result is stored. An intermediate that several ops read is part of the chain too when
//! all of them are ops of that chain (a DAG: SwiGLU's `x · sigmoid(x)` of a cast `x`): the
//! kernel computes it once per element. Every intermediate is still rounded to its element type, so a fused kernel computes
//! bit for bit what the unfused ops would (the sim backend's per-result rounding).
//!
//! Fusing moves the reads of the absorbed ops to the position of the chain's last op. That is
//! only sound when no op in between changes what they read, so a chain never spans a
//! *barrier*: a collective start or wait, a pool op, or a comm-buffer producer (comm-buffer
//! bytes are mutated in place by collectives and reused by the pool plan). An intermediate
//! that is itself a comm buffer (it carries a `comm.slot`), or is read by an op outside the
//! chain, is materialized.
//!
//! Concats: a `compute.concat` is a chain op too (it fuses with its operands' chains and into
//! its reader's chain like an elementwise op): the kernel picks, by the element's coordinate
//! along the concat's dim, the operand whose range holds it and evaluates that operand's
//! subchain there (`kernels::fused`: one variant of the kernel per combination of operands,
//! at most [`MAX_CONCAT_VARIANTS`]). Concats are not nested (a concat does not absorb a chain
//! holding one), so the choice depends on the element's index only. A lone concat is still
//! its own gather kernel. The rotary embedding's `cat(-x2, x1)` feeding `x·cos + ·sin` is
//! part of the `mul_mul_add` chain.
//!
//! Absorbed views: a view (`compute.broadcast`, `slice`, `permute`, `transpose`) is a kernel of
//! its own only where something other than a fused chain reads its result. Every group whose
//! ops read it takes a copy of the view op ([`Group::ops`]) and reads the view's *operand*
//! instead of its result ([`Group::inputs`]): each element of the chain loads the operand
//! element its index maps to (`kernels::index_map`: per dim an extent and a stride, plus an
//! offset), so the viewed tensor is never written or read back. Views are visited last to
//! first, so that a view of a view is taken by the groups that took the outer one and the
//! two compose (a slice of a permute is one strided map); a lone view (or concat) reading a
//! view takes it as well and becomes a gather through the composed map (a lone view that only
//! matmuls read excepted: `comm-to-rt` may fold it into the GEMM, which then reads its
//! operand's buffer). Legal for a reader group when:
//! - the view's result is not a comm buffer and the view writes no pool slot;
//! - the group is not an all-reduce's epilogue (its kernel reads every input at the reduced
//!   element's index);
//! - the operand is read at the group root's position instead of the view's, so it must
//!   read the same there: always true of a plain tensor (its buffer is written once, by its
//!   producer, and freed after its last reader, now the group), true of a comm buffer only
//!   when no [barrier](is_barrier) stands between the view and the group's root.
//!   Broadcasts of weights and tables (function arguments) therefore fuse across the
//!   collectives a schedule placed between them and their readers.
//!
//! When every reader's group takes it, the view is absorbed ([`FusionPlan::absorbed`]) and
//! emits nothing; otherwise its own kernel still materializes the result for the other readers
//! (a matmul, a softmax, attention, a `return`, a chain beyond a barrier) while the groups that
//! took a copy read the operand.
//!
//! Row reductions (Inductor's persistent reductions): a `compute.reduce_sum` or `reduce_max`
//! along the last dim (f16/bf16/f32, `kernels::is_row_block`) joins the chains around it into
//! one kernel of one block per row (`kernels::rows`): RMSNorm is one kernel. After the views are
//! absorbed, its group takes
//! - the *per-row chain*: the one fused chain holding every reader of the reduction's result,
//!   elementwise on per-row values (`scale`, `+ eps`, `rsqrt`);
//! - the *epilogue*: the one fused chain reading that chain's result (or the reduction's) only
//!   through broadcasts back to the rows (`is_row_broadcast`: index `j / len`) that were
//!   absorbed into it alone;
//! - the *prologue*: every fused chain producing a row-shaped value (the reduction's element
//!   count) that only the row kernel's ops read, each at the element's own index (an
//!   elementwise op or the reduction: not through a view, which may read another row's
//!   element), transitively: the `cast` and `x·x` of RMSNorm, whose `cast` the epilogue reads too.
//!
//! Chains with concats, all-reduce epilogues and comm-buffer or slot intermediates stay out, and,
//! as for a chain, no barrier may stand between the first op the row kernel computes and its
//! root (the epilogue's root, else the per-row chain's, else the reduction), which must be the
//! last. The kernel stores only its root. `COMMLIR_ROW_FUSION=0` at compile time keeps the
//! reductions apart (the comparison).
//!
//! Epilogues: a chain that reads the result of a `symm.one_shot_all_reduce`, or of a
//! `symm.fused_matmul_reduce_scatter` whose pipeline reduces after its last GEMM (not the
//! accumulating one, `fused_matmul::reduces_after_last_gemm`), can run inside the collective's
//! reduction, each thread applying it to the elements it has just reduced, so the reduced
//! tensor is never stored ([`FusionPlan::epilogues`]): in a sequence-parallel block, the
//! residual add after each reduce-scatter. Legal when:
//! - every reader of the all-reduce's result is an op of that one chain (a result read by
//!   anything else, a matmul or a second chain, keeps the plain all-reduce: storing it as well
//!   would cost the write the fusion saves);
//! - the chain is elementwise only, and every value it reads or writes has the all-reduce's
//!   element count (no broadcast);
//! - the chain's other inputs exist before the collective (arguments or earlier results);
//!   they stay live until the chain's root, so no op in between can change their bytes;
//! - no op strictly between the collective and the chain's root (other than the chain's own)
//!   is a pool op or reads or writes a comm buffer of a pool the chain's values live in
//!   (`pools_untouched_between`): an FSDP gather of the next layer's weights in another pool,
//!   or any plain compute, may stand there;
//! - for the one-shot all-reduce, the chain's result is not a comm buffer: its slot's
//!   liveness was planned for the chain's own position, and writing it earlier could clobber
//!   a slot still live (even the all-reduce's input, which peers read during the kernel). The
//!   fused reduce-scatter keeps its partials in a workspace of its own, so there the result
//!   may be a comm buffer, provided none of the collective's operands (dying at it) is in the
//!   result's pool: with the rule above, no slot whose life ends in between can share the
//!   result's bytes.
//!
//! The fused kernel rounds the reduced value to its element type once, as the sim rounds the
//! collective's result, then evaluates the chain exactly as the chain's own kernel does.

use crate::kernels::index_map::is_view;
use commlir_dialects::comm::{buffer_encoding_ref, is_comm_buffer, SLOT_ATTR};
use commlir_dialects::compute::{BINARY_OPS, UNARY_OPS};
use commlir_ir::{Context, OpId, Trait, Value};
use std::collections::HashMap;

/// Whether `name` is an elementwise op that can take part in a fused chain.
pub fn is_elementwise(name: &str) -> bool {
    BINARY_OPS.contains(&name)
        || UNARY_OPS.contains(&name)
        || matches!(
            name,
            "compute.scale"
                | "compute.cast"
                | "compute.fill"
                | "compute.reshape"
                | "compute.compare"
                | "compute.select"
        )
}

/// Whether `name` is a compute op lowered to a kernel of its own (never part of a chain):
/// reductions and data movement read other elements than the one a chain's thread computes.
/// A broadcast's kernel is dropped when fused chains are its only readers: they read its
/// operand themselves (module docs, *Absorbed broadcasts*). `iota` is
/// here too although it reads nothing: its value is the element's index, which a chain's
/// lanes do not carry (a chain sees only the elements it loaded), and its result is usually
/// small and read by several masks.
pub fn is_standalone_kernel(name: &str) -> bool {
    matches!(
        name,
        "compute.softmax"
            | "compute.reduce_sum"
            | "compute.reduce_max"
            | "compute.transpose"
            | "compute.permute"
            | "compute.broadcast"
            | "compute.slice"
            | "compute.concat"
            | "compute.iota"
    )
}

/// Whether `name` can stand in a fused chain's tree: elementwise ops, and concats (a concat
/// selects its operand by the element's coordinate, module docs, *Concats*).
pub fn is_chain_op(name: &str) -> bool {
    is_elementwise(name) || name == "compute.concat"
}

/// Whether `ops` (a group's) form a fused elementwise kernel (`kernels::fused`): chain ops
/// and the views whose results they read absorbed (module docs). A lone view or concat is
/// its standalone kernel.
pub fn is_fused_chain(ctx: &Context, ops: &[OpId]) -> bool {
    let all = ops.iter().all(|&o| {
        let name = ctx.op_name(o);
        is_chain_op(name) || is_view(name)
    });
    all && !matches!(ops, [o] if is_standalone_kernel(ctx.op_name(*o)))
}

/// Whether a group of `ops` only moves data (views, reshapes, clones, concats): its kernel is
/// named after the views, a chain with arithmetic after its chain ops.
pub fn is_movement(ctx: &Context, ops: &[OpId]) -> bool {
    ops.iter().all(|&o| {
        let name = ctx.op_name(o);
        is_view(name) || matches!(name, "compute.reshape" | "compute.clone" | "compute.concat")
    })
}

/// The most operand combinations of the concats of one fused kernel (each is compiled as a
/// variant of its own, `kernels::fused`).
pub const MAX_CONCAT_VARIANTS: usize = 16;

fn concat_variants(ctx: &Context, ops: &[OpId]) -> usize {
    ops.iter()
        .filter(|o| ctx.op_name(**o) == "compute.concat")
        .map(|o| ctx.operands(*o).len().max(1))
        .product()
}

/// One kernel's worth of ops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The op whose result the kernel stores.
    pub root: OpId,
    /// Every op of the kernel, in program order (the root last). A fused chain's ops may
    /// include absorbed `compute.broadcast`s (copies: one broadcast can be in several groups).
    pub ops: Vec<OpId>,
    /// The values the kernel reads from memory, in order of first use (an absorbed
    /// broadcast's operand, not its result).
    pub inputs: Vec<Value>,
}

/// The kernels of a block: every kernel op belongs to exactly one group.
#[derive(Clone, Debug, Default)]
pub struct FusionPlan {
    /// Groups in the program order of their roots.
    pub groups: Vec<Group>,
    /// For each root, its group's index.
    pub root_group: HashMap<OpId, usize>,
    /// Ops absorbed into a later root (emitted nothing where they stood). An absorbed
    /// broadcast maps to one of the roots that read it.
    pub absorbed: HashMap<OpId, OpId>,
    /// One-shot all-reduces that apply a group as their epilogue: op → group index.
    pub epilogues: HashMap<OpId, usize>,
    /// The roots of those groups → their all-reduce (no kernel of their own).
    pub fused_into: HashMap<OpId, OpId>,
}

impl FusionPlan {
    /// Number of ops that were fused away (not stored to memory).
    pub fn num_fused(&self) -> usize {
        self.absorbed.len() + self.fused_into.len()
    }
}

fn is_barrier(ctx: &Context, op: OpId) -> bool {
    let name = ctx.op_name(op);
    ctx.op_has_trait(op, Trait::Collective)
        || ctx.op_has_trait(op, Trait::Wait)
        || name.starts_with("comm.")
        || name.starts_with("symm.")
        || ctx.get_attr(op, SLOT_ATTR).is_some()
        || ctx
            .results(op)
            .iter()
            .any(|r| is_comm_buffer(ctx, ctx.value_type(*r)))
}

/// Plans the kernels of `ops` (one block, in program order).
pub fn plan(ctx: &Context, ops: &[OpId]) -> FusionPlan {
    let pos: HashMap<OpId, usize> = ops.iter().enumerate().map(|(i, o)| (*o, i)).collect();
    // barriers_before[i]: barriers among ops[..i]; an interval test is then O(1).
    let mut barriers_before = Vec::with_capacity(ops.len() + 1);
    barriers_before.push(0usize);
    for &op in ops {
        let last = *barriers_before.last().unwrap_or(&0);
        barriers_before.push(last + usize::from(is_barrier(ctx, op)));
    }
    // Working groups keyed by root; members in program order.
    let mut members: HashMap<OpId, Vec<OpId>> = HashMap::new();
    let mut absorbed: HashMap<OpId, OpId> = HashMap::new();
    let mut roots: Vec<OpId> = Vec::new();
    for &op in ops {
        let name = ctx.op_name(op);
        if is_standalone_kernel(name) && name != "compute.concat" {
            members.insert(op, vec![op]);
            roots.push(op);
            continue;
        }
        if !is_chain_op(name) {
            continue;
        }
        let concat = name == "compute.concat";
        let mut group = Vec::new();
        for &x in ctx.operands(op) {
            let Some(p) = ctx.defining_op(x) else {
                continue;
            };
            let fusable = is_chain_op(ctx.op_name(p))
                && members.contains_key(&p)
                && ctx.results(p).len() == 1
                && ctx.uses(x).len() == 1
                && !is_comm_buffer(ctx, ctx.value_type(x))
                && ctx.get_attr(p, SLOT_ATTR).is_none();
            if !fusable {
                continue;
            }
            let first = members[&p][0];
            let (Some(&a), Some(&b)) = (pos.get(&first), pos.get(&op)) else {
                continue;
            };
            // Barriers strictly between the chain's first op and this one.
            if barriers_before[b] - barriers_before[a + 1] > 0 {
                continue;
            }
            // A concat's operands are evaluated at shifted indices, in a variant of the kernel
            // per operand combination: no concat inside another's operand, and a bounded
            // number of combinations.
            let sub = &members[&p];
            let nested = concat && sub.iter().any(|m| ctx.op_name(*m) == "compute.concat");
            let variants = concat_variants(ctx, &group)
                * concat_variants(ctx, sub)
                * if concat {
                    ctx.operands(op).len().max(1)
                } else {
                    1
                };
            if nested || variants > MAX_CONCAT_VARIANTS {
                continue;
            }
            let sub = members.remove(&p).unwrap_or_default();
            for &m in &sub {
                absorbed.insert(m, op);
            }
            group.extend(sub);
        }
        // Then the producers that several ops of this chain read and nothing else (a DAG,
        // SwiGLU's `x·sigmoid(x)` of a cast `x`): each element computes them once. Not in a
        // chain with a concat, whose operands are evaluated at other indices.
        let has_concat = |g: &[OpId]| g.iter().any(|m| ctx.op_name(*m) == "compute.concat");
        while !concat && !has_concat(&group) {
            let reads: Vec<Value> = group
                .iter()
                .chain([&op])
                .flat_map(|m| ctx.operands(*m).to_vec())
                .collect();
            let mut grew = false;
            for x in reads {
                let Some(p) = ctx.defining_op(x) else {
                    continue;
                };
                let shared = is_elementwise(ctx.op_name(p))
                    && !group.contains(&p)
                    && members.get(&p).is_some_and(|sub| !has_concat(sub))
                    && ctx.results(p).len() == 1
                    && ctx.uses(x).len() > 1
                    && ctx
                        .uses(x)
                        .iter()
                        .all(|u| u.op == op || group.contains(&u.op))
                    && !is_comm_buffer(ctx, ctx.value_type(x))
                    && ctx.get_attr(p, SLOT_ATTR).is_none();
                if !shared {
                    continue;
                }
                let first = members[&p][0];
                let (Some(&a), Some(&b)) = (pos.get(&first), pos.get(&op)) else {
                    continue;
                };
                if barriers_before[b] - barriers_before[a + 1] > 0 {
                    continue;
                }
                let sub = members.remove(&p).unwrap_or_default();
                group.extend(sub);
                grew = true;
            }
            if !grew {
                break;
            }
        }
        // Absorbed ops of earlier roots re-point to this root.
        for m in &group {
            absorbed.insert(*m, op);
        }
        group.sort_by_key(|o| pos[o]);
        group.push(op);
        members.insert(op, group);
        roots.push(op);
    }
    let mut plan = FusionPlan {
        absorbed,
        ..FusionPlan::default()
    };
    for root in roots {
        let Some(ops_of) = members.remove(&root) else {
            continue; // absorbed later
        };
        let inputs = group_inputs(ctx, &ops_of);
        plan.root_group.insert(root, plan.groups.len());
        plan.groups.push(Group {
            root,
            ops: ops_of,
            inputs,
        });
    }
    plan_epilogues(ctx, ops, &pos, &mut plan);
    absorb_views(ctx, &pos, &barriers_before, &mut plan);
    plan_rows(ctx, &pos, &barriers_before, &mut plan);
    plan
}

/// The values the ops of a group read from memory, in order of first use: every operand not
/// produced inside the group.
fn group_inputs(ctx: &Context, ops: &[OpId]) -> Vec<Value> {
    let mut inputs: Vec<Value> = Vec::new();
    for &m in ops {
        for &v in ctx.operands(m) {
            let inside = ctx.defining_op(v).is_some_and(|d| ops.contains(&d));
            if !inside && !inputs.contains(&v) {
                inputs.push(v);
            }
        }
    }
    inputs
}

/// Copies every standalone view (broadcast, slice, permute, transpose) into the fused chains
/// that read its result, and drops its own kernel when no other reader is left (module docs,
/// *Absorbed views*). Views are visited last to first, so that a view of a view finds the
/// chains that took the outer one reading its result, and composes with it.
fn absorb_views(
    ctx: &Context,
    pos: &HashMap<OpId, usize>,
    barriers_before: &[usize],
    plan: &mut FusionPlan,
) {
    let mut dropped: Vec<usize> = Vec::new();
    for gi in (0..plan.groups.len()).rev() {
        let b = plan.groups[gi].root;
        if plan.groups[gi].ops != [b]
            || !is_view(ctx.op_name(b))
            || ctx.results(b).len() != 1
            || ctx.operands(b).len() != 1
        {
            continue;
        }
        let r = ctx.result(b, 0);
        let static_shapes = numel(ctx, r).is_some() && numel(ctx, ctx.operand(b, 0)).is_some();
        if !static_shapes
            || is_comm_buffer(ctx, ctx.value_type(r))
            || ctx.get_attr(b, SLOT_ATTR).is_some()
        {
            continue;
        }
        let Some(&at) = pos.get(&b) else {
            continue;
        };
        // A plain operand's buffer is written once, by its producer, and freed after its
        // last reader: it reads the same at any later position. A comm buffer's bytes may
        // change at a barrier.
        let pinned = is_comm_buffer(ctx, ctx.value_type(ctx.operand(b, 0)));
        // The groups that take a copy; whether every reader is in one of them.
        let mut takers: Vec<usize> = Vec::new();
        let mut all = !ctx.uses(r).is_empty();
        for u in ctx.uses(r) {
            // Every group holding the reader (a view's reader may be a copy in several).
            let holders: Vec<usize> = plan
                .groups
                .iter()
                .enumerate()
                .filter(|(g, grp)| !dropped.contains(g) && grp.ops.contains(&u.op))
                .map(|(g, _)| g)
                .collect();
            if holders.is_empty() {
                all = false;
            }
            for g in holders {
                let grp = &plan.groups[g];
                let takes = g != gi
                    && is_fused_chain_or_view(ctx, &grp.ops)
                    && !plan.fused_into.contains_key(&grp.root)
                    // For a comm-buffer operand, no barrier strictly between the view and
                    // the group's root.
                    && pos.get(&grp.root).is_some_and(|&end| {
                        end > at && (!pinned || barriers_before[end] == barriers_before[at + 1])
                    });
                if !takes {
                    all = false;
                } else if !takers.contains(&g) {
                    takers.push(g);
                }
            }
        }
        for &g in &takers {
            let grp = &mut plan.groups[g];
            grp.ops.push(b);
            grp.ops
                .sort_by_key(|o| pos.get(o).copied().unwrap_or(usize::MAX));
            grp.inputs = group_inputs(ctx, &grp.ops);
        }
        if all {
            if let Some(&g) = takers.first() {
                plan.absorbed.insert(b, plan.groups[g].root);
                dropped.push(gi);
            }
        }
    }
    drop_groups(plan, &dropped);
}

/// Whether a group can take a view: a fused chain, or a lone view or concat (which becomes
/// one, reading through the composed maps). Not a lone view that only matmuls read: `comm-to-rt`
/// may fold it into the GEMM as a transposed operand, which reads the view's operand buffer.
fn is_fused_chain_or_view(ctx: &Context, ops: &[OpId]) -> bool {
    let chain = ops.iter().all(|&o| {
        let name = ctx.op_name(o);
        is_chain_op(name) || is_view(name)
    });
    let gemm_operand = matches!(ops, [o] if is_view(ctx.op_name(*o)) && {
        let uses = ctx.uses(ctx.result(*o, 0));
        !uses.is_empty() && uses.iter().all(|u| ctx.op_name(u.op) == "compute.matmul")
    });
    chain && !gemm_operand
}

/// Removes the groups at indices `dropped` and re-indexes the plan.
fn drop_groups(plan: &mut FusionPlan, dropped: &[usize]) {
    if dropped.is_empty() {
        return;
    }
    let mut new_index: Vec<Option<usize>> = Vec::with_capacity(plan.groups.len());
    let mut kept = Vec::with_capacity(plan.groups.len() - dropped.len());
    for (i, g) in std::mem::take(&mut plan.groups).into_iter().enumerate() {
        if dropped.contains(&i) {
            new_index.push(None);
        } else {
            new_index.push(Some(kept.len()));
            kept.push(g);
        }
    }
    plan.groups = kept;
    plan.root_group = plan
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.root, i))
        .collect();
    for g in plan.epilogues.values_mut() {
        // Epilogue groups take no view and join no row kernel, so they are never dropped.
        if let Some(n) = new_index[*g] {
            *g = n;
        }
    }
}

/// The groups (not yet dropped) whose ops include `op` (a view may be copied into several).
fn holders(plan: &FusionPlan, dropped: &[usize], op: OpId) -> Vec<usize> {
    plan.groups
        .iter()
        .enumerate()
        .filter(|(g, grp)| !dropped.contains(g) && grp.ops.contains(&op))
        .map(|(g, _)| g)
        .collect()
}

/// Whether the broadcast of a per-row value of shape `from` to `to` gives every element of
/// row `i` (rows of `len` elements) the row's value: its index map is `j / len`.
pub fn is_row_broadcast(from: &[i64], to: &[i64], len: u64) -> bool {
    let n = to.iter().product::<i64>().max(0) as u64;
    let rows = n / len.max(1);
    crate::kernels::StridedIndex::new(from, to).is_ok_and(|m| {
        m.offset == 0 && m.dims == crate::kernels::collapse(vec![(rows, 1), (len, 0)])
    })
}

/// Merges each row reduction with the chains around it into one kernel (module docs, *Row
/// reductions*): `COMMLIR_ROW_FUSION=0` at compile time keeps them apart.
fn plan_rows(
    ctx: &Context,
    pos: &HashMap<OpId, usize>,
    barriers_before: &[usize],
    plan: &mut FusionPlan,
) {
    if std::env::var("COMMLIR_ROW_FUSION").is_ok_and(|v| v.trim() == "0") {
        return;
    }
    let mut dropped: Vec<usize> = Vec::new();
    for gi in 0..plan.groups.len() {
        let rd = plan.groups[gi].root;
        if dropped.contains(&gi)
            || plan.groups[gi].ops != [rd]
            || !matches!(ctx.op_name(rd), "compute.reduce_sum" | "compute.reduce_max")
            || !crate::kernels::is_row_block(ctx, rd)
        {
            continue;
        }
        let Some((members, root)) = row_members(ctx, pos, barriers_before, plan, gi, &dropped)
        else {
            continue;
        };
        let Some(&keep) = plan.root_group.get(&root) else {
            continue;
        };
        let mut ops: Vec<OpId> = Vec::new();
        for &m in &members {
            for &o in &plan.groups[m].ops {
                if !ops.contains(&o) {
                    ops.push(o);
                }
            }
        }
        ops.sort_by_key(|o| pos.get(o).copied().unwrap_or(usize::MAX));
        let roots: Vec<OpId> = members.iter().map(|&m| plan.groups[m].root).collect();
        for v in plan.absorbed.values_mut() {
            if roots.contains(v) {
                *v = root;
            }
        }
        for (&m, &r) in members.iter().zip(&roots) {
            if m != keep {
                plan.absorbed.insert(r, root);
                dropped.push(m);
            }
        }
        let inputs = group_inputs(ctx, &ops);
        let grp = &mut plan.groups[keep];
        grp.ops = ops;
        grp.inputs = inputs;
    }
    drop_groups(plan, &dropped);
}

/// The groups of the row kernel of reduction group `gi` and its root, if it has more than
/// the reduction (module docs, *Row reductions*).
fn row_members(
    ctx: &Context,
    pos: &HashMap<OpId, usize>,
    barriers_before: &[usize],
    plan: &FusionPlan,
    gi: usize,
    dropped: &[usize],
) -> Option<(Vec<usize>, OpId)> {
    let rd = plan.groups[gi].root;
    let (x, r) = (ctx.operand(rd, 0), ctx.result(rd, 0));
    let xt = commlir_dialects::shape::value_tensor(ctx, x)?;
    let n = xt.numel().max(0) as u64;
    let len = *xt.shape.last()? as u64;
    if len < 2 || n == 0 {
        return None;
    }
    let rows = n / len;
    // A fused chain of elementwise ops and views: concats select by coordinate, which the
    // row kernel does not do.
    let chain = |g: usize| {
        let grp = &plan.groups[g];
        is_fused_chain(ctx, &grp.ops)
            && !plan.fused_into.contains_key(&grp.root)
            && grp.ops.iter().all(|o| ctx.op_name(*o) != "compute.concat")
    };
    // Stored nowhere: not a comm buffer, not written to a slot.
    let plain = |v: Value| {
        !is_comm_buffer(ctx, ctx.value_type(v))
            && ctx
                .defining_op(v)
                .is_none_or(|d| ctx.get_attr(d, SLOT_ATTR).is_none())
    };
    // An elementwise reader: reads the element of its own index.
    let pointwise = |o: OpId| is_elementwise(ctx.op_name(o));
    // The one group holding every reader of `v`, when each satisfies `ok`.
    let one_group = |v: Value, ok: &dyn Fn(OpId) -> bool| -> Option<usize> {
        let mut group = None;
        for u in ctx.uses(v) {
            if !ok(u.op) {
                return None;
            }
            match holders(plan, dropped, u.op)[..] {
                [g] if group.is_none_or(|h| h == g) => group = Some(g),
                _ => return None,
            }
        }
        group
    };
    let mut members = vec![gi];
    if !plain(r) {
        return None;
    }
    // The chain on the per-row values.
    let mut per_row = r;
    let mut root = rd;
    if let Some(gp) = one_group(r, &pointwise).filter(|&g| {
        g != gi
            && chain(g)
            && plan.groups[g].ops.iter().all(|o| {
                ctx.results(*o).len() == 1 && numel(ctx, ctx.result(*o, 0)) == Some(rows as i64)
            })
    }) {
        members.push(gp);
        root = plan.groups[gp].root;
        per_row = ctx.result(root, 0);
    }
    // The epilogue: one chain reading the per-row value only through broadcasts back to
    // the rows, copies of its own.
    let shape = |v: Value| commlir_dialects::shape::value_tensor(ctx, v).map(|t| t.shape);
    let row_bcast = |o: OpId| {
        ctx.op_name(o) == "compute.broadcast"
            && plan.absorbed.contains_key(&o)
            && match (shape(per_row), shape(ctx.result(o, 0))) {
                (Some(a), Some(b)) => is_row_broadcast(&a, &b, len),
                _ => false,
            }
    };
    if plain(per_row) {
        if let Some(ge) = one_group(per_row, &row_bcast).filter(|&g| {
            !members.contains(&g)
                && chain(g)
                && numel(ctx, ctx.result(plan.groups[g].root, 0)) == Some(n as i64)
        }) {
            members.push(ge);
            root = plan.groups[ge].root;
        }
    }
    // The prologue: chains whose row-shaped results only the row kernel reads, each reader
    // at the element's own index (an elementwise op, or the reduction).
    loop {
        let mut grew = false;
        let inputs: Vec<Value> = members
            .iter()
            .flat_map(|&m| plan.groups[m].inputs.clone())
            .collect();
        for v in inputs {
            let Some(g) = ctx
                .defining_op(v)
                .and_then(|d| plan.root_group.get(&d).copied())
            else {
                continue;
            };
            if members.contains(&g)
                || dropped.contains(&g)
                || !chain(g)
                || numel(ctx, v) != Some(n as i64)
                || !plain(v)
            {
                continue;
            }
            let inside = ctx.uses(v).iter().all(|u| {
                (u.op == rd || pointwise(u.op)) && {
                    let h = holders(plan, dropped, u.op);
                    !h.is_empty() && h.iter().all(|g| members.contains(g))
                }
            });
            if inside {
                members.push(g);
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    if members.len() == 1 {
        return None;
    }
    // The kernel runs at the root: no barrier may stand between the first op it computes
    // and the root (as for a chain), and the root is the last.
    let computed: Vec<usize> = members
        .iter()
        .flat_map(|&m| plan.groups[m].ops.iter())
        .filter(|o| !crate::kernels::index_map::is_view(ctx.op_name(**o)))
        .filter_map(|o| pos.get(o).copied())
        .collect();
    let (first, last) = (*computed.iter().min()?, *computed.iter().max()?);
    let end = *pos.get(&root)?;
    (last == end && barriers_before[end] == barriers_before[first + 1]).then_some((members, root))
}

/// The elements of tensor value `v` (none for a dynamic or non-tensor type).
fn numel(ctx: &Context, v: Value) -> Option<i64> {
    commlir_dialects::shape::value_tensor(ctx, v).map(|t| t.numel())
}

/// Which collectives can apply an epilogue, and how: `Some(true)` when the chain's result may
/// be a comm buffer (module docs, *Epilogues*).
fn epilogue_host(ctx: &Context, op: OpId) -> Option<bool> {
    match ctx.op_name(op) {
        "symm.one_shot_all_reduce" => Some(false),
        // `COMMLIR_FUSED_EPILOGUE=0` at compile time keeps the chains out of the
        // reduce-scatters (the benchmarks' comparison, bench/gpu/prepare_async_tp.sh).
        "symm.fused_matmul_reduce_scatter"
            if crate::lower_to_rt::fused_matmul::reduces_after_last_gemm(ctx, op)
                && std::env::var("COMMLIR_FUSED_EPILOGUE").map_or(true, |v| v.trim() != "0") =>
        {
            Some(true)
        }
        _ => None,
    }
}

/// Fills `plan.epilogues` / `plan.fused_into` with the legal epilogues (module docs).
fn plan_epilogues(ctx: &Context, ops: &[OpId], pos: &HashMap<OpId, usize>, plan: &mut FusionPlan) {
    for (at, &op) in ops.iter().enumerate() {
        let Some(comm_root_ok) = epilogue_host(ctx, op) else {
            continue;
        };
        if ctx.results(op).len() != 1 {
            continue;
        }
        let r = ctx.result(op, 0);
        let Some(n) = numel(ctx, r) else {
            continue;
        };
        // The one group every reader belongs to.
        let mut group = None;
        let mut one_group = !ctx.uses(r).is_empty();
        for u in ctx.uses(r) {
            let root = plan.absorbed.get(&u.op).copied().unwrap_or(u.op);
            let g = plan.root_group.get(&root).copied();
            if g.is_none() || (group.is_some() && group != g) {
                one_group = false;
                break;
            }
            group = g;
        }
        let (true, Some(g)) = (one_group, group) else {
            continue;
        };
        let grp = &plan.groups[g];
        let root_r = ctx.result(grp.root, 0);
        let elementwise = grp.ops.iter().all(|o| {
            is_elementwise(ctx.op_name(*o))
                && ctx.results(*o).len() == 1
                && numel(ctx, ctx.result(*o, 0)) == Some(n)
        });
        let inputs_ready = grp.inputs.iter().all(|&v| {
            numel(ctx, v) == Some(n)
                && (v == r
                    || ctx
                        .defining_op(v)
                        .is_none_or(|d| pos.get(&d).is_some_and(|&p| p < at)))
        });
        let Some(&end) = pos.get(&grp.root) else {
            continue;
        };
        let comm_root = is_comm_buffer(ctx, ctx.value_type(root_r))
            || ctx.get_attr(grp.root, SLOT_ATTR).is_some();
        // What stands between may not touch the pools of the chain's values, and only the
        // fused reduce-scatter (its partials in a workspace of its own) may write a comm-buffer
        // result early (module docs).
        let legal = end > at
            && (comm_root_ok || !comm_root)
            && pools_untouched_between(ctx, op, ops, (at, end), grp);
        if elementwise && inputs_ready && legal {
            plan.epilogues.insert(op, g);
            plan.fused_into.insert(grp.root, op);
        }
    }
}

/// Whether the epilogue `grp` may run at its collective's position `at` instead of its root's
/// `end`. The chain's inputs are values that stay live until the root, so no op in between
/// can change their bytes (the collective itself still runs at `at`, as before); the hazard is
/// the early write of a comm-buffer result (only a reduce-scatter's may be one),
/// whose slot was planned live from `end` on and so may share bytes with slots that die in
/// between. Legal when no op strictly between (other than the chain's own) is a pool op or
/// reads or writes a comm buffer of a pool the chain uses, and none of the collective's
/// operands (dying at it) is in the result's pool: buffers of other pools (an FSDP-gathered
/// weight, the next layer's gather started in between) are other bytes.
fn pools_untouched_between(
    ctx: &Context,
    op: OpId,
    ops: &[OpId],
    (at, end): (usize, usize),
    grp: &Group,
) -> bool {
    let root = ctx.result(grp.root, 0);
    let pool_of = |v: Value| buffer_encoding_ref(ctx, ctx.value_type(v));
    let mut pools: Vec<_> = grp.inputs.iter().filter_map(|&v| pool_of(v)).collect();
    let root_pool = pool_of(root);
    if root_pool.is_none() && ctx.get_attr(grp.root, SLOT_ATTR).is_some() {
        return false; // a slot without a pool type: nothing to reason with
    }
    pools.extend(root_pool);
    let touches = |o: OpId| {
        ctx.op_name(o).starts_with("comm.pool")
            || ctx
                .operands(o)
                .iter()
                .chain(ctx.results(o))
                .any(|&v| pool_of(v).is_some_and(|p| pools.contains(&p)))
    };
    let between_ok = ops[at + 1..end]
        .iter()
        .all(|&o| grp.ops.contains(&o) || !touches(o));
    let operands_ok = ctx
        .operands(op)
        .iter()
        .all(|&v| root_pool.is_none() || pool_of(v) != root_pool);
    between_ok && operands_ok
}
