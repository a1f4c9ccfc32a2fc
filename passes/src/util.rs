//! Small IR queries shared by the generic passes.

use commlir_ir::{Context, OpId, Trait};

/// Whether `op` can be erased without changing the program: it is `Pure`, not a terminator
/// and none of its results is used (MLIR's `isOpTriviallyDead`). Unregistered ops are never
/// dead, since nothing is known of their effects.
pub fn is_trivially_dead(ctx: &Context, op: OpId) -> bool {
    ctx.op_has_trait(op, Trait::Pure)
        && !ctx.op_has_trait(op, Trait::Terminator)
        && !ctx.op_has_trait(op, Trait::Symbol)
        && ctx.results(op).iter().all(|&r| ctx.use_empty(r))
}
