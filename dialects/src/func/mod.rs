//! The `func` dialect: functions, calls and returns, with MLIR's bespoke syntax.

use crate::coll::REPLICATED_ARG_ATTR;
use commlir_ir::{
    register_dialect, register_op, ArgDef, AttrConstraint, AttrDef, AttrKind, Context, Diagnostic,
    OpDef, OpId, Syntax, Trait, TypeConstraint, TypeKind,
};

register_dialect!(pub FUNC_DIALECT = commlir_ir::opdef::DialectDef {
    name: "func",
    summary: "Functions, calls and returns.",
    description: "The structural ops of every program, with the same syntax as MLIR's func dialect.",
});

register_op!(
    /// `func.func [private] @f(%a: T) -> T { ... }`.
    pub FUNC = OpDef {
        name: "func.func",
        summary: "A function with a single-region body",
        description: "Defines a symbol. The entry block's arguments are the function's \
            arguments; `func.return` ends each block. A function without a body is a declaration.",
        attributes: &[
            AttrDef::required("sym_name", AttrConstraint::SymbolName),
            AttrDef::required("function_type", AttrConstraint::Type),
            AttrDef::optional("sym_visibility", AttrConstraint::String),
            AttrDef::optional("arg_attrs", AttrConstraint::Array),
            AttrDef::optional("res_attrs", AttrConstraint::Array),
        ],
        regions: Some(1),
        traits: &[Trait::IsolatedFromAbove, Trait::Symbol],
        syntax: Syntax::Func,
        verify: Some(verify_func),
        example: "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}",
        ..OpDef::EMPTY
    }
);

register_op!(
    /// `return %v : T`.
    pub RETURN = OpDef {
        name: "func.return",
        summary: "Returns from a function",
        description: "Its operands must match the enclosing function's result types.",
        operands: &[ArgDef::variadic("operands", TypeConstraint::Any)],
        traits: &[Trait::Pure, Trait::Terminator, Trait::ReturnLike, Trait::HasParent("func.func")],
        syntax: Syntax::Return,
        verify: Some(verify_return),
        example: "return %a : tensor<4xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    /// `%r = func.call @f(%a) : (T) -> T`.
    pub CALL = OpDef {
        name: "func.call",
        summary: "Calls a function",
        description: "The callee must be a `func.func` whose type matches the operands and results.",
        operands: &[ArgDef::variadic("operands", TypeConstraint::Any)],
        results: &[ArgDef::variadic("results", TypeConstraint::Any)],
        attributes: &[AttrDef::required("callee", AttrConstraint::SymbolRef)],
        syntax: Syntax::Call,
        verify: Some(verify_call),
        example: "%r = func.call @f(%a) : (tensor<4xf32>) -> tensor<4xf32>",
        ..OpDef::EMPTY
    }
);

/// The function a program runs when none is named, among `funcs` (the module's `func.func`
/// ops, in order): the only public function with a body, else `@main`, else the first
/// function with a body. Private helpers (`func.func private`) are what public functions
/// call, so they are never the default while a public function exists.
pub fn default_entry(ctx: &Context, funcs: &[OpId]) -> Option<OpId> {
    let has_body = |f: &&OpId| {
        ctx.op_regions(**f)
            .first()
            .is_some_and(|r| !ctx.region_blocks(*r).is_empty())
    };
    let defined: Vec<OpId> = funcs.iter().filter(has_body).copied().collect();
    let is_public = |f: &&OpId| {
        ctx.inherent_attr(**f, "sym_visibility")
            .and_then(|a| ctx.attr_as_str(a))
            .is_none_or(|v| v == "public")
    };
    let public: Vec<OpId> = defined.iter().filter(is_public).copied().collect();
    if let [only] = public.as_slice() {
        return Some(*only);
    }
    defined
        .iter()
        .copied()
        .find(|f| ctx.symbol_name(*f) == Some("main"))
        .or_else(|| defined.first().copied())
}

/// The `(inputs, results)` of a `func.func`.
pub fn func_signature(
    ctx: &Context,
    f: OpId,
) -> Option<(Vec<commlir_ir::Type>, Vec<commlir_ir::Type>)> {
    let t = ctx.inherent_attr(f, "function_type")?;
    match ctx.attr_kind(t) {
        commlir_ir::AttrKind::Type(t) => match ctx.type_kind(*t) {
            TypeKind::Function { inputs, results } => Some((inputs.clone(), results.clone())),
            _ => None,
        },
        _ => None,
    }
}

fn verify_func(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let Some((inputs, _)) = func_signature(ctx, op) else {
        return Err(ctx.op_error(op, "requires a function type for 'function_type'"));
    };
    let r = ctx.op_regions(op)[0];
    if let Some(&entry) = ctx.region_blocks(r).first() {
        let args: Vec<_> = ctx
            .block_args(entry)
            .iter()
            .map(|v| ctx.value_type(*v))
            .collect();
        if args != inputs {
            return Err(ctx.op_error(op, "entry block arguments do not match the function type"));
        }
    }
    verify_replicated_args(ctx, op, inputs.len())
}

/// Every `coll.replicated = @g` argument attribute names a `coll.group` in scope: the passes
/// slice such arguments by that group and `commlir-run` generates their inputs by it. The
/// diagnostic points at the argument.
fn verify_replicated_args(ctx: &Context, op: OpId, n_args: usize) -> Result<(), Diagnostic> {
    let Some(list) = ctx.inherent_attr(op, "arg_attrs") else {
        return Ok(());
    };
    let AttrKind::Array(items) = ctx.attr_kind(list) else {
        return Ok(());
    };
    let entry = ctx
        .op_regions(op)
        .first()
        .and_then(|r| ctx.region_blocks(*r).first().copied());
    for (i, item) in items.iter().enumerate().take(n_args) {
        let AttrKind::Dict(entries) = ctx.attr_kind(*item) else {
            continue;
        };
        let Some((_, v)) = entries
            .iter()
            .find(|(k, _)| ctx.ident_str(*k) == REPLICATED_ARG_ATTR)
        else {
            continue;
        };
        let at = |message: String| {
            let loc = entry
                .and_then(|b| ctx.block_args(b).get(i).copied())
                .and_then(|a| ctx.value_loc(a))
                .unwrap_or_else(|| ctx.op_loc(op));
            Diagnostic::error(loc, format!("'{}' op {message}", ctx.op_name(op)))
        };
        let Some(name) = ctx.attr_as_symbol(*v) else {
            return Err(at(format!(
                "argument #{i}: '{REPLICATED_ARG_ATTR}' must be a symbol reference to a 'coll.group'"
            )));
        };
        if ctx
            .lookup_symbol(op, name)
            .is_none_or(|g| ctx.op_name(g) != "coll.group")
        {
            return Err(at(format!(
                "argument #{i} is replicated on @{name}, which does not reference a 'coll.group'"
            )));
        }
    }
    Ok(())
}

fn verify_return(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let Some(f) = ctx.parent_op(op) else {
        return Ok(());
    };
    let Some((_, results)) = func_signature(ctx, f) else {
        return Ok(());
    };
    let got: Vec<_> = ctx
        .operands(op)
        .iter()
        .map(|v| ctx.value_type(*v))
        .collect();
    if got.len() != results.len() {
        return Err(ctx.op_error(
            op,
            format!(
                "has {} operands, but enclosing function (@{}) returns {}",
                got.len(),
                ctx.symbol_name(f).unwrap_or("?"),
                results.len()
            ),
        ));
    }
    for (i, (g, want)) in got.iter().zip(&results).enumerate() {
        if g != want {
            return Err(ctx.op_error(
                op,
                format!(
                    "type of return operand {i} ({}) doesn't match function result type ({}) in function @{}",
                    commlir_ir::printer::type_to_string(ctx, *g),
                    commlir_ir::printer::type_to_string(ctx, *want),
                    ctx.symbol_name(f).unwrap_or("?")
                ),
            ));
        }
    }
    Ok(())
}

fn verify_call(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let callee = ctx
        .inherent_attr(op, "callee")
        .and_then(|a| ctx.attr_as_symbol(a))
        .unwrap_or("");
    let Some(f) = ctx.lookup_symbol(op, callee) else {
        return Err(ctx.op_error(
            op,
            format!("'{callee}' does not reference a valid function"),
        ));
    };
    let Some((inputs, results)) = func_signature(ctx, f) else {
        return Err(ctx.op_error(
            op,
            format!("'{callee}' does not reference a valid function"),
        ));
    };
    let ins: Vec<_> = ctx
        .operands(op)
        .iter()
        .map(|v| ctx.value_type(*v))
        .collect();
    let outs: Vec<_> = ctx.results(op).iter().map(|v| ctx.value_type(*v)).collect();
    if ins != inputs {
        return Err(ctx.op_error(op, "operand types do not match the callee's signature"));
    }
    if outs != results {
        return Err(ctx.op_error(op, "result types do not match the callee's signature"));
    }
    Ok(())
}
