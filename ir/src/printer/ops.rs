//! Printing of operations, regions and blocks: the generic form, the uniform custom form and
//! the structural forms (`module`, `func.func`, `return`, `func.call`).
//!
//! The traversal is iterative: a stack of [`Frame`]s says what remains to be printed (the
//! rest of a block, the rest of a region, the tail of an op after its regions), so IR nested
//! to any depth prints without growing the call stack. Indentation is two spaces per level,
//! as mlir-opt does, but capped at [`MAX_INDENT_LEVELS`]: whitespace is insignificant, and
//! without a cap IR nested 100k deep would print quadratically many spaces.

use super::literals::{push_key, push_quoted, push_u64};
use super::names::Names;
use super::terms::TermPrinter;
use super::PrintOptions;
use crate::attrs::AttrKind;
use crate::context::Context;
use crate::entity::{Attr, BlockId, Ident, OpId, RegionId, Type, Value};
use crate::opdef::Syntax;
use crate::types::TypeKind;
use std::borrow::Cow;

/// Nesting levels beyond which indentation stops growing.
pub const MAX_INDENT_LEVELS: usize = 64;

/// Inherent attributes of the structural ops: printed as properties (`<{...}>`) in the
/// generic form, as mlir-opt does, wherever our IR keeps them.
const MODULE_INHERENT: &[&str] = &["sym_name", "sym_visibility"];
const FUNC_INHERENT: &[&str] = &[
    "arg_attrs",
    "function_type",
    "res_attrs",
    "sym_name",
    "sym_visibility",
];
const CALL_INHERENT: &[&str] = &["arg_attrs", "callee", "no_inline", "res_attrs"];

/// How one op is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Generic,
    Uniform,
    Module,
    Func,
    Return,
    Call,
}

/// When the entry block of a region gets its `^bb0(...):` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EntryHeader {
    /// When it has arguments or no ops (generic and uniform forms), or predecessors.
    Needed,
    /// Never: the arguments are printed elsewhere (the function signature) or absent.
    Never,
}

/// What remains to be printed.
#[derive(Clone, Copy, Debug)]
enum Frame {
    /// One op (the root).
    Single(OpId),
    /// The ops of a block from this one on.
    Ops(Option<OpId>),
    /// `{` (or `, {` when not the first region of its op), then the region's blocks.
    RegionOpen {
        region: RegionId,
        first: bool,
        entry: EntryHeader,
    },
    /// The blocks of a region from index `next`.
    Blocks {
        region: RegionId,
        next: usize,
        entry: EntryHeader,
    },
    /// The closing `}` of a region.
    RegionClose,
    /// What follows an op's regions.
    Tail(OpId, Form),
}

/// Prints one op and everything nested in it.
pub(crate) struct OpPrinter<'c, 'o> {
    ctx: &'c Context,
    opts: &'o PrintOptions,
    out: &'o mut String,
    names: Names,
    terms: TermPrinter<'c>,
    frames: Vec<Frame>,
    level: usize,
    /// The interned `sym_name`, looked up once (absent: no op can have one).
    sym_name_key: Option<Ident>,
}

impl<'c, 'o> OpPrinter<'c, 'o> {
    pub(crate) fn new(
        ctx: &'c Context,
        opts: &'o PrintOptions,
        root: OpId,
        out: &'o mut String,
    ) -> Self {
        let names = Names::number(ctx, root, opts.generic);
        // Typical ops print to 50-100 bytes; growing a 20 MB string by doubling would copy
        // it several times over.
        out.reserve(64 * (names.num_ops + 1));
        OpPrinter {
            ctx,
            opts,
            out,
            names,
            terms: TermPrinter::new(ctx),
            frames: Vec::new(),
            level: 0,
            sym_name_key: ctx.find_ident("sym_name"),
        }
    }

    /// Prints `root` and its nested IR, ending with a newline.
    pub(crate) fn print(mut self, root: OpId) {
        self.frames.push(Frame::Single(root));
        while let Some(frame) = self.frames.pop() {
            match frame {
                Frame::Single(op) => self.op(op),
                Frame::Ops(None) => {}
                Frame::Ops(Some(op)) => {
                    self.frames.push(Frame::Ops(self.ctx.next_op(op)));
                    self.op(op);
                }
                Frame::RegionOpen {
                    region,
                    first,
                    entry,
                } => {
                    self.out.push_str(if first { "{\n" } else { ", {\n" });
                    self.level += 1;
                    self.frames.push(Frame::RegionClose);
                    self.frames.push(Frame::Blocks {
                        region,
                        next: 0,
                        entry,
                    });
                }
                Frame::Blocks {
                    region,
                    next,
                    entry,
                } => {
                    let Some(&block) = self.ctx.region_blocks(region).get(next) else {
                        continue;
                    };
                    self.frames.push(Frame::Blocks {
                        region,
                        next: next + 1,
                        entry,
                    });
                    self.block_header(block, next == 0, entry);
                    self.frames.push(Frame::Ops(self.ctx.block_first(block)));
                }
                Frame::RegionClose => {
                    self.level -= 1;
                    push_indent(self.out, self.level);
                    self.out.push('}');
                }
                Frame::Tail(op, form) => self.tail(op, form),
            }
        }
    }

    /// Prints an op's text up to its regions, and schedules the regions and the tail.
    fn op(&mut self, op: OpId) {
        let form = self.form(op);
        push_indent(self.out, self.level);
        match form {
            Form::Generic => self.generic_head(op),
            Form::Uniform => self.uniform_head(op),
            Form::Module => self.module_head(op),
            Form::Func => self.func_head(op),
            Form::Return => self.return_op(op),
            Form::Call => self.call_op(op),
        }
        let regions = self.ctx.op_regions(op);
        // A function without a body is a declaration: no braces at all.
        let declaration = form == Form::Func && self.ctx.region_blocks(regions[0]).is_empty();
        if regions.is_empty() || declaration {
            self.tail(op, form);
            return;
        }
        let entry = match form {
            Form::Module | Form::Func => EntryHeader::Never,
            _ => EntryHeader::Needed,
        };
        self.frames.push(Frame::Tail(op, form));
        for (i, &region) in regions.iter().enumerate().rev() {
            self.frames.push(Frame::RegionOpen {
                region,
                first: i == 0,
                entry,
            });
        }
        match form {
            Form::Module | Form::Func => self.out.push(' '),
            _ => self.out.push_str(" ("),
        }
    }

    /// Prints what follows an op's regions (or the rest of an op without regions).
    fn tail(&mut self, op: OpId, form: Form) {
        let has_regions = !self.ctx.op_regions(op).is_empty();
        match form {
            Form::Generic => {
                if has_regions {
                    self.out.push(')');
                }
                let (_, attrs) = self.split_inherent(op);
                self.dict(attrs.iter().copied(), " {");
                self.out.push_str(" : ");
                self.value_function_type(op);
            }
            Form::Uniform => {
                if has_regions {
                    self.out.push(')');
                }
                self.signature(op);
            }
            Form::Module | Form::Func | Form::Return | Form::Call => {}
        }
        if self.opts.debug_info {
            self.terms.trailing_loc(self.out, self.ctx.op_loc(op));
        }
        self.out.push('\n');
    }

    // ----- choosing a form ----------------------------------------------------------------

    fn form(&self, op: OpId) -> Form {
        let ctx = self.ctx;
        if self.opts.generic {
            return Form::Generic;
        }
        // Unregistered ops have no custom syntax, as in MLIR.
        let Some(def) = ctx.op_def(op) else {
            return Form::Generic;
        };
        let plain = ctx.successors(op).is_empty();
        // A structural op that does not have the shape its bespoke syntax can express is
        // printed generically, so that nothing is lost.
        let ok = match def.syntax {
            // The uniform grammar has no successor list.
            Syntax::Uniform => plain,
            Syntax::Module => plain && self.module_ok(op),
            Syntax::Func => plain && self.func_ok(op),
            Syntax::Return => plain && ctx.results(op).is_empty() && ctx.op_regions(op).is_empty(),
            Syntax::Call => {
                plain
                    && ctx.op_regions(op).is_empty()
                    && ctx
                        .inherent_attr(op, "callee")
                        .is_some_and(|a| matches!(ctx.attr_kind(a), AttrKind::SymbolRef { .. }))
            }
            Syntax::Upstream => plain && self.upstream_uniform_ok(op),
        };
        if !ok {
            return Form::Generic;
        }
        match def.syntax {
            Syntax::Uniform | Syntax::Upstream => Form::Uniform,
            Syntax::Module => Form::Module,
            Syntax::Func => Form::Func,
            Syntax::Return => Form::Return,
            Syntax::Call => Form::Call,
        }
    }

    /// Whether an upstream op's uniform custom form is also MLIR's custom form for it: no
    /// attributes or properties (MLIR's formats spell those as keywords, `fastmath<fast>`,
    /// `on @grid`, which the uniform form does not), no regions, and one type for every operand
    /// and result (`arith.addf %a, %b : T`, `math.exp %a : T`).
    fn upstream_uniform_ok(&self, op: OpId) -> bool {
        let ctx = self.ctx;
        let mut types = ctx
            .operands(op)
            .iter()
            .chain(ctx.results(op))
            .map(|v| ctx.value_type(*v));
        ctx.attrs(op).is_empty()
            && ctx.properties(op).is_none()
            && ctx.op_regions(op).is_empty()
            && !ctx.results(op).is_empty()
            && types.next().is_some_and(|first| {
                types.all(|t| t == first) && !self.terms.is_function_type(first)
            })
    }

    fn module_ok(&self, op: OpId) -> bool {
        let ctx = self.ctx;
        let [region] = ctx.op_regions(op) else {
            return false;
        };
        let [block] = ctx.region_blocks(*region) else {
            return false;
        };
        ctx.operands(op).is_empty()
            && ctx.results(op).is_empty()
            && ctx.block_args(*block).is_empty()
            && self.sym_name_ok(op)
    }

    fn sym_name_ok(&self, op: OpId) -> bool {
        self.ctx
            .inherent_attr(op, "sym_name")
            .is_none_or(|a| matches!(self.ctx.attr_kind(a), AttrKind::String(_)))
    }

    fn func_ok(&self, op: OpId) -> bool {
        let ctx = self.ctx;
        let [region] = ctx.op_regions(op) else {
            return false;
        };
        let Some((inputs, results)) = self.func_type(op) else {
            return false;
        };
        let sym_ok = ctx.inherent_attr(op, "sym_name").is_some() && self.sym_name_ok(op);
        let vis_ok = ctx
            .inherent_attr(op, "sym_visibility")
            .is_none_or(|a| matches!(ctx.attr_as_str(a), Some("public" | "private" | "nested")));
        let attrs_ok = |name: &str, n: usize| {
            ctx.inherent_attr(op, name)
                .is_none_or(|a| match ctx.attr_kind(a) {
                    AttrKind::Array(items) => {
                        items.len() == n
                            && items
                                .iter()
                                .all(|d| matches!(ctx.attr_kind(*d), AttrKind::Dict(_)))
                    }
                    _ => false,
                })
        };
        // The custom form puts the entry arguments in the signature, so they must match it;
        // an empty entry block has no custom spelling.
        let body_ok = match ctx.region_blocks(*region).first() {
            None => true,
            Some(&entry) => {
                ctx.block_first(entry).is_some()
                    && ctx.block_args(entry).len() == inputs.len()
                    && ctx
                        .block_args(entry)
                        .iter()
                        .zip(inputs)
                        .all(|(v, t)| ctx.value_type(*v) == *t)
            }
        };
        ctx.operands(op).is_empty()
            && ctx.results(op).is_empty()
            && sym_ok
            && vis_ok
            && attrs_ok("arg_attrs", inputs.len())
            && attrs_ok("res_attrs", results.len())
            && body_ok
    }

    fn func_type(&self, op: OpId) -> Option<(&'c [Type], &'c [Type])> {
        let ctx = self.ctx;
        let AttrKind::Type(t) = ctx.attr_kind(ctx.inherent_attr(op, "function_type")?) else {
            return None;
        };
        match ctx.type_kind(*t) {
            TypeKind::Function { inputs, results } => Some((inputs, results)),
            _ => None,
        }
    }

    // ----- the generic form -----------------------------------------------------------------

    fn generic_head(&mut self, op: OpId) {
        let ctx = self.ctx;
        self.results_def(op);
        push_quoted(self.out, ctx.op_name(op).as_bytes());
        self.out.push('(');
        self.values(ctx.operands(op));
        self.out.push(')');
        let succs = ctx.successors(op);
        if !succs.is_empty() {
            self.out.push('[');
            for (i, &b) in succs.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                self.names.push_block(self.out, b);
            }
            self.out.push(']');
        }
        let (props, _) = self.split_inherent(op);
        match props {
            Props::Attr(p) => {
                self.out.push_str(" <");
                self.terms.attr(self.out, p);
                self.out.push('>');
            }
            Props::Entries(entries) => {
                if !entries.is_empty() {
                    self.out.push_str(" <{");
                    self.entries(entries.iter().copied());
                    self.out.push_str("}>");
                }
            }
            Props::None => {}
        }
    }

    /// The properties and discardable attributes of `op` as the generic form prints them:
    /// a registered structural op's inherent attributes move to the properties.
    fn split_inherent(&self, op: OpId) -> (Props, Cow<'c, [(Ident, Attr)]>) {
        let ctx = self.ctx;
        let attrs = ctx.attrs(op);
        let props = ctx.properties(op);
        let inherent: &[&str] = match ctx.op_def(op).map(|d| d.syntax) {
            Some(Syntax::Module) => MODULE_INHERENT,
            Some(Syntax::Func) => FUNC_INHERENT,
            Some(Syntax::Call) => CALL_INHERENT,
            _ => &[],
        };
        let is_inherent = |k: Ident| inherent.contains(&ctx.ident_str(k));
        let as_is = (props.map_or(Props::None, Props::Attr), Cow::Borrowed(attrs));
        if !attrs.iter().any(|(k, _)| is_inherent(*k)) {
            return as_is;
        }
        let mut moved: Vec<(Ident, Attr)> = match props.map(|p| ctx.attr_kind(p)) {
            None => Vec::new(),
            Some(AttrKind::Dict(entries)) => entries.clone(),
            // Properties that are not a dictionary cannot take more entries.
            Some(_) => return as_is,
        };
        let mut rest = Vec::new();
        for &(k, v) in attrs {
            if is_inherent(k) {
                moved.push((k, v));
            } else {
                rest.push((k, v));
            }
        }
        ctx.sort_named(&mut moved);
        (Props::Entries(moved), Cow::Owned(rest))
    }

    // ----- the uniform custom form --------------------------------------------------------

    fn uniform_head(&mut self, op: OpId) {
        let ctx = self.ctx;
        self.results_def(op);
        self.out.push_str(ctx.op_name(op));
        // `@symbol` stands for the `sym_name` string, wherever the op keeps it (properties
        // first, as `inherent_attr` looks them up).
        let sym_key = self.sym_name_key;
        let is_sym = |k: Ident| Some(k) == sym_key;
        let string_entry = |entries: &[(Ident, Attr)]| {
            entries
                .iter()
                .find(|(k, v)| is_sym(*k) && matches!(ctx.attr_kind(*v), AttrKind::String(_)))
                .map(|(_, v)| *v)
        };
        let prop_entries: &[(Ident, Attr)] = match ctx.properties(op).map(|p| ctx.attr_kind(p)) {
            Some(AttrKind::Dict(entries)) => entries,
            _ => &[],
        };
        let sym_from_props = string_entry(prop_entries);
        let sym_from_attrs = if sym_from_props.is_none() {
            string_entry(ctx.attrs(op))
        } else {
            None
        };
        let (sym_in_props, sym_in_attrs) = (sym_from_props.is_some(), sym_from_attrs.is_some());
        let sym = sym_from_props.or(sym_from_attrs);
        if let Some(AttrKind::String(name)) = sym.map(|a| ctx.attr_kind(a)) {
            self.out.push_str(" @");
            match std::str::from_utf8(name) {
                Ok(s) => push_key(self.out, s),
                Err(_) => push_quoted(self.out, name),
            }
        }
        let operands = ctx.operands(op);
        if !operands.is_empty() {
            self.out.push(' ');
            self.values(operands);
        }
        if let Some(p) = ctx.properties(op) {
            match ctx.attr_kind(p) {
                AttrKind::Dict(entries) => {
                    let kept = entries
                        .iter()
                        .copied()
                        .filter(|(k, _)| !(sym_in_props && is_sym(*k)));
                    self.dict_delimited(kept, " <{", "}>");
                }
                _ => {
                    self.out.push_str(" <");
                    self.terms.attr(self.out, p);
                    self.out.push('>');
                }
            }
        }
        let kept = ctx
            .attrs(op)
            .iter()
            .copied()
            .filter(|(k, _)| !(sym_in_attrs && is_sym(*k)));
        self.dict(kept, " {");
    }

    /// ` : T` when all operand and result types are one type, else ` : (T, ...) -> (T, ...)`;
    /// nothing for an op without operands and results.
    fn signature(&mut self, op: OpId) {
        let ctx = self.ctx;
        let mut types = ctx
            .operands(op)
            .iter()
            .chain(ctx.results(op))
            .map(|v| ctx.value_type(*v));
        let Some(first) = types.next() else { return };
        self.out.push_str(" : ");
        // A lone function type would read as a signature, so it takes the long form.
        if types.all(|t| t == first) && !self.terms.is_function_type(first) {
            self.terms.ty(self.out, first);
        } else {
            self.value_function_type(op);
        }
    }

    // ----- structural ops -----------------------------------------------------------------

    fn module_head(&mut self, op: OpId) {
        let ctx = self.ctx;
        let name = ctx.op_name(op);
        self.out.push_str(if name == "builtin.module" {
            "module"
        } else {
            name
        });
        if let Some(AttrKind::String(s)) =
            ctx.inherent_attr(op, "sym_name").map(|a| ctx.attr_kind(a))
        {
            self.out.push_str(" @");
            push_symbol_name(self.out, s);
        }
        let rest = self.merged_attrs(op, &["sym_name"]);
        self.dict(rest.into_iter(), " attributes {");
    }

    fn func_head(&mut self, op: OpId) {
        let ctx = self.ctx;
        let Some((inputs, results)) = self.func_type(op) else {
            return;
        };
        self.out.push_str(ctx.op_name(op));
        self.out.push(' ');
        if let Some(vis) = ctx
            .inherent_attr(op, "sym_visibility")
            .and_then(|a| ctx.attr_as_str(a))
        {
            self.out.push_str(vis);
            self.out.push(' ');
        }
        if let Some(AttrKind::String(s)) =
            ctx.inherent_attr(op, "sym_name").map(|a| ctx.attr_kind(a))
        {
            self.out.push('@');
            push_symbol_name(self.out, s);
        }
        let arg_attrs = self.attr_list(op, "arg_attrs");
        let res_attrs = self.attr_list(op, "res_attrs");
        let entry = ctx
            .op_regions(op)
            .first()
            .and_then(|r| ctx.region_blocks(*r).first().copied());
        self.out.push('(');
        for (i, &t) in inputs.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            match entry {
                Some(b) => {
                    let arg = ctx.block_args(b)[i];
                    self.names.push_value(ctx, self.out, arg);
                    self.out.push_str(": ");
                    self.terms.ty(self.out, t);
                    self.arg_attr_dict(arg_attrs, i);
                    self.arg_loc(arg);
                }
                None => {
                    self.terms.ty(self.out, t);
                    self.arg_attr_dict(arg_attrs, i);
                }
            }
        }
        self.out.push(')');
        if !results.is_empty() {
            self.out.push_str(" -> ");
            let has_attrs = (0..results.len()).any(|i| self.nonempty_dict_at(res_attrs, i));
            let paren = self.terms.results_need_parens(results) || has_attrs;
            if paren {
                self.out.push('(');
            }
            for (i, &t) in results.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                self.terms.ty(self.out, t);
                self.arg_attr_dict(res_attrs, i);
            }
            if paren {
                self.out.push(')');
            }
        }
        let rest = self.merged_attrs(op, FUNC_INHERENT);
        self.dict(rest.into_iter(), " attributes {");
    }

    /// The dictionaries of `arg_attrs` / `res_attrs`, if present.
    fn attr_list(&self, op: OpId, name: &str) -> &'c [Attr] {
        let ctx = self.ctx;
        match ctx.inherent_attr(op, name).map(|a| ctx.attr_kind(a)) {
            Some(AttrKind::Array(items)) => items,
            _ => &[],
        }
    }

    fn nonempty_dict_at(&self, list: &[Attr], i: usize) -> bool {
        list.get(i)
            .is_some_and(|d| matches!(self.ctx.attr_kind(*d), AttrKind::Dict(e) if !e.is_empty()))
    }

    /// ` {attrs}` of argument or result `i`, when non-empty.
    fn arg_attr_dict(&mut self, list: &[Attr], i: usize) {
        if self.nonempty_dict_at(list, i) {
            self.out.push(' ');
            self.terms.attr(self.out, list[i]);
        }
    }

    fn return_op(&mut self, op: OpId) {
        let ctx = self.ctx;
        let name = ctx.op_name(op);
        // Inside a function printed in its custom form the func dialect is the default one,
        // so MLIR drops the prefix (a generic `"func.func"` sets no default dialect).
        let in_func = ctx
            .parent_op(op)
            .is_some_and(|p| self.form(p) == Form::Func);
        let short = name.strip_prefix("func.").filter(|_| in_func);
        self.out.push_str(short.unwrap_or(name));
        let rest = self.merged_attrs(op, &[]);
        self.dict(rest.into_iter(), " {");
        let operands = ctx.operands(op);
        if !operands.is_empty() {
            self.out.push(' ');
            self.values(operands);
            self.out.push_str(" : ");
            for (i, v) in operands.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                self.terms.ty(self.out, ctx.value_type(*v));
            }
        }
    }

    fn call_op(&mut self, op: OpId) {
        let ctx = self.ctx;
        self.results_def(op);
        self.out.push_str(ctx.op_name(op));
        self.out.push(' ');
        if let Some(callee) = ctx.inherent_attr(op, "callee") {
            self.terms.attr(self.out, callee);
        }
        self.out.push('(');
        self.values(ctx.operands(op));
        self.out.push(')');
        let rest = self.merged_attrs(op, &["callee"]);
        self.dict(rest.into_iter(), " {");
        self.out.push_str(" : ");
        self.value_function_type(op);
    }

    /// Properties and discardable attributes together, sorted, minus `elided`: the
    /// attribute dictionary of a structural op's custom form.
    fn merged_attrs(&self, op: OpId, elided: &[&str]) -> Vec<(Ident, Attr)> {
        let ctx = self.ctx;
        let mut all: Vec<(Ident, Attr)> = Vec::new();
        if let Some(AttrKind::Dict(entries)) = ctx.properties(op).map(|p| ctx.attr_kind(p)) {
            all.extend_from_slice(entries);
        }
        all.extend_from_slice(ctx.attrs(op));
        all.retain(|(k, _)| !elided.contains(&ctx.ident_str(*k)));
        ctx.sort_named(&mut all);
        all
    }

    // ----- blocks -------------------------------------------------------------------------

    fn block_header(&mut self, block: BlockId, is_entry: bool, entry: EntryHeader) {
        let ctx = self.ctx;
        // Copied out so the names table is not borrowed while printing (rarely non-empty).
        let preds = self.names.preds(block).to_vec();
        if is_entry {
            let needed = !ctx.block_args(block).is_empty()
                || ctx.block_first(block).is_none()
                || !preds.is_empty();
            if entry == EntryHeader::Never || !needed {
                return;
            }
        }
        push_indent(self.out, self.level.saturating_sub(1));
        self.names.push_block(self.out, block);
        let args = ctx.block_args(block);
        if !args.is_empty() {
            self.out.push('(');
            for (i, &arg) in args.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                self.names.push_value(ctx, self.out, arg);
                self.out.push_str(": ");
                self.terms.ty(self.out, ctx.value_type(arg));
                self.arg_loc(arg);
            }
            self.out.push(')');
        }
        self.out.push(':');
        // mlir-opt's predecessor comments: readers ignore them, people read them.
        match preds.as_slice() {
            [] if is_entry => {}
            [] => self.out.push_str("  // no predecessors"),
            [p] => {
                self.out.push_str("  // pred: ");
                self.names.push_block(self.out, *p);
            }
            many => {
                let mut sorted: Vec<(u32, BlockId)> = many
                    .iter()
                    .map(|b| (self.names.block_number(*b).unwrap_or(u32::MAX), *b))
                    .collect();
                sorted.sort_by_key(|(n, _)| *n);
                self.out.push_str("  // ");
                push_u64(self.out, sorted.len() as u64);
                self.out.push_str(" preds: ");
                for (i, (_, b)) in sorted.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.names.push_block(self.out, *b);
                }
            }
        }
        self.out.push('\n');
    }

    // ----- shared pieces ------------------------------------------------------------------

    /// ` loc(...)` of a block argument under debug info; an argument without a location has
    /// the unknown one, as every MLIR value does.
    fn arg_loc(&mut self, arg: Value) {
        if self.opts.debug_info {
            let l = self
                .ctx
                .value_loc(arg)
                .unwrap_or_else(|| self.ctx.unknown_loc());
            self.terms.trailing_loc(self.out, l);
        }
    }

    /// `%0 = ` / `%0:2 = ` for an op with results.
    fn results_def(&mut self, op: OpId) {
        if !self.ctx.results(op).is_empty() {
            self.names.push_results_def(self.ctx, self.out, op);
            self.out.push_str(" = ");
        }
    }

    fn values(&mut self, vals: &[Value]) {
        for (i, &v) in vals.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.names.push_value(self.ctx, self.out, v);
        }
    }

    /// `(operand types) -> result types` of an op.
    fn value_function_type(&mut self, op: OpId) {
        let ctx = self.ctx;
        let types = |vals: &'c [Value]| vals.iter().map(|v| ctx.value_type(*v));
        self.terms
            .function_type(self.out, types(ctx.operands(op)), types(ctx.results(op)));
    }

    /// `open` + entries + `}` when there is at least one entry.
    fn dict(&mut self, entries: impl Iterator<Item = (Ident, Attr)>, open: &str) {
        self.dict_delimited(entries, open, "}");
    }

    fn dict_delimited(
        &mut self,
        entries: impl Iterator<Item = (Ident, Attr)>,
        open: &str,
        close: &str,
    ) {
        let mut entries = entries.peekable();
        if entries.peek().is_none() {
            return;
        }
        self.out.push_str(open);
        self.entries(entries);
        self.out.push_str(close);
    }

    /// `k = v, flag, ...` (a unit value is spelled by its bare key).
    fn entries(&mut self, entries: impl Iterator<Item = (Ident, Attr)>) {
        for (i, (k, v)) in entries.enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            push_key(self.out, self.ctx.ident_str(k));
            if !matches!(self.ctx.attr_kind(v), AttrKind::Unit) {
                self.out.push_str(" = ");
                self.terms.attr(self.out, v);
            }
        }
    }
}

/// The properties an op prints in the generic form.
enum Props {
    None,
    /// The op's own properties attribute, as is.
    Attr(Attr),
    /// Properties with inherent attributes merged in, sorted.
    Entries(Vec<(Ident, Attr)>),
}

/// Appends a symbol name held as bytes (after the `@`).
fn push_symbol_name(out: &mut String, name: &[u8]) {
    match std::str::from_utf8(name) {
        Ok(s) => push_key(out, s),
        Err(_) => push_quoted(out, name),
    }
}

/// Two spaces per nesting level, capped at [`MAX_INDENT_LEVELS`].
fn push_indent(out: &mut String, level: usize) {
    const SPACES: &str = "                                                                ";
    let mut n = 2 * level.min(MAX_INDENT_LEVELS);
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
}
