//! A hand-written front end for the forms large and everyday files are written in: the
//! generic form (`mlir-opt --mlir-print-op-generic --mlir-print-debuginfo`, our printer under
//! `--mlir-print-op-generic`), the uniform custom form (`[%r, ... =] dialect.op [@symbol]
//! [%operand, ...] [<{props}>] [{attr-dict}] [(region, ...)] [: signature] [loc(...)]`), the
//! structural ops `module`, `func.func`, `return` / `func.return` and `call` / `func.call`,
//! and any mixture of them in one file.
//!
//! It reads the op structure itself — result groups, op names, operands, successors,
//! properties, region lists, blocks and their arguments, attribute dictionaries, function
//! signatures, trailing locations, alias definitions and metadata — and builds IR through the
//! same [`Builder`] functions as the pest front end (`create_generic`, `create_custom`,
//! `create_func`, ...), so both share one implementation of the semantics (name scoping,
//! forward references, signature checks, properties vs attributes, unregistered dialects).
//! Types and attribute values are only *delimited* here: each span goes to the pest-based
//! type and attribute parsers, cached by its text, so types and attributes keep one
//! implementation. `loc("file":line:col)` and `loc(#alias)` are read directly.
//!
//! Where the grammar's ordered choice would back out of an optional part (a custom op's
//! operand list that is really the next op's results, a `return` without its `: types`) the
//! scanner backs out the same way; anywhere else it follows a single reading.
//!
//! It never reports an error of its own: on anything it does not handle (unusual spellings,
//! a keyword that does not take its bespoke syntax) or any error at all, it fails, and the
//! caller re-parses the whole file with pest, which gives the diagnostic. To keep its results
//! identical to pest's it builds in the same order: an op's properties, attributes and
//! signature are read before its regions (so a region list is skipped first and read after
//! the op exists), and result names are bound after the regions.
//!
//! Recursion follows region nesting only, and stops at the nesting limit.

mod scan;

use super::build::{Builder, CustomOp, FuncArg, GenericOp, PResult, ResultGroup, UseRef};
use super::lex::RegionListEnds;
use crate::attrs::AttrKind;
use crate::diag::Diagnostic;
use crate::entity::{Attr, BlockId, Ident, Loc, OpId, RegionId, Type, Value};
use crate::location::LocKind;
use rustc_hash::FxHashMap;
use scan::{Mark, Scanner};

/// Parses a whole file; any failure means "use the pest front end".
/// `region_lists`: the pre-scan's region lists, hints for [`Scanner::skip_region_list`].
pub(super) fn parse_file<'a>(
    b: &mut Builder<'a, '_>,
    region_lists: RegionListEnds,
) -> PResult<OpId> {
    let mut p = Fast {
        s: Scanner::new(b.src, region_lists),
        max_nesting: b.max_nesting,
        b,
        depth: 0,
        uses: Vec::new(),
        defs: Vec::new(),
        deferred: Vec::new(),
        type_tokens: FxHashMap::default(),
        attr_dicts: FxHashMap::default(),
        prop_dicts: FxHashMap::default(),
    };
    p.file()
        .map_err(|Bail| Diagnostic::error(p.b.ctx.unknown_loc(), "not handled by the fast path"))
}

/// What an op or block argument location was written as.
enum ParsedLoc<'a> {
    Loc(Loc),
    /// `loc(#name)` before `#name` is defined (mlir-opt prints location aliases at the end).
    Alias(&'a str),
}

/// Where an op starts and the result names written before it.
#[derive(Clone, Copy)]
struct OpStart {
    pos: usize,
    line_col: (u32, u32),
    num_defs: u64,
}

/// Where a location that waits for its alias goes.
enum LocTarget {
    Op(OpId),
    Arg(Value),
}

struct Fast<'a, 'b, 'c> {
    b: &'b mut Builder<'a, 'c>,
    s: Scanner<'a>,
    max_nesting: usize,
    /// Region nesting depth.
    depth: usize,
    /// Operands and result groups of the ops being read, as stacks: an op's own entries sit
    /// above those of the ops it is nested in, so no op allocates lists of its own.
    uses: Vec<UseRef<'a>>,
    defs: Vec<ResultGroup<'a>>,
    /// Locations that name an alias defined later in the file.
    deferred: Vec<(LocTarget, &'a str)>,
    /// The `type` tokens read so far, by text (see [`Fast::known_type_here`]).
    type_tokens: FxHashMap<&'a str, Type>,
    /// Attribute and property dictionaries by text.
    attr_dicts: FxHashMap<&'a str, Vec<(Ident, Attr)>>,
    prop_dicts: FxHashMap<&'a str, Attr>,
}

/// The fast path's only failure, "not handled here": what went wrong is told by pest, which
/// parses the file again. A unit type keeps results small on the hot paths.
struct Bail;

/// An error from the shared builder functions is a failure like any other.
impl From<Diagnostic> for Bail {
    fn from(_: Diagnostic) -> Self {
        Bail
    }
}

type FResult<T> = Result<T, Bail>;

fn unsupported() -> Bail {
    Bail
}

impl<'a> Fast<'a, '_, '_> {
    fn expect(&mut self, c: u8) -> FResult<()> {
        if self.s.eat(c) {
            Ok(())
        } else {
            Err(unsupported())
        }
    }

    /// The text of a token a lexer found at the current position, moving past it.
    #[inline]
    fn token(&mut self, end: Option<usize>) -> FResult<&'a str> {
        let end = end.ok_or_else(unsupported)?;
        let text = self.s.text(self.s.pos, end).ok_or_else(unsupported)?;
        self.s.advance(end);
        Ok(text)
    }

    /// A `file:line:col` location for a 1-based line and byte column.
    fn loc_at(&mut self, (line, col): (u32, u32)) -> Loc {
        let file = self.b.file;
        self.b.ctx.loc(LocKind::FileLineCol { file, line, col })
    }

    // ----- the file ---------------------------------------------------------------------------

    fn file(&mut self) -> FResult<OpId> {
        let top = self.b.begin_file();
        loop {
            self.s.skip_ws();
            match self.s.peek() {
                _ if self.s.at_end() => break,
                b'{' if self.s.starts_with(b"{-#") => {
                    let end = self.s.metadata();
                    self.token(end)?;
                }
                b'%' | b'"' | b'_' | b'a'..=b'z' | b'A'..=b'Z' => self.operation(top)?,
                b'#' => self.attr_alias_def()?,
                b'!' => self.type_alias_def()?,
                _ => return Err(unsupported()),
            }
        }
        let module = self.b.finish_file(top)?;
        for (target, name) in std::mem::take(&mut self.deferred) {
            let l = self.known_loc_alias(name)?.ok_or_else(unsupported)?;
            match target {
                LocTarget::Op(op) => self.b.ctx.set_op_loc(op, l),
                LocTarget::Arg(v) => self.b.ctx.set_value_loc(v, l),
            }
        }
        Ok(module)
    }

    /// `#name = attribute`.
    fn attr_alias_def(&mut self) -> FResult<()> {
        let pos = self.s.pos;
        let end = self.s.alias_name(pos, b'#');
        let name = &self.token(end)?[1..];
        self.s.skip_ws();
        self.expect(b'=')?;
        self.s.skip_ws();
        if !self.b.start_attr_alias(name, pos)? {
            return Err(unsupported());
        }
        let value = match self.location()? {
            Some(ParsedLoc::Loc(l)) => self.b.ctx.attr(AttrKind::Location(l)),
            Some(ParsedLoc::Alias(_)) => return Err(unsupported()),
            // A top-level value ends with its line: a value that goes on (`5\n: i32`) leaves
            // text no top-level item starts with, which fails the file.
            None => self.attr_value(true)?,
        };
        self.b.attr_aliases.insert(name, value);
        Ok(())
    }

    /// `!name = type`.
    fn type_alias_def(&mut self) -> FResult<()> {
        let pos = self.s.pos;
        let end = self.s.alias_name(pos, b'!');
        let name = &self.token(end)?[1..];
        self.s.skip_ws();
        self.expect(b'=')?;
        self.s.skip_ws();
        self.b.start_type_alias(name, pos)?;
        let t = self.type_token()?;
        self.b.type_aliases.insert(name, t);
        Ok(())
    }

    // ----- operations -------------------------------------------------------------------------

    /// One op in any form the fast path reads, appended to `block`.
    fn operation(&mut self, block: BlockId) -> FResult<()> {
        let pos = self.s.pos;
        let line_col = self.s.line_col();
        let defs_start = self.defs.len();
        let mut num_defs = 0u64;
        if self.s.peek() == b'%' {
            loop {
                let dpos = self.s.pos;
                let end = self.s.value_def(dpos);
                let text = self.token(end)?;
                let g = self.b.result_group(text, dpos, &mut num_defs)?;
                self.defs.push(g);
                self.s.skip_ws();
                if self.s.eat(b',') {
                    self.s.skip_ws();
                    continue;
                }
                self.expect(b'=')?;
                self.s.skip_ws();
                break;
            }
        }
        let at = OpStart {
            pos,
            line_col,
            num_defs,
        };
        let (op, deferred) = if self.s.peek() == b'"' {
            self.generic_op(at)?
        } else {
            self.named_op(at)?
        };
        self.b
            .bind_results(op, &self.defs[defs_start..], num_defs, pos)?;
        self.defs.truncate(defs_start);
        if let Some(name) = deferred {
            self.deferred.push((LocTarget::Op(op), name));
        }
        self.b.ctx.append_op(block, op);
        Ok(())
    }

    /// A generic-form op from its quoted name on; returns it with the location alias it
    /// waits for, if any.
    fn generic_op(&mut self, at: OpStart) -> FResult<(OpId, Option<&'a str>)> {
        let OpStart {
            pos,
            line_col,
            num_defs,
        } = at;
        let end = self.s.string(self.s.pos);
        let name = self.token(end)?;
        let name = self.b.string_ident_of(name)?;
        self.s.skip_ws();

        self.expect(b'(')?;
        self.s.skip_ws();
        let uses_start = self.uses.len();
        if !self.s.eat(b')') {
            self.use_list()?;
            self.s.skip_ws();
            self.expect(b')')?;
        }
        self.s.skip_ws();

        let mut successors = Vec::new();
        if self.s.eat(b'[') {
            loop {
                self.s.skip_ws();
                let spos = self.s.pos;
                let end = self.s.sigil_name(spos, b'^');
                let label = self.token(end)?;
                successors.push(self.b.block_ref(label, spos));
                self.s.skip_ws();
                if !self.s.eat(b',') {
                    break;
                }
            }
            self.expect(b']')?;
            self.s.skip_ws();
        }

        let props = self.properties()?;
        // The regions are read once the op exists: skip them for now.
        let regions = self.skip_regions()?;
        let attrs = self.attr_dict()?;

        self.expect(b':')?;
        self.s.skip_ws();
        let sig_pos = self.s.pos;
        let sig = self.signature()?;
        let (loc, deferred) = self.trailing_loc(line_col)?;

        let op = self.b.create_generic(GenericOp {
            name,
            uses: &self.uses[uses_start..],
            successors,
            props,
            attrs,
            sig,
            sig_pos,
            num_regions: regions.map_or(0, |r| r.2),
            num_defs,
            pos,
            loc,
        })?;
        self.uses.truncate(uses_start);
        self.deferred_regions(op, regions)?;
        Ok((op, deferred))
    }

    /// `%use ("," %use)*` onto the use stack, leaving the position after the last one.
    fn use_list(&mut self) -> FResult<()> {
        loop {
            let upos = self.s.pos;
            let end = self.s.value_use(upos);
            let text = self.token(end)?;
            let u = self.b.use_ref_text(text, upos)?;
            self.uses.push(u);
            let after = self.s.mark();
            self.s.skip_ws();
            if self.s.eat(b',') {
                self.s.skip_ws();
                continue;
            }
            self.s.reset(after);
            return Ok(());
        }
    }

    /// `"<" dict ">"` if it comes next, and the blanks after it.
    fn properties(&mut self) -> FResult<Option<Attr>> {
        if !self.s.eat(b'<') {
            return Ok(None);
        }
        self.s.skip_ws();
        let key = self.dict_text();
        let cached = key.and_then(|k| self.prop_dicts.get(k).copied());
        let props = match (key, cached) {
            (Some(k), Some(p)) => {
                self.s.skip_known(k, self.s.pos + k.len());
                p
            }
            _ => {
                let mut entries = Vec::new();
                self.dict(&mut entries)?;
                let p = self.b.ctx.dict_attr(entries);
                if let Some(k) = key {
                    self.check_dict_end(k)?;
                    self.prop_dicts.insert(k, p);
                }
                p
            }
        };
        self.s.skip_ws();
        self.expect(b'>')?;
        self.s.skip_ws();
        Ok(Some(props))
    }

    /// An attribute dictionary `{...}` if one comes next (entries in source order, through
    /// the cache of dictionary spellings), and the blanks after it.
    fn attr_dict(&mut self) -> FResult<Vec<(Ident, Attr)>> {
        let mut attrs = Vec::new();
        if self.s.peek() != b'{' {
            return Ok(attrs);
        }
        let key = self.dict_text();
        match key.and_then(|k| self.attr_dicts.get(k).map(|c| (k, c))) {
            Some((k, cached)) => {
                attrs = cached.clone();
                self.s.skip_known(k, self.s.pos + k.len());
            }
            None => {
                self.dict(&mut attrs)?;
                if let Some(k) = key {
                    self.check_dict_end(k)?;
                    self.attr_dicts.insert(k, attrs.clone());
                }
            }
        }
        self.s.skip_ws();
        Ok(attrs)
    }

    /// Skips the region list at the current position, if there is one, and the blanks after
    /// it: its start, its end and its number of regions, for [`Fast::deferred_regions`].
    fn skip_regions(&mut self) -> FResult<Option<(Mark, usize, usize)>> {
        if self.s.peek() != b'(' {
            return Ok(None);
        }
        let start = self.s.mark();
        let (end, count) = self
            .s
            .skip_region_list(self.s.pos)
            .ok_or_else(unsupported)?;
        self.s.jump_relative(end);
        self.s.skip_ws();
        Ok(Some((start, end, count)))
    }

    /// Reads the region list that [`Fast::skip_regions`] skipped into `op`, then comes back.
    fn deferred_regions(&mut self, op: OpId, regions: Option<(Mark, usize, usize)>) -> FResult<()> {
        if let Some((start, end, count)) = regions {
            let tail = self.s.mark();
            self.s.reset(start);
            self.region_list(op, count)?;
            if self.s.pos != end {
                return Err(unsupported());
            }
            let base = self.s.mark();
            self.s.join_lines(base, tail);
        }
        Ok(())
    }

    /// The op's `loc(...)` if one follows, else its default location (where it starts).
    /// Without one the position stays put: what follows belongs to the next item.
    fn trailing_loc(&mut self, line_col: (u32, u32)) -> FResult<(Loc, Option<&'a str>)> {
        let after = self.s.mark();
        self.s.skip_ws();
        Ok(match self.location()? {
            Some(ParsedLoc::Loc(l)) => (l, None),
            Some(ParsedLoc::Alias(name)) => (self.loc_at(line_col), Some(name)),
            None => {
                self.s.reset(after);
                (self.loc_at(line_col), None)
            }
        })
    }

    /// Sets the location that follows an op built before it was read (a structural op, whose
    /// location comes after its body).
    fn loc_after_body(&mut self, op: OpId) -> FResult<Option<&'a str>> {
        let after = self.s.mark();
        self.s.skip_ws();
        match self.location()? {
            Some(ParsedLoc::Loc(l)) => {
                self.b.ctx.set_op_loc(op, l);
                Ok(None)
            }
            Some(ParsedLoc::Alias(name)) => Ok(Some(name)),
            None => {
                self.s.reset(after);
                Ok(None)
            }
        }
    }

    // ----- the custom form --------------------------------------------------------------------

    /// An op written with a bare name: one of the structural ops (`module`, `func.func`,
    /// `return`, `func.call`, as the grammar tries them first) or the uniform custom form.
    fn named_op(&mut self, at: OpStart) -> FResult<(OpId, Option<&'a str>)> {
        let name_pos = self.s.pos;
        let end = self.s.bare_key(name_pos);
        let name = self.token(end)?;
        // A keyword is followed by no identifier character, and the token just read holds all
        // of them: the keywords are exactly these whole tokens.
        match name {
            "module" | "builtin.module" => self.module_op(at),
            "func.func" => self.func_op(at),
            "return" | "func.return" => self.return_op(at),
            "call" | "func.call" => self.call_op(at),
            _ => self.custom_op(at, name, name_pos),
        }
    }

    /// `@name` (bare or quoted) at the current position, unescaped; the blanks after it.
    fn symbol(&mut self) -> FResult<String> {
        let spos = self.s.pos;
        let end = if self.s.at(spos + 1) == b'"' {
            self.s.string(spos + 1)
        } else {
            self.s.sigil_name(spos, b'@')
        };
        let text = self.token(end)?;
        let name = self.b.symbol_name_of(text)?;
        self.s.skip_ws();
        Ok(name)
    }

    /// `name @sym? operands? <{props}>? {attrs}? (regions)? (: signature)? loc(...)?`.
    fn custom_op(
        &mut self,
        at: OpStart,
        name: &'a str,
        name_pos: usize,
    ) -> FResult<(OpId, Option<&'a str>)> {
        self.s.skip_ws();
        let sym = if self.s.peek() == b'@' {
            Some(self.symbol()?)
        } else {
            None
        };
        let uses_start = self.uses.len();
        if self.s.peek() == b'%' {
            let before = self.s.mark();
            self.use_list()?;
            self.s.skip_ws();
            // A list followed by `=` or `:N` is the result list of the next op.
            if self.s.peek() == b'=' || self.colon_digit() {
                self.uses.truncate(uses_start);
                self.s.reset(before);
            }
        }
        let props = self.properties()?;
        // `{-#` opens file metadata, never a dictionary.
        let attrs = if self.s.starts_with(b"{-#") {
            Vec::new()
        } else {
            self.attr_dict()?
        };
        let regions = self.skip_regions()?;
        let sig = if self.s.eat(b':') {
            self.s.skip_ws();
            let sig_pos = self.s.pos;
            Some((self.signature()?, sig_pos))
        } else {
            None
        };
        let (loc, deferred) = self.trailing_loc(at.line_col)?;
        let op = self.b.create_custom(CustomOp {
            name,
            name_pos,
            sym,
            uses: &self.uses[uses_start..],
            props,
            attrs,
            sig,
            num_regions: regions.map_or(0, |r| r.2),
            num_defs: at.num_defs,
            pos: at.pos,
            loc,
        })?;
        self.uses.truncate(uses_start);
        self.deferred_regions(op, regions)?;
        Ok((op, deferred))
    }

    /// Whether `":" digit` comes next (comments and blanks allowed between, as in the
    /// grammar's look-ahead); moves nothing.
    fn colon_digit(&mut self) -> bool {
        if self.s.peek() != b':' {
            return false;
        }
        let m = self.s.mark();
        self.s.pos += 1;
        self.s.skip_ws();
        let digit = self.s.peek().is_ascii_digit();
        self.s.reset(m);
        digit
    }

    /// `module @name? (attributes {...})? { ... } loc(...)?`.
    fn module_op(&mut self, at: OpStart) -> FResult<(OpId, Option<&'a str>)> {
        self.s.skip_ws();
        let sym = if self.s.peek() == b'@' {
            Some(self.symbol()?)
        } else {
            None
        };
        let attrs = self.attributes_clause()?;
        self.expect(b'{')?;
        let loc = self.loc_at(at.line_col);
        let op = self.b.create_module(sym, attrs, loc);
        let region = self.b.ctx.op_regions(op)[0];
        self.nested(|p| {
            p.b.enter_region(true);
            p.region_body(region, None)?;
            Ok(p.b.exit_region()?)
        })?;
        self.b.finish_module(op);
        Ok((op, self.loc_after_body(op)?))
    }

    /// `(attributes {...})?` and the blanks after it.
    fn attributes_clause(&mut self) -> FResult<Vec<(Ident, Attr)>> {
        if !self.s.starts_with(b"attributes") {
            return Ok(Vec::new());
        }
        let end = self.s.bare_key(self.s.pos);
        if self.token(end)? != "attributes" {
            return Err(unsupported());
        }
        self.s.skip_ws();
        if self.s.peek() != b'{' {
            return Err(unsupported());
        }
        self.attr_dict()
    }

    /// `func.func (private|public|nested)? @name(args) (-> results)? (attributes {...})?
    /// ({ body })? loc(...)?`.
    fn func_op(&mut self, at: OpStart) -> FResult<(OpId, Option<&'a str>)> {
        self.s.skip_ws();
        let mut visibility = None;
        if self.s.peek() != b'@' {
            let end = self.s.bare_key(self.s.pos);
            let word = self.token(end)?;
            if !matches!(word, "private" | "public" | "nested") {
                return Err(unsupported());
            }
            visibility = Some(word);
            self.s.skip_ws();
        }
        if self.s.peek() != b'@' {
            return Err(unsupported());
        }
        let sym = self.symbol()?;
        self.expect(b'(')?;
        self.s.skip_ws();
        let mut args = Vec::new();
        let mut arg_aliases = Vec::new();
        if !self.s.eat(b')') {
            loop {
                let (arg, alias) = self.func_arg()?;
                args.push(arg);
                arg_aliases.push(alias);
                self.s.skip_ws();
                if self.s.eat(b',') {
                    self.s.skip_ws();
                    continue;
                }
                self.expect(b')')?;
                break;
            }
        }
        self.s.skip_ws();
        let mut results = Vec::new();
        if self.s.starts_with(b"->") {
            self.s.pos += 2;
            self.s.skip_ws();
            if self.s.eat(b'(') {
                self.s.skip_ws();
                if !self.s.eat(b')') {
                    loop {
                        let ty = self.type_token()?;
                        self.s.skip_ws();
                        let dict = self.optional_dict()?;
                        results.push((ty, dict));
                        if self.s.eat(b',') {
                            self.s.skip_ws();
                            continue;
                        }
                        self.expect(b')')?;
                        break;
                    }
                }
            } else {
                results.push((self.type_token()?, None));
            }
            self.s.skip_ws();
        }
        let attrs = self.attributes_clause()?;
        let loc = self.loc_at(at.line_col);
        let op = self
            .b
            .create_func(visibility, sym, &args, &results, attrs, loc);
        if self.s.eat(b'{') {
            let (region, entry) = self.b.begin_func_body(op, &args)?;
            for (v, alias) in self.b.ctx.block_args(entry).iter().zip(arg_aliases) {
                if let Some(name) = alias {
                    self.deferred.push((LocTarget::Arg(*v), name));
                }
            }
            self.nested(|p| {
                p.region_body(region, Some(entry))?;
                Ok(p.b.exit_region()?)
            })?;
        }
        Ok((op, self.loc_after_body(op)?))
    }

    /// One argument of a function signature: `(%name ":")? type {attrs}? loc(...)?`; with the
    /// location alias it waits for, if any.
    fn func_arg(&mut self) -> FResult<(FuncArg<'a>, Option<&'a str>)> {
        let pos = self.s.pos;
        let mut name = None;
        if self.s.peek() == b'%' {
            let end = self.s.sigil_name(pos, b'%');
            name = Some(self.token(end)?);
            self.s.skip_ws();
            self.expect(b':')?;
            self.s.skip_ws();
        }
        let ty = self.type_token()?;
        self.s.skip_ws();
        let attrs = self.optional_dict()?;
        let (loc, alias) = match self.location()? {
            Some(ParsedLoc::Loc(l)) => (Some(l), None),
            Some(ParsedLoc::Alias(a)) => (None, Some(a)),
            None => (None, None),
        };
        Ok((
            FuncArg {
                name,
                pos,
                ty,
                attrs,
                loc,
            },
            alias,
        ))
    }

    /// `return (%v ("," %v)* ":" type ("," type)*)?` (or `func.return`).
    fn return_op(&mut self, at: OpStart) -> FResult<(OpId, Option<&'a str>)> {
        let uses_start = self.uses.len();
        let mut types = Vec::new();
        let after_kw = self.s.mark();
        self.s.skip_ws();
        if !(self.s.peek() == b'%' && self.return_operands(&mut types)?) {
            // No operand group: the op is the keyword alone.
            self.uses.truncate(uses_start);
            types.clear();
            self.s.reset(after_kw);
        }
        let (loc, deferred) = self.trailing_loc(at.line_col)?;
        let op = self
            .b
            .create_return(&self.uses[uses_start..], &types, at.pos, loc)?;
        self.uses.truncate(uses_start);
        Ok((op, deferred))
    }

    /// The operand group of a `return`; `false` where the grammar's group does not match
    /// (the caller then takes the keyword alone, as the grammar does).
    fn return_operands(&mut self, types: &mut Vec<Type>) -> FResult<bool> {
        if self.use_list().is_err() {
            return Ok(false);
        }
        self.s.skip_ws();
        if !self.s.eat(b':') {
            return Ok(false);
        }
        self.s.skip_ws();
        if self.s.type_token(self.s.pos).is_none() {
            self.s.forget_token();
            return Ok(false);
        }
        types.push(self.type_token()?);
        loop {
            let m = self.s.mark();
            self.s.skip_ws();
            if self.s.eat(b',') {
                self.s.skip_ws();
                if self.s.type_token(self.s.pos).is_some() {
                    types.push(self.type_token()?);
                    continue;
                }
                self.s.forget_token();
            }
            self.s.reset(m);
            return Ok(true);
        }
    }

    /// `call @callee(%args) <{props}>? {attrs}? : (T, ...) -> (R, ...)` (or `func.call`).
    fn call_op(&mut self, at: OpStart) -> FResult<(OpId, Option<&'a str>)> {
        self.s.skip_ws();
        // `symbol_ref`: `@a::@b`, with no blanks inside.
        let start = self.s.pos;
        loop {
            if self.s.peek() != b'@' {
                return Err(unsupported());
            }
            let end = if self.s.at(self.s.pos + 1) == b'"' {
                self.s.string(self.s.pos + 1)
            } else {
                self.s.sigil_name(self.s.pos, b'@')
            };
            self.token(end)?;
            if !(self.s.starts_with(b"::") && self.s.at(self.s.pos + 2) == b'@') {
                break;
            }
            self.s.pos += 2;
        }
        let text = self.s.text(start, self.s.pos).ok_or_else(unsupported)?;
        let callee = self.b.attr_from_text(text)?;
        self.s.skip_ws();
        self.expect(b'(')?;
        self.s.skip_ws();
        let uses_start = self.uses.len();
        if !self.s.eat(b')') {
            self.use_list()?;
            self.s.skip_ws();
            self.expect(b')')?;
        }
        self.s.skip_ws();
        let props = self.properties()?;
        let attrs = self.attr_dict()?;
        self.expect(b':')?;
        self.s.skip_ws();
        let sig_pos = self.s.pos;
        let sig = self.signature()?;
        let (loc, deferred) = self.trailing_loc(at.line_col)?;
        let op = self.b.create_call(
            Some(callee),
            &self.uses[uses_start..],
            props,
            attrs,
            (sig, sig_pos),
            loc,
        )?;
        self.uses.truncate(uses_start);
        Ok((op, deferred))
    }

    /// Runs `f` one region level deeper, within the nesting limit.
    fn nested(&mut self, f: impl FnOnce(&mut Self) -> FResult<()>) -> FResult<()> {
        if self.depth >= self.max_nesting {
            return Err(unsupported());
        }
        self.depth += 1;
        f(self)?;
        self.depth -= 1;
        Ok(())
    }

    /// A dictionary attribute `{...}` if one comes next, and the blanks after it.
    fn optional_dict(&mut self) -> FResult<Option<Attr>> {
        if self.s.peek() != b'{' {
            return Ok(None);
        }
        let mut entries = Vec::new();
        self.dict(&mut entries)?;
        self.s.skip_ws();
        Ok(Some(self.b.ctx.dict_attr(entries)))
    }

    /// `"(" region ("," region)* ")"` of `op`, which was created with `count` regions.
    fn region_list(&mut self, op: OpId, count: usize) -> FResult<()> {
        if self.depth >= self.max_nesting {
            return Err(unsupported());
        }
        self.depth += 1;
        let isolated = self.b.regions_isolated(op);
        self.expect(b'(')?;
        let mut i = 0;
        loop {
            self.s.skip_ws();
            self.expect(b'{')?;
            let region = *self.b.ctx.op_regions(op).get(i).ok_or_else(unsupported)?;
            self.b.enter_region(isolated);
            self.region_body(region, None)?;
            self.b.exit_region()?;
            i += 1;
            self.s.skip_ws();
            if !self.s.eat(b',') {
                break;
            }
        }
        self.expect(b')')?;
        self.depth -= 1;
        if i != count {
            return Err(unsupported());
        }
        Ok(())
    }

    /// The ops and blocks of a region, after its `{`, through its `}`. `entry`: a function's
    /// entry block, made from its signature, which takes the ops before any label.
    fn region_body(&mut self, region: RegionId, entry: Option<BlockId>) -> FResult<()> {
        let mut cur = entry;
        if let Some(e) = entry {
            self.b.ctx.append_block(region, e);
        }
        let mut first = true;
        loop {
            self.s.skip_ws();
            match self.s.peek() {
                b'}' => {
                    self.s.pos += 1;
                    return Ok(());
                }
                // A label first in a region whose entry block has named arguments already.
                b'^' if first && entry.is_some() => return Err(unsupported()),
                b'^' => cur = Some(self.block_label(region)?),
                b'%' | b'"' | b'_' | b'a'..=b'z' | b'A'..=b'Z' => {
                    let b = self.b.current_block(region, &mut cur);
                    self.operation(b)?;
                }
                _ => return Err(unsupported()),
            }
            first = false;
        }
    }

    /// `^label ("(" (arg ("," arg)*)? ")")? ":"`, defining the block in `region`.
    fn block_label(&mut self, region: RegionId) -> FResult<BlockId> {
        let pos = self.s.pos;
        let end = self.s.sigil_name(pos, b'^');
        let label = self.token(end)?;
        let b = self.b.define_block(label, pos, region)?;
        self.s.skip_ws();
        if self.s.eat(b'(') {
            self.s.skip_ws();
            if !self.s.eat(b')') {
                loop {
                    self.block_arg(b)?;
                    self.s.skip_ws();
                    if self.s.eat(b',') {
                        self.s.skip_ws();
                        continue;
                    }
                    self.expect(b')')?;
                    break;
                }
            }
            self.s.skip_ws();
        }
        self.expect(b':')?;
        Ok(b)
    }

    /// `%name ":" type location?`.
    fn block_arg(&mut self, b: BlockId) -> FResult<()> {
        let pos = self.s.pos;
        let line_col = self.s.line_col();
        let end = self.s.sigil_name(pos, b'%');
        let name = self.token(end)?;
        self.s.skip_ws();
        self.expect(b':')?;
        self.s.skip_ws();
        let ty = self.type_token()?;
        let after_type = self.s.mark();
        self.s.skip_ws();
        let (loc, deferred) = match self.location()? {
            Some(ParsedLoc::Loc(l)) => (l, None),
            Some(ParsedLoc::Alias(name)) => (self.loc_at(line_col), Some(name)),
            None => {
                self.s.reset(after_type);
                (self.loc_at(line_col), None)
            }
        };
        let v = self.b.block_arg(b, name, pos, ty, loc)?;
        if let Some(name) = deferred {
            self.deferred.push((LocTarget::Arg(v), name));
        }
        Ok(())
    }

    // ----- types, attributes, locations -------------------------------------------------------

    /// An op's signature: a `type` token, usually the rest of its line.
    fn signature(&mut self) -> FResult<Type> {
        match self.known_type_here() {
            Some(t) => Ok(t),
            None => self.type_token(),
        }
    }

    /// A `type` token, built (once per distinct text) by the pest-based type parser.
    fn type_token(&mut self) -> FResult<Type> {
        let end = self.s.type_token(self.s.pos);
        let text = self.token(end)?;
        let t = self.b.type_of_token_text(text)?;
        self.type_tokens.insert(text, t);
        Ok(t)
    }

    /// The `type` token at the current position, moving past it, if its text is that of a
    /// token read before; found without lexing it. A generic op's signature is nearly always
    /// the rest of its line, or what comes before the line's closing `loc(...)`: those texts
    /// are looked up, and [`Scanner::type_token_ends_at`] confirms that the token here would
    /// end where the text does. (Each line is searched once, by its op: linear in the file.)
    fn known_type_here(&mut self) -> Option<Type> {
        let line = self.s.line_rest()?;
        let (text, t) = match self.type_tokens.get(line) {
            Some(&t) => (line, t),
            None if line.ends_with(')') => {
                let before_loc = line[..line.rfind(" loc(")?].trim_end();
                (before_loc, *self.type_tokens.get(before_loc)?)
            }
            None => return None,
        };
        let end = self.s.pos + text.len();
        // The text holds no newline: no line to count.
        self.s.type_token_ends_at(end).then(|| {
            self.s.pos = end;
            t
        })
    }

    /// The text of the `{...}` dictionary at the current position, as a cache key: the same
    /// dictionaries repeat on op after op. `None` where it holds a `//`, which `balanced`
    /// reads as text but the dictionary grammar as a comment.
    fn dict_text(&mut self) -> Option<&'a str> {
        let start = self.s.pos;
        let end = self.s.brace_group(start);
        // Nothing is consumed yet: a newline seen in the group is counted when it is.
        self.s.forget_token();
        let text = self.s.text(start, end?)?;
        (!text.contains("//")).then_some(text)
    }

    /// After reading dictionary `key` entry by entry: the two readings must end together.
    fn check_dict_end(&self, key: &'a str) -> FResult<()> {
        match self
            .s
            .text(self.s.pos - key.len().min(self.s.pos), self.s.pos)
        {
            Some(t) if std::ptr::eq(t.as_ptr(), key.as_ptr()) => Ok(()),
            _ => Err(unsupported()),
        }
    }

    /// `"{" (entry ("," entry)*)? "}"` into `out`, where an entry is `key ("=" attribute)?`.
    fn dict(&mut self, out: &mut Vec<(Ident, Attr)>) -> FResult<()> {
        self.expect(b'{')?;
        self.s.skip_ws();
        if self.s.eat(b'}') {
            return Ok(());
        }
        loop {
            let epos = self.s.pos;
            let end = if self.s.peek() == b'"' {
                self.s.string(epos)
            } else {
                self.s.bare_key(epos)
            };
            let key = self.token(end)?;
            let k = self.b.key_ident(key)?;
            self.s.skip_ws();
            let v = if self.s.eat(b'=') {
                self.s.skip_ws();
                self.attr_value(false)?
            } else {
                self.b.ctx.unit_attr()
            };
            self.b.push_named(out, k, v, epos)?;
            self.s.skip_ws();
            if self.s.eat(b',') {
                self.s.skip_ws();
                continue;
            }
            return self.expect(b'}');
        }
    }

    /// One attribute value, delimited here and built (once per distinct text) by the pest-based
    /// attribute parser. `line_ends`: a top-level alias value, which ends with its line.
    fn attr_value(&mut self, line_ends: bool) -> FResult<Attr> {
        let start = self.s.pos;
        let end = self.s.attr_span(start, line_ends);
        let text = self.token(end)?.trim_end();
        if text.is_empty() {
            return Err(unsupported());
        }
        Ok(self.b.attr_from_text(text)?)
    }

    /// `loc(...)` at the current position, if there is one. The common forms
    /// `loc("file":line:col)` and `loc(#alias)` are read here; any other goes, as one span, to
    /// the pest-based attribute parser.
    fn location(&mut self) -> FResult<Option<ParsedLoc<'a>>> {
        if !self.s.starts_with(b"loc") {
            return Ok(None);
        }
        let before = self.s.mark();
        let start = self.s.pos;
        self.s.pos += 3;
        self.s.skip_ws();
        if self.s.peek() != b'(' {
            self.s.reset(before);
            return Ok(None);
        }
        let open = self.s.mark();
        self.s.pos += 1;
        self.s.skip_ws();
        let tpos = self.s.pos;
        match self.s.peek() {
            b'"' => {
                if let Some(end) = self.s.loc_file(tpos) {
                    let text = self.token(Some(end))?;
                    self.s.skip_ws();
                    if self.s.eat(b')') {
                        return Ok(Some(ParsedLoc::Loc(self.b.file_loc(text, tpos)?)));
                    }
                }
            }
            b'#' => {
                if let Some(end) = self.s.alias_name(tpos, b'#') {
                    let name = &self.token(Some(end))?[1..];
                    self.s.skip_ws();
                    if self.s.eat(b')') {
                        return Ok(Some(match self.known_loc_alias(name)? {
                            Some(l) => ParsedLoc::Loc(l),
                            None => ParsedLoc::Alias(name),
                        }));
                    }
                }
            }
            _ => {}
        }
        self.s.reset(open);
        let end = self.s.paren_group(self.s.pos);
        self.token(end)?;
        let text = self.s.text(start, self.s.pos).ok_or_else(unsupported)?;
        // `balanced` reads `//` as text, the location grammar as a comment: leave those to pest.
        if text.contains("//") {
            return Err(unsupported());
        }
        let a = self.b.attr_from_text(text)?;
        match self.b.ctx.attr_kind(a) {
            AttrKind::Location(l) => Ok(Some(ParsedLoc::Loc(*l))),
            _ => Err(unsupported()),
        }
    }

    /// The location alias `#name` if it is defined already; an alias of anything else fails.
    fn known_loc_alias(&self, name: &str) -> FResult<Option<Loc>> {
        match self.b.attr_aliases.get(name) {
            None => Ok(None),
            Some(&a) => match self.b.ctx.attr_kind(a) {
                AttrKind::Location(l) => Ok(Some(*l)),
                _ => Err(unsupported()),
            },
        }
    }
}
