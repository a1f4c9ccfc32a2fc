//! `coll-to-comm`: lowers functional collectives to comm buffers, start ops and waits, the
//! way Inductor's `comm_lowering.py` does, and further.
//!
//! - Every buffer a collective reads or writes becomes a comm buffer (`symm_mem` on groups
//!   with symmetric memory, `nccl` otherwise), so that all of them can be pooled and
//!   registered; Inductor does this for symmetric memory only.
//! - A producer is realized directly as the comm buffer when it is a compute op and the
//!   collective cannot corrupt another reader (Inductor always clones before an in-place
//!   all-reduce); otherwise a `compute.clone` into a comm buffer is inserted.
//! - In-place collectives (`all_reduce`, `broadcast`) become start ops on the buffer;
//!   out-of-place ones write a `comm.alloc` destination; each `coll.wait_tensor` becomes a
//!   `comm.wait` yielding the buffers; `shard_dim_alltoall` stays blocking.
//! - Small sum all-reduces on symmetric-memory groups become `symm.one_shot_all_reduce`,
//!   which blocks, so the original wait disappears.
//! - Operands that an op declares as comm-buffer operands (PR #173513's argument
//!   registration, see [`commlir_ir::CommBufferOperand`]) are realized generically.
//!
//! Locations and `cost_ns` carry over to every op a rewrite creates.

use commlir_dialects::coll::group_of;
use commlir_dialects::comm::{buffer_encoding, buffer_type, work_type};
use commlir_dialects::shape::{strip_encoding, tensor_bytes};
use commlir_ir::{Attr, Builder, CommBufferKind, Context, Diagnostic, OpId, Trait, Value};

/// Default size limit (bytes) for lowering an all-reduce to a one-shot all-reduce.
pub const DEFAULT_ONE_SHOT_THRESHOLD: u64 = 131_072;

/// Options of `coll-to-comm`.
#[derive(Clone, Debug)]
pub struct CollToCommOptions {
    /// All-reduces of at most this many bytes on symmetric-memory groups become one-shot.
    pub one_shot_threshold: u64,
}

impl Default for CollToCommOptions {
    fn default() -> Self {
        CollToCommOptions {
            one_shot_threshold: DEFAULT_ONE_SHOT_THRESHOLD,
        }
    }
}

/// What one run of the lowering did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CollToCommStats {
    /// Collectives lowered to start/wait or blocking comm ops.
    pub lowered: u64,
    /// All-reduces lowered to `symm.one_shot_all_reduce`.
    pub one_shot: u64,
    /// Producers realized directly as comm buffers (no copy).
    pub realized_in_place: u64,
    /// Clones inserted into comm buffers.
    pub clones: u64,
    /// Destination buffers allocated for out-of-place collectives.
    pub allocs: u64,
    /// Copies out of comm buffers where a function result would be one.
    pub copy_outs: u64,
    /// Declared comm-buffer operands realized on non-collective ops.
    pub registered_operands: u64,
}

/// Lowers every functional collective inside `root` (a function or a module).
pub fn lower(
    ctx: &mut Context,
    root: OpId,
    opts: &CollToCommOptions,
) -> Result<CollToCommStats, Diagnostic> {
    let mut ops = Vec::new();
    ctx.walk(root, |op| ops.push(op));
    let mut lw = Lowering {
        opts,
        stats: CollToCommStats::default(),
    };
    for op in ops {
        if ctx.is_erased(op) {
            continue;
        }
        match ctx.op_name(op) {
            "coll.all_reduce" => lw.all_reduce(ctx, op)?,
            "coll.all_reduce_coalesced" => lw.in_place(ctx, op, "comm.all_reduce_coalesced")?,
            "coll.broadcast" => lw.in_place(ctx, op, "comm.broadcast")?,
            "coll.all_gather_into_tensor" | "coll.all_gather_into_tensor_coalesced" => {
                lw.out_of_place(ctx, op, "comm.all_gather")?
            }
            "coll.reduce_scatter_tensor" | "coll.reduce_scatter_tensor_coalesced" => {
                lw.out_of_place(ctx, op, "comm.reduce_scatter")?
            }
            "coll.all_to_all_single" => lw.out_of_place(ctx, op, "comm.all_to_all")?,
            "coll.shard_dim_alltoall" => lw.shard_dim_alltoall(ctx, op)?,
            _ => {
                if ctx
                    .op_def(op)
                    .is_some_and(|d| !d.comm_buffer_operands.is_empty())
                {
                    lw.registered_operands(ctx, op)?;
                }
            }
        }
    }
    Ok(lw.stats)
}

struct Lowering<'o> {
    opts: &'o CollToCommOptions,
    stats: CollToCommStats,
}

/// The attributes a lowered op inherits from its collective (everything but the ones the
/// lowering consumes), so `reduce_op`, `group`, `src`, splits and `cost_ns` carry over.
fn carried_attrs(ctx: &Context, op: OpId) -> Vec<(String, Attr)> {
    let mut out: Vec<(String, Attr)> = Vec::new();
    for (k, v) in ctx.attrs(op) {
        out.push((ctx.ident_str(*k).to_string(), *v));
    }
    if let Some(p) = ctx.properties(op) {
        if let commlir_ir::AttrKind::Dict(entries) = ctx.attr_kind(p) {
            for (k, v) in entries {
                out.push((ctx.ident_str(*k).to_string(), *v));
            }
        }
    }
    out
}

fn create(
    ctx: &mut Context,
    before: OpId,
    name: &str,
    operands: &[Value],
    results: &[commlir_ir::Type],
    attrs: &[(String, Attr)],
) -> OpId {
    let attrs: Vec<(&str, Attr)> = attrs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let mut b = Builder::before(ctx, before);
    b.create(name, operands, results, &attrs)
}

/// Whether every user of `v` tolerates a comm-buffer encoding on its type: ops of our
/// communication dialects do (their verifiers compare types modulo encoding), and so does an
/// op that declares the operand as a comm-buffer operand; `func.return` and `func.call` need
/// exact types, and so do ops we do not know.
fn users_accept_encoding(ctx: &Context, v: Value) -> bool {
    ctx.uses(v)
        .iter()
        .all(|u| accepts_encoding(ctx, u.op, u.index as usize))
}

fn accepts_encoding(ctx: &Context, op: OpId, operand: usize) -> bool {
    let Some(def) = ctx.op_def(op) else {
        return false;
    };
    if matches!(def.dialect(), "compute" | "coll" | "comm" | "symm") {
        return true;
    }
    // Only unambiguous operand layouts (no variadic slots) map an index to a declared name.
    let fixed = def
        .operands
        .iter()
        .all(|a| a.arity == commlir_ir::Arity::One);
    fixed
        && def
            .operands
            .get(operand)
            .is_some_and(|a| def.comm_buffer_operands.iter().any(|c| c.operand == a.name))
}

/// Whether `v` can be realized directly as a comm buffer: a compute op produced it (so its
/// buffer is ours to place) and its readers accept the encoding.
fn realizable_in_place(ctx: &Context, v: Value) -> bool {
    let Some(p) = ctx.defining_op(v) else {
        return false;
    };
    ctx.op_name(p).starts_with("compute.")
        && ctx.op_has_trait(p, Trait::MemAlloc)
        && buffer_encoding(ctx, ctx.value_type(v)).is_none()
        && users_accept_encoding(ctx, v)
}

impl Lowering<'_> {
    /// Returns a comm buffer of (`kind`, `group`) holding `v`'s data for `user`. With
    /// `mutates`, `user` writes the buffer, so `v` is only used directly when nobody else
    /// reads it.
    fn realize(
        &mut self,
        ctx: &mut Context,
        v: Value,
        kind: CommBufferKind,
        group: &str,
        user: OpId,
        mutates: bool,
    ) -> Value {
        let t = ctx.value_type(v);
        let sole_reader = ctx.uses(v).iter().all(|u| u.op == user);
        let already = buffer_encoding(ctx, t).is_some_and(|e| e.kind == kind && e.group == group);
        if already && (!mutates || sole_reader) {
            return v;
        }
        if !already && realizable_in_place(ctx, v) && (!mutates || sole_reader) {
            let bt = buffer_type(ctx, t, kind, group);
            ctx.set_value_type(v, bt);
            self.stats.realized_in_place += 1;
            return v;
        }
        let plain = strip_encoding(ctx, t);
        let bt = buffer_type(ctx, plain, kind, group);
        let clone = create(ctx, user, "compute.clone", &[v], &[bt], &[]);
        self.stats.clones += 1;
        ctx.result(clone, 0)
    }

    fn kind_of(ctx: &Context, op: OpId) -> Result<(CommBufferKind, String), Diagnostic> {
        let g = group_of(ctx, op)?;
        let kind = if g.symm_mem {
            CommBufferKind::SymmMem
        } else {
            CommBufferKind::Nccl
        };
        Ok((kind, g.name))
    }

    fn all_reduce(&mut self, ctx: &mut Context, op: OpId) -> Result<(), Diagnostic> {
        let g = group_of(ctx, op)?;
        let x = ctx.operand(op, 0);
        let is_sum = ctx
            .inherent_attr(op, "reduce_op")
            .and_then(|a| ctx.attr_as_str(a))
            == Some("sum");
        let bytes = tensor_bytes(ctx, ctx.value_type(x)).unwrap_or(u64::MAX);
        if g.symm_mem
            && is_sum
            && bytes <= self.opts.one_shot_threshold
            && realizable_in_place(ctx, x)
        {
            return self.one_shot(ctx, op, &g.name);
        }
        self.in_place(ctx, op, "comm.all_reduce")
    }

    /// `symm.one_shot_all_reduce`: blocking, so the collective's waits disappear.
    fn one_shot(&mut self, ctx: &mut Context, op: OpId, group: &str) -> Result<(), Diagnostic> {
        let x = ctx.operand(op, 0);
        let b = self.realize(ctx, x, CommBufferKind::SymmMem, group, op, false);
        let rt = strip_encoding(ctx, ctx.value_type(ctx.result(op, 0)));
        let attrs = carried_attrs(ctx, op);
        let y = create(ctx, op, "symm.one_shot_all_reduce", &[b], &[rt], &attrs);
        let y = ctx.result(y, 0);
        let r = ctx.result(op, 0);
        for w in waits_of(ctx, r) {
            let wr = ctx.result(w, 0);
            ctx.replace_all_uses(wr, y);
            ctx.erase_op(w);
        }
        ctx.erase_op(op);
        self.stats.one_shot += 1;
        self.stats.lowered += 1;
        Ok(())
    }

    /// In-place collectives: every operand becomes a comm buffer the start op mutates.
    fn in_place(&mut self, ctx: &mut Context, op: OpId, start: &str) -> Result<(), Diagnostic> {
        let (kind, group) = Self::kind_of(ctx, op)?;
        let inputs = ctx.operands(op).to_vec();
        let mut bufs: Vec<Value> = Vec::with_capacity(inputs.len());
        for x in inputs {
            let mut b = self.realize(ctx, x, kind, &group, op, true);
            // The same value listed twice must not be reduced twice in one buffer.
            if bufs.contains(&b) {
                let t = ctx.value_type(b);
                let c = create(ctx, op, "compute.clone", &[x], &[t], &[]);
                self.stats.clones += 1;
                b = ctx.result(c, 0);
            }
            bufs.push(b);
        }
        self.start_and_waits(ctx, op, start, bufs.clone(), bufs)
    }

    /// Out-of-place collectives: inputs become comm buffers, destinations are allocated.
    fn out_of_place(&mut self, ctx: &mut Context, op: OpId, start: &str) -> Result<(), Diagnostic> {
        let (kind, group) = Self::kind_of(ctx, op)?;
        let inputs = ctx.operands(op).to_vec();
        let mut operands: Vec<Value> = inputs
            .iter()
            .map(|x| self.realize(ctx, *x, kind, &group, op, false))
            .collect();
        let outs = self.alloc_outputs(ctx, op, kind, &group);
        operands.extend(&outs);
        self.start_and_waits(ctx, op, start, operands, outs)
    }

    fn alloc_outputs(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        kind: CommBufferKind,
        group: &str,
    ) -> Vec<Value> {
        let results = ctx.results(op).to_vec();
        results
            .iter()
            .map(|r| {
                let plain = strip_encoding(ctx, ctx.value_type(*r));
                let bt = buffer_type(ctx, plain, kind, group);
                let a = create(ctx, op, "comm.alloc", &[], &[bt], &[]);
                self.stats.allocs += 1;
                ctx.result(a, 0)
            })
            .collect()
    }

    /// Emits the start op before `op` and turns the waits of `op`'s results into one
    /// `comm.wait` (at the first of them) yielding `written`.
    fn start_and_waits(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        start: &str,
        operands: Vec<Value>,
        written: Vec<Value>,
    ) -> Result<(), Diagnostic> {
        let attrs = carried_attrs(ctx, op);
        let wt = work_type(ctx);
        let s = create(ctx, op, start, &operands, &[wt], &attrs);
        let work = ctx.result(s, 0);
        let results = ctx.results(op).to_vec();
        // All waits on any result, in program order: the first becomes the comm.wait.
        let mut waits: Vec<(OpId, usize)> = Vec::new();
        for (i, r) in results.iter().enumerate() {
            for w in waits_of(ctx, *r) {
                waits.push((w, i));
            }
        }
        sort_in_program_order(ctx, &mut waits);
        if let Some(&(first, _)) = waits.first() {
            let mut wait_operands = vec![work];
            wait_operands.extend(&written);
            let types: Vec<_> = written.iter().map(|v| ctx.value_type(*v)).collect();
            let wattrs = carried_attrs(ctx, first);
            let cw = create(ctx, first, "comm.wait", &wait_operands, &types, &wattrs);
            let yielded = ctx.results(cw).to_vec();
            for (w, i) in waits {
                let wr = ctx.result(w, 0);
                self.replace_with_buffer(ctx, wr, yielded[i]);
                ctx.erase_op(w);
            }
        }
        ctx.erase_op(op);
        self.stats.lowered += 1;
        Ok(())
    }

    /// Replaces `old` (a plain tensor) by `buf` (a comm buffer of the same shape); users that
    /// need the exact plain type (function results, calls, unknown ops) get a copy out, so
    /// comm buffers never escape.
    fn replace_with_buffer(&mut self, ctx: &mut Context, old: Value, buf: Value) {
        let uses = ctx.uses(old).to_vec();
        let mut copy: Option<Value> = None;
        for u in uses {
            let tolerant = accepts_encoding(ctx, u.op, u.index as usize);
            let target = if tolerant || ctx.value_type(old) == ctx.value_type(buf) {
                buf
            } else {
                *copy.get_or_insert_with(|| {
                    let t = ctx.value_type(old);
                    let def = ctx.defining_op(buf).unwrap();
                    let c = commlir_ir::Builder::after(ctx, def).create(
                        "compute.clone",
                        &[buf],
                        &[t],
                        &[],
                    );
                    self.stats.copy_outs += 1;
                    ctx.result(c, 0)
                })
            };
            ctx.set_operand(u.op, u.index as usize, target);
        }
    }

    fn shard_dim_alltoall(&mut self, ctx: &mut Context, op: OpId) -> Result<(), Diagnostic> {
        let (kind, group) = Self::kind_of(ctx, op)?;
        let x = ctx.operand(op, 0);
        let input = self.realize(ctx, x, kind, &group, op, false);
        let out = self.alloc_outputs(ctx, op, kind, &group)[0];
        let attrs = carried_attrs(ctx, op);
        let ot = ctx.value_type(out);
        let s = create(
            ctx,
            op,
            "comm.shard_dim_alltoall",
            &[input, out],
            &[ot],
            &attrs,
        );
        let r = ctx.result(s, 0);
        let old = ctx.result(op, 0);
        self.replace_with_buffer(ctx, old, r);
        ctx.erase_op(op);
        self.stats.lowered += 1;
        Ok(())
    }

    /// Realizes the declared comm-buffer operands of any op, with no per-op code.
    fn registered_operands(&mut self, ctx: &mut Context, op: OpId) -> Result<(), Diagnostic> {
        let def = ctx.op_def(op).expect("registered op");
        for cb in def.comm_buffer_operands {
            let Some(idx) = def.operands.iter().position(|a| a.name == cb.operand) else {
                return Err(ctx.op_error(
                    op,
                    format!(
                        "declares comm-buffer operand '{}', which it does not have",
                        cb.operand
                    ),
                ));
            };
            let Some(&v) = ctx.operands(op).get(idx) else {
                continue;
            };
            let group = ctx
                .inherent_attr(op, cb.group_attr)
                .and_then(|a| ctx.attr_as_symbol(a))
                .map(str::to_string)
                .ok_or_else(|| {
                    ctx.op_error(
                        op,
                        format!(
                            "comm-buffer operand '{}' needs a group symbol in attribute '{}'",
                            cb.operand, cb.group_attr
                        ),
                    )
                })?;
            let mutates = def.has_trait(Trait::MemWrite);
            let b = self.realize(ctx, v, cb.kind, &group, op, mutates);
            if b != v {
                ctx.set_operand(op, idx, b);
            }
            self.stats.registered_operands += 1;
        }
        Ok(())
    }
}

/// The `coll.wait_tensor` ops consuming `r`.
fn waits_of(ctx: &Context, r: Value) -> Vec<OpId> {
    let mut w: Vec<OpId> = ctx
        .uses(r)
        .iter()
        .filter(|u| ctx.op_name(u.op) == "coll.wait_tensor")
        .map(|u| u.op)
        .collect();
    w.dedup();
    w
}

fn sort_in_program_order(ctx: &Context, waits: &mut [(OpId, usize)]) {
    waits.sort_by(|a, b| {
        if a.0 == b.0 {
            return std::cmp::Ordering::Equal;
        }
        if ctx.op_parent(a.0) == ctx.op_parent(b.0) {
            if ctx.is_before_in_block(a.0, b.0) {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            }
        } else {
            a.0.cmp(&b.0)
        }
    });
}

mod pass {
    //! The `coll-to-comm` pass: registration, options and statistics around [`super::lower`].

    use super::{lower, CollToCommOptions};
    use commlir_ir::pass::{
        Anchor, OptionDef, OptionKind, Pass, PassEnv, PassInfo, PassOptions, StatisticDef,
    };
    use commlir_ir::{Context, Diagnostic, OpId};

    commlir_ir::register_pass!(pub COLL_TO_COMM = PassInfo {
        argument: "coll-to-comm",
        name: "CollToComm",
        summary: "Lower functional collectives to comm buffers, start ops and waits",
        description: "Every buffer a collective reads or writes becomes a comm buffer \
            (`#comm.buffer<symm_mem|nccl, @group>`); producers are realized directly where \
            the collective corrupts no other reader, else cloned; in-place all_reduce and \
            broadcast, out-of-place all_gather / reduce_scatter / all_to_all with `comm.alloc` \
            destinations, coalesced forms, blocking shard_dim_alltoall, `comm.wait` for each \
            wait; small sum all-reduces on symm_mem groups become `symm.one_shot_all_reduce`; \
            operands declared as comm-buffer operands are realized generically.",
        anchor: Anchor::FUNC,
        options: &[OptionDef::new(
            "one-shot-threshold",
            OptionKind::UInt,
            "131072",
            "Largest all-reduce (bytes) lowered to a one-shot all-reduce on symm_mem groups",
        )],
        statistics: &[
            StatisticDef::new("lowered", "Collectives lowered"),
            StatisticDef::new("one-shot", "All-reduces lowered to one-shot all-reduces"),
            StatisticDef::new("realized-in-place", "Producers realized directly as comm buffers"),
            StatisticDef::new("clones", "Copies into comm buffers"),
            StatisticDef::new("allocs", "Destination buffers allocated"),
            StatisticDef::new("copy-outs", "Copies out of comm buffers for function results"),
            StatisticDef::new("registered-operands", "Declared comm-buffer operands realized"),
        ],
        create: |o: &PassOptions| {
            Ok(Box::new(CollToComm(CollToCommOptions { one_shot_threshold: o.get_uint("one-shot-threshold") })))
        },
    });

    struct CollToComm(CollToCommOptions);

    impl Pass for CollToComm {
        fn info(&self) -> &'static PassInfo {
            &COLL_TO_COMM
        }
        fn run(
            &mut self,
            ctx: &mut Context,
            op: OpId,
            env: &mut PassEnv<'_>,
        ) -> Result<(), Diagnostic> {
            let s = lower(ctx, op, &self.0)?;
            env.add_stat("lowered", s.lowered);
            env.add_stat("one-shot", s.one_shot);
            env.add_stat("realized-in-place", s.realized_in_place);
            env.add_stat("clones", s.clones);
            env.add_stat("allocs", s.allocs);
            env.add_stat("copy-outs", s.copy_outs);
            env.add_stat("registered-operands", s.registered_operands);
            Ok(())
        }
    }
}

pub use pass::COLL_TO_COMM;
