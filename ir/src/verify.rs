//! The verifier: generic structural checks driven by the op definitions (arity, type and
//! attribute constraints, traits, dominance, symbols), then each op's own verifier.
//!
//! It walks the IR iteratively, so arbitrarily deep nesting cannot overflow the stack.
//!
//! [`verify_order`] is the cheap variant for IR that was valid and has since only had ops
//! permuted within their blocks: it runs only the checks a permutation can fail.

use crate::attrs::AttrKind;
use crate::context::{Context, ValueDef};
use crate::diag::Diagnostic;
use crate::entity::{Attr, Ident, OpId, Type, Value};
use crate::opdef::{ArgDef, Arity, AttrConstraint, OpDef, Trait, TypeConstraint};
use crate::types::{TypeKind, DYNAMIC};
use rustc_hash::FxHashMap;

/// Verifies `root` and everything nested in it; returns every error found (at most one per
/// op, as MLIR stops verifying an op at its first failure).
pub fn verify(ctx: &Context, root: OpId) -> Result<(), Vec<Diagnostic>> {
    verify_walk(ctx, root, |op, visit, defs| {
        verify_op_in(ctx, op, Some(visit), defs)
    })
}

/// Runs `check` on `root` and every op nested in it, in pre-order, collecting its errors.
///
/// `check` gets the pre-order visit numbers of the walk so far: in a pre-order walk, an op of
/// the block of an (already visited) user comes before that user exactly when it was visited
/// before it, so same-block dominance is one lookup in this dense table, with no renumbering
/// of the block's order (which every pass invalidates) and no visit to the defining op.
/// Nothing changes the IR during the walk, so symbol tables are indexed on first search.
#[inline(always)]
fn verify_walk(
    ctx: &Context,
    root: OpId,
    mut check: impl FnMut(OpId, &VisitOrder, &mut DefCache) -> Result<(), Diagnostic>,
) -> Result<(), Vec<Diagnostic>> {
    let mut errors = Vec::new();
    let mut visit = VisitOrder::take(ctx.num_op_slots());
    let mut next = 0u32;
    let mut defs = DefCache::default();
    ctx.with_symbol_cache(|| {
        ctx.walk(root, |op| {
            visit.set(op, next);
            next += 1;
            if let Err(e) = check(op, &visit, &mut defs) {
                errors.push(e);
            }
        })
    });
    visit.give_back();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Verifies `root` after a pass that only permuted ops within their blocks (see
/// [`PassEnv::mark_reordered_only`](crate::pass::PassEnv::mark_reordered_only)), on the
/// premise that the IR passed [`verify`] before: same ops, operands, results, attributes,
/// properties, locations, regions and block membership, only their order changed.
///
/// Every check of [`verify`] reads either the op itself (its name, operands' and results'
/// types, attributes, regions, parent op) and the symbols it references, none of which a
/// permutation changes, or the order of ops. The order-reading ones are all run here, each
/// where [`verify`] runs it and with its diagnostic, so the errors are exactly those [`verify`]
/// would report (the checks that precede them on an op cannot fail, by the premise):
///
/// - dominance: an operand used before its definition in the block (directly or through an
///   enclosing op), with the same visit-order lookup as [`verify`];
/// - [`Trait::Terminator`]: the op must still be the last of its block;
/// - terminated regions (every op without [`Trait::NoTerminator`]): each block must still
///   end with a terminator;
/// - [`Trait::OrderSensitiveVerifier`]: ops whose own `verify` hook reads the order of other
///   ops get the whole of [`verify`]'s checks.
///
/// Order-dependent checks that cannot fail after a permutation are not run: the symbol table
/// check words its duplicate error at the later definition, but a permutation neither adds a
/// symbol nor renames one; symbol lookups return the first definition of a name, which is
/// the only one in a valid table.
///
/// The op verifiers of the dialects were audited against this: `rt.kernel` (its body must end
/// with `rt.yield`) and `rt.launch` (its kernel's `rt.yield` gives the result buffer's type)
/// read which op ends a block and carry [`Trait::OrderSensitiveVerifier`]. `comm.pool` walks
/// its block, but its checks (one pool per kind and group, each `comm.slot` in bounds) hold
/// for every order of the same ops, as do those that look at use lists (a move leaves them
/// alone), the entry block (blocks are not reordered) or the parent op; the rest read only
/// their own op.
pub fn verify_order(ctx: &Context, root: OpId) -> Result<(), Vec<Diagnostic>> {
    verify_walk(ctx, root, |op, visit, defs| {
        verify_op_order(ctx, op, visit, defs)
    })
}

/// [`verify_op_in`] reduced to the checks a permutation can fail (see [`verify_order`]), in
/// the same order, so that the first failure is the one the full verifier reports.
fn verify_op_order(
    ctx: &Context,
    op: OpId,
    visit: &VisitOrder,
    defs: &mut DefCache,
) -> Result<(), Diagnostic> {
    let Some(def) = ctx.op_def(op) else {
        // An unregistered op that passed before is allowed; only its operands are checked.
        return verify_dominance(ctx, op, Some(visit));
    };
    let order = defs.get(ctx, op, def).0.order;
    if order.full {
        return verify_op_in(ctx, op, Some(visit), defs);
    }
    verify_dominance(ctx, op, Some(visit))?;
    if order.terminator {
        verify_is_last(ctx, op)?;
    }
    if order.terminated_regions {
        verify_block_terminators(ctx, op)?;
    }
    Ok(())
}

/// The error for an op of a dialect that is not registered (MLIR's wording).
pub fn unregistered_error(ctx: &Context, op: OpId) -> Diagnostic {
    let name = ctx.op_name(op);
    let dialect = name.split_once('.').map(|(d, _)| d).unwrap_or(name);
    if ctx.registry().is_partial(dialect) {
        Diagnostic::error(
            ctx.op_loc(op),
            format!("'{name}' op is not registered: commlir's '{dialect}' dialect declares only the ops its conversions consume; use --allow-unregistered-dialect to accept it"),
        )
    } else if ctx.is_dialect_registered(dialect) {
        Diagnostic::error(
            ctx.op_loc(op),
            format!("unregistered operation '{name}' found in dialect ('{dialect}') that does not allow unknown operations"),
        )
    } else {
        Diagnostic::error(
            ctx.op_loc(op),
            format!("'{name}' op created with unregistered dialect. If this is intended, please use --allow-unregistered-dialect"),
        )
    }
}

/// Visit numbers of the ops a [`verify`] walk has reached (`u32::MAX`: not yet, or outside
/// the walked op).
struct VisitOrder {
    /// Per op slot: the generation of the walk that numbered it (high half) and its number
    /// (low half). Only entries of this walk's generation count, so the table is reused from
    /// walk to walk without clearing: verifying each of F functions of a module allocated
    /// and filled a table of every op of the module, O(F × ops) per pass.
    number: Vec<u64>,
    generation: u32,
}

thread_local! {
    /// The table of the last walk on this thread, and its generation.
    static VISIT_TABLE: std::cell::RefCell<(Vec<u64>, u32)> =
        const { std::cell::RefCell::new((Vec::new(), 0)) };
}

impl VisitOrder {
    /// The thread's table (a fresh one if a walk on this thread holds it), for `slots` ops.
    fn take(slots: usize) -> VisitOrder {
        let (mut number, generation) = VISIT_TABLE.with(|t| std::mem::take(&mut *t.borrow_mut()));
        let generation = match generation.checked_add(1) {
            Some(g) => g,
            None => {
                // 2^32 walks on one thread: start the generations over on a clean table.
                number.iter_mut().for_each(|e| *e = 0);
                1
            }
        };
        if number.len() < slots {
            number.resize(slots, 0);
        }
        VisitOrder { number, generation }
    }

    /// Returns the table for the thread's next walk.
    fn give_back(self) {
        VISIT_TABLE.with(|t| *t.borrow_mut() = (self.number, self.generation));
    }

    fn set(&mut self, op: OpId, n: u32) {
        self.number[op.index()] = (u64::from(self.generation) << 32) | u64::from(n);
    }

    /// `op`'s number in this walk, if the walk has visited it.
    fn get(&self, op: OpId) -> Option<u32> {
        let e = *self.number.get(op.index())?;
        ((e >> 32) as u32 == self.generation).then_some(e as u32)
    }

    /// Whether `a` comes before `b`, both in one block, when the walk has visited `b`
    /// (`None` when it has not, e.g. `b` encloses the walked op).
    fn is_before(&self, a: OpId, b: OpId) -> Option<bool> {
        let nb = self.get(b)?;
        Some(self.get(a).is_some_and(|na| na < nb))
    }
}

/// Verifies one op (not its nested ops).
pub fn verify_op(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_op_in(ctx, op, None, &mut DefCache::default())
}

/// What the generic checks need to know of an op definition, worked out once per verify run
/// rather than once per op.
struct DefFacts {
    def: &'static OpDef,
    operands: SlotLayout,
    results: SlotLayout,
    /// The interned name of each of `def.attributes` (`None`: never interned, so no op has
    /// it), for attribute lookups that compare keys instead of text.
    attr_keys: Box<[Option<Ident>]>,
    /// Whether a trait of the definition is checked per op (see [`verify_traits`]).
    checked_traits: bool,
    order: OrderChecks,
}

/// Which of [`verify_order`]'s checks apply to ops of a definition.
#[derive(Clone, Copy)]
struct OrderChecks {
    /// [`Trait::OrderSensitiveVerifier`]: run every check.
    full: bool,
    /// [`Trait::Terminator`]: the op must end its block.
    terminator: bool,
    /// No [`Trait::NoTerminator`]: the blocks of the op's regions must end with a terminator.
    terminated_regions: bool,
}

/// The shape of an operand or result list definition.
#[derive(Clone, Copy)]
struct SlotLayout {
    /// Slots taking exactly one value.
    fixed: usize,
    /// Optional and variadic slots.
    flexible: usize,
    /// Some slot is optional.
    optional: bool,
    /// Some slot has a constraint other than [`TypeConstraint::Any`].
    constrained: bool,
}

impl SlotLayout {
    fn of(slots: &[ArgDef]) -> Self {
        let fixed = slots.iter().filter(|s| s.arity == Arity::One).count();
        SlotLayout {
            fixed,
            flexible: slots.len() - fixed,
            optional: slots.iter().any(|s| s.arity == Arity::Optional),
            constrained: slots.iter().any(|s| s.ty != TypeConstraint::Any),
        }
    }

    /// Whether [`verify_slots`] accepts `vals` for `slots` (this layout), decided with the
    /// counts worked out once and no diagnostic text at hand.
    fn accepts(
        self,
        ctx: &Context,
        types: &mut TypeFacts,
        vals: &[Value],
        slots: &[ArgDef],
    ) -> bool {
        let n = vals.len();
        let count_ok = if self.flexible == 0 {
            n == self.fixed
        } else {
            n >= self.fixed && !(self.flexible == 1 && self.optional && n > self.fixed + 1)
        };
        if !count_ok {
            return false;
        }
        // With several flexible slots the values cannot be mapped to slots: counts only.
        if self.flexible > 1 || !self.constrained {
            return true;
        }
        let mut ok = |v: &Value, c: TypeConstraint| types.satisfies(ctx, ctx.value_type(*v), c);
        if self.flexible == 0 {
            return vals.iter().zip(slots).all(|(v, s)| ok(v, s.ty));
        }
        let extra = n - self.fixed;
        let mut i = 0;
        for s in slots {
            let take = if s.arity == Arity::One { 1 } else { extra };
            if !vals[i..i + take].iter().all(|v| ok(v, s.ty)) {
                return false;
            }
            i += take;
        }
        true
    }
}

impl DefFacts {
    fn new(ctx: &Context, def: &'static OpDef) -> Self {
        DefFacts {
            def,
            operands: SlotLayout::of(def.operands),
            results: SlotLayout::of(def.results),
            attr_keys: def
                .attributes
                .iter()
                .map(|a| ctx.find_ident(a.name))
                .collect(),
            checked_traits: def.traits.iter().any(|t| is_checked_per_op(*t)),
            order: OrderChecks {
                full: def.has_trait(Trait::OrderSensitiveVerifier),
                terminator: def.has_trait(Trait::Terminator),
                terminated_regions: !def.has_trait(Trait::NoTerminator),
            },
        }
    }

    /// Whether every declared attribute is present (or optional) and satisfies its
    /// constraint; when not, [`verify_attrs`] finds the first failure and words it.
    fn attrs_ok(&self, ctx: &Context, op: OpId) -> bool {
        self.def
            .attributes
            .iter()
            .zip(&self.attr_keys)
            .all(
                |(ad, key)| match key.and_then(|k| ctx.inherent_attr_id(op, k)) {
                    None => ad.optional,
                    Some(a) => attr_satisfies(ctx, a, ad.constraint),
                },
            )
    }
}

/// [`DefFacts`] of the definitions met so far, by the op name's identifier, and the
/// [`TypeFacts`] of the types met so far.
#[derive(Default)]
struct DefCache {
    /// Identifier index -> position in `facts` (`u32::MAX`: none yet).
    by_name: Vec<u32>,
    facts: Vec<DefFacts>,
    types: TypeFacts,
}

/// Which [`TypeConstraint`]s each type satisfies, worked out once per verify run on the
/// type's first sighting: most ops share a handful of types, and the operand and result
/// checks then test a bit instead of matching the type's structure.
#[derive(Default)]
struct TypeFacts {
    /// Type index -> [`TypeFacts::KNOWN`] and bit `c as u8` for each constraint `c` the type
    /// satisfies (0: not worked out yet).
    bits: Vec<u8>,
}

impl TypeFacts {
    const KNOWN: u8 = 0x80;
    /// Every constraint (exhaustive match below, so a new one cannot be missed).
    const ALL: [TypeConstraint; 7] = [
        TypeConstraint::Any,
        TypeConstraint::AnyTensor,
        TypeConstraint::StaticTensor,
        TypeConstraint::AnyInteger,
        TypeConstraint::AnyFloat,
        TypeConstraint::Index,
        TypeConstraint::FloatTensor,
    ];

    fn bit(c: TypeConstraint) -> u8 {
        match c {
            TypeConstraint::Any
            | TypeConstraint::AnyTensor
            | TypeConstraint::StaticTensor
            | TypeConstraint::AnyInteger
            | TypeConstraint::AnyFloat
            | TypeConstraint::Index
            | TypeConstraint::FloatTensor => 1 << (c as u8),
        }
    }

    /// [`type_satisfies`], remembered per type.
    #[inline]
    fn satisfies(&mut self, ctx: &Context, t: Type, c: TypeConstraint) -> bool {
        let bits = match self.bits.get(t.index()) {
            Some(&b) if b != 0 => b,
            _ => self.learn(ctx, t),
        };
        bits & Self::bit(c) != 0
    }

    /// Works out and records the facts of `t`.
    #[cold]
    #[inline(never)]
    fn learn(&mut self, ctx: &Context, t: Type) -> u8 {
        let i = t.index();
        if i >= self.bits.len() {
            self.bits.resize(i + 1, 0);
        }
        self.bits[i] = Self::ALL
            .iter()
            .filter(|&&c| type_satisfies(ctx, t, c))
            .fold(Self::KNOWN, |b, &c| b | Self::bit(c));
        self.bits[i]
    }
}

impl DefCache {
    #[inline(always)]
    fn get(&mut self, ctx: &Context, op: OpId, def: &'static OpDef) -> (&DefFacts, &mut TypeFacts) {
        let name = ctx.op_name_ident(op).index();
        if name >= self.by_name.len() {
            self.by_name.resize(name + 1, u32::MAX);
        }
        let mut i = self.by_name[name] as usize;
        // An op's definition is the one registered for its name; the pointer check keeps a
        // definition registered after the run started from being confused with an older one.
        if !(i < self.facts.len() && std::ptr::eq(self.facts[i].def, def)) {
            i = self.facts.len();
            self.by_name[name] = i as u32;
            self.facts.push(DefFacts::new(ctx, def));
        }
        (&self.facts[i], &mut self.types)
    }
}

fn verify_op_in(
    ctx: &Context,
    op: OpId,
    visit: Option<&VisitOrder>,
    defs: &mut DefCache,
) -> Result<(), Diagnostic> {
    verify_dominance(ctx, op, visit)?;
    let Some(def) = ctx.op_def(op) else {
        // As in MLIR, --allow-unregistered-dialect opens only dialects nobody registered: an
        // unknown name in a registered dialect (`func.nope`) is still an error. `builtin` stays
        // open for the builtin ops commlir does not model (unrealized_conversion_cast, ...).
        let name = ctx.op_name(op);
        let dialect = name.split_once('.').map(|(d, _)| d).unwrap_or(name);
        // A partial dialect (an upstream one of which commlir declares only the ops its
        // conversions read) is open under the flag as well.
        if ctx.allow_unregistered
            && (dialect == "builtin"
                || !ctx.is_dialect_registered(dialect)
                || ctx.registry().is_partial(dialect))
        {
            return Ok(());
        }
        return Err(unregistered_error(ctx, op));
    };
    let (facts, types) = defs.get(ctx, op, def);
    // Each check has a fast test of the common, valid case; the full check (which words the
    // diagnostic) runs only when that test fails.
    let (operands, results) = (ctx.operands(op), ctx.results(op));
    if !facts.operands.accepts(ctx, types, operands, def.operands) {
        verify_slots(ctx, op, def, operands, def.operands, "operand")?;
    }
    if !facts.results.accepts(ctx, types, results, def.results) {
        verify_slots(ctx, op, def, results, def.results, "result")?;
    }
    if !facts.attrs_ok(ctx, op) {
        verify_attrs(ctx, op, def)?;
    }
    verify_traits(ctx, op, def, facts.checked_traits)?;
    if let Some(f) = def.verify {
        f(ctx, op)?;
    }
    Ok(())
}

fn verify_slots(
    ctx: &Context,
    op: OpId,
    _def: &OpDef,
    vals: &[Value],
    slots: &[ArgDef],
    what: &str,
) -> Result<(), Diagnostic> {
    let fixed = slots.iter().filter(|s| s.arity == Arity::One).count();
    let flexible = slots.len() - fixed;
    let n = vals.len();
    if flexible == 0 && n != fixed {
        return Err(ctx.op_error(op, format!("expected {fixed} {what}s, but found {n}")));
    }
    if n < fixed {
        return Err(ctx.op_error(
            op,
            format!("expected at least {fixed} {what}s, but found {n}"),
        ));
    }
    if flexible == 1 && slots.iter().any(|s| s.arity == Arity::Optional) && n > fixed + 1 {
        return Err(ctx.op_error(
            op,
            format!("expected at most {} {what}s, but found {n}", fixed + 1),
        ));
    }
    // Map values to slots when the layout is unambiguous (at most one flexible slot).
    if flexible > 1 {
        return Ok(());
    }
    let extra = n - fixed;
    let mut i = 0;
    for s in slots {
        let take = if s.arity == Arity::One { 1 } else { extra };
        for _ in 0..take {
            let t = ctx.value_type(vals[i]);
            if !type_satisfies(ctx, t, s.ty) {
                return Err(ctx.op_error(
                    op,
                    format!(
                        "{what} #{i} must be {}, but got {}",
                        s.ty.describe(),
                        crate::printer::type_to_string(ctx, t)
                    ),
                ));
            }
            i += 1;
        }
    }
    Ok(())
}

/// Whether type `t` satisfies constraint `c`.
pub fn type_satisfies(ctx: &Context, t: Type, c: TypeConstraint) -> bool {
    let k = ctx.type_kind(t);
    match c {
        TypeConstraint::Any => true,
        TypeConstraint::AnyTensor => {
            matches!(k, TypeKind::Tensor { .. } | TypeKind::UnrankedTensor { .. })
        }
        TypeConstraint::StaticTensor => {
            matches!(k, TypeKind::Tensor { shape, .. } if !shape.contains(&DYNAMIC))
        }
        TypeConstraint::AnyInteger => matches!(k, TypeKind::Integer { .. }),
        TypeConstraint::AnyFloat => matches!(k, TypeKind::Float(_)),
        TypeConstraint::Index => matches!(k, TypeKind::Index),
        TypeConstraint::FloatTensor => matches!(k, TypeKind::Tensor { elem, .. }
            if matches!(ctx.type_kind(*elem), TypeKind::Float(_))),
    }
}

/// Whether attribute `a` satisfies constraint `c`.
pub fn attr_satisfies(ctx: &Context, a: Attr, c: AttrConstraint) -> bool {
    let k = ctx.attr_kind(a);
    match c {
        AttrConstraint::Any => true,
        AttrConstraint::Integer => matches!(k, AttrKind::Integer { .. }),
        AttrConstraint::Float => matches!(k, AttrKind::Float { .. } | AttrKind::Integer { .. }),
        AttrConstraint::String => matches!(k, AttrKind::String(_)),
        AttrConstraint::StrEnum(allowed) => {
            ctx.attr_as_str(a).is_some_and(|s| allowed.contains(&s))
        }
        AttrConstraint::Bool => matches!(k, AttrKind::Bool(_)),
        AttrConstraint::Unit => matches!(k, AttrKind::Unit),
        AttrConstraint::SymbolRef => matches!(k, AttrKind::SymbolRef { .. }),
        AttrConstraint::SymbolName => matches!(k, AttrKind::String(_)),
        AttrConstraint::Type => matches!(k, AttrKind::Type(_)),
        AttrConstraint::Array => matches!(k, AttrKind::Array(_) | AttrKind::DenseArray { .. }),
        AttrConstraint::I64Array => ctx.attr_as_i64_array(a).is_some(),
        AttrConstraint::Dict => matches!(k, AttrKind::Dict(_)),
    }
}

fn verify_attrs(ctx: &Context, op: OpId, def: &OpDef) -> Result<(), Diagnostic> {
    for ad in def.attributes {
        match ctx.inherent_attr(op, ad.name) {
            None if !ad.optional => {
                return Err(ctx.op_error(op, format!("requires attribute '{}'", ad.name)));
            }
            None => {}
            Some(a) if !attr_satisfies(ctx, a, ad.constraint) => {
                return Err(ctx.op_error(
                    op,
                    format!(
                        "attribute '{}' must be {}, but got {}",
                        ad.name,
                        ad.constraint.describe(),
                        crate::printer::attr_to_string(ctx, a)
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Whether [`verify_traits`] has a check of its own for trait `t` (a match without a
/// catch-all, so that a new trait must be placed here).
fn is_checked_per_op(t: Trait) -> bool {
    match t {
        Trait::Terminator
        | Trait::HasParent(_)
        | Trait::SingleBlock
        | Trait::SameOperandsAndResultType
        | Trait::SameOperandsAndResultElementType
        | Trait::SymbolTable
        | Trait::Symbol => true,
        // NoTerminator is read by the terminator check below, IsolatedFromAbove by the
        // dominance check, OrderSensitiveVerifier by `verify_order`; the others are facts for
        // the passes.
        Trait::Pure
        | Trait::OrderSensitiveVerifier
        | Trait::IsolatedFromAbove
        | Trait::NoTerminator
        | Trait::ReturnLike
        | Trait::Collective
        | Trait::Wait
        | Trait::MemRead
        | Trait::MemWrite
        | Trait::MemAlloc
        | Trait::Blocking => false,
    }
}

/// The trait checks; `checked_traits` says whether a trait of `def` is one of those
/// [`is_checked_per_op`] (the loop over the traits is skipped otherwise).
fn verify_traits(
    ctx: &Context,
    op: OpId,
    def: &OpDef,
    checked_traits: bool,
) -> Result<(), Diagnostic> {
    if let Some(n) = def.regions {
        let got = ctx.op_regions(op).len();
        if got != n {
            return Err(ctx.op_error(op, format!("requires {n} regions, but found {got}")));
        }
    }
    let traits: &[Trait] = if checked_traits { def.traits } else { &[] };
    for t in traits {
        // Every trait with an arm here is one of those `is_checked_per_op` lists.
        match *t {
            Trait::Terminator => verify_is_last(ctx, op)?,
            Trait::HasParent(p) => {
                let parent = ctx.parent_op(op).map(|p| ctx.op_name(p));
                if parent != Some(p) {
                    return Err(ctx.op_error(op, format!("expects parent op '{p}'")));
                }
            }
            Trait::SingleBlock => {
                for &r in ctx.op_regions(op) {
                    if ctx.region_blocks(r).len() > 1 {
                        return Err(ctx.op_error(op, "expects a single block per region"));
                    }
                }
            }
            Trait::SameOperandsAndResultType => {
                let mut all = ctx
                    .operands(op)
                    .iter()
                    .chain(ctx.results(op))
                    .map(|v| ctx.value_type(*v));
                if let Some(first) = all.next() {
                    if all.any(|t| t != first) {
                        return Err(
                            ctx.op_error(op, "requires the same type for all operands and results")
                        );
                    }
                }
            }
            Trait::SameOperandsAndResultElementType => {
                let elem = |v: &Value| match ctx.type_kind(ctx.value_type(*v)) {
                    TypeKind::Tensor { elem, .. } | TypeKind::UnrankedTensor { elem } => *elem,
                    _ => ctx.value_type(*v),
                };
                let mut all = ctx.operands(op).iter().chain(ctx.results(op)).map(elem);
                if let Some(first) = all.next() {
                    if all.any(|t| t != first) {
                        return Err(ctx.op_error(
                            op,
                            "requires the same element type for all operands and results",
                        ));
                    }
                }
            }
            Trait::SymbolTable => verify_symbol_table(ctx, op)?,
            Trait::Symbol if ctx.symbol_name(op).is_none() => {
                return Err(ctx.op_error(op, "requires string attribute 'sym_name'"));
            }
            _ => {}
        }
    }
    if !ctx.op_regions(op).is_empty() && !def.has_trait(Trait::NoTerminator) {
        verify_block_terminators(ctx, op)?;
    }
    Ok(())
}

/// The check of [`Trait::Terminator`]: `op` is the last op of its block.
fn verify_is_last(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    match ctx.op_parent(op) {
        Some(b) if ctx.block_last(b) != Some(op) => {
            Err(ctx.op_error(op, "must be the last operation in the parent block"))
        }
        _ => Ok(()),
    }
}

/// Every block of `op`'s regions ends with a terminator (for ops without
/// [`Trait::NoTerminator`]).
fn verify_block_terminators(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    for &r in ctx.op_regions(op) {
        for &b in ctx.region_blocks(r) {
            match ctx.block_last(b) {
                Some(last) if ctx.op_def(last).is_none() && ctx.allow_unregistered => {}
                Some(last) if ctx.op_has_trait(last, Trait::Terminator) => {}
                Some(last) => {
                    return Err(Diagnostic::error(
                        ctx.op_loc(last),
                        "block with no terminator, has ".to_string()
                            + &format!("'{}'", ctx.op_name(last)),
                    )
                    .with_note(ctx.op_loc(op), "in the region of this operation"));
                }
                None => {
                    return Err(ctx.op_error(op, "empty block: expect at least a terminator"));
                }
            }
        }
    }
    Ok(())
}

fn verify_symbol_table(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let mut seen: FxHashMap<&str, OpId> = FxHashMap::default();
    for &r in ctx.op_regions(op) {
        for &b in ctx.region_blocks(r) {
            for c in ctx.block_ops(b) {
                if let Some(name) = ctx.symbol_name(c) {
                    if let Some(prev) = seen.insert(name, c) {
                        return Err(Diagnostic::error(
                            ctx.op_loc(c),
                            format!("redefinition of symbol named '{name}'"),
                        )
                        .with_note(ctx.op_loc(prev), "see existing symbol definition here"));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Checks that each operand is defined before its use: earlier in the same block, in the same
/// region (blocks of a CFG region), or in an enclosing block before the enclosing op; and that
/// no use crosses into an op that is isolated from above.
///
/// Inlined into both verifiers' per-op code (each op's hottest check; a call costs both).
#[inline(always)]
fn verify_dominance(ctx: &Context, op: OpId, visit: Option<&VisitOrder>) -> Result<(), Diagnostic> {
    for (i, &v) in ctx.operands(op).iter().enumerate() {
        let Some(def_block) = ctx.value_block(v) else {
            return Err(ctx.op_error(
                op,
                format!("operand #{i} is defined by an erased or detached operation"),
            ));
        };
        let mut user = op;
        loop {
            let Some(b) = ctx.op_parent(user) else {
                return Err(ctx.op_error(op, format!("operand #{i} does not dominate this use")));
            };
            if b == def_block {
                // Regions of unregistered ops may be graph regions (MLIR assumes nothing about
                // them), where a use may precede its definition.
                let graph_region = ctx
                    .block_parent_op(b)
                    .is_some_and(|p| ctx.op_def(p).is_none());
                if graph_region {
                    break;
                }
                if let ValueDef::Result { op: d, .. } = ctx.value_def(v) {
                    let before = visit
                        .and_then(|w| w.is_before(d, user))
                        .unwrap_or_else(|| d != user && ctx.is_before_in_block(d, user));
                    if !before {
                        return Err(
                            ctx.op_error(op, format!("operand #{i} does not dominate this use"))
                        );
                    }
                }
                break;
            }
            if ctx.block_parent(b).is_some() && ctx.block_parent(b) == ctx.block_parent(def_block) {
                break;
            }
            let Some(p) = ctx.block_parent_op(b) else {
                return Err(ctx.op_error(op, format!("operand #{i} does not dominate this use")));
            };
            if ctx.op_has_trait(p, Trait::IsolatedFromAbove) {
                return Err(ctx
                    .op_error(op, "using value defined outside the region")
                    .with_note(ctx.op_loc(p), "required by region isolation constraints"));
            }
            user = p;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The fast tests of [`verify_op_in`] must accept exactly what the full checks accept
    //! (the full checks then word the diagnostics): compared here on random definitions and
    //! ops.

    use super::*;
    use crate::opdef::AttrDef;
    use crate::parser::{parse_source, parse_type, ParseOptions};

    /// A small deterministic generator (xorshift64*).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
        }
        fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
            xs[self.below(xs.len())]
        }
    }

    const TYPES: &[&str] = &[
        "tensor<4x8xf32>",
        "tensor<?x8xf32>",
        "tensor<4xi32>",
        "tensor<*xf32>",
        "tensor<2x2xf32, #comm.buffer<nccl, @tp>>",
        "i32",
        "f32",
        "index",
    ];
    const TYPE_CONSTRAINTS: &[TypeConstraint] = &[
        TypeConstraint::Any,
        TypeConstraint::AnyTensor,
        TypeConstraint::StaticTensor,
        TypeConstraint::AnyInteger,
        TypeConstraint::AnyFloat,
        TypeConstraint::Index,
        TypeConstraint::FloatTensor,
    ];

    /// Ops for [`order_checks_match_verify_on_permuted_blocks`].
    static ORDER_TEST_DEFS: [OpDef; 4] = [
        OpDef {
            name: "t.func",
            regions: Some(1),
            traits: &[Trait::IsolatedFromAbove],
            ..OpDef::EMPTY
        },
        OpDef {
            name: "t.op",
            operands: &[ArgDef::variadic("in", TypeConstraint::Index)],
            results: &[ArgDef::variadic("out", TypeConstraint::Index)],
            regions: None,
            ..OpDef::EMPTY
        },
        OpDef {
            name: "t.ret",
            operands: &[ArgDef::variadic("in", TypeConstraint::Index)],
            traits: &[Trait::Terminator],
            ..OpDef::EMPTY
        },
        OpDef {
            name: "t.first",
            traits: &[Trait::OrderSensitiveVerifier],
            verify: Some(
                |ctx, op| match ctx.op_parent(op).and_then(|b| ctx.block_first(b)) {
                    Some(f) if f != op => Err(ctx.op_error(op, "must come first in its block")),
                    _ => Ok(()),
                },
            ),
            ..OpDef::EMPTY
        },
    ];

    /// [`verify_order`] reports exactly what [`verify`] reports on valid IR whose ops were
    /// then moved within their blocks: nested regions (uses through enclosing ops),
    /// terminators and an order-sensitive verifier.
    #[test]
    fn order_checks_match_verify_on_permuted_blocks() {
        const TEXT: &str = r#"
"t.func"() ({
^bb0(%a: index):
  "t.first"() : () -> ()
  %0 = "t.op"(%a) : (index) -> index
  %1 = "t.op"(%0) : (index) -> index
  %2 = "t.op"(%0) ({
    %3 = "t.op"(%1) : (index) -> index
    %4 = "t.op"(%3, %0) : (index, index) -> index
    "t.op"() ({
      "t.first"() : () -> ()
      %5 = "t.op"(%4, %1) : (index, index) -> index
      "t.ret"(%5) : (index) -> ()
    }) : () -> ()
    "t.ret"(%4) : (index) -> ()
  }) : (index) -> index
  %6 = "t.op"() : () -> index
  %7 = "t.op"(%2, %6) : (index, index) -> index
  "t.ret"(%7) : (index) -> ()
}) : () -> ()
"#;
        let mut rng = Rng(0x0123_4567_89ab_cdef);
        let (mut valid, mut invalid) = (0, 0);
        for _ in 0..2000 {
            let mut ctx = Context::new();
            for def in &ORDER_TEST_DEFS {
                ctx.register_op(def);
            }
            let m = parse_source(&mut ctx, "t", TEXT.as_bytes(), &ParseOptions::default())
                .unwrap_or_else(|e| panic!("{}", e.message));
            verify(&ctx, m).unwrap_or_else(|e| panic!("{}", e[0].message));
            let mut blocks = Vec::new();
            ctx.walk(m, |op| {
                for &r in ctx.op_regions(op) {
                    blocks.extend(ctx.region_blocks(r).iter().copied());
                }
            });
            for _ in 0..1 + rng.below(3) {
                let b = rng.pick(&blocks);
                let ops: Vec<OpId> = ctx.block_ops(b).collect();
                let (x, y) = (rng.pick(&ops), rng.pick(&ops));
                if rng.below(2) == 0 {
                    ctx.move_before(x, y);
                } else {
                    ctx.move_after(x, y);
                }
            }
            let render = |r: Result<(), Vec<Diagnostic>>| format!("{:?}", r.err());
            let full = render(verify(&ctx, m));
            assert_eq!(render(verify_order(&ctx, m)), full);
            if full == "None" {
                valid += 1;
            } else {
                invalid += 1;
            }
        }
        assert!(
            valid > 100 && invalid > 1000,
            "{valid} valid, {invalid} invalid"
        );
    }

    #[test]
    fn type_facts_match_type_satisfies() {
        let mut ctx = Context::new();
        let types: Vec<Type> = TYPES
            .iter()
            .map(|t| parse_type(&mut ctx, t).unwrap())
            .collect();
        assert_eq!(TypeFacts::ALL.len(), TYPE_CONSTRAINTS.len());
        let mut facts = TypeFacts::default();
        // Twice: the first query of a type works its facts out, the later ones read them.
        for _ in 0..2 {
            for &t in types.iter().rev() {
                for &c in TYPE_CONSTRAINTS {
                    assert_eq!(facts.satisfies(&ctx, t, c), type_satisfies(&ctx, t, c));
                }
            }
        }
    }

    #[test]
    fn slot_fast_test_matches_verify_slots() {
        let mut ctx = Context::new();
        let module = parse_source(&mut ctx, "t", b"", &ParseOptions::default()).unwrap();
        let types: Vec<Type> = TYPES
            .iter()
            .map(|t| parse_type(&mut ctx, t).unwrap())
            .collect();
        let block = ctx.new_block(&types);
        let args = ctx.block_args(block).to_vec();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut accepted = 0;
        let mut type_facts = TypeFacts::default();
        for _ in 0..20_000 {
            let slots: Vec<ArgDef> = (0..rng.below(4))
                .map(|_| {
                    let ty = rng.pick(TYPE_CONSTRAINTS);
                    match rng.below(4) {
                        0 => ArgDef::optional("x", ty),
                        1 => ArgDef::variadic("x", ty),
                        _ => ArgDef::one("x", ty),
                    }
                })
                .collect();
            let vals: Vec<Value> = (0..rng.below(6)).map(|_| rng.pick(&args)).collect();
            let fast = SlotLayout::of(&slots).accepts(&ctx, &mut type_facts, &vals, &slots);
            let full = verify_slots(&ctx, module, &OpDef::EMPTY, &vals, &slots, "operand");
            assert_eq!(fast, full.is_ok(), "{slots:?} {vals:?}");
            accepted += usize::from(fast);
        }
        assert!(accepted > 1000, "too few accepted cases: {accepted}");
    }

    #[test]
    fn attr_fast_test_matches_verify_attrs() {
        const NAMES: &[&str] = &["a", "b", "c", "sym_name"];
        const VALUES: &[&str] = &[
            "1 : i64",
            "2.5 : f64",
            "\"x\"",
            "\"s\"",
            "true",
            "unit",
            "@g",
            "[1, 2]",
            "array<i64: 1, 2>",
            "[1.0 : f32]",
            "i32",
            "{k = 1 : i64}",
        ];
        const CONSTRAINTS: &[AttrConstraint] = &[
            AttrConstraint::Any,
            AttrConstraint::Integer,
            AttrConstraint::Float,
            AttrConstraint::String,
            AttrConstraint::StrEnum(&["x", "y"]),
            AttrConstraint::Bool,
            AttrConstraint::Unit,
            AttrConstraint::SymbolRef,
            AttrConstraint::SymbolName,
            AttrConstraint::Type,
            AttrConstraint::Array,
            AttrConstraint::I64Array,
            AttrConstraint::Dict,
        ];
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        // Ops with random properties and attributes (a name may be in both).
        let mut text = String::new();
        for _ in 0..300 {
            let dict = |rng: &mut Rng| {
                let mut entries = Vec::new();
                for n in NAMES {
                    if rng.below(2) == 0 {
                        entries.push(format!("{n} = {}", rng.pick(VALUES)));
                    }
                }
                entries.join(", ")
            };
            let props = dict(&mut rng);
            let attrs = dict(&mut rng);
            let props = if props.is_empty() && rng.below(2) == 0 {
                String::new()
            } else {
                format!("<{{{props}}}>")
            };
            text += &format!("\"t.op\"() {props} {{{attrs}}} : () -> ()\n");
        }
        let mut ctx = Context::new();
        ctx.allow_unregistered = true;
        let module = parse_source(&mut ctx, "t", text.as_bytes(), &ParseOptions::default())
            .unwrap_or_else(|e| panic!("{}", e.message));
        let mut ops = Vec::new();
        ctx.walk(module, |op| ops.push(op));
        ops.remove(0);
        assert_eq!(ops.len(), 300);
        let mut accepted = 0;
        for _ in 0..3000 {
            // Declared attributes, one of which may be a name no op has (never interned).
            let mut attributes = Vec::new();
            for n in ["a", "b", "c", "sym_name", "never_written"] {
                if rng.below(2) == 0 {
                    let c = rng.pick(CONSTRAINTS);
                    attributes.push(if rng.below(2) == 0 {
                        AttrDef::optional(n, c)
                    } else {
                        AttrDef::required(n, c)
                    });
                }
            }
            let def: &'static OpDef = Box::leak(Box::new(OpDef {
                attributes: Box::leak(attributes.into_boxed_slice()),
                ..OpDef::EMPTY
            }));
            let facts = DefFacts::new(&ctx, def);
            for _ in 0..10 {
                let op = rng.pick(&ops);
                let fast = facts.attrs_ok(&ctx, op);
                assert_eq!(fast, verify_attrs(&ctx, op, def).is_ok());
                accepted += usize::from(fast);
            }
        }
        assert!(accepted > 1000, "too few accepted cases: {accepted}");
    }
}
