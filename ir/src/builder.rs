//! [`Builder`]: creates ops at an insertion point, the way MLIR's `OpBuilder` does; the
//! rewrite primitives (move, erase, replace-all-uses) live on the [`Context`] and are O(1)
//! layout edits.

use crate::context::{Context, OpState};
use crate::entity::{Attr, BlockId, Loc, OpId, Type, Value};

/// Where the next created op goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertPoint {
    /// At the end of a block.
    End(BlockId),
    /// At the start of a block (successive ops keep their creation order).
    Start(BlockId),
    /// Right before an op.
    Before(OpId),
    /// Right after an op (successive ops keep their creation order).
    After(OpId),
    /// Nowhere: ops stay detached.
    Detached,
}

/// Creates ops at an insertion point, with a default location.
pub struct Builder<'c> {
    pub ctx: &'c mut Context,
    pub ip: InsertPoint,
    pub loc: Loc,
}

impl<'c> Builder<'c> {
    /// A builder appending to `block`.
    pub fn at_end(ctx: &'c mut Context, block: BlockId) -> Self {
        let loc = ctx.unknown_loc();
        Builder {
            ctx,
            ip: InsertPoint::End(block),
            loc,
        }
    }
    /// A builder inserting before `op`, with `op`'s location by default.
    pub fn before(ctx: &'c mut Context, op: OpId) -> Self {
        let loc = ctx.op_loc(op);
        Builder {
            ctx,
            ip: InsertPoint::Before(op),
            loc,
        }
    }
    /// A builder inserting after `op`, with `op`'s location by default.
    pub fn after(ctx: &'c mut Context, op: OpId) -> Self {
        let loc = ctx.op_loc(op);
        Builder {
            ctx,
            ip: InsertPoint::After(op),
            loc,
        }
    }

    /// Inserts a detached op at the insertion point and advances it past the op.
    pub fn insert(&mut self, op: OpId) -> OpId {
        match self.ip {
            InsertPoint::End(b) => self.ctx.append_op(b, op),
            InsertPoint::Start(b) => {
                self.ctx.prepend_op(b, op);
                self.ip = InsertPoint::After(op);
            }
            InsertPoint::Before(a) => self.ctx.insert_before(a, op),
            InsertPoint::After(a) => {
                self.ctx.insert_after(a, op);
                self.ip = InsertPoint::After(op);
            }
            InsertPoint::Detached => {}
        }
        op
    }

    /// Creates and inserts op `name` with operands, result types and discardable attributes.
    pub fn create(
        &mut self,
        name: &str,
        operands: &[Value],
        result_types: &[Type],
        attrs: &[(&str, Attr)],
    ) -> OpId {
        let name = self.ctx.ident(name);
        let mut st = OpState::new(name, self.loc);
        st.operands = operands.to_vec();
        st.result_types = result_types.to_vec();
        st.attrs = attrs.iter().map(|(k, v)| (self.ctx.ident(k), *v)).collect();
        let op = self.ctx.create_op(st);
        self.insert(op)
    }

    /// Creates and inserts an op from a full [`OpState`].
    pub fn create_state(&mut self, st: OpState) -> OpId {
        let op = self.ctx.create_op(st);
        self.insert(op)
    }

    /// Creates and inserts a single-result op, returning its result.
    pub fn create_value(
        &mut self,
        name: &str,
        operands: &[Value],
        result_type: Type,
        attrs: &[(&str, Attr)],
    ) -> Value {
        let op = self.create(name, operands, &[result_type], attrs);
        self.ctx.result(op, 0)
    }
}
