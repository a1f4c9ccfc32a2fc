//! The buffer model of a block: which storage each value lives in, when each storage is
//! allocated and last used, and the resulting memory profile, with Inductor's semantics:
//!
//! - a result is allocated at its producer and freed after its last user (a user of any value
//!   aliasing it);
//! - aliases cost nothing new: a wait's results alias the buffers it completes, an in-place
//!   collective mutates its buffer (`symm.two_shot_all_reduce`'s result is its input),
//!   `comm.shard_dim_alltoall` yields its destination;
//! - function results are never freed; arguments are not counted unless donated (argument
//!   attribute `commlir.donated`), in which case they are freed after their last use.

use commlir_dialects::comm::{buffer_encoding, BufferEncoding};
use commlir_dialects::shape::tensor_bytes;
use commlir_ir::{AttrKind, BlockId, Context, OpId, Value, ValueDef};

/// Index of a storage in a [`BufferModel`].
pub type StorageId = usize;

/// One allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Storage {
    /// Size in bytes.
    pub size: u64,
    /// Position of the allocating op in the block; `None` for an argument.
    pub def: Option<usize>,
    /// Position of the last op using it (`def` when unused).
    pub last_use: Option<usize>,
    /// Returned from the function: never freed.
    pub escapes: bool,
    /// A donated argument: counted from entry, freed after its last use.
    pub donated: bool,
    /// The comm-buffer encoding, for comm buffers.
    pub comm: Option<BufferEncoding>,
    /// The value that created it.
    pub root: Value,
}

impl Storage {
    /// Whether the storage counts towards memory at all.
    pub fn counted(&self) -> bool {
        self.def.is_some() || self.donated
    }
}

/// Storage and liveness of every value of one block.
#[derive(Clone, Debug)]
pub struct BufferModel {
    /// The ops of the block, in order.
    pub ops: Vec<OpId>,
    /// Storages, in allocation order.
    pub storages: Vec<Storage>,
    storage_of: Vec<Option<StorageId>>,
    pos_of: Vec<u32>,
}

/// The operand a result aliases, if the op yields an existing buffer rather than a new one.
pub fn alias_of(ctx: &Context, op: OpId, result: usize) -> Option<Value> {
    match ctx.op_name(op) {
        "comm.wait" => ctx.operands(op).get(result + 1).copied(),
        // Two-shot reduces in place: its result is its input's symm buffer.
        "coll.wait_tensor" | "symm.two_shot_all_reduce" => ctx.operands(op).first().copied(),
        "comm.shard_dim_alltoall" => ctx.operands(op).get(1).copied(),
        _ => None,
    }
}

pub(crate) fn is_donated(ctx: &Context, func: OpId, index: usize) -> bool {
    let Some(arg_attrs) = ctx.inherent_attr(func, "arg_attrs") else {
        return false;
    };
    let AttrKind::Array(items) = ctx.attr_kind(arg_attrs) else {
        return false;
    };
    let Some(&d) = items.get(index) else {
        return false;
    };
    match ctx.attr_kind(d) {
        AttrKind::Dict(entries) => entries
            .iter()
            .any(|(k, _)| ctx.ident_str(*k) == "commlir.donated"),
        _ => false,
    }
}

impl BufferModel {
    /// Builds the model of `block` (a function body).
    pub fn new(ctx: &Context, block: BlockId) -> Self {
        let ops: Vec<OpId> = ctx.block_op_list(block);
        let mut storage_of = vec![None; ctx.num_value_slots()];
        let mut pos_of = vec![u32::MAX; ctx.num_op_slots()];
        let mut storages: Vec<Storage> = Vec::new();
        let func = ctx.block_parent_op(block);
        for (i, &a) in ctx.block_args(block).iter().enumerate() {
            let donated = func.is_some_and(|f| is_donated(ctx, f, i));
            storage_of[a.index()] = Some(storages.len());
            storages.push(Storage {
                size: tensor_bytes(ctx, ctx.value_type(a)).unwrap_or(0),
                def: None,
                last_use: None,
                escapes: false,
                donated,
                comm: buffer_encoding(ctx, ctx.value_type(a)),
                root: a,
            });
        }
        for (p, op) in ctx.prefetched(&ops).enumerate() {
            pos_of[op.index()] = p as u32;
            for (i, &r) in ctx.results(op).iter().enumerate() {
                let aliased = alias_of(ctx, op, i).and_then(|v| storage_of[v.index()]);
                let sid = match aliased {
                    Some(s) => s,
                    None => {
                        storages.push(Storage {
                            size: tensor_bytes(ctx, ctx.value_type(r)).unwrap_or(0),
                            def: Some(p),
                            last_use: Some(p),
                            escapes: false,
                            donated: false,
                            comm: buffer_encoding(ctx, ctx.value_type(r)),
                            root: r,
                        });
                        storages.len() - 1
                    }
                };
                storage_of[r.index()] = Some(sid);
            }
        }
        let mut m = BufferModel {
            ops,
            storages,
            storage_of,
            pos_of,
        };
        m.recompute_last_uses(ctx);
        m
    }

    /// Recomputes every storage's last use from the current op order (after reordering).
    pub fn recompute_last_uses(&mut self, ctx: &Context) {
        for s in &mut self.storages {
            s.last_use = s.def;
            s.escapes = false;
        }
        for (p, &op) in self.ops.iter().enumerate() {
            self.pos_of[op.index()] = p as u32;
            let is_return = ctx.op_has_trait(op, commlir_ir::Trait::ReturnLike);
            for &v in ctx.operands(op) {
                if let Some(s) = self.storage(v) {
                    let st = &mut self.storages[s];
                    st.last_use = Some(st.last_use.map_or(p, |l| l.max(p)));
                    if is_return {
                        st.escapes = true;
                    }
                }
            }
        }
    }

    /// The storage a value lives in (values defined outside the block have none).
    pub fn storage(&self, v: Value) -> Option<StorageId> {
        self.storage_of.get(v.index()).copied().flatten()
    }

    /// Position of an op of the block.
    pub fn pos(&self, op: OpId) -> Option<usize> {
        self.pos_of
            .get(op.index())
            .filter(|p| **p != u32::MAX)
            .map(|p| *p as usize)
    }

    /// Bytes allocated by the op at position `p` (its new storages).
    pub fn alloc_at(&self, p: usize) -> u64 {
        self.storages
            .iter()
            .filter(|s| s.def == Some(p))
            .map(|s| s.size)
            .sum()
    }

    /// The memory profile: for each op position, (memory after its allocations, memory after
    /// the frees that follow it), and the peak.
    pub fn profile(&self) -> MemoryProfile {
        let n = self.ops.len();
        let mut alloc = vec![0u64; n];
        let mut free = vec![0u64; n];
        let mut base = 0u64;
        for s in &self.storages {
            if !s.counted() {
                continue;
            }
            match s.def {
                Some(d) => alloc[d] += s.size,
                None => base += s.size,
            }
            if !s.escapes {
                if let Some(l) = s.last_use {
                    free[l] += s.size;
                }
            }
        }
        let mut cur = base;
        let mut post_alloc = Vec::with_capacity(n);
        let mut post_free = Vec::with_capacity(n);
        let mut peak = base;
        for p in 0..n {
            cur += alloc[p];
            post_alloc.push(cur);
            peak = peak.max(cur);
            cur -= free[p].min(cur);
            post_free.push(cur);
        }
        MemoryProfile {
            base,
            post_alloc,
            post_free,
            peak,
        }
    }
}

/// Memory over the program order of a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryProfile {
    /// Bytes live at entry (donated arguments).
    pub base: u64,
    /// Bytes live right after each op's allocations.
    pub post_alloc: Vec<u64>,
    /// Bytes live after the frees following each op.
    pub post_free: Vec<u64>,
    /// The peak.
    pub peak: u64,
}

/// Peak memory of a function body, in bytes.
pub fn peak_memory(ctx: &Context, block: BlockId) -> u64 {
    BufferModel::new(ctx, block).profile().peak
}

/// The value's defining position in `model`, for block arguments `None`.
pub fn def_pos(ctx: &Context, model: &BufferModel, v: Value) -> Option<usize> {
    match ctx.value_def(v) {
        ValueDef::Result { op, .. } => model.pos(op),
        ValueDef::BlockArg { .. } => None,
    }
}
