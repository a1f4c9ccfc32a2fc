//! commlir dialects, one folder per dialect: `func` (structure), and the communication
//! dialects `compute`, `coll`, `comm` and `symm`, and the runtime-call dialect `rt`; and the
//! parts of upstream MLIR's `shard`, `arith` and `math` that commlir's conversions consume.
//!
//! Every op is declared once with [`commlir_ir::register_op!`] and registers itself; linking
//! this crate is enough for a [`commlir_ir::Context`] to know its ops. Call [`link`] from a
//! binary that references nothing else of this crate, so the linker keeps the registrations.

pub mod arith;
pub mod coll;
pub mod comm;
pub mod compute;
pub mod docgen;
pub mod func;
pub mod math;
pub mod rt;
pub mod shape;
pub mod shard;
pub mod symm;

/// Forces this crate's registrations to be linked into the final binary.
#[inline(never)]
pub fn link() {
    std::hint::black_box((
        &func::FUNC,
        &compute::MATMUL,
        &coll::ALL_REDUCE,
        &comm::WAIT,
        &symm::ONE_SHOT_ALL_REDUCE,
        &rt::LAUNCH,
        &arith::ADDF,
        &math::EXP,
        &shard::GRID_OP,
    ));
}
