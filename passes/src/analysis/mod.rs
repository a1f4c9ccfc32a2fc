//! Analyses shared by the passes: buffer aliasing, liveness and peak memory.

pub mod buffers;

pub use buffers::{BufferModel, Storage, StorageId};
