//! Fused elementwise kernels: a chain of elementwise ops, the views it reads through
//! ([`super::index_map`]) and the concats it selects between, evaluated per element.
//!
//! [`Body`] analyses a kernel's ops. Values the kernel reads from memory are *leaves*: the
//! kernel arguments and the views (broadcast, slice, permute, transpose, or a reshape of a
//! leaf) of them, each with the [`ViewIndex`] that finds its element `j` in an argument.
//! Every other value is computed by its op, at the same flat index as the op's result
//! (elementwise ops and reshapes keep it). A `compute.concat` in the chain selects by the
//! element's coordinate along its dim: in operand `k`'s range, the operand's subchain is
//! evaluated and its leaves are read at their index composed with the operand's offset
//! ([`ViewIndex::concat_piece`]). A kernel with concats is compiled once per combination of
//! operands (a *variant*), and each element (each vector, in the vector loop) branches to its
//! variant: concats are not nested (the planner keeps them at the chain's top level), so the
//! choice depends on the element's index only.
//!
//! Values a kernel only moves (views, reshapes, clones and concats of loaded elements) stay
//! as loaded ([`Val::Stored`]): a kernel of pure data movement copies bits, NaN payloads
//! included, as the data-movement kernels and the sim do. Arithmetic widens them to the
//! compute type, and every op's result is rounded to its element type (see `super`).
//!
//! The loop: when every pointer is 16-byte aligned, each thread of a grid-stride loop handles
//! [`super::elementwise_vector_width`] consecutive elements: one 16-byte vector load per
//! contiguous leaf (wider element types take several), one load shared by the lanes for a
//! repeated one, one load per lane otherwise ([`super::index_map::Access`]), the chain lane by
//! lane in scalars, one vector store; the last `n mod width` elements run one per iteration.
//! Otherwise (an unaligned pool view) every element runs one per iteration. A concat whose
//! operand boundaries are not multiples of the vector width makes the width 1: the scalar loop
//! throughout. Any grid is correct; `rt.launch` sizes it for one vector per thread.

use super::index_map::{is_view, Access, StridedIndex, ViewIndex};
use super::{transcendental_used, Gen, Kind, R, VECTOR_BYTES};
use commlir_ir::{Context as IrContext, OpId, Value};
use inkwell::basic_block::BasicBlock;
use inkwell::values::{BasicValue, BasicValueEnum, FunctionValue, IntValue, VectorValue};
use inkwell::IntPredicate;
use std::collections::HashMap;

/// `?` for inkwell's builder errors.
macro_rules! b {
    ($e:expr) => {
        $e.map_err(|e| e.to_string())?
    };
}

/// A value as a kernel holds it.
#[derive(Clone, Copy, Debug)]
pub(super) enum Val<'c> {
    /// As loaded: the stored element (an `i1` as its byte), of this kind.
    Stored(BasicValueEnum<'c>, Kind),
    /// Computed: in the compute type, already rounded to the element type.
    Computed(BasicValueEnum<'c>),
}

/// A concat of the chain: operand `k` covers `[starts[k], starts[k] + lens[k])` along `dim`.
#[derive(Clone, Debug)]
pub(super) struct Concat {
    pub op: OpId,
    pub dim: usize,
    /// Elements per step along `dim` (the product of the later dims of the result).
    pub inner: u64,
    pub total: u64,
    pub starts: Vec<u64>,
    pub lens: Vec<u64>,
}

/// Where a value is evaluated: at the kernel's element, or inside operand `k` of concat `c`
/// (indices into [`Body::concats`]).
pub(super) type Piece = Option<(usize, usize)>;

/// A fused kernel's ops, analysed (module docs).
pub(super) struct Body {
    /// The leaves: value → (kernel argument, index over the value's shape).
    pub leaves: HashMap<Value, (usize, ViewIndex)>,
    /// Computed values → their op (elementwise, concat, or a reshape of a computed value).
    pub producer: HashMap<Value, OpId>,
    pub concats: Vec<Concat>,
    /// Views of computed values (a row kernel's broadcast of a per-row value): result → op.
    pub deferred: HashMap<Value, OpId>,
    /// Reductions (row kernels).
    pub reductions: Vec<OpId>,
}

fn shape_of(g: &Gen<'_, '_>, ctx: &IrContext, v: Value) -> R<Vec<u64>> {
    Ok(g.kind_of(ctx, v)?
        .1
        .iter()
        .map(|d| (*d).max(0) as u64)
        .collect())
}

impl Body {
    pub fn new(g: &Gen<'_, '_>, ctx: &IrContext, ops: &[OpId], args: &[Value]) -> R<Body> {
        let mut body = Body {
            leaves: HashMap::new(),
            producer: HashMap::new(),
            concats: Vec::new(),
            deferred: HashMap::new(),
            reductions: Vec::new(),
        };
        for (k, &a) in args.iter().enumerate() {
            body.leaves
                .insert(a, (k, ViewIndex::identity(&shape_of(g, ctx, a)?)));
        }
        for &op in ops {
            let name = ctx.op_name(op);
            let r = ctx.result(op, 0);
            let leaf_operand = ctx
                .operands(op)
                .first()
                .and_then(|x| body.leaves.get(x))
                .cloned();
            if is_view(name) || matches!(name, "compute.reshape" | "compute.clone") {
                match leaf_operand {
                    Some((a, vi)) => {
                        let next = vi.apply(ctx, op, &shape_of(g, ctx, r)?)?;
                        body.leaves.insert(r, (a, next));
                    }
                    None if is_view(name) => {
                        body.deferred.insert(r, op);
                    }
                    None => {
                        body.producer.insert(r, op);
                    }
                }
            } else if name == "compute.concat" {
                let dim = ctx
                    .inherent_attr(op, "dim")
                    .and_then(|a| ctx.attr_as_i64(a))
                    .ok_or("compute.concat requires 'dim'")?
                    .max(0) as usize;
                let rs = shape_of(g, ctx, r)?;
                let (mut starts, mut lens, mut at) = (Vec::new(), Vec::new(), 0);
                for &x in ctx.operands(op) {
                    let len = shape_of(g, ctx, x)?.get(dim).copied().unwrap_or(0);
                    starts.push(at);
                    lens.push(len);
                    at += len;
                }
                body.concats.push(Concat {
                    op,
                    dim,
                    inner: rs[dim + 1..].iter().product(),
                    total: at,
                    starts,
                    lens,
                });
                body.producer.insert(r, op);
            } else if matches!(name, "compute.reduce_sum" | "compute.reduce_max") {
                body.reductions.push(op);
            } else if crate::fusion::is_elementwise(name) {
                body.producer.insert(r, op);
            } else {
                return Err(format!("'{name}' cannot be part of a fused kernel"));
            }
        }
        Ok(body)
    }

    /// Every combination of concat operands, one index per concat (one empty variant
    /// without concats).
    pub fn variants(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new()];
        for c in &self.concats {
            out = out
                .into_iter()
                .flat_map(|v| {
                    (0..c.starts.len()).map(move |k| {
                        let mut n = v.clone();
                        n.push(k);
                        n
                    })
                })
                .collect();
        }
        out
    }

    /// Leaf `v`'s argument and index, read at the kernel's element (`piece` none) or inside
    /// a concat's operand.
    pub fn leaf_index(
        &self,
        g: &Gen<'_, '_>,
        ctx: &IrContext,
        v: Value,
        piece: Piece,
    ) -> R<(usize, ViewIndex)> {
        let (a, vi) = self.leaves.get(&v).ok_or("not a leaf")?;
        let Some((c, k)) = piece else {
            return Ok((*a, vi.clone()));
        };
        let cat = &self.concats[c];
        let operand = shape_of(g, ctx, ctx.operand(cat.op, k))?;
        Ok((
            *a,
            vi.concat_piece(&operand, cat.dim, cat.starts[k], cat.total),
        ))
    }
}

/// One evaluation of a body (one element, or one lane of a vector) in one variant.
pub(super) struct Eval<'b, 'c> {
    pub body: &'b Body,
    /// The operand each concat takes ([`Body::variants`]).
    pub choice: &'b [usize],
    /// Values the caller supplies (a reduction's result, a per-row value's broadcast).
    pub provided: HashMap<Value, Val<'c>>,
    memo: HashMap<(Value, Piece), Val<'c>>,
}

/// Loads leaf `v` (evaluated in `piece`) for an [`Eval`].
pub(super) type LoadLeaf<'l, 'a, 'c> = dyn FnMut(&Gen<'a, 'c>, Value, Piece) -> R<Val<'c>> + 'l;

impl<'b, 'c> Eval<'b, 'c> {
    pub fn new(body: &'b Body, choice: &'b [usize]) -> Self {
        Eval {
            body,
            choice,
            provided: HashMap::new(),
            memo: HashMap::new(),
        }
    }

    /// The value of `v` at the current element.
    pub fn value<'a>(
        &mut self,
        g: &Gen<'a, 'c>,
        ctx: &IrContext,
        v: Value,
        piece: Piece,
        load: &mut LoadLeaf<'_, 'a, 'c>,
    ) -> R<Val<'c>> {
        if let Some(x) = self.provided.get(&v) {
            return Ok(*x);
        }
        if let Some(x) = self.memo.get(&(v, piece)) {
            return Ok(*x);
        }
        let x = if self.body.leaves.contains_key(&v) {
            load(g, v, piece)?
        } else {
            let op = *self
                .body
                .producer
                .get(&v)
                .ok_or("a value the fused kernel neither loads nor computes")?;
            match ctx.op_name(op) {
                "compute.concat" => {
                    if piece.is_some() {
                        return Err("nested concats in a fused kernel".into());
                    }
                    let c = self
                        .body
                        .concats
                        .iter()
                        .position(|c| c.op == op)
                        .ok_or("unknown concat")?;
                    let k = self.choice[c];
                    self.value(g, ctx, ctx.operand(op, k), Some((c, k)), load)?
                }
                // The same elements: a stored value stays as loaded.
                "compute.reshape" | "compute.clone" => {
                    self.value(g, ctx, ctx.operand(op, 0), piece, load)?
                }
                _ => {
                    let mut ins = Vec::new();
                    for &x in ctx.operands(op) {
                        let xv = self.value(g, ctx, x, piece, load)?;
                        ins.push(computed(g, xv)?);
                    }
                    Val::Computed(g.apply_op(ctx, op, &ins)?)
                }
            }
        };
        self.memo.insert((v, piece), x);
        Ok(x)
    }
}

/// `v` as a compute value (floats widened, `i1` bytes as `i1`).
pub(super) fn computed<'c>(g: &Gen<'_, 'c>, v: Val<'c>) -> R<BasicValueEnum<'c>> {
    match v {
        Val::Computed(x) => Ok(x),
        Val::Stored(x, Kind::Float(e)) => {
            Ok(g.convert(x.into_float_value(), g.compute_ty(e))?.into())
        }
        Val::Stored(x, Kind::Int(i)) => Ok(g.int_load_value(i, x.into_int_value())?.into()),
    }
}

/// `v` as element of `k` is stored (floats rounded once).
pub(super) fn stored<'c>(g: &Gen<'_, 'c>, v: Val<'c>, k: Kind) -> R<BasicValueEnum<'c>> {
    match (v, k) {
        (Val::Stored(x, _), _) => Ok(x),
        (Val::Computed(x), Kind::Float(e)) => {
            Ok(g.convert(x.into_float_value(), g.storage_ty(e))?.into())
        }
        (Val::Computed(x), Kind::Int(i)) => Ok(g.int_store_value(i, x.into_int_value())?.into()),
    }
}

impl<'a, 'c> Gen<'a, 'c> {
    /// Element `idx` of `ptr` as stored (`i1` bytes marked `!range [0, 2)`).
    pub(super) fn load_stored(
        &self,
        k: Kind,
        ptr: inkwell::values::PointerValue<'c>,
        idx: IntValue<'c>,
    ) -> R<Val<'c>> {
        let st = self.storage_any(k);
        let p = unsafe { b!(self.b.build_in_bounds_gep(st, ptr, &[idx], "p")) };
        let v = b!(self.b.build_load(st, p, "ld"));
        if let Kind::Int(i) = k {
            self.bool_range(i, v)?;
        }
        Ok(Val::Stored(v, k))
    }

    /// The buffer index of flat element `j` through the collapsed maps `maps`, in order.
    pub(super) fn view_index(&self, j: IntValue<'c>, maps: &[StridedIndex]) -> R<IntValue<'c>> {
        let mut i = j;
        for m in maps {
            i = self.strided_index(i, &m.dims)?;
            if m.offset != 0 {
                let off = self.cx.i64_type().const_int(m.offset as u64, true);
                i = b!(self.b.build_int_add(i, off, "off"));
            }
        }
        Ok(i)
    }

    /// Branches on the concat operands element `idx` falls in: runs `body` once per variant
    /// (in its own block) and returns the value it produced for `idx`'s variant.
    pub(super) fn by_variant<V: BasicValue<'c> + Copy>(
        &self,
        f: FunctionValue<'c>,
        body_of: &Body,
        variants: &[Vec<usize>],
        idx: IntValue<'c>,
        body: &mut dyn FnMut(&Self, &[usize]) -> R<V>,
    ) -> R<BasicValueEnum<'c>> {
        if let [only] = variants {
            return Ok(body(self, only)?.as_basic_value_enum());
        }
        // Each concat's coordinate of the element.
        let mut coord = Vec::new();
        for c in &body_of.concats {
            let q = b!(self
                .b
                .build_int_unsigned_div(idx, self.i64(c.inner.max(1)), "q"));
            coord.push(b!(self.b.build_int_unsigned_rem(
                q,
                self.i64(c.total.max(1)),
                "q"
            )));
        }
        let merge = self.cx.append_basic_block(f, "vmerge");
        let mut incoming: Vec<(BasicValueEnum<'c>, BasicBlock<'c>)> = Vec::new();
        for (vi, choice) in variants.iter().enumerate() {
            let run = self.cx.append_basic_block(f, "variant");
            if vi + 1 < variants.len() {
                // In every chosen operand's range (the last variant is what remains).
                let mut all = self.cx.bool_type().const_int(1, false);
                for ((c, &k), &q) in body_of.concats.iter().zip(choice).zip(&coord) {
                    let lo = b!(self.b.build_int_compare(
                        IntPredicate::UGE,
                        q,
                        self.i64(c.starts[k]),
                        "lo"
                    ));
                    let hi = b!(self.b.build_int_compare(
                        IntPredicate::ULT,
                        q,
                        self.i64(c.starts[k] + c.lens[k]),
                        "hi"
                    ));
                    let both = b!(self.b.build_and(lo, hi, "in"));
                    all = b!(self.b.build_and(all, both, "in"));
                }
                let next = self.cx.append_basic_block(f, "vtest");
                b!(self.b.build_conditional_branch(all, run, next));
                self.b.position_at_end(run);
                let v = body(self, choice)?.as_basic_value_enum();
                incoming.push((v, self.b.get_insert_block().ok_or("no block")?));
                b!(self.b.build_unconditional_branch(merge));
                self.b.position_at_end(next);
            } else {
                b!(self.b.build_unconditional_branch(run));
                self.b.position_at_end(run);
                let v = body(self, choice)?.as_basic_value_enum();
                incoming.push((v, self.b.get_insert_block().ok_or("no block")?));
                b!(self.b.build_unconditional_branch(merge));
            }
        }
        self.b.position_at_end(merge);
        let ty = incoming.first().ok_or("no variant")?.0.get_type();
        let phi = b!(self.b.build_phi(ty, "vv"));
        for (v, bb) in &incoming {
            phi.add_incoming(&[(v, *bb)]);
        }
        Ok(phi.as_basic_value())
    }

    /// A fused chain (module docs): `ops` of the kernel body, reading `args`, storing
    /// `result`.
    pub(super) fn fused(
        &mut self,
        ctx: &IrContext,
        f: FunctionValue<'c>,
        ops: &[OpId],
        args: &[Value],
        result: Value,
    ) -> R<()> {
        let body = Body::new(self, ctx, ops, args)?;
        if !body.reductions.is_empty() || !body.deferred.is_empty() {
            return Err("a view of a computed value in an elementwise kernel".into());
        }
        let width = super::elementwise_vector_width(ctx, ops);
        if transcendental_used(ctx, ops) {
            self.all_helpers()?;
            self.b
                .position_at_end(f.get_first_basic_block().ok_or("no entry")?);
        }
        let variants = body.variants();
        let (re, shape) = self.kind_of(ctx, result)?;
        let n = shape.iter().product::<i64>().max(0) as u64;
        let out = self.param(f, args.len())?;
        let (gid, stride) = self.thread_range()?;
        let body = &body;
        // One element `i` (one per iteration).
        let scalar = |g: &Self, start_at: u64| -> R<()> {
            let start = b!(g.b.build_int_add(gid, g.i64(start_at), "start"));
            g.counted(f, start, g.i64(n), stride, |g, i| {
                let v = g.by_variant(f, body, &variants, i, &mut |g, choice| {
                    let mut ev = Eval::new(body, choice);
                    let mut load = |g: &Self, v: Value, piece: Piece| -> R<Val<'c>> {
                        let (a, vi) = body.leaf_index(g, ctx, v, piece)?;
                        let (k, _) = g.kind_of(ctx, v)?;
                        let idx = g.view_index(i, &vi.strided())?;
                        g.load_stored(k, g.param(f, a)?, idx)
                    };
                    let r = ev.value(g, ctx, result, None, &mut load)?;
                    stored(g, r, re)
                })?;
                g.store_any_stored(re, out, i, v)
            })
        };
        let nv = n / width;
        if nv == 0 || width == 1 {
            return scalar(self, 0);
        }
        let aligned = self.all_aligned(f, args.len() + 1)?;
        let vec_bb = self.cx.append_basic_block(f, "vec");
        let sc_bb = self.cx.append_basic_block(f, "scalar");
        let done = self.cx.append_basic_block(f, "done");
        b!(self.b.build_conditional_branch(aligned, vec_bb, sc_bb));
        // Aligned: vectors of `width` elements, then the tail.
        self.b.position_at_end(vec_bb);
        self.counted(f, gid, self.i64(nv), stride, |g, j| {
            let first = b!(g.b.build_int_mul(j, g.i64(width), "first"));
            let acc = g.by_variant(f, body, &variants, first, &mut |g, choice| {
                g.vector_of(ctx, f, body, choice, result, first, width)
            })?;
            let p = unsafe {
                b!(g.b.build_in_bounds_gep(g.storage_any(re), out, &[first], "vo"))
            };
            let st = b!(g.b.build_store(p, acc));
            st.set_alignment(VECTOR_BYTES as u32)
                .map_err(|e| e.to_string())?;
            Ok(())
        })?;
        if nv * width < n {
            scalar(self, nv * width)?;
        }
        b!(self.b.build_unconditional_branch(done));
        // Unaligned: element by element.
        self.b.position_at_end(sc_bb);
        scalar(self, 0)?;
        b!(self.b.build_unconditional_branch(done));
        self.b.position_at_end(done);
        Ok(())
    }

    /// The `width` stored elements of `result` from element `first` (a multiple of `width`,
    /// every pointer 16-byte aligned) as one vector, in variant `choice`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn vector_of(
        &self,
        ctx: &IrContext,
        f: FunctionValue<'c>,
        body: &Body,
        choice: &[usize],
        result: Value,
        first: IntValue<'c>,
        width: u64,
    ) -> R<VectorValue<'c>> {
        let (re, _) = self.kind_of(ctx, result)?;
        let mut cache = VectorLoads::default();
        let mut acc = self.vec_ty(re, width as u32).get_poison();
        for l in 0..width {
            let mut ev = Eval::new(body, choice);
            let mut load = |g: &Self, v: Value, piece: Piece| -> R<Val<'c>> {
                cache.lane(g, ctx, f, body, (v, piece), first, l, width)
            };
            let v = ev.value(self, ctx, result, None, &mut load)?;
            let s = stored(self, v, re)?;
            let lane = self.cx.i32_type().const_int(l, false);
            acc = b!(self.b.build_insert_element(acc, s, lane, "acc"));
        }
        Ok(acc)
    }

    /// Stores a stored-form element.
    pub(super) fn store_any_stored(
        &self,
        k: Kind,
        ptr: inkwell::values::PointerValue<'c>,
        idx: IntValue<'c>,
        v: BasicValueEnum<'c>,
    ) -> R<()> {
        let p = unsafe {
            b!(self
                .b
                .build_in_bounds_gep(self.storage_any(k), ptr, &[idx], "p"))
        };
        b!(self.b.build_store(p, v));
        Ok(())
    }

    /// Whether the first `params` parameters of `f` are all 16-byte aligned (a runtime test).
    pub(super) fn all_aligned(&self, f: FunctionValue<'c>, params: usize) -> R<IntValue<'c>> {
        let i64t = self.cx.i64_type();
        let mut low = self.i64(0);
        for k in 0..params {
            let pi = b!(self.b.build_ptr_to_int(self.param(f, k)?, i64t, "pi"));
            low = b!(self.b.build_or(low, pi, "low"));
        }
        let low = b!(self.b.build_and(low, self.i64(VECTOR_BYTES - 1), "low"));
        Ok(b!(self.b.build_int_compare(
            IntPredicate::EQ,
            low,
            self.i64(0),
            "aligned"
        )))
    }

    /// Defines every transcendental helper (before a kernel body that may call them).
    pub(super) fn all_helpers(&mut self) -> R<()> {
        self.helper_exp()?;
        self.helper_tanh()?;
        self.helper_exp_fast()?;
        self.helper_tanh_fast()?;
        self.helper_tanh64()?;
        self.helper_sincos64(false)?;
        self.helper_sincos64(true)?;
        self.helper_log64()?;
        Ok(())
    }
}

/// The loads of one vector of a fused chain: each leaf (in its piece) is read once per
/// vector, as [`ViewIndex::access`] says.
#[derive(Default)]
pub(super) struct VectorLoads<'c> {
    vectors: HashMap<(Value, Piece), VectorValue<'c>>,
    shared: HashMap<(Value, Piece), Val<'c>>,
}

impl<'c> VectorLoads<'c> {
    /// Lane `l` of leaf `key` for the vector from element `first`.
    #[allow(clippy::too_many_arguments)]
    pub fn lane(
        &mut self,
        g: &Gen<'_, 'c>,
        ctx: &IrContext,
        f: FunctionValue<'c>,
        body: &Body,
        key: (Value, Piece),
        first: IntValue<'c>,
        l: u64,
        width: u64,
    ) -> R<Val<'c>> {
        let (v, piece) = key;
        let (a, vi) = body.leaf_index(g, ctx, v, piece)?;
        let (k, _) = g.kind_of(ctx, v)?;
        let maps = vi.strided();
        match vi.access(width) {
            Access::Shared => {
                if let Some(x) = self.shared.get(&key) {
                    return Ok(*x);
                }
                let idx = g.view_index(first, &maps)?;
                let x = g.load_stored(k, g.param(f, a)?, idx)?;
                self.shared.insert(key, x);
                Ok(x)
            }
            Access::PerLane => {
                let i = b!(g.b.build_int_add(first, g.i64(l), "i"));
                let idx = g.view_index(i, &maps)?;
                g.load_stored(k, g.param(f, a)?, idx)
            }
            Access::Vector => {
                let vec = match self.vectors.get(&key) {
                    Some(x) => *x,
                    None => {
                        let at = g.view_index(first, &maps)?;
                        let p = unsafe {
                            b!(g.b.build_in_bounds_gep(
                                g.storage_any(k),
                                g.param(f, a)?,
                                &[at],
                                "vp"
                            ))
                        };
                        let x = b!(g.b.build_load(g.vec_ty(k, width as u32), p, "vld"));
                        if let Some(ins) = x.as_instruction_value() {
                            ins.set_alignment(VECTOR_BYTES as u32)
                                .map_err(|e| e.to_string())?;
                        }
                        if let Kind::Int(i) = k {
                            g.bool_range(i, x)?;
                        }
                        let x = x.into_vector_value();
                        self.vectors.insert(key, x);
                        x
                    }
                };
                let lane = g.cx.i32_type().const_int(l, false);
                Ok(Val::Stored(
                    b!(g.b.build_extract_element(vec, lane, "x")),
                    k,
                ))
            }
        }
    }
}
