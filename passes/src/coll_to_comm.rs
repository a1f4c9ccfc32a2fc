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
//! - An all-reduce on a symmetric-memory group runs through NCCL (start/wait),
//!   `symm.one_shot_all_reduce` or the in-place `symm.two_shot_all_reduce`, whichever the
//!   cost model estimates cheapest (copies into comm buffers included); the symm ops block,
//!   so the original wait disappears. `symm-algo` forces one, `one-shot-threshold` restores
//!   the size rule (at most that many bytes: one-shot, else NCCL).
//! - Operands that an op declares as comm-buffer operands (PR #173513's argument
//!   registration, see [`commlir_ir::CommBufferOperand`]) are realized generically.
//!
//! Locations and `cost_ns` carry over to every op a rewrite creates.
//!
//! A program has thousands of collectives over a handful of groups, op names and tensor
//! types, so the lowering resolves each group, interns each op name and builds each comm
//! buffer type once per pass run (see [`Lowering`]'s caches) rather than once per op.

use crate::analysis::cost::{CollKind, Machine, SymmAlgo};
use commlir_dialects::coll::group_of;
use commlir_dialects::comm::{buffer_encoding, buffer_type, work_type};
use commlir_dialects::shape::{strip_encoding, tensor_bytes};
use commlir_ir::{
    Attr, BlockId, Builder, CommBufferKind, Context, Diagnostic, Ident, OpId, OpState, Trait, Type,
    Value,
};
use rustc_hash::FxHashMap;
use std::rc::Rc;

/// How an all-reduce on a symmetric-memory group is lowered (option `symm-algo`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SymmAlgoChoice {
    /// The cheapest by the cost model (or the size rule of `one-shot-threshold`, if given).
    #[default]
    Auto,
    /// Always NCCL: `comm.all_reduce` and its wait.
    Nccl,
    /// Always `symm.one_shot_all_reduce`.
    OneShot,
    /// Always `symm.two_shot_all_reduce`.
    TwoShot,
}

impl SymmAlgoChoice {
    /// The option spellings, in the order of the variants.
    pub const NAMES: &'static [&'static str] = &["auto", "nccl", "one-shot", "two-shot"];

    /// Parses an option spelling.
    pub fn parse(s: &str) -> Option<SymmAlgoChoice> {
        Some(match s {
            "auto" => SymmAlgoChoice::Auto,
            "nccl" => SymmAlgoChoice::Nccl,
            "one-shot" => SymmAlgoChoice::OneShot,
            "two-shot" => SymmAlgoChoice::TwoShot,
            _ => return None,
        })
    }

    /// The option spelling.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// Options of `coll-to-comm`.
#[derive(Clone, Debug, Default)]
pub struct CollToCommOptions {
    /// `Some(t)`: the size rule instead of the cost model, for all-reduces on
    /// symmetric-memory groups whose input can be realized without a copy: at most `t` bytes
    /// become one-shot, the rest NCCL (`Some(0)`: always NCCL).
    pub one_shot_threshold: Option<u64>,
    /// Forces one lowering of all-reduces on symmetric-memory groups; wins over
    /// `one_shot_threshold`.
    pub symm_algo: SymmAlgoChoice,
    /// The machine whose cost model chooses the all-reduce lowering (`None`: the module's
    /// `commlir.machine`, else the default).
    pub machine: Option<Machine>,
}

/// The lowering chosen for one all-reduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArPath {
    Nccl,
    OneShot,
    TwoShot,
}

/// What one run of the lowering did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CollToCommStats {
    /// Collectives lowered to start/wait or blocking comm ops.
    pub lowered: u64,
    /// All-reduces lowered to `symm.one_shot_all_reduce`.
    pub one_shot: u64,
    /// All-reduces lowered to `symm.two_shot_all_reduce`.
    pub two_shot: u64,
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
    let machine = crate::analysis::machine::for_op(ctx, root, opts.machine.as_ref())?;
    let mut lw = Lowering {
        opts,
        machine,
        stats: CollToCommStats::default(),
        names: Vec::new(),
        groups: FxHashMap::default(),
        buffer_types: FxHashMap::default(),
        plain_types: FxHashMap::default(),
        work_type: None,
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
            "symm.two_shot_all_reduce" => lw.two_shot_input(ctx, op)?,
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

/// One run of the lowering: its options, statistics and the caches that make each op's
/// rewrite independent of string work. Every cache maps its inputs to what the uncached
/// call would return (types and attributes are interned, symbols are not edited by the pass).
struct Lowering<'o> {
    opts: &'o CollToCommOptions,
    /// The machine of the cost model.
    machine: std::borrow::Cow<'o, Machine>,
    stats: CollToCommStats,
    /// The op names created so far, interned.
    names: Vec<(&'static str, Ident)>,
    /// (block of the collective, its `group` attribute) → the group's buffer kind and name,
    /// as [`group_of`] resolves it from that block (for collectives that are not symbol
    /// tables themselves, so the lookup starts at the block's ancestors).
    groups: FxHashMap<(Option<BlockId>, Attr), (CommBufferKind, Rc<str>)>,
    /// (type, kind, group) → [`buffer_type`].
    buffer_types: FxHashMap<(Type, CommBufferKind, Rc<str>), Type>,
    /// type → [`strip_encoding`].
    plain_types: FxHashMap<Type, Type>,
    /// [`work_type`].
    work_type: Option<Type>,
}

/// The attributes a lowered op inherits from its collective (everything but the ones the
/// lowering consumes), so `reduce_op`, `group`, `src`, splits and `cost_ns` carry over.
fn carried_attrs(ctx: &Context, op: OpId) -> Vec<(Ident, Attr)> {
    let mut out: Vec<(Ident, Attr)> = ctx.attrs(op).to_vec();
    if let Some(p) = ctx.properties(op) {
        if let commlir_ir::AttrKind::Dict(entries) = ctx.attr_kind(p) {
            out.extend_from_slice(entries);
        }
    }
    out
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

/// How [`Lowering::realize`] provides a comm buffer holding a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Realization {
    /// The value already is one, used as is.
    Use,
    /// Its producer writes straight into one (the result type gets the encoding).
    Retype,
    /// A `compute.clone` into a fresh one.
    Clone,
}

/// How a comm buffer of (`kind`, `group`) holding `v` is provided for `user`. With
/// `mutates`, `user` writes the buffer, so `v` is only used directly when nobody else reads
/// it.
fn realization(
    ctx: &Context,
    v: Value,
    kind: CommBufferKind,
    group: &str,
    user: OpId,
    mutates: bool,
) -> Realization {
    let sole_reader = ctx.uses(v).iter().all(|u| u.op == user);
    let already = buffer_encoding(ctx, ctx.value_type(v))
        .is_some_and(|e| e.kind == kind && *e.group == *group);
    if already && (!mutates || sole_reader) {
        Realization::Use
    } else if !already && realizable_in_place(ctx, v) && (!mutates || sole_reader) {
        Realization::Retype
    } else {
        Realization::Clone
    }
}

/// Whether a symm all-reduce may take `reduce_op` on `x`: the symm ops reject `sum`/`avg` of
/// `i1` (see their verifier), which stays on NCCL's path.
fn symm_reduce_ok(ctx: &Context, op: OpId, x: Value) -> bool {
    let reduce = ctx
        .inherent_attr(op, "reduce_op")
        .and_then(|a| ctx.attr_as_str(a));
    let is_i1 = commlir_dialects::shape::value_tensor_view(ctx, x).is_some_and(|t| {
        matches!(
            ctx.type_kind(t.elem),
            commlir_ir::TypeKind::Integer { width: 1, .. }
        )
    });
    !(is_i1 && matches!(reduce, Some("sum" | "avg")))
}

/// The cheapest lowering of an all-reduce of `bytes` on `n` ranks by `machine`'s estimates,
/// each path charged the copy into a comm buffer it would need (`clone_*`). Ties go to NCCL,
/// then one-shot: NCCL's start/wait pair can still overlap with compute, the blocking symm
/// kernels cannot, so they must be strictly cheaper to be chosen.
fn cheapest(
    machine: &Machine,
    bytes: u64,
    n: u64,
    clone_in_place: bool,
    clone_out_of_place: bool,
) -> ArPath {
    let copy = |needed: bool| if needed { machine.copy(bytes) } else { 0.0 };
    let candidates = [
        (
            ArPath::Nccl,
            machine.collective(CollKind::AllReduce, bytes, n).ns + copy(clone_in_place),
        ),
        (
            ArPath::OneShot,
            machine.symm(SymmAlgo::OneShotAllReduce, bytes, n) + copy(clone_out_of_place),
        ),
        (
            ArPath::TwoShot,
            machine.symm(SymmAlgo::TwoShotAllReduce, bytes, n) + copy(clone_in_place),
        ),
    ];
    let mut best = candidates[0];
    for c in &candidates[1..] {
        if c.1 < best.1 {
            best = *c;
        }
    }
    best.0
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
    /// `name`, interned once per run.
    fn name(&mut self, ctx: &mut Context, name: &'static str) -> Ident {
        if let Some(&(_, i)) = self.names.iter().find(|(n, _)| *n == name) {
            return i;
        }
        let i = ctx.ident(name);
        self.names.push((name, i));
        i
    }

    /// Creates op `name` before `before`, at its location (what `Builder::before(..).create`
    /// does, with the name and attribute keys already interned).
    fn create(
        &mut self,
        ctx: &mut Context,
        before: OpId,
        name: &'static str,
        operands: &[Value],
        results: &[Type],
        attrs: Vec<(Ident, Attr)>,
    ) -> OpId {
        let name = self.name(ctx, name);
        let mut st = OpState::new(name, ctx.op_loc(before));
        st.operands = operands.to_vec();
        st.result_types = results.to_vec();
        st.attrs = attrs;
        Builder::before(ctx, before).create_state(st)
    }

    /// [`buffer_type`], cached.
    fn buffer_type(
        &mut self,
        ctx: &mut Context,
        t: Type,
        kind: CommBufferKind,
        group: &Rc<str>,
    ) -> Type {
        *self
            .buffer_types
            .entry((t, kind, group.clone()))
            .or_insert_with(|| buffer_type(ctx, t, kind, group))
    }

    /// [`strip_encoding`], cached.
    fn strip_encoding(&mut self, ctx: &mut Context, t: Type) -> Type {
        *self
            .plain_types
            .entry(t)
            .or_insert_with(|| strip_encoding(ctx, t))
    }

    /// [`work_type`], cached.
    fn work_type(&mut self, ctx: &mut Context) -> Type {
        *self.work_type.get_or_insert_with(|| work_type(ctx))
    }

    /// Returns a comm buffer of (`kind`, `group`) holding `v`'s data for `user`. With
    /// `mutates`, `user` writes the buffer, so `v` is only used directly when nobody else
    /// reads it.
    fn realize(
        &mut self,
        ctx: &mut Context,
        v: Value,
        kind: CommBufferKind,
        group: &Rc<str>,
        user: OpId,
        mutates: bool,
    ) -> Value {
        let t = ctx.value_type(v);
        match realization(ctx, v, kind, group, user, mutates) {
            Realization::Use => return v,
            Realization::Retype => {
                let bt = self.buffer_type(ctx, t, kind, group);
                ctx.set_value_type(v, bt);
                self.stats.realized_in_place += 1;
                return v;
            }
            Realization::Clone => {}
        }
        let plain = self.strip_encoding(ctx, t);
        let bt = self.buffer_type(ctx, plain, kind, group);
        let clone = self.create(ctx, user, "compute.clone", &[v], &[bt], Vec::new());
        self.stats.clones += 1;
        ctx.result(clone, 0)
    }

    /// The buffer kind and group name of a collective's group ([`group_of`], cached).
    fn kind_of(
        &mut self,
        ctx: &Context,
        op: OpId,
    ) -> Result<(CommBufferKind, Rc<str>), Diagnostic> {
        let key = ctx
            .inherent_attr(op, "group")
            .filter(|_| !ctx.is_symbol_table(op))
            .map(|a| (ctx.op_parent(op), a));
        if let Some(hit) = key.and_then(|k| self.groups.get(&k)) {
            return Ok(hit.clone());
        }
        let g = group_of(ctx, op)?;
        let kind = if g.symm_mem {
            CommBufferKind::SymmMem
        } else {
            CommBufferKind::Nccl
        };
        let found = (kind, Rc::<str>::from(g.name));
        if let Some(k) = key {
            self.groups.insert(k, found.clone());
        }
        Ok(found)
    }

    fn all_reduce(&mut self, ctx: &mut Context, op: OpId) -> Result<(), Diagnostic> {
        let g = group_of(ctx, op)?;
        let x = ctx.operand(op, 0);
        let path = if g.symm_mem && symm_reduce_ok(ctx, op, x) {
            self.choose(ctx, op, x, g.size.max(1) as u64, &g.name)
        } else {
            ArPath::Nccl
        };
        let group = Rc::<str>::from(g.name);
        match path {
            ArPath::Nccl => self.in_place(ctx, op, "comm.all_reduce"),
            ArPath::OneShot => self.one_shot(ctx, op, &group),
            ArPath::TwoShot => self.two_shot(ctx, op, &group),
        }
    }

    /// The lowering of all-reduce `op` of `x` on a symmetric-memory group of `n` ranks.
    fn choose(&self, ctx: &Context, op: OpId, x: Value, n: u64, group: &str) -> ArPath {
        let bytes = tensor_bytes(ctx, ctx.value_type(x));
        match (self.opts.symm_algo, self.opts.one_shot_threshold) {
            (SymmAlgoChoice::Nccl, _) => ArPath::Nccl,
            (SymmAlgoChoice::OneShot, _) => ArPath::OneShot,
            (SymmAlgoChoice::TwoShot, _) => ArPath::TwoShot,
            (SymmAlgoChoice::Auto, Some(threshold)) => {
                if bytes.is_some_and(|b| b <= threshold) && realizable_in_place(ctx, x) {
                    ArPath::OneShot
                } else {
                    ArPath::Nccl
                }
            }
            (SymmAlgoChoice::Auto, None) => {
                let Some(bytes) = bytes else {
                    return ArPath::Nccl;
                };
                let clone = |mutates| {
                    realization(ctx, x, CommBufferKind::SymmMem, group, op, mutates)
                        == Realization::Clone
                };
                cheapest(&self.machine, bytes, n, clone(true), clone(false))
            }
        }
    }

    /// `symm.one_shot_all_reduce`: blocking, so the collective's waits disappear.
    fn one_shot(&mut self, ctx: &mut Context, op: OpId, group: &Rc<str>) -> Result<(), Diagnostic> {
        let x = ctx.operand(op, 0);
        let b = self.realize(ctx, x, CommBufferKind::SymmMem, group, op, false);
        let rt = self.strip_encoding(ctx, ctx.value_type(ctx.result(op, 0)));
        let attrs = carried_attrs(ctx, op);
        let y = self.create(ctx, op, "symm.one_shot_all_reduce", &[b], &[rt], attrs);
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

    /// `symm.two_shot_all_reduce`: blocking and in place, so its input is realized as a
    /// buffer nobody else reads (cloned otherwise, like NCCL's in-place all-reduce), the
    /// waits disappear and their readers read the buffer (copied out where they need a
    /// plain tensor).
    fn two_shot(&mut self, ctx: &mut Context, op: OpId, group: &Rc<str>) -> Result<(), Diagnostic> {
        let y = self.two_shot_on(ctx, op, group)?;
        let r = ctx.result(op, 0);
        for w in waits_of(ctx, r) {
            let wr = ctx.result(w, 0);
            self.replace_with_buffer(ctx, wr, y);
            ctx.erase_op(w);
        }
        ctx.erase_op(op);
        self.stats.two_shot += 1;
        self.stats.lowered += 1;
        Ok(())
    }

    /// Creates `symm.two_shot_all_reduce` before `op` (an all-reduce, at either level) on
    /// its operand realized as a symm buffer it may clobber; returns the result, which has
    /// the buffer's type.
    fn two_shot_on(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        group: &Rc<str>,
    ) -> Result<Value, Diagnostic> {
        let x = ctx.operand(op, 0);
        let b = self.realize(ctx, x, CommBufferKind::SymmMem, group, op, true);
        let bt = ctx.value_type(b);
        let attrs = carried_attrs(ctx, op);
        let y = self.create(ctx, op, "symm.two_shot_all_reduce", &[b], &[bt], attrs);
        Ok(ctx.result(y, 0))
    }

    /// A `symm.two_shot_all_reduce` written at the input level: its result has its input's
    /// type, so realizing the input (the generic comm-buffer-operand rule) changes the
    /// result's type too; the op is rebuilt on the buffer and its readers read the buffer.
    fn two_shot_input(&mut self, ctx: &mut Context, op: OpId) -> Result<(), Diagnostic> {
        let (_, group) = self.kind_of(ctx, op)?;
        let x = ctx.operand(op, 0);
        if realization(ctx, x, CommBufferKind::SymmMem, &group, op, true) == Realization::Use {
            self.stats.registered_operands += 1;
            return Ok(());
        }
        let y = self.two_shot_on(ctx, op, &group)?;
        let old = ctx.result(op, 0);
        self.replace_with_buffer(ctx, old, y);
        ctx.erase_op(op);
        self.stats.registered_operands += 1;
        Ok(())
    }

    /// In-place collectives: every operand becomes a comm buffer the start op mutates.
    fn in_place(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        start: &'static str,
    ) -> Result<(), Diagnostic> {
        let (kind, group) = self.kind_of(ctx, op)?;
        let inputs = ctx.operands(op).to_vec();
        let mut bufs: Vec<Value> = Vec::with_capacity(inputs.len());
        for x in inputs {
            let mut b = self.realize(ctx, x, kind, &group, op, true);
            // The same value listed twice must not be reduced twice in one buffer.
            if bufs.contains(&b) {
                let t = ctx.value_type(b);
                let c = self.create(ctx, op, "compute.clone", &[x], &[t], Vec::new());
                self.stats.clones += 1;
                b = ctx.result(c, 0);
            }
            bufs.push(b);
        }
        self.start_and_waits(ctx, op, start, bufs.clone(), bufs)
    }

    /// Out-of-place collectives: inputs become comm buffers, destinations are allocated.
    fn out_of_place(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        start: &'static str,
    ) -> Result<(), Diagnostic> {
        let (kind, group) = self.kind_of(ctx, op)?;
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
        group: &Rc<str>,
    ) -> Vec<Value> {
        let results = ctx.results(op).to_vec();
        results
            .iter()
            .map(|r| {
                let plain = self.strip_encoding(ctx, ctx.value_type(*r));
                let bt = self.buffer_type(ctx, plain, kind, group);
                let a = self.create(ctx, op, "comm.alloc", &[], &[bt], Vec::new());
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
        start: &'static str,
        operands: Vec<Value>,
        written: Vec<Value>,
    ) -> Result<(), Diagnostic> {
        let attrs = carried_attrs(ctx, op);
        let wt = self.work_type(ctx);
        let s = self.create(ctx, op, start, &operands, &[wt], attrs);
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
            let cw = self.create(ctx, first, "comm.wait", &wait_operands, &types, wattrs);
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
            } else if let Some(c) = copy {
                c
            } else {
                let t = ctx.value_type(old);
                let def = ctx.defining_op(buf).unwrap();
                let name = self.name(ctx, "compute.clone");
                let mut st = OpState::new(name, ctx.op_loc(def));
                st.operands = vec![buf];
                st.result_types = vec![t];
                let c = Builder::after(ctx, def).create_state(st);
                self.stats.copy_outs += 1;
                *copy.insert(ctx.result(c, 0))
            };
            ctx.set_operand(u.op, u.index as usize, target);
        }
    }

    fn shard_dim_alltoall(&mut self, ctx: &mut Context, op: OpId) -> Result<(), Diagnostic> {
        let (kind, group) = self.kind_of(ctx, op)?;
        let x = ctx.operand(op, 0);
        let input = self.realize(ctx, x, kind, &group, op, false);
        let out = self.alloc_outputs(ctx, op, kind, &group)[0];
        let attrs = carried_attrs(ctx, op);
        let ot = ctx.value_type(out);
        let s = self.create(
            ctx,
            op,
            "comm.shard_dim_alltoall",
            &[input, out],
            &[ot],
            attrs,
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
                .map(Rc::<str>::from)
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

    use super::{lower, CollToCommOptions, SymmAlgoChoice};
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
            wait; all-reduces on symm_mem groups run through NCCL, `symm.one_shot_all_reduce` \
            or `symm.two_shot_all_reduce`, whichever the cost model estimates cheapest \
            (`symm-algo` forces one, `one-shot-threshold` restores the size rule); operands \
            declared as comm-buffer operands are realized generically.",
        anchor: Anchor::FUNC,
        options: &[
            OptionDef::new(
                "one-shot-threshold",
                OptionKind::Int,
                "-1",
                "If at least 0: all-reduces of at most this many bytes on symm_mem groups become \
                 one-shot, the others NCCL (the size rule instead of the cost model)",
            ),
            OptionDef::new(
                "symm-algo",
                OptionKind::Enum(SymmAlgoChoice::NAMES),
                "auto",
                "All-reduces on symm_mem groups: auto (cost model), nccl, one-shot or two-shot",
            ),
            crate::analysis::machine::MACHINE_OPTION,
        ],
        statistics: &[
            StatisticDef::new("lowered", "Collectives lowered"),
            StatisticDef::new("one-shot", "All-reduces lowered to one-shot all-reduces"),
            StatisticDef::new("two-shot", "All-reduces lowered to two-shot all-reduces"),
            StatisticDef::new("realized-in-place", "Producers realized directly as comm buffers"),
            StatisticDef::new("clones", "Copies into comm buffers"),
            StatisticDef::new("allocs", "Destination buffers allocated"),
            StatisticDef::new("copy-outs", "Copies out of comm buffers for function results"),
            StatisticDef::new("registered-operands", "Declared comm-buffer operands realized"),
        ],
        create: |o: &PassOptions| {
            let threshold = o.get_int("one-shot-threshold");
            Ok(Box::new(CollToComm(CollToCommOptions {
                // Negative (the default): not given, the cost model decides.
                one_shot_threshold: u64::try_from(threshold).ok(),
                symm_algo: SymmAlgoChoice::parse(o.get_str("symm-algo")).unwrap_or_default(),
                machine: crate::analysis::machine::from_option(o.get_str("machine"))?,
            })))
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
            env.add_stat("two-shot", s.two_shot);
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
