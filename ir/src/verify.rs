//! The verifier: generic structural checks driven by the op definitions (arity, type and
//! attribute constraints, traits, dominance, symbols), then each op's own verifier.
//!
//! It walks the IR iteratively, so arbitrarily deep nesting cannot overflow the stack.

use crate::attrs::AttrKind;
use crate::context::{Context, ValueDef};
use crate::diag::Diagnostic;
use crate::entity::{Attr, OpId, Type, Value};
use crate::opdef::{ArgDef, Arity, AttrConstraint, OpDef, Trait, TypeConstraint};
use crate::types::{TypeKind, DYNAMIC};
use rustc_hash::FxHashMap;

/// Verifies `root` and everything nested in it; returns every error found (at most one per
/// op, as MLIR stops verifying an op at its first failure).
pub fn verify(ctx: &Context, root: OpId) -> Result<(), Vec<Diagnostic>> {
    let mut errors = Vec::new();
    // Pre-order visit numbers of the walk so far: in a pre-order walk, an op of the block of
    // an (already visited) user comes before that user exactly when it was visited before it,
    // so same-block dominance is one lookup in this dense table, with no renumbering of
    // the block's order (which every pass invalidates) and no visit to the defining op.
    let mut visit = VisitOrder {
        number: vec![u32::MAX; ctx.num_op_slots()],
    };
    let mut next = 0u32;
    ctx.walk(root, |op| {
        visit.number[op.index()] = next;
        next += 1;
        if let Err(e) = verify_op_in(ctx, op, Some(&visit)) {
            errors.push(e);
        }
    });
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The error for an op of a dialect that is not registered (MLIR's wording).
pub fn unregistered_error(ctx: &Context, op: OpId) -> Diagnostic {
    let name = ctx.op_name(op);
    let dialect = name.split_once('.').map(|(d, _)| d).unwrap_or(name);
    if ctx.is_dialect_registered(dialect) {
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
    number: Vec<u32>,
}

impl VisitOrder {
    /// Whether `a` comes before `b`, both in one block, when the walk has visited `b`
    /// (`None` when it has not, e.g. `b` encloses the walked op).
    fn is_before(&self, a: OpId, b: OpId) -> Option<bool> {
        let nb = self.number[b.index()];
        (nb != u32::MAX).then(|| self.number[a.index()] < nb)
    }
}

/// Verifies one op (not its nested ops).
pub fn verify_op(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    verify_op_in(ctx, op, None)
}

fn verify_op_in(ctx: &Context, op: OpId, visit: Option<&VisitOrder>) -> Result<(), Diagnostic> {
    verify_dominance(ctx, op, visit)?;
    let Some(def) = ctx.op_def(op) else {
        // As in MLIR, --allow-unregistered-dialect opens only dialects nobody registered: an
        // unknown name in a registered dialect (`func.nope`) is still an error. `builtin` stays
        // open for the builtin ops commlir does not model (unrealized_conversion_cast, ...).
        let name = ctx.op_name(op);
        let dialect = name.split_once('.').map(|(d, _)| d).unwrap_or(name);
        if ctx.allow_unregistered && (dialect == "builtin" || !ctx.is_dialect_registered(dialect)) {
            return Ok(());
        }
        return Err(unregistered_error(ctx, op));
    };
    verify_slots(ctx, op, def, ctx.operands(op), def.operands, "operand")?;
    verify_slots(ctx, op, def, ctx.results(op), def.results, "result")?;
    verify_attrs(ctx, op, def)?;
    verify_traits(ctx, op, def)?;
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

fn verify_traits(ctx: &Context, op: OpId, def: &OpDef) -> Result<(), Diagnostic> {
    if let Some(n) = def.regions {
        let got = ctx.op_regions(op).len();
        if got != n {
            return Err(ctx.op_error(op, format!("requires {n} regions, but found {got}")));
        }
    }
    for t in def.traits {
        match *t {
            Trait::Terminator => {
                if let Some(b) = ctx.op_parent(op) {
                    if ctx.block_last(b) != Some(op) {
                        return Err(
                            ctx.op_error(op, "must be the last operation in the parent block")
                        );
                    }
                }
            }
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
    if !def.has_trait(Trait::NoTerminator) {
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
