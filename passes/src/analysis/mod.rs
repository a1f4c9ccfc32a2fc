//! Analyses shared by the passes: buffer aliasing, liveness and peak memory, the cost model,
//! the timeline simulator, and what the driver writes from them (the report, the timelines).

pub mod buffers;
pub mod cost;
pub mod hiding;
pub mod machine;
pub mod profile;
pub mod report;
pub mod svg;
pub mod timeline;
pub mod trace;

pub use buffers::{BufferModel, Storage, StorageId};
