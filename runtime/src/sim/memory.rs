//! Per-rank storage: the mutable memory behind tensor values.
//!
//! Values do not own data; they name a [`StorageId`]. Compute results get fresh storage
//! (value semantics), while aliases — the results of `comm.wait`, the buffers an in-place
//! collective mutates, the arguments of a call — name the same storage, so an in-place write
//! is visible through every alias, exactly as on a GPU.
//!
//! Storage is an indirection on purpose: once `comm-plan-pools` assigns pool offsets, a
//! storage can become a slot `(pool, offset, size)` of a shared pool allocation (and
//! overlapping slots will then alias as the plan says) without touching the interpreter.

use crate::tensor::{Tensor, TensorType};

/// A handle to one storage of a rank's [`Memory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StorageId(u32);

/// One storage. Today each is an owned tensor; pool slots are the planned extension.
#[derive(Clone, Debug)]
enum Storage {
    Owned(Tensor),
}

/// The storages of one rank.
#[derive(Debug, Default)]
pub struct Memory {
    storages: Vec<Storage>,
}

impl Memory {
    /// Stores a tensor in fresh storage.
    pub fn alloc(&mut self, t: Tensor) -> StorageId {
        let id = StorageId(self.storages.len() as u32);
        self.storages.push(Storage::Owned(t));
        id
    }

    /// The current contents of a storage.
    pub fn read(&self, id: StorageId) -> &Tensor {
        match &self.storages[id.0 as usize] {
            Storage::Owned(t) => t,
        }
    }

    /// Overwrites a storage with a tensor of the same type (what a collective does to its
    /// destination buffer). A type mismatch means the IR and the semantics disagree.
    pub fn write(&mut self, id: StorageId, t: Tensor) -> Result<(), String> {
        match &mut self.storages[id.0 as usize] {
            Storage::Owned(cur) => {
                if cur.ty != t.ty {
                    return Err(format!("writes {} into a buffer of type {}", t.ty, cur.ty));
                }
                *cur = t;
            }
        }
        Ok(())
    }

    /// The type of a storage.
    pub fn ty(&self, id: StorageId) -> &TensorType {
        &self.read(id).ty
    }
}
