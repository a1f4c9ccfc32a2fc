//! The [`Context`]: owner of every IR object, in arenas addressed by ids.
//!
//! Operations sit in an intrusive doubly linked list inside their block, so inserting,
//! moving and erasing an op is O(1); values keep use lists, so replace-all-uses and
//! "last user" queries are cheap. Types, attributes, identifiers and locations are interned.

use crate::attrs::{AttrKind, IntValue};
use crate::diag::Diagnostic;
use crate::entity::{Attr, BlockId, Ident, Loc, OpId, RegionId, Type, Value};
use crate::intern::Interner;
use crate::location::LocKind;
use crate::opdef::{OpDef, Registry, Trait};
use crate::types::{FloatKind, Signedness, TypeKind};
use rustc_hash::FxHashMap;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueDef {
    /// Result `index` of `op`.
    Result { op: OpId, index: u32 },
    /// Argument `index` of `block`.
    BlockArg { block: BlockId, index: u32 },
}

/// One use of a value: operand `index` of `op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Use {
    pub op: OpId,
    pub index: u32,
}

#[derive(Clone, Debug)]
pub(crate) struct ValueData {
    pub ty: Type,
    pub def: ValueDef,
    pub uses: Vec<Use>,
    /// Location of a block argument (op results use their op's location).
    pub loc: Option<Loc>,
}

/// How many operands (or results) an op keeps inline, without a heap allocation.
const INLINE_VALUES: usize = 2;

/// The operands or results of an op. Most ops have one or two of each; keeping those inline
/// in the op saves two allocations per op, and, on every sweep over a large block, the two
/// cache misses of following their pointers.
#[derive(Clone, Debug)]
pub(crate) enum ValueList {
    Inline(u8, [Value; INLINE_VALUES]),
    Heap(Vec<Value>),
}

impl Default for ValueList {
    fn default() -> Self {
        ValueList::Inline(0, [Value(0); INLINE_VALUES])
    }
}

impl From<Vec<Value>> for ValueList {
    fn from(v: Vec<Value>) -> Self {
        if v.len() <= INLINE_VALUES {
            let mut a = [Value(0); INLINE_VALUES];
            a[..v.len()].copy_from_slice(&v);
            ValueList::Inline(v.len() as u8, a)
        } else {
            ValueList::Heap(v)
        }
    }
}

impl ValueList {
    fn push(&mut self, v: Value) {
        match self {
            ValueList::Inline(n, a) if (*n as usize) < INLINE_VALUES => {
                a[*n as usize] = v;
                *n += 1;
            }
            ValueList::Inline(..) => {
                let mut heap = self.to_vec();
                heap.push(v);
                *self = ValueList::Heap(heap);
            }
            ValueList::Heap(h) => h.push(v),
        }
    }
}

impl std::ops::Deref for ValueList {
    type Target = [Value];
    #[inline]
    fn deref(&self) -> &[Value] {
        match self {
            ValueList::Inline(n, a) => &a[..*n as usize],
            ValueList::Heap(v) => v,
        }
    }
}

impl std::ops::DerefMut for ValueList {
    #[inline]
    fn deref_mut(&mut self) -> &mut [Value] {
        match self {
            ValueList::Inline(n, a) => &mut a[..*n as usize],
            ValueList::Heap(v) => v,
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct OpData {
    pub name: Ident,
    pub def: Option<&'static OpDef>,
    pub operands: ValueList,
    pub results: ValueList,
    pub properties: Option<Attr>,
    pub attrs: Vec<(Ident, Attr)>,
    /// Regions and successors, which few ops have: boxed apart so that the record every walk
    /// reads stays two cache lines rather than three.
    pub nested: Option<Box<Nested>>,
    pub loc: Loc,
    pub erased: bool,
}

/// The regions and successors of an op that has any (see [`OpData::nested`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Nested {
    pub regions: Vec<RegionId>,
    pub successors: Vec<BlockId>,
}

/// Where an op sits: its block and neighbours. Kept apart from [`OpData`], in an arena of
/// their own, so that following a block's list (every pass, analysis and printer does) reads
/// 28 dense bytes per op rather than a cache line of a large op record.
#[derive(Clone, Debug, Default)]
pub(crate) struct OpLinks {
    pub parent: Option<BlockId>,
    pub prev: Option<OpId>,
    pub next: Option<OpId>,
    /// Position key inside the parent block (see [`Context::is_before_in_block`]); valid
    /// while the block's `order_valid` is set.
    pub order: Cell<u32>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct BlockData {
    pub args: Vec<Value>,
    pub first: Option<OpId>,
    pub last: Option<OpId>,
    pub parent: Option<RegionId>,
    pub len: u32,
    /// Whether every op of the block has a position key, increasing along the block.
    pub order_valid: Cell<bool>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct RegionData {
    pub blocks: Vec<BlockId>,
    pub parent: Option<OpId>,
}

/// Everything needed to create an operation.
#[derive(Clone, Debug)]
pub struct OpState {
    pub name: Ident,
    pub operands: Vec<Value>,
    pub result_types: Vec<Type>,
    pub properties: Option<Attr>,
    pub attrs: Vec<(Ident, Attr)>,
    pub num_regions: usize,
    pub successors: Vec<BlockId>,
    pub loc: Loc,
}

impl OpState {
    /// A state for op `name` at `loc`, with nothing else.
    pub fn new(name: Ident, loc: Loc) -> Self {
        OpState {
            name,
            operands: Vec::new(),
            result_types: Vec::new(),
            properties: None,
            attrs: Vec::new(),
            num_regions: 0,
            successors: Vec::new(),
            loc,
        }
    }
}

/// The size of the position key space of a block (keys are `u32`), see
/// [`Context::is_before_in_block`].
const ORDER_SPAN: u64 = 1 << 32;

/// The density threshold base `T` (1 < T < 2) of position key relabelling: a range of 2^i
/// keys is relabelled only while it holds at most (2/T)^i ops. Smaller values relabel larger
/// ranges less often; with 1.25 the key space serves blocks of up to about 3.4 million ops
/// before an insertion into a full gap renumbers the whole block.
const ORDER_DENSITY: f64 = 1.25;

/// Owner of the IR: arenas of ops, blocks, regions and values; interned types, attributes,
/// identifiers and locations; the op registry.
pub struct Context {
    pub(crate) ops: Vec<OpData>,
    /// The layout of each op, by op index (see [`OpLinks`]).
    pub(crate) links: Vec<OpLinks>,
    pub(crate) blocks: Vec<BlockData>,
    pub(crate) regions: Vec<RegionData>,
    pub(crate) values: Vec<ValueData>,
    types: Interner<TypeKind>,
    attrs: Interner<AttrKind>,
    locs: Interner<LocKind>,
    idents: FxHashMap<Box<str>, u32>,
    ident_strs: Vec<Box<str>>,
    registry: &'static Registry,
    extra_ops: Registry,
    /// Op definitions by name identifier, filled on first use: creating an op must not hash
    /// (or copy) its name text every time. Cleared when an op is registered.
    op_defs_by_ident: FxHashMap<Ident, Option<&'static OpDef>>,
    /// Accept ops of unregistered dialects (`--allow-unregistered-dialect`).
    pub allow_unregistered: bool,
    unknown_loc: Loc,
    /// Symbol tables indexed by [`Context::lookup_symbol`], only while a
    /// [`Context::with_symbol_cache`] call runs (`None` otherwise).
    symbol_cache: RefCell<Option<SymbolCache>>,
    /// Symbol tables pinned by [`Context::pin_symbol_table`], with their index.
    pinned_symbols: RefCell<Vec<(OpId, Arc<SymbolIndex>)>>,
    /// Position keys written by relabelling and renumbering (see
    /// [`Context::order_keys_written`]).
    order_keys_written: Cell<u64>,
    /// For each value with a long use list, where each of its uses sits in the list, so that
    /// removing a use (erasing an op, setting an operand) does not search thousands of uses
    /// of a weight or constant that every layer reads. Present while a list has at least
    /// [`INDEXED_USES`]` / 2` uses, from the time it reaches [`INDEXED_USES`].
    use_index: FxHashMap<Value, FxHashMap<Use, u32>>,
}

/// The use list length from which a value's uses are indexed ([`Context::use_index`]).
const INDEXED_USES: usize = 64;

/// The symbol tables [`Context::lookup_symbol`] has indexed: for each table op, the first
/// op (in block order) defining each symbol name, which is what the linear search finds;
/// and for each block, the symbol tables enclosing it (the ops the search walks up through).
/// A symbol table's index: each name to the first op (in block order) defining it.
type SymbolIndex = FxHashMap<Box<str>, OpId>;

#[derive(Default)]
struct SymbolCache {
    /// Each index, with its table op and whether it came from a pin (and may be stale).
    tables: Vec<(Arc<SymbolIndex>, OpId, bool)>,
    /// Table op -> position in `tables`.
    table_of: FxHashMap<OpId, u32>,
    /// Block index -> positions in `tables` of the tables enclosing the block, innermost
    /// first (`None`: not worked out yet).
    enclosing: Vec<Option<Box<[u32]>>>,
}

impl SymbolCache {
    /// The position of `table`'s index, built on first use.
    fn table(&mut self, ctx: &Context, table: OpId) -> usize {
        if let Some(&t) = self.table_of.get(&table) {
            return t as usize;
        }
        let t = self.tables.len();
        let entry = match ctx.pinned_index(table) {
            Some(index) => (index, table, true),
            None => (Arc::new(ctx.index_symbol_table(table)), table, false),
        };
        self.tables.push(entry);
        self.table_of.insert(table, t as u32);
        t
    }

    /// `name` in index `t`. An index shared from a pin is checked (see
    /// [`Context::pin_symbol_table`]): a hit that no longer defines `name` in the table, or a
    /// miss, rebuilds the index from the table as it is now.
    fn get(&mut self, ctx: &Context, t: usize, name: &str) -> Option<OpId> {
        let (index, table, pinned) = &self.tables[t];
        let hit = index.get(name).copied();
        if !*pinned || hit.is_some_and(|s| ctx.defines_symbol(*table, s, name)) {
            return hit;
        }
        let table = *table;
        self.tables[t] = (Arc::new(ctx.index_symbol_table(table)), table, false);
        self.tables[t].0.get(name).copied()
    }

    /// The tables enclosing block `b`, worked out on first use.
    fn enclosing(&mut self, ctx: &Context, b: BlockId) -> &[u32] {
        if b.index() >= self.enclosing.len() {
            self.enclosing.resize(b.index() + 1, None);
        }
        if self.enclosing[b.index()].is_none() {
            let mut chain = Vec::new();
            let mut cur = ctx.block_parent_op(b);
            while let Some(o) = cur {
                if ctx.is_symbol_table(o) {
                    chain.push(self.table(ctx, o) as u32);
                }
                cur = ctx.parent_op(o);
            }
            self.enclosing[b.index()] = Some(chain.into());
        }
        self.enclosing[b.index()].as_deref().unwrap_or_default()
    }

    /// [`Context::lookup_symbol`] through the indexes.
    fn lookup(&mut self, ctx: &Context, from: OpId, name: &str) -> Option<OpId> {
        // An op without regions holds no symbols, whatever its traits.
        if !ctx.op_regions(from).is_empty() && ctx.is_symbol_table(from) {
            let t = self.table(ctx, from);
            if let Some(s) = self.get(ctx, t, name) {
                return Some(s);
            }
        }
        let b = ctx.op_parent(from)?;
        let mut i = 0;
        while let Some(&t) = self.enclosing(ctx, b).get(i) {
            if let Some(s) = self.get(ctx, t as usize, name) {
                return Some(s);
            }
            i += 1;
        }
        None
    }
}

impl Default for Context {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Context({} ops, {} values)",
            self.ops.len(),
            self.values.len()
        )
    }
}

impl Context {
    /// A context knowing every op registered in this binary.
    pub fn new() -> Self {
        let mut ctx = Context {
            ops: Vec::new(),
            links: Vec::new(),
            blocks: Vec::new(),
            regions: Vec::new(),
            values: Vec::new(),
            types: Interner::default(),
            attrs: Interner::default(),
            locs: Interner::default(),
            idents: FxHashMap::default(),
            ident_strs: Vec::new(),
            registry: Registry::global(),
            extra_ops: Registry::default(),
            op_defs_by_ident: FxHashMap::default(),
            allow_unregistered: false,
            unknown_loc: Loc(0),
            symbol_cache: RefCell::new(None),
            pinned_symbols: RefCell::new(Vec::new()),
            order_keys_written: Cell::new(0),
            use_index: FxHashMap::default(),
        };
        ctx.unknown_loc = ctx.loc(LocKind::Unknown);
        ctx
    }

    /// Registers an op definition for this context only (in addition to the global ones).
    pub fn register_op(&mut self, def: &'static OpDef) {
        self.extra_ops.insert(def);
        self.op_defs_by_ident.clear();
    }

    /// The definition of the op named by identifier `name`, through the per-context cache.
    fn op_def_by_ident(&mut self, name: Ident) -> Option<&'static OpDef> {
        if let Some(&d) = self.op_defs_by_ident.get(&name) {
            return d;
        }
        let d = self.op_def_by_name(&self.ident_strs[name.index()]);
        self.op_defs_by_ident.insert(name, d);
        d
    }

    /// The definition of op `name`, if registered.
    pub fn op_def_by_name(&self, name: &str) -> Option<&'static OpDef> {
        self.extra_ops.get(name).or_else(|| self.registry.get(name))
    }

    /// Whether ops of `dialect` are known.
    pub fn is_dialect_registered(&self, dialect: &str) -> bool {
        self.extra_ops.has_dialect(dialect) || self.registry.has_dialect(dialect)
    }

    /// The global registry.
    pub fn registry(&self) -> &'static Registry {
        self.registry
    }

    // ----- identifiers --------------------------------------------------------------------

    /// Interns a string.
    pub fn ident(&mut self, s: &str) -> Ident {
        if let Some(&i) = self.idents.get(s) {
            return Ident(i);
        }
        let i = self.ident_strs.len() as u32;
        self.ident_strs.push(s.into());
        self.idents.insert(s.into(), i);
        Ident(i)
    }
    /// Looks an identifier up without interning it.
    pub fn find_ident(&self, s: &str) -> Option<Ident> {
        self.idents.get(s).map(|&i| Ident(i))
    }
    /// The text of an identifier.
    #[inline]
    pub fn ident_str(&self, i: Ident) -> &str {
        &self.ident_strs[i.index()]
    }

    // ----- types --------------------------------------------------------------------------

    /// Interns a type.
    pub fn ty(&mut self, k: TypeKind) -> Type {
        Type(self.types.intern(k))
    }
    /// The structure of a type.
    #[inline]
    pub fn type_kind(&self, t: Type) -> &TypeKind {
        self.types.get(t.0)
    }
    /// `iN` (signless).
    pub fn int_type(&mut self, width: u32) -> Type {
        self.ty(TypeKind::Integer {
            width,
            signedness: Signedness::Signless,
        })
    }
    /// A float type.
    pub fn float_type(&mut self, k: FloatKind) -> Type {
        self.ty(TypeKind::Float(k))
    }
    /// `index`.
    pub fn index_type(&mut self) -> Type {
        self.ty(TypeKind::Index)
    }
    /// `none`.
    pub fn none_type(&mut self) -> Type {
        self.ty(TypeKind::None)
    }
    /// A ranked tensor type without encoding.
    pub fn tensor_type(&mut self, shape: &[i64], elem: Type) -> Type {
        self.ty(TypeKind::Tensor {
            shape: shape.to_vec(),
            elem,
            encoding: None,
        })
    }
    /// A function type.
    pub fn function_type(&mut self, inputs: Vec<Type>, results: Vec<Type>) -> Type {
        self.ty(TypeKind::Function { inputs, results })
    }

    // ----- attributes ---------------------------------------------------------------------

    /// Interns an attribute.
    pub fn attr(&mut self, k: AttrKind) -> Attr {
        Attr(self.attrs.intern(k))
    }
    /// The structure of an attribute.
    #[inline]
    pub fn attr_kind(&self, a: Attr) -> &AttrKind {
        self.attrs.get(a.0)
    }
    /// A string attribute.
    pub fn str_attr(&mut self, s: &str) -> Attr {
        self.attr(AttrKind::String(s.as_bytes().to_vec()))
    }
    /// An integer attribute of type `iN`.
    pub fn int_attr(&mut self, v: i64, width: u32) -> Attr {
        let ty = self.int_type(width);
        self.attr(AttrKind::Integer {
            value: IntValue::Small(v as i128),
            ty,
        })
    }
    /// The unit attribute.
    pub fn unit_attr(&mut self) -> Attr {
        self.attr(AttrKind::Unit)
    }
    /// A flat symbol reference `@name`.
    pub fn symbol_ref(&mut self, name: &str) -> Attr {
        let root = self.ident(name);
        self.attr(AttrKind::SymbolRef {
            root,
            nested: Vec::new(),
        })
    }
    /// A type attribute.
    pub fn type_attr(&mut self, t: Type) -> Attr {
        self.attr(AttrKind::Type(t))
    }
    /// A dictionary attribute; entries are sorted by key text.
    pub fn dict_attr(&mut self, mut entries: Vec<(Ident, Attr)>) -> Attr {
        self.sort_named(&mut entries);
        self.attr(AttrKind::Dict(entries))
    }
    /// Sorts named attributes by key text (MLIR's canonical order).
    pub fn sort_named(&self, entries: &mut [(Ident, Attr)]) {
        entries.sort_by(|a, b| self.ident_str(a.0).cmp(self.ident_str(b.0)));
    }
    /// An integer attribute's value as i64.
    pub fn attr_as_i64(&self, a: Attr) -> Option<i64> {
        match self.attr_kind(a) {
            AttrKind::Integer { value, .. } => value.as_i64(),
            AttrKind::Bool(b) => Some(*b as i64),
            _ => None,
        }
    }
    /// A float (or integer) attribute's value as f64.
    pub fn attr_as_f64(&self, a: Attr) -> Option<f64> {
        match self.attr_kind(a) {
            AttrKind::Float { value, .. } => Some(value.to_f64()),
            AttrKind::Integer { value, .. } => value.as_i64().map(|v| v as f64),
            _ => None,
        }
    }
    /// A string attribute's text (if valid UTF-8).
    pub fn attr_as_str(&self, a: Attr) -> Option<&str> {
        match self.attr_kind(a) {
            AttrKind::String(s) => std::str::from_utf8(s).ok(),
            _ => None,
        }
    }
    /// A flat symbol reference's name.
    pub fn attr_as_symbol(&self, a: Attr) -> Option<&str> {
        match self.attr_kind(a) {
            AttrKind::SymbolRef { root, nested } if nested.is_empty() => {
                Some(self.ident_str(*root))
            }
            _ => None,
        }
    }
    /// The elements of an `array<i64: ...>` or `[1, 2]` attribute.
    pub fn attr_as_i64_array(&self, a: Attr) -> Option<Vec<i64>> {
        match self.attr_kind(a) {
            AttrKind::DenseArray { values, .. } => values
                .iter()
                .map(|v| match v {
                    crate::attrs::DenseElem::Int(i) => i.as_i64(),
                    _ => None,
                })
                .collect(),
            AttrKind::Array(items) => items.iter().map(|x| self.attr_as_i64(*x)).collect(),
            _ => None,
        }
    }

    // ----- locations ----------------------------------------------------------------------

    /// Interns a location.
    pub fn loc(&mut self, k: LocKind) -> Loc {
        Loc(self.locs.intern(k))
    }
    /// The unknown location.
    pub fn unknown_loc(&self) -> Loc {
        self.unknown_loc
    }
    /// A file:line:col location.
    pub fn file_loc(&mut self, file: &str, line: u32, col: u32) -> Loc {
        let file = self.ident(file);
        self.loc(LocKind::FileLineCol { file, line, col })
    }
    /// The structure of a location.
    #[inline]
    pub fn loc_kind(&self, l: Loc) -> &LocKind {
        self.locs.get(l.0)
    }

    // ----- values -------------------------------------------------------------------------

    fn new_value(&mut self, ty: Type, def: ValueDef, loc: Option<Loc>) -> Value {
        let v = Value(self.values.len() as u32);
        self.values.push(ValueData {
            ty,
            def,
            uses: Vec::new(),
            loc,
        });
        v
    }
    /// The type of a value.
    #[inline]
    pub fn value_type(&self, v: Value) -> Type {
        self.values[v.index()].ty
    }
    /// Changes the type of a value (used by lowerings that add encodings).
    pub fn set_value_type(&mut self, v: Value, ty: Type) {
        self.values[v.index()].ty = ty;
    }
    /// Where a value is defined.
    #[inline]
    pub fn value_def(&self, v: Value) -> ValueDef {
        self.values[v.index()].def
    }
    /// The op defining `v`, if it is an op result.
    pub fn defining_op(&self, v: Value) -> Option<OpId> {
        match self.value_def(v) {
            ValueDef::Result { op, .. } => Some(op),
            ValueDef::BlockArg { .. } => None,
        }
    }
    /// The uses of a value, in no particular order.
    #[inline]
    pub fn uses(&self, v: Value) -> &[Use] {
        &self.values[v.index()].uses
    }
    /// Whether the value has no uses.
    pub fn use_empty(&self, v: Value) -> bool {
        self.values[v.index()].uses.is_empty()
    }
    /// Location of a block argument, if set.
    pub fn value_loc(&self, v: Value) -> Option<Loc> {
        self.values[v.index()].loc
    }
    /// Sets the location of a block argument.
    pub fn set_value_loc(&mut self, v: Value, loc: Loc) {
        self.values[v.index()].loc = Some(loc);
    }
    /// The block holding the value's definition.
    pub fn value_block(&self, v: Value) -> Option<BlockId> {
        match self.value_def(v) {
            ValueDef::Result { op, .. } => self.op_parent(op),
            ValueDef::BlockArg { block, .. } => Some(block),
        }
    }

    fn add_use(&mut self, v: Value, u: Use) {
        let uses = &mut self.values[v.index()].uses;
        uses.push(u);
        let n = uses.len();
        if n > INDEXED_USES / 2 {
            self.index_new_uses(v, n - 1);
        }
    }

    /// Records in [`Context::use_index`] the uses of `v` from position `from` on, just
    /// appended; builds `v`'s index when its list has grown to [`INDEXED_USES`].
    fn index_new_uses(&mut self, v: Value, from: usize) {
        let uses = &self.values[v.index()].uses;
        match self.use_index.get_mut(&v) {
            Some(index) => {
                for (p, &u) in uses.iter().enumerate().skip(from) {
                    index.insert(u, p as u32);
                }
            }
            None if uses.len() >= INDEXED_USES => {
                let index = uses
                    .iter()
                    .enumerate()
                    .map(|(p, &u)| (u, p as u32))
                    .collect();
                self.use_index.insert(v, index);
            }
            None => {}
        }
    }

    /// Removes use `u` of `v`: the last use takes its place in the list (the order of the
    /// rest is kept otherwise). O(1) on an indexed list, a search on a short one.
    fn remove_use(&mut self, v: Value, u: Use) {
        let uses = &mut self.values[v.index()].uses;
        let index = if uses.len() >= INDEXED_USES / 2 {
            self.use_index.get_mut(&v)
        } else {
            None
        };
        let p = match &index {
            Some(index) => index.get(&u).map(|&p| p as usize),
            None => uses.iter().position(|x| *x == u),
        };
        let Some(p) = p else { return };
        uses.swap_remove(p);
        if let Some(index) = index {
            index.remove(&u);
            if let Some(&moved) = uses.get(p) {
                index.insert(moved, p as u32);
            }
            if uses.len() < INDEXED_USES / 2 {
                self.use_index.remove(&v);
            }
        }
    }

    /// Replaces every use of `from` with `to`.
    pub fn replace_all_uses(&mut self, from: Value, to: Value) {
        if from == to {
            return;
        }
        let uses = std::mem::take(&mut self.values[from.index()].uses);
        if uses.len() >= INDEXED_USES / 2 {
            self.use_index.remove(&from);
        }
        for u in &uses {
            self.ops[u.op.index()].operands[u.index as usize] = to;
        }
        let to_uses = &mut self.values[to.index()].uses;
        let start = to_uses.len();
        to_uses.extend(uses);
        let n = to_uses.len();
        if n > INDEXED_USES / 2 {
            self.index_new_uses(to, start);
        }
    }

    /// Replaces the uses of `from` with `to` where `pred` accepts the using op.
    pub fn replace_uses_where(
        &mut self,
        from: Value,
        to: Value,
        pred: impl Fn(&Context, OpId) -> bool,
    ) {
        let uses: Vec<Use> = self.uses(from).to_vec();
        for u in uses {
            if pred(self, u.op) {
                self.set_operand(u.op, u.index as usize, to);
            }
        }
    }

    // ----- operations ---------------------------------------------------------------------

    /// Creates a detached op (not in any block) with fresh results and empty regions.
    pub fn create_op(&mut self, st: OpState) -> OpId {
        let id = OpId(self.ops.len() as u32);
        let def = self.op_def_by_ident(st.name);
        let mut attrs = st.attrs;
        self.sort_named(&mut attrs);
        self.ops.push(OpData {
            name: st.name,
            def,
            operands: ValueList::default(),
            results: ValueList::default(),
            properties: st.properties,
            attrs,
            nested: (st.num_regions > 0 || !st.successors.is_empty()).then(|| {
                Box::new(Nested {
                    regions: Vec::with_capacity(st.num_regions),
                    successors: st.successors,
                })
            }),
            loc: st.loc,
            erased: false,
        });
        self.links.push(OpLinks::default());
        for (i, v) in st.operands.iter().enumerate() {
            self.add_use(
                *v,
                Use {
                    op: id,
                    index: i as u32,
                },
            );
        }
        self.ops[id.index()].operands = st.operands.into();
        let mut results = ValueList::default();
        for (i, t) in st.result_types.iter().enumerate() {
            let v = self.new_value(
                *t,
                ValueDef::Result {
                    op: id,
                    index: i as u32,
                },
                None,
            );
            results.push(v);
        }
        self.ops[id.index()].results = results;
        for _ in 0..st.num_regions {
            let r = self.new_region();
            self.regions[r.index()].parent = Some(id);
            if let Some(n) = self.ops[id.index()].nested.as_mut() {
                n.regions.push(r);
            }
        }
        id
    }

    /// Makes room for `ops` more ops and `values` more values without reallocating.
    pub fn reserve(&mut self, ops: usize, values: usize) {
        self.ops.reserve(ops);
        self.links.reserve(ops);
        self.values.reserve(values);
    }

    /// Number of op slots ever allocated (ids are below this).
    pub fn num_op_slots(&self) -> usize {
        self.ops.len()
    }
    /// Number of value slots ever allocated.
    pub fn num_value_slots(&self) -> usize {
        self.values.len()
    }

    /// The op's name.
    #[inline]
    pub fn op_name(&self, op: OpId) -> &str {
        self.ident_str(self.ops[op.index()].name)
    }
    /// The op's interned name.
    #[inline]
    pub fn op_name_ident(&self, op: OpId) -> Ident {
        self.ops[op.index()].name
    }
    /// The op's registered definition, if any.
    #[inline]
    pub fn op_def(&self, op: OpId) -> Option<&'static OpDef> {
        self.ops[op.index()].def
    }
    /// Whether the op's definition carries trait `t`.
    #[inline]
    pub fn op_has_trait(&self, op: OpId, t: Trait) -> bool {
        self.op_def(op).is_some_and(|d| d.has_trait(t))
    }
    /// Hints the CPU to start loading `op`'s record (its name, operands, results, attributes),
    /// for sweeps that know which op comes next but not yet what it holds: a large block's
    /// ops lie scattered over the arena once passes have inserted and moved ops, and walking
    /// one that is not in cache stalls on two or three misses per op. No effect on what any
    /// read returns; a no-op for an id out of range and off x86_64.
    #[inline]
    pub fn prefetch_op(&self, op: OpId) {
        if let Some(d) = self.ops.get(op.index()) {
            prefetch_bytes(
                d as *const OpData as *const u8,
                std::mem::size_of::<OpData>(),
            );
        }
    }
    /// The ops of `ops` in order, each one's record requested [`PREFETCH_DISTANCE`] ops before
    /// it is handed out: for sweeps over an op order held in a vector (a schedule, a block
    /// collected earlier), which the block walks' own lookahead does not cover.
    pub fn prefetched<'a>(&'a self, ops: &'a [OpId]) -> impl Iterator<Item = OpId> + 'a {
        for &op in ops.iter().take(PREFETCH_DISTANCE) {
            self.prefetch_op(op);
        }
        ops.iter().enumerate().map(move |(i, &op)| {
            if let Some(&a) = ops.get(i + PREFETCH_DISTANCE) {
                self.prefetch_op(a);
            }
            op
        })
    }
    /// Requests the records of the first [`PREFETCH_DISTANCE`] ops from `first` on; returns
    /// the op after them, where a walk's lookahead continues.
    fn prefetch_run(&self, first: Option<OpId>) -> Option<OpId> {
        let mut ahead = first;
        for _ in 0..PREFETCH_DISTANCE {
            let a = ahead?;
            self.prefetch_op(a);
            ahead = self.next_op(a);
        }
        ahead
    }
    /// Hints the CPU to start loading the records of `op`'s operands (their types and
    /// defining ops); see [`Context::prefetch_op`]. Reads `op`'s own record, so issue it some
    /// ops after `prefetch_op` of the same op.
    #[inline]
    pub fn prefetch_operands(&self, op: OpId) {
        if let Some(d) = self.ops.get(op.index()) {
            for v in d.operands.iter() {
                if let Some(vd) = self.values.get(v.index()) {
                    prefetch_bytes(vd as *const ValueData as *const u8, 1);
                }
            }
        }
    }
    /// The op's operands.
    #[inline]
    pub fn operands(&self, op: OpId) -> &[Value] {
        &self.ops[op.index()].operands
    }
    /// Operand `i`.
    #[inline]
    pub fn operand(&self, op: OpId, i: usize) -> Value {
        self.ops[op.index()].operands[i]
    }
    /// Sets operand `i`, keeping use lists right.
    pub fn set_operand(&mut self, op: OpId, i: usize, v: Value) {
        let old = self.ops[op.index()].operands[i];
        if old == v {
            return;
        }
        self.remove_use(
            old,
            Use {
                op,
                index: i as u32,
            },
        );
        self.ops[op.index()].operands[i] = v;
        self.add_use(
            v,
            Use {
                op,
                index: i as u32,
            },
        );
    }
    /// Replaces the whole operand list.
    pub fn set_operands(&mut self, op: OpId, vals: Vec<Value>) {
        let old = std::mem::take(&mut self.ops[op.index()].operands);
        for (i, v) in old.iter().enumerate() {
            self.remove_use(
                *v,
                Use {
                    op,
                    index: i as u32,
                },
            );
        }
        for (i, v) in vals.iter().enumerate() {
            self.add_use(
                *v,
                Use {
                    op,
                    index: i as u32,
                },
            );
        }
        self.ops[op.index()].operands = vals.into();
    }
    /// The op's results.
    #[inline]
    pub fn results(&self, op: OpId) -> &[Value] {
        &self.ops[op.index()].results
    }
    /// Result `i`.
    #[inline]
    pub fn result(&self, op: OpId, i: usize) -> Value {
        self.ops[op.index()].results[i]
    }
    /// The op's regions.
    #[inline]
    pub fn op_regions(&self, op: OpId) -> &[RegionId] {
        self.ops[op.index()]
            .nested
            .as_deref()
            .map_or(&[], |n| &n.regions)
    }
    /// The op's successor blocks.
    pub fn successors(&self, op: OpId) -> &[BlockId] {
        self.ops[op.index()]
            .nested
            .as_deref()
            .map_or(&[], |n| &n.successors)
    }
    /// The op's location.
    #[inline]
    pub fn op_loc(&self, op: OpId) -> Loc {
        self.ops[op.index()].loc
    }
    /// Sets the op's location.
    pub fn set_op_loc(&mut self, op: OpId, loc: Loc) {
        self.ops[op.index()].loc = loc;
    }
    /// The op's properties (`<{...}>`), if any.
    pub fn properties(&self, op: OpId) -> Option<Attr> {
        self.ops[op.index()].properties
    }
    /// Sets the op's properties.
    pub fn set_properties(&mut self, op: OpId, p: Option<Attr>) {
        self.ops[op.index()].properties = p;
    }
    /// The op's discardable attributes, sorted by name.
    #[inline]
    pub fn attrs(&self, op: OpId) -> &[(Ident, Attr)] {
        &self.ops[op.index()].attrs
    }
    /// A discardable attribute by name.
    pub fn get_attr(&self, op: OpId, name: &str) -> Option<Attr> {
        self.ops[op.index()]
            .attrs
            .iter()
            .find(|(k, _)| self.ident_str(*k) == name)
            .map(|(_, v)| *v)
    }
    /// A property by name (an entry of the `<{...}>` dictionary).
    pub fn get_prop(&self, op: OpId, name: &str) -> Option<Attr> {
        let p = self.ops[op.index()].properties?;
        match self.attr_kind(p) {
            AttrKind::Dict(entries) => entries
                .iter()
                .find(|(k, _)| self.ident_str(*k) == name)
                .map(|(_, v)| *v),
            _ => None,
        }
    }
    /// An inherent attribute: from the properties first, then the attribute dictionary.
    pub fn inherent_attr(&self, op: OpId, name: &str) -> Option<Attr> {
        self.get_prop(op, name).or_else(|| self.get_attr(op, name))
    }
    /// [`Context::inherent_attr`] by interned name (see [`Context::find_ident`]): keys are
    /// interned, so comparing them is comparing their text, without reading it.
    pub fn inherent_attr_id(&self, op: OpId, name: Ident) -> Option<Attr> {
        let data = &self.ops[op.index()];
        if let Some(p) = data.properties {
            if let AttrKind::Dict(entries) = self.attr_kind(p) {
                if let Some((_, v)) = entries.iter().find(|(k, _)| *k == name) {
                    return Some(*v);
                }
            }
        }
        data.attrs.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
    }
    /// Sets a discardable attribute (keeps the list sorted).
    pub fn set_attr(&mut self, op: OpId, name: &str, value: Attr) {
        let key = self.ident(name);
        let pos = {
            let attrs = &self.ops[op.index()].attrs;
            attrs.binary_search_by(|(k, _)| self.ident_str(*k).cmp(name))
        };
        let attrs = &mut self.ops[op.index()].attrs;
        match pos {
            Ok(i) => attrs[i].1 = value,
            Err(i) => attrs.insert(i, (key, value)),
        }
    }
    /// Removes a discardable attribute; returns it if present.
    pub fn remove_attr(&mut self, op: OpId, name: &str) -> Option<Attr> {
        let pos = self.ops[op.index()]
            .attrs
            .iter()
            .position(|(k, _)| self.ident_str(*k) == name)?;
        Some(self.ops[op.index()].attrs.remove(pos).1)
    }
    /// Whether the op was erased.
    pub fn is_erased(&self, op: OpId) -> bool {
        self.ops[op.index()].erased
    }

    /// Builds the error diagnostic `'name' op message` at the op's location.
    pub fn op_error(&self, op: OpId, message: impl std::fmt::Display) -> Diagnostic {
        Diagnostic::error(
            self.op_loc(op),
            format!("'{}' op {}", self.op_name(op), message),
        )
    }

    // ----- blocks and regions -------------------------------------------------------------

    /// The ops of `b` in order, as a vector: follows the block's list alone (dense links),
    /// without the op-record requests of [`Context::block_ops`], which are wasted when the
    /// records are read only later (by then a large block's first records are evicted again).
    pub fn block_op_list(&self, b: BlockId) -> Vec<OpId> {
        let mut v = Vec::with_capacity(self.block_len(b));
        let mut c = self.block_first(b);
        while let Some(o) = c {
            v.push(o);
            c = self.next_op(o);
        }
        v
    }

    /// Creates a detached region.
    pub fn new_region(&mut self) -> RegionId {
        let r = RegionId(self.regions.len() as u32);
        self.regions.push(RegionData::default());
        r
    }
    /// Creates a detached block with arguments of the given types.
    pub fn new_block(&mut self, arg_types: &[Type]) -> BlockId {
        let b = BlockId(self.blocks.len() as u32);
        self.blocks.push(BlockData::default());
        for t in arg_types {
            self.add_block_arg(b, *t, None);
        }
        b
    }
    /// Appends an argument to a block.
    pub fn add_block_arg(&mut self, b: BlockId, ty: Type, loc: Option<Loc>) -> Value {
        let index = self.blocks[b.index()].args.len() as u32;
        let v = self.new_value(ty, ValueDef::BlockArg { block: b, index }, loc);
        self.blocks[b.index()].args.push(v);
        v
    }
    /// A block's arguments.
    #[inline]
    pub fn block_args(&self, b: BlockId) -> &[Value] {
        &self.blocks[b.index()].args
    }
    /// Appends a block to a region.
    pub fn append_block(&mut self, r: RegionId, b: BlockId) {
        self.blocks[b.index()].parent = Some(r);
        self.regions[r.index()].blocks.push(b);
    }
    /// A region's blocks, in order.
    #[inline]
    pub fn region_blocks(&self, r: RegionId) -> &[BlockId] {
        &self.regions[r.index()].blocks
    }
    /// The op owning a region.
    pub fn region_parent(&self, r: RegionId) -> Option<OpId> {
        self.regions[r.index()].parent
    }
    /// The region holding a block.
    pub fn block_parent(&self, b: BlockId) -> Option<RegionId> {
        self.blocks[b.index()].parent
    }
    /// The op whose region holds a block.
    pub fn block_parent_op(&self, b: BlockId) -> Option<OpId> {
        self.block_parent(b).and_then(|r| self.region_parent(r))
    }
    /// The block holding an op.
    #[inline]
    pub fn op_parent(&self, op: OpId) -> Option<BlockId> {
        self.links[op.index()].parent
    }
    /// The op enclosing an op (the owner of its block's region).
    pub fn parent_op(&self, op: OpId) -> Option<OpId> {
        self.op_parent(op).and_then(|b| self.block_parent_op(b))
    }
    /// First op of a block.
    #[inline]
    pub fn block_first(&self, b: BlockId) -> Option<OpId> {
        self.blocks[b.index()].first
    }
    /// Last op of a block.
    #[inline]
    pub fn block_last(&self, b: BlockId) -> Option<OpId> {
        self.blocks[b.index()].last
    }
    /// Number of ops in a block.
    pub fn block_len(&self, b: BlockId) -> usize {
        self.blocks[b.index()].len as usize
    }
    /// The op after `op` in its block.
    #[inline]
    pub fn next_op(&self, op: OpId) -> Option<OpId> {
        self.links[op.index()].next
    }
    /// The op before `op` in its block.
    #[inline]
    pub fn prev_op(&self, op: OpId) -> Option<OpId> {
        self.links[op.index()].prev
    }
    /// Iterates over the ops of a block in order.
    pub fn block_ops(&self, b: BlockId) -> BlockOps<'_> {
        BlockOps::new(self, self.block_first(b))
    }

    // ----- layout edits (all O(1)) ---------------------------------------------------------

    fn link(&mut self, op: OpId, block: BlockId, prev: Option<OpId>, next: Option<OpId>) {
        debug_assert!(
            self.links[op.index()].parent.is_none(),
            "op already in a block"
        );
        {
            let d = &mut self.links[op.index()];
            d.parent = Some(block);
            d.prev = prev;
            d.next = next;
        }
        match prev {
            Some(p) => self.links[p.index()].next = Some(op),
            None => self.blocks[block.index()].first = Some(op),
        }
        match next {
            Some(n) => self.links[n.index()].prev = Some(op),
            None => self.blocks[block.index()].last = Some(op),
        }
        let bd = &mut self.blocks[block.index()];
        bd.len += 1;
        if bd.order_valid.get() && !self.place_in_order(op, prev, next) {
            self.blocks[block.index()].order_valid.set(false);
        }
    }

    /// Gives `op`, just linked between `prev` and `next` in a block whose ops all have
    /// position keys, a key between theirs: the midpoint of the gap, or, where there is none,
    /// after relabelling the smallest enclosing key range that is sparse enough (see
    /// [`Context::is_before_in_block`]). `false` when even the whole key space is too dense:
    /// the block is then renumbered at the next query.
    fn place_in_order(&mut self, op: OpId, prev: Option<OpId>, next: Option<OpId>) -> bool {
        let key = |o: Option<OpId>, none: i64| o.map_or(none, |o| self.order_key(o) as i64);
        // The key space is [0, ORDER_SPAN); -1 and ORDER_SPAN stand for the block's ends.
        let (lo, hi) = (key(prev, -1), key(next, ORDER_SPAN as i64));
        if hi - lo >= 2 {
            self.links[op.index()]
                .order
                .set((lo + (hi - lo) / 2) as u32);
            return true;
        }
        // No gap: Bender et al.'s order maintenance ("Two simplified algorithms for
        // maintaining order in a list", 2002). The ranges of 2^i keys aligned around the
        // neighbour's key, from i = 1 up, are sparse enough when they hold at most
        // (2 / ORDER_DENSITY)^i ops (`op` included); the first one is relabelled evenly.
        // That costs O(log n) amortized per insertion while a block holds fewer than
        // (2 / ORDER_DENSITY)^32 ops.
        let anchor = self.order_key(prev.or(next).expect("a neighbour without a gap")) as u64;
        let (mut first, mut last, mut count) = (op, op, 1u64);
        let mut limit = 1.0f64;
        for i in 1..=32u32 {
            limit *= 2.0 / ORDER_DENSITY;
            let size = 1u64 << i;
            let base = anchor & !(size - 1);
            while let Some(p) = self.links[first.index()].prev {
                if (self.order_key(p) as u64) < base {
                    break;
                }
                first = p;
                count += 1;
            }
            while let Some(n) = self.links[last.index()].next {
                if self.order_key(n) as u64 >= base + size {
                    break;
                }
                last = n;
                count += 1;
            }
            if count as f64 <= limit {
                self.spread_keys(first, count, base, size);
                return true;
            }
        }
        false
    }

    /// `op`'s position key (meaningful only while its block's order is valid).
    #[inline]
    fn order_key(&self, op: OpId) -> u32 {
        self.links[op.index()].order.get()
    }

    /// Gives the `count` ops from `first` on keys spread evenly over `[base, base + size)`
    /// (`count <= size`), the i-th one at the middle of the i-th of `count` equal parts.
    fn spread_keys(&self, first: OpId, count: u64, base: u64, size: u64) {
        // Key i is base + (2i + 1)·size / (2·count), stepped without a division per op.
        let d = 2 * count;
        let (step_q, step_r) = (2 * size / d, 2 * size % d);
        let (mut q, mut r) = (size / d, size % d);
        let mut cur = Some(first);
        for _ in 0..count {
            let o = cur.expect("`count` ops from `first`");
            self.links[o.index()].order.set((base + q) as u32);
            q += step_q;
            r += step_r;
            if r >= d {
                q += 1;
                r -= d;
            }
            cur = self.links[o.index()].next;
        }
        self.order_keys_written
            .set(self.order_keys_written.get() + count);
    }

    /// How many position keys relabelling and renumbering have written so far, in every
    /// block (see [`Context::is_before_in_block`]): the work behind order queries, for tests
    /// and diagnostics. Giving an inserted op the midpoint of a gap writes no key counted
    /// here.
    pub fn order_keys_written(&self) -> u64 {
        self.order_keys_written.get()
    }

    /// Detaches an op from its block (it keeps its operands, results and regions).
    pub fn unlink(&mut self, op: OpId) {
        let Some(block) = self.links[op.index()].parent else {
            return;
        };
        let (prev, next) = (self.links[op.index()].prev, self.links[op.index()].next);
        match prev {
            Some(p) => self.links[p.index()].next = next,
            None => self.blocks[block.index()].first = next,
        }
        match next {
            Some(n) => self.links[n.index()].prev = prev,
            None => self.blocks[block.index()].last = prev,
        }
        let d = &mut self.links[op.index()];
        d.parent = None;
        d.prev = None;
        d.next = None;
        self.blocks[block.index()].len -= 1;
    }

    /// Appends a detached op at the end of a block.
    pub fn append_op(&mut self, block: BlockId, op: OpId) {
        let last = self.blocks[block.index()].last;
        self.link(op, block, last, None);
    }
    /// Prepends a detached op at the start of a block.
    pub fn prepend_op(&mut self, block: BlockId, op: OpId) {
        let first = self.blocks[block.index()].first;
        self.link(op, block, None, first);
    }
    /// Inserts a detached op right before `anchor`.
    pub fn insert_before(&mut self, anchor: OpId, op: OpId) {
        let block = self.links[anchor.index()]
            .parent
            .expect("anchor not in a block");
        let prev = self.links[anchor.index()].prev;
        self.link(op, block, prev, Some(anchor));
    }
    /// Inserts a detached op right after `anchor`.
    pub fn insert_after(&mut self, anchor: OpId, op: OpId) {
        let block = self.links[anchor.index()]
            .parent
            .expect("anchor not in a block");
        let next = self.links[anchor.index()].next;
        self.link(op, block, Some(anchor), next);
    }
    /// Moves an op (in any block) right before `anchor`.
    pub fn move_before(&mut self, op: OpId, anchor: OpId) {
        if op == anchor {
            return;
        }
        self.unlink(op);
        self.insert_before(anchor, op);
    }
    /// Moves an op (in any block) right after `anchor`.
    pub fn move_after(&mut self, op: OpId, anchor: OpId) {
        if op == anchor {
            return;
        }
        self.unlink(op);
        self.insert_after(anchor, op);
    }

    /// Whether `a` comes before `b`; both must be in the same block.
    ///
    /// Each op of a block carries a 32-bit position key, increasing along the block. The
    /// first query on a block numbers it, spreading the keys evenly over the key space
    /// (O(n)); from then on the keys are kept up to date as ops come and go, and a query is
    /// a comparison. Removing an op keeps the others' keys; an op inserted into a numbered
    /// block takes the midpoint of the gap between its neighbours' keys, and where they are
    /// adjacent, a small range of keys around them is relabelled (amortized O(log n) per
    /// insertion, see [`Context::order_keys_written`]). So a pass that alternates rewrites
    /// and order queries on a large block stays near-linear, rather than renumbering the
    /// whole block after every insertion. Inserting into a block that was never queried
    /// (building it, parsing) costs nothing extra.
    pub fn is_before_in_block(&self, a: OpId, b: OpId) -> bool {
        let block = self.links[a.index()].parent.expect("op not in a block");
        debug_assert_eq!(Some(block), self.links[b.index()].parent);
        let bd = &self.blocks[block.index()];
        if !bd.order_valid.get() {
            if let Some(first) = bd.first {
                self.spread_keys(first, bd.len as u64, 0, ORDER_SPAN);
            }
            bd.order_valid.set(true);
        }
        self.order_key(a) < self.order_key(b)
    }

    /// Erases an op and everything nested in it. Its results must have no uses left outside.
    pub fn erase_op(&mut self, op: OpId) {
        self.unlink(op);
        // Iterative, so deeply nested IR cannot overflow the stack.
        let mut stack = vec![op];
        while let Some(o) = stack.pop() {
            let ops = std::mem::take(&mut self.ops[o.index()].operands);
            for (i, v) in ops.iter().enumerate() {
                self.remove_use(
                    *v,
                    Use {
                        op: o,
                        index: i as u32,
                    },
                );
            }
            self.ops[o.index()].erased = true;
            let regions = self.op_regions(o).to_vec();
            for r in regions {
                for &b in &self.regions[r.index()].blocks.clone() {
                    let mut cur = self.blocks[b.index()].first;
                    while let Some(c) = cur {
                        cur = self.links[c.index()].next;
                        stack.push(c);
                    }
                }
            }
        }
    }

    /// Replaces the results of `op` with `new_values` everywhere, then erases `op`.
    pub fn replace_op(&mut self, op: OpId, new_values: &[Value]) {
        let results = self.results(op).to_vec();
        assert_eq!(
            results.len(),
            new_values.len(),
            "replace_op: result count mismatch"
        );
        for (r, n) in results.iter().zip(new_values) {
            self.replace_all_uses(*r, *n);
        }
        self.erase_op(op);
    }

    /// Visits every op nested under `root` (including `root`) in pre-order, iteratively.
    ///
    /// One frame per open op (its next block and next op), so each block's list is followed
    /// once, front to back, rather than first pushed whole onto a stack.
    pub fn walk(&self, root: OpId, mut f: impl FnMut(OpId)) {
        struct Frame {
            op: OpId,
            region: usize,
            block: usize,
            next: Option<OpId>,
            /// The op [`PREFETCH_DISTANCE`] places after `next` (see [`BlockOps`]).
            ahead: Option<OpId>,
        }
        f(root);
        let mut stack = vec![Frame {
            op: root,
            region: 0,
            block: 0,
            next: None,
            ahead: None,
        }];
        while let Some(top) = stack.last_mut() {
            if let Some(c) = top.next {
                top.next = self.next_op(c);
                if let Some(a) = top.ahead {
                    self.prefetch_op(a);
                    top.ahead = self.next_op(a);
                }
                f(c);
                if !self.op_regions(c).is_empty() {
                    stack.push(Frame {
                        op: c,
                        region: 0,
                        block: 0,
                        next: None,
                        ahead: None,
                    });
                }
                continue;
            }
            // Enter the frame's next block, if any (`block` counts blocks already entered).
            let regions = self.op_regions(top.op);
            let mut entered = false;
            while top.region < regions.len() {
                let blocks = self.region_blocks(regions[top.region]);
                if top.block < blocks.len() {
                    top.next = self.block_first(blocks[top.block]);
                    top.ahead = self.prefetch_run(top.next);
                    top.block += 1;
                    entered = true;
                    break;
                }
                top.region += 1;
                top.block = 0;
            }
            if !entered {
                stack.pop();
            }
        }
    }

    /// Nesting depth of an op (0 for a detached or top-level op).
    pub fn op_depth(&self, op: OpId) -> usize {
        let mut d = 0;
        let mut cur = self.parent_op(op);
        while let Some(p) = cur {
            d += 1;
            cur = self.parent_op(p);
        }
        d
    }

    // ----- symbols ------------------------------------------------------------------------

    /// The `sym_name` of an op (property or attribute), if any.
    pub fn symbol_name(&self, op: OpId) -> Option<&str> {
        self.inherent_attr(op, "sym_name")
            .and_then(|a| self.attr_as_str(a))
    }

    /// Resolves `name` from `from`: searches the symbol tables of the enclosing ops, innermost
    /// first (so module-level symbols such as `@tp` resolve from ops nested in functions).
    pub fn lookup_symbol(&self, from: OpId, name: &str) -> Option<OpId> {
        if let Some(cache) = self.symbol_cache.borrow_mut().as_mut() {
            return cache.lookup(self, from, name);
        }
        let mut cur = Some(from);
        while let Some(o) = cur {
            if self.is_symbol_table(o) {
                let pinned = self
                    .pinned_symbols
                    .borrow()
                    .iter()
                    .rev()
                    .find(|(t, _)| *t == o)
                    .and_then(|(_, index)| index.get(name).copied())
                    .filter(|&s| self.defines_symbol(o, s, name));
                if pinned.is_some() {
                    return pinned;
                }
                let found = self
                    .symbol_table_ops(o)
                    .find(|&c| self.symbol_name(c) == Some(name));
                if found.is_some() {
                    return found;
                }
            }
            cur = self.parent_op(o);
        }
        None
    }

    /// Indexes `table`'s symbols until [`Context::unpin_symbol_table`]: lookups through the
    /// table answer from the index instead of scanning it. The pass manager pins an op's
    /// table while a nested pipeline runs on the op's children (MLIR's rule: a pass on one
    /// function adds, erases or renames no symbol of the module), so that verifying each of
    /// F functions after each pass no longer indexes or scans all F: that made a module of
    /// 10k small functions take 22 s through the scheduling pipeline. Correct even if a pass
    /// breaks the rule: a hit is checked (the op still defines the name in the table) and a
    /// miss falls back to the scan.
    pub fn pin_symbol_table(&self, table: OpId) {
        let index = Arc::new(self.index_symbol_table(table));
        self.pinned_symbols.borrow_mut().push((table, index));
    }

    /// Ends the innermost [`Context::pin_symbol_table`] of `table`.
    pub fn unpin_symbol_table(&self, table: OpId) {
        let mut pins = self.pinned_symbols.borrow_mut();
        if let Some(i) = pins.iter().rposition(|(t, _)| *t == table) {
            pins.remove(i);
        }
    }

    /// The index of `table` while it is pinned.
    fn pinned_index(&self, table: OpId) -> Option<Arc<SymbolIndex>> {
        let pins = self.pinned_symbols.borrow();
        pins.iter()
            .rev()
            .find(|(t, _)| *t == table)
            .map(|(_, index)| index.clone())
    }

    /// Whether `op` (from an index of `table`) still defines symbol `name` in `table`.
    fn defines_symbol(&self, table: OpId, op: OpId, name: &str) -> bool {
        !self.is_erased(op)
            && self.parent_op(op) == Some(table)
            && self.symbol_name(op) == Some(name)
    }

    /// Runs `f` with [`Context::lookup_symbol`] answering from an index of each symbol table
    /// it searches, built on the table's first search, rather than by a linear search of the
    /// table each time. `self` stays borrowed while `f` runs, so the IR cannot change under
    /// the index; it is dropped when the outermost such call returns (or unwinds).
    pub fn with_symbol_cache<R>(&self, f: impl FnOnce() -> R) -> R {
        /// Drops the index on the way out, on unwinding too.
        struct Reset<'a>(&'a RefCell<Option<SymbolCache>>);
        impl Drop for Reset<'_> {
            fn drop(&mut self) {
                *self.0.borrow_mut() = None;
            }
        }
        let outermost = {
            let mut c = self.symbol_cache.borrow_mut();
            let outermost = c.is_none();
            if outermost {
                *c = Some(SymbolCache::default());
            }
            outermost
        };
        let _reset = outermost.then(|| Reset(&self.symbol_cache));
        f()
    }

    /// The ops directly in the regions of `table`, in order.
    fn symbol_table_ops(&self, table: OpId) -> impl Iterator<Item = OpId> + '_ {
        self.op_regions(table)
            .iter()
            .flat_map(|&r| self.region_blocks(r))
            .flat_map(|&b| self.block_ops(b))
    }

    /// The first op of each symbol name in `table` (see [`SymbolCache`]).
    fn index_symbol_table(&self, table: OpId) -> SymbolIndex {
        let mut index = FxHashMap::default();
        for c in self.symbol_table_ops(table) {
            if let Some(name) = self.symbol_name(c) {
                index.entry(name.into()).or_insert(c);
            }
        }
        index
    }

    /// Whether `op` holds a symbol table (a module, or any op declaring the trait).
    pub fn is_symbol_table(&self, op: OpId) -> bool {
        self.op_has_trait(op, Trait::SymbolTable) || self.op_name(op) == "builtin.module"
    }

    /// Renders a location as MLIR prints it inside `loc(...)`.
    pub fn loc_to_string(&self, l: Loc) -> String {
        crate::printer::loc_body(self, l)
    }
}

/// Iterator over the ops of a block.
pub struct BlockOps<'a> {
    ctx: &'a Context,
    cur: Option<OpId>,
    /// The op [`PREFETCH_DISTANCE`] places after `cur` (or `None` past the end), whose record
    /// is requested as `cur` is handed out: whoever walks a block reads the ops' records, and
    /// those of a large block lie scattered over the arena.
    ahead: Option<OpId>,
}

/// How many ops ahead of the one handed out block walks request an op's record
/// ([`Context::prefetch_op`]): far enough to hide a miss behind the work on the ops between,
/// near enough that the lines are still cached when the op's turn comes.
pub const PREFETCH_DISTANCE: usize = 8;

impl<'a> BlockOps<'a> {
    fn new(ctx: &'a Context, first: Option<OpId>) -> Self {
        BlockOps {
            ctx,
            cur: first,
            ahead: ctx.prefetch_run(first),
        }
    }
}

impl Iterator for BlockOps<'_> {
    type Item = OpId;
    #[inline]
    fn next(&mut self) -> Option<OpId> {
        let c = self.cur?;
        self.cur = self.ctx.next_op(c);
        if let Some(a) = self.ahead {
            self.ctx.prefetch_op(a);
            self.ahead = self.ctx.next_op(a);
        }
        Some(c)
    }
}

/// Asks the CPU to load the cache lines of `len` bytes at `p` (a hint: never faults, whatever
/// the address, and changes no value).
#[inline(always)]
fn prefetch_bytes(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // Every line from the first byte's to the last byte's.
        let first = p as usize & !63;
        let last = (p as usize).wrapping_add(len.max(1) - 1);
        let mut line = first;
        while line <= last {
            // SAFETY: a prefetch is a hint that neither faults nor writes, for any address;
            // wrapping arithmetic keeps the address computation defined (the first line
            // starts before `p`).
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(
                    p.wrapping_add(line.wrapping_sub(p as usize)) as *const i8
                )
            };
            line += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

#[cfg(test)]
mod layout_tests {
    /// Every walk reads one op record per op: keep it within two cache lines (regions and
    /// successors live in `nested`, up to two operands and results inline).
    #[test]
    fn an_op_record_fits_two_cache_lines() {
        assert!(
            std::mem::size_of::<super::OpData>() <= 128,
            "{}",
            std::mem::size_of::<super::OpData>()
        );
    }
}
