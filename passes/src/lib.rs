//! commlir analyses and passes, one file per pass.
pub mod analysis;
pub mod arith_to_compute;
pub mod coll_bucket;
pub mod coll_fold_prescale;
pub mod coll_fuse_matmul;
pub mod coll_sequence_parallel;
pub mod coll_to_comm;
pub mod comm_apply_profile;
pub mod comm_global_order;
pub mod comm_overlap_schedule;
pub mod comm_plan_pools;
pub mod comm_reorder_peak_memory;
pub mod comm_sink_waits_iterative;
pub mod cse;
pub mod dce;
pub mod pools;
pub mod schedule;
pub mod schedule_for_comm;
pub mod shard_to_coll;
pub mod strip_debuginfo;
pub mod symbol_dce;
pub mod test_count_ops;
pub mod test_options;
mod util;

/// Forces this crate's pass registrations to be linked into the final binary (a binary that
/// uses nothing else of this crate would otherwise drop them).
#[inline(never)]
pub fn link() {
    commlir_dialects::link();
    std::hint::black_box(&cse::CSE);
    std::hint::black_box(&dce::DCE);
    std::hint::black_box(&strip_debuginfo::STRIP_DEBUGINFO);
    std::hint::black_box(&symbol_dce::SYMBOL_DCE);
    std::hint::black_box(&test_count_ops::TEST_COUNT_OPS);
    std::hint::black_box(&test_options::TEST_OPTIONS);
    std::hint::black_box(&coll_to_comm::COLL_TO_COMM);
    std::hint::black_box(&comm_global_order::COMM_GLOBAL_ORDER);
    std::hint::black_box(&schedule_for_comm::COMM_SINK_WAITS);
    std::hint::black_box(&schedule_for_comm::COMM_RAISE_COMMS);
    std::hint::black_box(&schedule_for_comm::COMM_REORDER_COMPUTE_FOR_OVERLAP);
    std::hint::black_box(&comm_reorder_peak_memory::COMM_REORDER_PEAK_MEMORY);
    std::hint::black_box(&comm_sink_waits_iterative::COMM_SINK_WAITS_ITERATIVE);
    std::hint::black_box(&comm_overlap_schedule::COMM_OVERLAP_SCHEDULE);
    std::hint::black_box(&comm_plan_pools::COMM_PLAN_POOLS);
    std::hint::black_box(&shard_to_coll::SHARD_TO_COLL);
    std::hint::black_box(&arith_to_compute::ARITH_TO_COMPUTE);
    std::hint::black_box(&coll_fuse_matmul::COLL_FUSE_MATMUL);
    std::hint::black_box(&coll_sequence_parallel::COLL_SEQUENCE_PARALLEL);
    std::hint::black_box(&coll_bucket::COLL_BUCKET);
    std::hint::black_box(&coll_fold_prescale::COLL_FOLD_PRESCALE);
    std::hint::black_box(&comm_apply_profile::COMM_APPLY_PROFILE);
}
