//! commlir analyses and passes, one file per pass.
pub mod coll_to_comm;
