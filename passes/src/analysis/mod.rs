//! Analyses shared by the passes: buffer aliasing, liveness and peak memory.

pub mod buffers;
pub mod cost;
pub mod report;
pub mod timeline;

pub use buffers::{BufferModel, Storage, StorageId};
