//! Building IR from the parse tree: operations, regions, blocks and SSA name scopes.
//!
//! The walk follows MLIR's parser semantics:
//! - value names live in *isolated name scopes* (one per op that is IsolatedFromAbove, and
//!   one for the file); nested regions of other ops see the enclosing names, and the names a
//!   region defines disappear when it closes;
//! - a use before its definition gets a placeholder value (the result of a detached
//!   placeholder op) that the definition replaces; unresolved placeholders are reported as
//!   "use of undeclared SSA value name" when their isolated scope closes;
//! - block labels are scoped per region; successors may name blocks defined later.
//!
//! Recursion only follows region nesting, which the pre-scan bounds by the nesting limit.

use super::grammar::Rule;
use super::lex::LineCursor;
use crate::attrs::AttrKind;
use crate::context::{Context, OpState};
use crate::diag::Diagnostic;
use crate::entity::{Attr, BlockId, Ident, Loc, OpId, RegionId, Type, Value};
use crate::location::LocKind;
use crate::opdef::Trait;
use crate::types::TypeKind;
use pest::iterators::{Pair, Pairs};
use rustc_hash::{FxHashMap, FxHashSet};

pub(super) type PResult<T> = Result<T, Diagnostic>;

/// Upper bound on the results of one op, so that `%x:4000000000 = ...` cannot exhaust memory.
const MAX_RESULTS: u64 = 1 << 20;

/// A name binding in an isolated scope.
struct Entry {
    value: Value,
    /// Offset of the definition, or of the first use for a forward reference.
    pos: usize,
    /// The placeholder op while this is an unresolved forward reference.
    forward: Option<OpId>,
}

/// Value names visible in one isolated-from-above scope (MLIR's `IsolatedSSANameScope`).
#[derive(Default)]
struct NameScope<'a> {
    values: FxHashMap<(&'a str, u32), Entry>,
    /// Names defined, in order; `marks` splits them by nested region.
    defs: Vec<(&'a str, u32)>,
    marks: Vec<usize>,
    /// Keys that were forward references (checked when the scope closes).
    forward: Vec<(&'a str, u32)>,
}

struct BlockEntry {
    block: BlockId,
    defined: bool,
    first_use: usize,
}

/// Block labels of one region.
#[derive(Default)]
struct BlockScope<'a> {
    blocks: FxHashMap<&'a str, BlockEntry>,
}

/// One argument of a `func.func` signature.
pub(super) struct FuncArg<'a> {
    pub name: Option<&'a str>,
    pub pos: usize,
    pub ty: Type,
    pub attrs: Option<Attr>,
    pub loc: Option<Loc>,
}

/// A parsed `%name#index` use.
#[derive(Clone, Copy)]
pub(super) struct UseRef<'a> {
    pub name: &'a str,
    pub index: u32,
    pub pos: usize,
}

/// A `%name:count` result group written before an op.
pub(super) struct ResultGroup<'a> {
    pub name: &'a str,
    pub count: u32,
    pub pos: usize,
}

/// The parts of a generic-form op, gathered by either front end.
pub(super) struct GenericOp<'a, 'u> {
    pub name: Ident,
    pub uses: &'u [UseRef<'a>],
    pub successors: Vec<BlockId>,
    pub props: Option<Attr>,
    pub attrs: Vec<(Ident, Attr)>,
    /// The signature and where it was written.
    pub sig: Type,
    pub sig_pos: usize,
    pub num_regions: usize,
    /// The number of result names written before the op (0: none).
    pub num_defs: u64,
    /// Where the op starts.
    pub pos: usize,
    pub loc: Loc,
}

/// The parts of a custom-form op, gathered by either front end.
pub(super) struct CustomOp<'a, 'u> {
    pub name: &'a str,
    pub name_pos: usize,
    /// The `@symbol`, unescaped.
    pub sym: Option<String>,
    pub uses: &'u [UseRef<'a>],
    pub props: Option<Attr>,
    pub attrs: Vec<(Ident, Attr)>,
    /// The signature and where it was written.
    pub sig: Option<(Type, usize)>,
    pub num_regions: usize,
    /// The number of result names written before the op (0: none).
    pub num_defs: u64,
    /// Where the op starts.
    pub pos: usize,
    pub loc: Loc,
}

/// The IR builder: walks pest pairs and creates ops in the context.
pub(super) struct Builder<'a, 'c> {
    pub ctx: &'c mut Context,
    pub src: &'a str,
    pub file: Ident,
    pub max_nesting: usize,
    pub cursor: LineCursor<'a>,
    pub type_cache: FxHashMap<&'a str, Type>,
    pub type_text: FxHashMap<Type, &'a str>,
    pub attr_cache: FxHashMap<&'a str, Attr>,
    pub type_aliases: FxHashMap<&'a str, Type>,
    pub attr_aliases: FxHashMap<&'a str, Attr>,
    /// Location alias definitions not built yet: mlir-opt prints `#locN = loc(...)` at the end
    /// of the file, after their uses, so they are built on first use.
    pub lazy_locs: FxHashMap<&'a str, Pair<'a, Rule>>,
    pub lazily_built: FxHashSet<&'a str>,
    /// The file string of the last `"file":line:col` location and its identifier.
    pub last_loc_file: Option<(&'a str, Ident)>,
    names: Vec<NameScope<'a>>,
    block_scopes: Vec<BlockScope<'a>>,
    block_depth: usize,
    placeholder_name: Ident,
}

impl<'a, 'c> Builder<'a, 'c> {
    pub(super) fn new(
        ctx: &'c mut Context,
        src: &'a str,
        file_name: &str,
        max_nesting: usize,
    ) -> Self {
        let file = ctx.ident(file_name);
        let placeholder_name = ctx.ident("builtin.unresolved_forward_reference");
        Builder {
            ctx,
            src,
            file,
            max_nesting,
            cursor: LineCursor::new(src),
            type_cache: FxHashMap::default(),
            type_text: FxHashMap::default(),
            attr_cache: FxHashMap::default(),
            type_aliases: FxHashMap::default(),
            attr_aliases: FxHashMap::default(),
            lazy_locs: FxHashMap::default(),
            lazily_built: FxHashSet::default(),
            last_loc_file: None,
            names: Vec::new(),
            block_scopes: Vec::new(),
            block_depth: 0,
            placeholder_name,
        }
    }

    // ----- positions and diagnostics --------------------------------------------------------

    /// Absolute offset of a pair in the source (pairs of sub-parses are slices of it too).
    pub(super) fn off(&self, p: &Pair<'a, Rule>) -> usize {
        self.off_str(p.as_str())
    }
    pub(super) fn off_str(&self, s: &str) -> usize {
        (s.as_ptr() as usize)
            .saturating_sub(self.src.as_ptr() as usize)
            .min(self.src.len())
    }

    /// `file:line:col` of an offset.
    pub(super) fn loc_at(&mut self, pos: usize) -> Loc {
        let (line, col) = self.cursor.line_col(pos);
        self.ctx.loc(LocKind::FileLineCol {
            file: self.file,
            line,
            col,
        })
    }

    /// An error at an offset.
    pub(super) fn err(&mut self, pos: usize, msg: impl Into<String>) -> Diagnostic {
        let l = self.loc_at(pos);
        Diagnostic::error(l, msg)
    }

    /// The next child of a pair; the grammar guarantees it, so a miss is an internal error.
    pub(super) fn child(&self, it: &mut Pairs<'a, Rule>) -> PResult<Pair<'a, Rule>> {
        it.next().ok_or_else(|| {
            Diagnostic::error(
                self.ctx.unknown_loc(),
                "internal parser error: malformed parse tree",
            )
        })
    }

    /// The source text of a type, for messages.
    pub(super) fn type_str(&self, t: Type) -> String {
        match self.type_text.get(&t) {
            Some(s) => s.to_string(),
            None => crate::printer::type_to_string(self.ctx, t),
        }
    }

    // ----- the file -------------------------------------------------------------------------

    /// Builds the whole file; returns the top-level module (implicit when needed).
    pub(super) fn build_file(&mut self, file: Pair<'a, Rule>) -> PResult<OpId> {
        // Location aliases may be used before their definition: note where they are.
        for item in file.clone().into_inner() {
            if item.as_rule() == Rule::attr_alias_def {
                let mut it = item.into_inner();
                if let (Some(name), Some(value)) = (it.next(), it.next()) {
                    if value.as_rule() == Rule::location {
                        self.lazy_locs.entry(&name.as_str()[1..]).or_insert(value);
                    }
                }
            }
        }
        let top = self.begin_file();
        for item in file.into_inner() {
            match item.as_rule() {
                Rule::operation => self.build_operation(item, top)?,
                Rule::attr_alias_def => self.attr_alias_def(item)?,
                Rule::type_alias_def => self.type_alias_def(item)?,
                _ => {}
            }
        }
        self.finish_file(top)
    }

    /// Opens the file's scopes; returns the block that collects the top-level ops.
    pub(super) fn begin_file(&mut self) -> BlockId {
        let top = self.ctx.new_block(&[]);
        self.push_names(true);
        self.push_blocks();
        top
    }

    /// Closes the file's scopes (reporting unresolved names) and returns the top-level module:
    /// the file's only op when that is a `builtin.module`, else an implicit module around `top`.
    pub(super) fn finish_file(&mut self, top: BlockId) -> PResult<OpId> {
        self.pop_blocks()?;
        self.pop_names()?;

        let mut ops = self.ctx.block_ops(top);
        if let (Some(only), None) = (ops.next(), ops.next()) {
            if self.ctx.op_name(only) == "builtin.module" {
                self.ctx.unlink(only);
                return Ok(only);
            }
        }
        let loc = self.ctx.loc(LocKind::FileLineCol {
            file: self.file,
            line: 0,
            col: 0,
        });
        let mut st = OpState::new(self.ctx.ident("builtin.module"), loc);
        st.num_regions = 1;
        let module = self.ctx.create_op(st);
        let r = self.ctx.op_regions(module)[0];
        self.ctx.append_block(r, top);
        Ok(module)
    }

    fn attr_alias_def(&mut self, p: Pair<'a, Rule>) -> PResult<()> {
        let pos = self.off(&p);
        let mut it = p.into_inner();
        let name = &self.child(&mut it)?.as_str()[1..];
        let value = self.child(&mut it)?;
        if !self.start_attr_alias(name, pos)? {
            return Ok(());
        }
        let a = self.build_attr(value)?;
        self.attr_aliases.insert(name, a);
        Ok(())
    }

    /// Checks that `#name` (defined at `pos`) may be defined now. `false`: a use earlier in the
    /// file already built this (location) alias from this very definition, so it is skipped.
    pub(super) fn start_attr_alias(&mut self, name: &'a str, pos: usize) -> PResult<bool> {
        if self.lazily_built.remove(name) {
            return Ok(false);
        }
        if self.attr_aliases.contains_key(name) {
            return Err(self.err(pos, format!("redefinition of attribute alias id '{name}'")));
        }
        self.lazy_locs.remove(name);
        Ok(true)
    }

    fn type_alias_def(&mut self, p: Pair<'a, Rule>) -> PResult<()> {
        let pos = self.off(&p);
        let mut it = p.into_inner();
        let name = &self.child(&mut it)?.as_str()[1..];
        let value = self.child(&mut it)?;
        self.start_type_alias(name, pos)?;
        let t = self.type_token(value)?;
        self.type_aliases.insert(name, t);
        Ok(())
    }

    /// Checks that `!name` (defined at `pos`) is not defined yet.
    pub(super) fn start_type_alias(&mut self, name: &'a str, pos: usize) -> PResult<()> {
        if self.type_aliases.contains_key(name) {
            return Err(self.err(pos, format!("redefinition of type alias id '{name}'")));
        }
        Ok(())
    }

    // ----- scopes -----------------------------------------------------------------------------

    fn push_names(&mut self, isolated: bool) {
        match self.names.last_mut() {
            Some(top) if !isolated => top.marks.push(top.defs.len()),
            _ => self.names.push(NameScope {
                marks: vec![0],
                ..NameScope::default()
            }),
        }
    }

    fn pop_names(&mut self) -> PResult<()> {
        let Some(top) = self.names.last_mut() else {
            return Ok(());
        };
        let mark = top.marks.pop().unwrap_or(0);
        if mark == 0 {
            // Every definition goes: keep only the unresolved forward references (the only
            // entries not in `defs`), in one pass instead of a removal per name.
            top.defs.clear();
            top.values.retain(|_, e| e.forward.is_some());
        } else {
            for key in top.defs.drain(mark..) {
                top.values.remove(&key);
            }
        }
        if !top.marks.is_empty() {
            return Ok(());
        }
        let Some(scope) = self.names.pop() else {
            return Ok(());
        };
        let first = scope
            .forward
            .iter()
            .filter_map(|k| scope.values.get(k))
            .filter(|e| e.forward.is_some())
            .map(|e| e.pos)
            .min();
        match first {
            Some(pos) => Err(self.err(pos, "use of undeclared SSA value name")),
            None => Ok(()),
        }
    }

    fn push_blocks(&mut self) {
        if self.block_depth == self.block_scopes.len() {
            self.block_scopes.push(BlockScope::default());
        }
        self.block_scopes[self.block_depth].blocks.clear();
        self.block_depth += 1;
    }

    fn pop_blocks(&mut self) -> PResult<()> {
        self.block_depth -= 1;
        let scope = &self.block_scopes[self.block_depth];
        let undefined = scope
            .blocks
            .values()
            .filter(|e| !e.defined)
            .map(|e| e.first_use)
            .min();
        match undefined {
            Some(pos) => Err(self.err(pos, "reference to an undefined block")),
            None => Ok(()),
        }
    }

    /// The block a successor `^name` refers to, created on first reference.
    pub(super) fn block_ref(&mut self, name: &'a str, pos: usize) -> BlockId {
        let scope = self.block_depth - 1;
        if let Some(e) = self.block_scopes[scope].blocks.get(name) {
            return e.block;
        }
        let b = self.ctx.new_block(&[]);
        self.block_scopes[scope].blocks.insert(
            name,
            BlockEntry {
                block: b,
                defined: false,
                first_use: pos,
            },
        );
        b
    }

    /// Defines label `^name` in `region`, reusing a block created by an earlier reference.
    pub(super) fn define_block(
        &mut self,
        name: &'a str,
        pos: usize,
        region: RegionId,
    ) -> PResult<BlockId> {
        let scope = self.block_depth - 1;
        let b = match self.block_scopes[scope].blocks.get_mut(name) {
            Some(e) if e.defined => {
                return Err(self.err(pos, format!("redefinition of block '{name}'")))
            }
            Some(e) => {
                e.defined = true;
                e.block
            }
            None => {
                let b = self.ctx.new_block(&[]);
                self.block_scopes[scope].blocks.insert(
                    name,
                    BlockEntry {
                        block: b,
                        defined: true,
                        first_use: pos,
                    },
                );
                b
            }
        };
        self.ctx.append_block(region, b);
        Ok(b)
    }

    /// Resolves a use of `%name#index` expected to have type `ty`.
    fn resolve_use(&mut self, u: UseRef<'a>, ty: Type) -> PResult<Value> {
        let key = (u.name, u.index);
        let found = self
            .names
            .last()
            .and_then(|s| s.values.get(&key))
            .map(|e| e.value);
        if let Some(v) = found {
            let vt = self.ctx.value_type(v);
            if vt != ty {
                let msg = format!(
                    "use of value '{}' expects different type than prior uses: '{}' vs '{}'",
                    u.name,
                    self.type_str(ty),
                    self.type_str(vt)
                );
                return Err(self.err(u.pos, msg));
            }
            return Ok(v);
        }
        let mut st = OpState::new(self.placeholder_name, self.ctx.unknown_loc());
        st.result_types.push(ty);
        let ph = self.ctx.create_op(st);
        let v = self.ctx.result(ph, 0);
        if let Some(scope) = self.names.last_mut() {
            scope.values.insert(
                key,
                Entry {
                    value: v,
                    pos: u.pos,
                    forward: Some(ph),
                },
            );
            scope.forward.push(key);
        }
        Ok(v)
    }

    /// Resolves uses against the inputs of function type `fn_ty` (no copy of the type list).
    fn resolve_uses_of_fn(&mut self, uses: &[UseRef<'a>], fn_ty: Type) -> PResult<Vec<Value>> {
        let mut out = Vec::with_capacity(uses.len());
        for (i, u) in uses.iter().enumerate() {
            let t = match self.ctx.type_kind(fn_ty) {
                TypeKind::Function { inputs, .. } => inputs[i],
                _ => return Err(self.err(u.pos, "expected function type")),
            };
            out.push(self.resolve_use(*u, t)?);
        }
        Ok(out)
    }

    fn resolve_uses(&mut self, uses: &[UseRef<'a>], types: &[Type]) -> PResult<Vec<Value>> {
        uses.iter()
            .zip(types)
            .map(|(u, t)| self.resolve_use(*u, *t))
            .collect()
    }

    /// Binds `%name#index` to `value`.
    fn define_value(&mut self, name: &'a str, index: u32, value: Value, pos: usize) -> PResult<()> {
        let key = (name, index);
        let Some(scope) = self.names.last_mut() else {
            return Ok(());
        };
        // One hash lookup for the common case, a fresh name.
        let e = match scope.values.entry(key) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(Entry {
                    value,
                    pos,
                    forward: None,
                });
                scope.defs.push(key);
                return Ok(());
            }
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
        };
        match e {
            e if e.forward.is_some() => {
                let (old, old_pos) = (e.value, e.pos);
                let (old_ty, new_ty) = (self.ctx.value_type(old), self.ctx.value_type(value));
                if old_ty != new_ty {
                    let msg = format!(
                        "definition of SSA value '{name}#{index}' has type {}",
                        self.type_str(new_ty)
                    );
                    let note = format!("previously used here with type {}", self.type_str(old_ty));
                    let note_loc = self.loc_at(old_pos);
                    return Err(self.err(pos, msg).with_note(note_loc, note));
                }
                let Some(scope) = self.names.last_mut() else {
                    return Ok(());
                };
                let Some(e) = scope.values.get_mut(&key) else {
                    return Ok(());
                };
                let ph = e.forward.take();
                e.value = value;
                e.pos = pos;
                scope.defs.push(key);
                self.ctx.replace_all_uses(old, value);
                if let Some(ph) = ph {
                    self.ctx.erase_op(ph);
                }
                Ok(())
            }
            e => {
                let prev = e.pos;
                let note_loc = self.loc_at(prev);
                Err(self
                    .err(pos, format!("redefinition of SSA value '{name}'"))
                    .with_note(note_loc, "previously defined here"))
            }
        }
    }

    // ----- operations -------------------------------------------------------------------------

    fn use_ref(&mut self, p: &Pair<'a, Rule>) -> PResult<UseRef<'a>> {
        let pos = self.off(p);
        self.use_ref_text(p.as_str(), pos)
    }

    /// A `%name` / `%name#index` token at `pos`.
    pub(super) fn use_ref_text(&mut self, text: &'a str, pos: usize) -> PResult<UseRef<'a>> {
        match text.split_once('#') {
            None => Ok(UseRef {
                name: text,
                index: 0,
                pos,
            }),
            Some((name, n)) => match n.parse::<u32>() {
                Ok(index) => Ok(UseRef { name, index, pos }),
                Err(_) => Err(self.err(pos, "invalid SSA value result number")),
            },
        }
    }

    /// A `%name` / `%name:count` result group token at `pos`, added to the op's running
    /// result count `num_defs`.
    pub(super) fn result_group(
        &mut self,
        text: &'a str,
        pos: usize,
        num_defs: &mut u64,
    ) -> PResult<ResultGroup<'a>> {
        let (name, count) = match text.split_once(':') {
            None => (text, 1),
            Some((name, n)) => match n.parse::<u32>() {
                Ok(n) if n >= 1 => (name, n),
                _ => return Err(self.err(pos, "expected integer number of results")),
            },
        };
        *num_defs += count as u64;
        if *num_defs > MAX_RESULTS {
            return Err(self.err(pos, "too many results"));
        }
        Ok(ResultGroup { name, count, pos })
    }

    /// Builds one `operation` pair and appends it to `block`.
    pub(super) fn build_operation(&mut self, p: Pair<'a, Rule>, block: BlockId) -> PResult<()> {
        let pos = self.off(&p);
        let default_loc = self.loc_at(pos);
        let mut defs: Vec<ResultGroup<'a>> = Vec::new();
        let mut num_defs: u64 = 0;
        let mut body = None;
        let mut explicit_loc = None;
        for c in p.into_inner() {
            match c.as_rule() {
                Rule::value_def => {
                    let dpos = self.off(&c);
                    defs.push(self.result_group(c.as_str(), dpos, &mut num_defs)?);
                }
                r if super::typeattr::is_loc_rule(r) => explicit_loc = Some(c),
                _ => body = Some(c),
            }
        }
        let Some(body) = body else {
            return Err(self.err(pos, "expected operation name"));
        };
        let op = match body.as_rule() {
            Rule::generic_op => self.generic_op(body, num_defs, pos, default_loc)?,
            Rule::custom_op => self.custom_op(body, num_defs, pos, default_loc)?,
            Rule::module_op => self.module_op(body, default_loc)?,
            Rule::func_op => self.func_op(body, default_loc)?,
            Rule::return_op => self.return_op(body, default_loc)?,
            Rule::call_op => self.call_op(body, default_loc)?,
            _ => return Err(self.err(pos, "expected operation name")),
        };
        self.bind_results(op, &defs, num_defs, pos)?;
        if let Some(l) = explicit_loc {
            let loc = self.loc_inner(l, 0)?;
            self.ctx.set_op_loc(op, loc);
        }
        self.ctx.append_op(block, op);
        Ok(())
    }

    /// Binds the result groups written before op `op` (at `pos`) to its results.
    pub(super) fn bind_results(
        &mut self,
        op: OpId,
        defs: &[ResultGroup<'a>],
        num_defs: u64,
        pos: usize,
    ) -> PResult<()> {
        let nres = self.ctx.results(op).len() as u64;
        if !defs.is_empty() && nres != num_defs {
            return Err(self.err(
                pos,
                format!("operation defines {nres} results but was provided {num_defs} to bind"),
            ));
        }
        let mut next = 0usize;
        for g in defs {
            for i in 0..g.count {
                let v = self.ctx.result(op, next);
                next += 1;
                self.define_value(g.name, i, v, g.pos)?;
            }
        }
        Ok(())
    }

    /// Creates an op and fails like mlir-opt when its dialect is unknown.
    fn create_checked(&mut self, st: OpState) -> PResult<OpId> {
        let op = self.ctx.create_op(st);
        if self.ctx.op_def(op).is_none() && !self.ctx.allow_unregistered {
            return Err(crate::verify::unregistered_error(self.ctx, op));
        }
        Ok(op)
    }

    /// Whether the regions of `op` start an isolated name scope.
    pub(super) fn regions_isolated(&self, op: OpId) -> bool {
        self.ctx.op_has_trait(op, Trait::IsolatedFromAbove)
    }

    /// Builds the regions of `op` from a `region_list` pair.
    fn op_regions(&mut self, op: OpId, list: Option<Pair<'a, Rule>>) -> PResult<()> {
        let Some(list) = list else { return Ok(()) };
        let isolated = self.regions_isolated(op);
        for (i, r) in list.into_inner().enumerate() {
            let region = self.ctx.op_regions(op)[i];
            self.enter_region(isolated);
            self.region_body(r, region, None)?;
            self.exit_region()?;
        }
        Ok(())
    }

    /// Opens the name and block-label scopes of a region.
    pub(super) fn enter_region(&mut self, isolated: bool) {
        self.push_names(isolated);
        self.push_blocks();
    }

    /// Closes the scopes of a region, reporting undefined blocks and (for an isolated region)
    /// unresolved value names.
    pub(super) fn exit_region(&mut self) -> PResult<()> {
        self.pop_blocks()?;
        self.pop_names()
    }

    /// The block an unlabeled op at the start of `region` goes into: `cur`, or a new entry
    /// block.
    pub(super) fn current_block(&mut self, region: RegionId, cur: &mut Option<BlockId>) -> BlockId {
        match *cur {
            Some(b) => b,
            None => {
                let b = self.ctx.new_block(&[]);
                self.ctx.append_block(region, b);
                *cur = Some(b);
                b
            }
        }
    }

    /// Fills `region` from a `region` pair. `entry` is a pre-made entry block (a function's,
    /// whose arguments come from its signature).
    fn region_body(
        &mut self,
        p: Pair<'a, Rule>,
        region: RegionId,
        entry: Option<BlockId>,
    ) -> PResult<()> {
        let mut cur = entry;
        if let Some(e) = entry {
            self.ctx.append_block(region, e);
        }
        let mut first = true;
        for c in p.into_inner() {
            match c.as_rule() {
                Rule::operation => {
                    let b = self.current_block(region, &mut cur);
                    self.build_operation(c, b)?;
                }
                Rule::block => {
                    let pos = self.off(&c);
                    if first && entry.is_some() {
                        return Err(
                            self.err(pos, "invalid block name in region with named arguments")
                        );
                    }
                    cur = Some(self.labeled_block(c, region)?);
                }
                _ => {}
            }
            first = false;
        }
        Ok(())
    }

    fn labeled_block(&mut self, p: Pair<'a, Rule>, region: RegionId) -> PResult<BlockId> {
        let mut it = p.into_inner();
        let label = self.child(&mut it)?;
        let pos = self.off(&label);
        let b = self.define_block(label.as_str(), pos, region)?;
        for c in it {
            match c.as_rule() {
                Rule::block_arg => {
                    let mut a = c.into_inner();
                    let name = self.child(&mut a)?;
                    let npos = self.off(&name);
                    let default_loc = self.loc_at(npos);
                    let ty = self.type_token(self.child(&mut a)?)?;
                    let loc = match a.next() {
                        Some(l) => self.loc_inner(l, 0)?,
                        None => default_loc,
                    };
                    self.block_arg(b, name.as_str(), npos, ty, loc)?;
                }
                Rule::operation => self.build_operation(c, b)?,
                _ => {}
            }
        }
        Ok(b)
    }

    /// Adds argument `name` (at `pos`) of type `ty` to block `b` and defines its name.
    pub(super) fn block_arg(
        &mut self,
        b: BlockId,
        name: &'a str,
        pos: usize,
        ty: Type,
        loc: Loc,
    ) -> PResult<Value> {
        let v = self.ctx.add_block_arg(b, ty, Some(loc));
        self.define_value(name, 0, v, pos)?;
        Ok(v)
    }

    fn generic_op(
        &mut self,
        p: Pair<'a, Rule>,
        num_defs: u64,
        pos: usize,
        loc: Loc,
    ) -> PResult<OpId> {
        let mut it = p.into_inner();
        let name_pair = self.child(&mut it)?;
        let name = self.string_ident(&name_pair)?;
        let mut uses = Vec::new();
        let mut successors = Vec::new();
        let mut props = None;
        let mut regions = None;
        let mut attrs = Vec::new();
        let mut sig = None;
        for c in it {
            match c.as_rule() {
                Rule::value_use => uses.push(self.use_ref(&c)?),
                Rule::successors => {
                    for s in c.into_inner() {
                        let spos = self.off(&s);
                        successors.push(self.block_ref(s.as_str(), spos));
                    }
                }
                Rule::properties => {
                    let d = self.child(&mut c.into_inner())?;
                    props = Some(self.build_attr(d)?);
                }
                Rule::region_list => regions = Some(c),
                Rule::dict_attr => attrs = self.named_attrs(c)?,
                Rule::r#type => sig = Some(c),
                _ => {}
            }
        }
        let Some(sig) = sig else {
            return Err(self.err(pos, "expected function type"));
        };
        let sig_pos = self.off(&sig);
        let sig = self.type_token(sig)?;
        let num_regions = regions
            .as_ref()
            .map_or(0, |r| r.clone().into_inner().count());
        let op = self.create_generic(GenericOp {
            name,
            uses: &uses,
            successors,
            props,
            attrs,
            sig,
            sig_pos,
            num_regions,
            num_defs,
            pos,
            loc,
        })?;
        self.op_regions(op, regions)?;
        Ok(op)
    }

    /// Checks a generic op's signature against its operands and result names, resolves the
    /// operands and creates the op (its regions are filled by the caller).
    pub(super) fn create_generic(&mut self, g: GenericOp<'a, '_>) -> PResult<OpId> {
        let (inputs, results) = match self.ctx.type_kind(g.sig) {
            TypeKind::Function { inputs, results } => (inputs.len(), results.clone()),
            _ => return Err(self.err(g.sig_pos, "expected function type")),
        };
        let uses = g.uses;
        if inputs != uses.len() {
            let plural = if uses.len() == 1 { "" } else { "s" };
            return Err(self.err(
                g.sig_pos,
                format!(
                    "expected {} operand type{plural} but had {}",
                    uses.len(),
                    inputs
                ),
            ));
        }
        if g.num_defs != 0 && results.len() as u64 != g.num_defs {
            return Err(self.err(
                g.pos,
                format!(
                    "operation defines {} results but was provided {} to bind",
                    results.len(),
                    g.num_defs
                ),
            ));
        }
        let operands = self.resolve_uses_of_fn(uses, g.sig)?;
        let mut st = OpState::new(g.name, g.loc);
        st.operands = operands;
        st.result_types = results;
        st.properties = g.props;
        st.attrs = g.attrs;
        st.successors = g.successors;
        st.num_regions = g.num_regions;
        self.create_checked(st)
    }

    fn custom_op(
        &mut self,
        p: Pair<'a, Rule>,
        num_defs: u64,
        pos: usize,
        loc: Loc,
    ) -> PResult<OpId> {
        let mut it = p.into_inner();
        let name_pair = self.child(&mut it)?;
        let name = name_pair.as_str();
        let name_pos = self.off(&name_pair);
        let mut uses = Vec::new();
        let mut props = None;
        let mut regions = None;
        let mut attrs = Vec::new();
        let mut sym = None;
        let mut sig = None;
        for c in it {
            match c.as_rule() {
                Rule::symbol => sym = Some(self.symbol_name(&c)?),
                Rule::operands => {
                    for u in c.into_inner() {
                        uses.push(self.use_ref(&u)?);
                    }
                }
                Rule::properties => {
                    let d = self.child(&mut c.into_inner())?;
                    props = Some(self.build_attr(d)?);
                }
                Rule::dict_attr => attrs = self.named_attrs(c)?,
                Rule::region_list => regions = Some(c),
                Rule::r#type => {
                    let sig_pos = self.off(&c);
                    sig = Some((self.type_token(c)?, sig_pos));
                }
                _ => {}
            }
        }
        let num_regions = regions
            .as_ref()
            .map_or(0, |r| r.clone().into_inner().count());
        let op = self.create_custom(CustomOp {
            name,
            name_pos,
            sym,
            uses: &uses,
            props,
            attrs,
            sig,
            num_regions,
            num_defs,
            pos,
            loc,
        })?;
        self.op_regions(op, regions)?;
        Ok(op)
    }

    /// Checks a custom-form op's name, symbol and signature against its operands and result
    /// names, resolves the operands and creates the op (its regions are filled by the caller).
    pub(super) fn create_custom(&mut self, c: CustomOp<'a, '_>) -> PResult<OpId> {
        if self.ctx.op_def_by_name(c.name).is_none() && !self.ctx.allow_unregistered {
            let name = c.name;
            return Err(self.err(c.name_pos, format!("custom op '{name}' is unknown")));
        }
        let name = self.ctx.ident(c.name);
        let mut attrs = c.attrs;
        if let Some(s) = c.sym {
            let k = self.ctx.ident("sym_name");
            if attrs.iter().any(|(n, _)| *n == k) {
                return Err(self.err(
                    c.pos,
                    "'sym_name' given both as @symbol and in the attribute dictionary",
                ));
            }
            let v = self.ctx.attr(AttrKind::String(s.into_bytes()));
            attrs.push((k, v));
        }
        let uses = c.uses;
        let (operands, results) = match c.sig {
            None => {
                if !uses.is_empty() || c.num_defs != 0 {
                    let name = c.name;
                    return Err(self.err(
                        c.pos,
                        format!("custom op '{name}' expects ':' and a type signature"),
                    ));
                }
                (Vec::new(), Vec::new())
            }
            Some((ty, sig_pos)) => match self.ctx.type_kind(ty) {
                TypeKind::Function { inputs, results } => {
                    if inputs.len() != uses.len() {
                        let msg = format!(
                            "{} operands present, but expected {}",
                            uses.len(),
                            inputs.len()
                        );
                        return Err(self.err(sig_pos, msg));
                    }
                    let results = results.clone();
                    (self.resolve_uses_of_fn(uses, ty)?, results)
                }
                _ => {
                    let mut operands = Vec::with_capacity(uses.len());
                    for u in uses {
                        operands.push(self.resolve_use(*u, ty)?);
                    }
                    (operands, vec![ty; c.num_defs as usize])
                }
            },
        };
        let mut st = OpState::new(name, c.loc);
        st.operands = operands;
        st.result_types = results;
        st.properties = c.props;
        st.attrs = attrs;
        st.num_regions = c.num_regions;
        Ok(self.ctx.create_op(st))
    }

    fn module_op(&mut self, p: Pair<'a, Rule>, loc: Loc) -> PResult<OpId> {
        let mut sym = None;
        let mut attrs = Vec::new();
        let mut body = None;
        for c in p.into_inner() {
            match c.as_rule() {
                Rule::symbol => sym = Some(self.symbol_name(&c)?),
                Rule::dict_attr => attrs = self.named_attrs(c)?,
                Rule::region => body = Some(c),
                _ => {}
            }
        }
        let op = self.create_module(sym, attrs, loc);
        let region = self.ctx.op_regions(op)[0];
        if let Some(body) = body {
            self.enter_region(true);
            self.region_body(body, region, None)?;
            self.exit_region()?;
        }
        self.finish_module(op);
        Ok(op)
    }

    /// Creates a `builtin.module` with an empty region (its body is filled by the caller, then
    /// [`Builder::finish_module`] runs).
    pub(super) fn create_module(
        &mut self,
        sym: Option<String>,
        attrs: Vec<(Ident, Attr)>,
        loc: Loc,
    ) -> OpId {
        let mut st = OpState::new(self.ctx.ident("builtin.module"), loc);
        if let Some(s) = sym {
            let k = self.ctx.ident("sym_name");
            let v = self.ctx.attr(AttrKind::String(s.into_bytes()));
            st.properties = Some(self.ctx.dict_attr(vec![(k, v)]));
        }
        st.attrs = attrs;
        st.num_regions = 1;
        self.ctx.create_op(st)
    }

    /// Gives a module whose body was empty its one (empty) block.
    pub(super) fn finish_module(&mut self, op: OpId) {
        let region = self.ctx.op_regions(op)[0];
        if self.ctx.region_blocks(region).is_empty() {
            let b = self.ctx.new_block(&[]);
            self.ctx.append_block(region, b);
        }
    }

    fn func_op(&mut self, p: Pair<'a, Rule>, loc: Loc) -> PResult<OpId> {
        let mut visibility = None;
        let mut sym = String::new();
        let mut attrs = Vec::new();
        let mut body = None;
        let mut args: Vec<FuncArg<'a>> = Vec::new();
        let mut results: Vec<(Type, Option<Attr>)> = Vec::new();
        for c in p.into_inner() {
            match c.as_rule() {
                Rule::visibility => visibility = Some(c.as_str()),
                Rule::symbol => sym = self.symbol_name(&c)?,
                Rule::func_args => {
                    for a in c.into_inner() {
                        let apos = self.off(&a);
                        let (mut name, mut ty, mut dict, mut aloc) = (None, None, None, None);
                        for x in a.into_inner() {
                            match x.as_rule() {
                                Rule::value_name => name = Some(x.as_str()),
                                Rule::r#type => ty = Some(self.type_token(x)?),
                                Rule::dict_attr => dict = Some(self.build_attr(x)?),
                                r if super::typeattr::is_loc_rule(r) => {
                                    aloc = Some(self.loc_inner(x, 0)?)
                                }
                                _ => {}
                            }
                        }
                        let Some(ty) = ty else {
                            return Err(self.err(apos, "expected type"));
                        };
                        args.push(FuncArg {
                            name,
                            pos: apos,
                            ty,
                            attrs: dict,
                            loc: aloc,
                        });
                    }
                }
                Rule::func_results => {
                    for r in c.into_inner() {
                        let mut it = r.into_inner();
                        let ty = self.type_token(self.child(&mut it)?)?;
                        let dict = match it.next() {
                            Some(d) => Some(self.build_attr(d)?),
                            None => None,
                        };
                        results.push((ty, dict));
                    }
                }
                Rule::dict_attr => attrs = self.named_attrs(c)?,
                Rule::region => body = Some(c),
                _ => {}
            }
        }
        let op = self.create_func(visibility, sym, &args, &results, attrs, loc);
        if let Some(body) = body {
            let (region, entry) = self.begin_func_body(op, &args)?;
            self.region_body(body, region, Some(entry))?;
            self.exit_region()?;
        }
        Ok(op)
    }

    /// Creates a `func.func` from its signature (its body is read by the caller, between
    /// [`Builder::begin_func_body`] and [`Builder::exit_region`]).
    pub(super) fn create_func(
        &mut self,
        visibility: Option<&str>,
        sym: String,
        args: &[FuncArg<'a>],
        results: &[(Type, Option<Attr>)],
        attrs: Vec<(Ident, Attr)>,
        loc: Loc,
    ) -> OpId {
        let mut props: Vec<(Ident, Attr)> = Vec::new();
        if let Some(v) = visibility {
            let k = self.ctx.ident("sym_visibility");
            let v = self.ctx.str_attr(v);
            props.push((k, v));
        }
        let k = self.ctx.ident("sym_name");
        let v = self.ctx.attr(AttrKind::String(sym.into_bytes()));
        props.push((k, v));
        let inputs: Vec<Type> = args.iter().map(|a| a.ty).collect();
        let outs: Vec<Type> = results.iter().map(|r| r.0).collect();
        let fty = self.ctx.function_type(inputs, outs);
        let k = self.ctx.ident("function_type");
        let v = self.ctx.type_attr(fty);
        props.push((k, v));
        if args
            .iter()
            .any(|a| a.attrs.is_some_and(|d| !self.is_empty_dict(d)))
        {
            let empty = self.ctx.dict_attr(Vec::new());
            let items = args.iter().map(|a| a.attrs.unwrap_or(empty)).collect();
            let k = self.ctx.ident("arg_attrs");
            let v = self.ctx.attr(AttrKind::Array(items));
            props.push((k, v));
        }
        if results
            .iter()
            .any(|r| r.1.is_some_and(|d| !self.is_empty_dict(d)))
        {
            let empty = self.ctx.dict_attr(Vec::new());
            let items = results.iter().map(|r| r.1.unwrap_or(empty)).collect();
            let k = self.ctx.ident("res_attrs");
            let v = self.ctx.attr(AttrKind::Array(items));
            props.push((k, v));
        }
        let mut st = OpState::new(self.ctx.ident("func.func"), loc);
        st.properties = Some(self.ctx.dict_attr(props));
        st.attrs = attrs;
        st.num_regions = 1;
        // The structural ops have syntax of their own, so the parser knows them even when the
        // func dialect is not linked in; the verifier still checks them against their defs.
        self.ctx.create_op(st)
    }

    /// Opens the body of function `op`: its isolated scope and its entry block, whose
    /// arguments are named by the signature. Returns the body region and the entry block (not
    /// appended yet); the caller reads the body and closes it with [`Builder::exit_region`].
    pub(super) fn begin_func_body(
        &mut self,
        op: OpId,
        args: &[FuncArg<'a>],
    ) -> PResult<(RegionId, BlockId)> {
        let region = self.ctx.op_regions(op)[0];
        self.enter_region(true);
        let entry = self.ctx.new_block(&[]);
        for a in args {
            let Some(name) = a.name else {
                return Err(self.err(a.pos, "expected SSA identifier"));
            };
            let l = match a.loc {
                Some(l) => l,
                None => self.loc_at(a.pos),
            };
            let v = self.ctx.add_block_arg(entry, a.ty, Some(l));
            self.define_value(name, 0, v, a.pos)?;
        }
        Ok((region, entry))
    }

    fn is_empty_dict(&self, a: Attr) -> bool {
        matches!(self.ctx.attr_kind(a), AttrKind::Dict(e) if e.is_empty())
    }

    fn return_op(&mut self, p: Pair<'a, Rule>, loc: Loc) -> PResult<OpId> {
        let pos = self.off(&p);
        let mut uses = Vec::new();
        let mut types = Vec::new();
        for c in p.into_inner() {
            match c.as_rule() {
                Rule::value_use => uses.push(self.use_ref(&c)?),
                Rule::r#type => types.push(self.type_token(c)?),
                _ => {}
            }
        }
        self.create_return(&uses, &types, pos, loc)
    }

    /// Creates a `func.return` of `uses`, whose types are `types` (written at `pos`).
    pub(super) fn create_return(
        &mut self,
        uses: &[UseRef<'a>],
        types: &[Type],
        pos: usize,
        loc: Loc,
    ) -> PResult<OpId> {
        if uses.len() != types.len() {
            return Err(self.err(
                pos,
                format!(
                    "{} operands present, but expected {}",
                    uses.len(),
                    types.len()
                ),
            ));
        }
        let operands = self.resolve_uses(uses, types)?;
        let mut st = OpState::new(self.ctx.ident("func.return"), loc);
        st.operands = operands;
        Ok(self.ctx.create_op(st))
    }

    fn call_op(&mut self, p: Pair<'a, Rule>, loc: Loc) -> PResult<OpId> {
        let pos = self.off(&p);
        let mut uses = Vec::new();
        let mut callee = None;
        let mut props = None;
        let mut attrs = Vec::new();
        let mut sig = None;
        for c in p.into_inner() {
            match c.as_rule() {
                Rule::symbol_ref => callee = Some(self.build_attr(c)?),
                Rule::value_use => uses.push(self.use_ref(&c)?),
                Rule::properties => {
                    let d = self.child(&mut c.into_inner())?;
                    props = Some(self.build_attr(d)?);
                }
                Rule::dict_attr => attrs = self.named_attrs(c)?,
                Rule::r#type => sig = Some(c),
                _ => {}
            }
        }
        let Some(sig) = sig else {
            return Err(self.err(pos, "expected function type"));
        };
        let sig_pos = self.off(&sig);
        let ty = self.type_token(sig)?;
        self.create_call(callee, &uses, props, attrs, (ty, sig_pos), loc)
    }

    /// Creates a `func.call` of `callee`; `props` is the `<{...}>` dictionary, whose entries
    /// join the callee in the op's properties.
    pub(super) fn create_call(
        &mut self,
        callee: Option<Attr>,
        uses: &[UseRef<'a>],
        props: Option<Attr>,
        attrs: Vec<(Ident, Attr)>,
        (ty, sig_pos): (Type, usize),
        loc: Loc,
    ) -> PResult<OpId> {
        let results = match self.ctx.type_kind(ty) {
            TypeKind::Function { inputs, results } => {
                if inputs.len() != uses.len() {
                    let msg = format!(
                        "{} operands present, but expected {}",
                        uses.len(),
                        inputs.len()
                    );
                    return Err(self.err(sig_pos, msg));
                }
                results.clone()
            }
            _ => return Err(self.err(sig_pos, "expected function type")),
        };
        let operands = self.resolve_uses_of_fn(uses, ty)?;
        let mut entries = match props.map(|d| self.ctx.attr_kind(d)) {
            Some(AttrKind::Dict(e)) => e.to_vec(),
            _ => Vec::new(),
        };
        if let Some(c) = callee {
            entries.push((self.ctx.ident("callee"), c));
        }
        let mut st = OpState::new(self.ctx.ident("func.call"), loc);
        st.operands = operands;
        st.result_types = results;
        st.properties = Some(self.ctx.dict_attr(entries));
        st.attrs = attrs;
        Ok(self.ctx.create_op(st))
    }
}
