//! Per-rank storage: the mutable memory behind tensor values, including comm-buffer pools.
//!
//! Values do not own data; they name a [`StorageId`]. Compute results get fresh storage
//! (value semantics), while aliases — the results of `comm.wait`, the buffers an in-place
//! collective mutates, the arguments of a call — name the same storage, so an in-place write
//! is visible through every alias, exactly as on a GPU.
//!
//! Once `comm-plan-pools` has run, comm buffers live in pools: a pool is one byte array
//! (allocated by `comm.pool`), and a comm buffer is a *slot*, a storage that reads and writes
//! the pool's bytes at its planned offset in the element type's memory format (bf16 as two
//! bytes, and so on). Overlapping slots therefore really alias: a buffer written over another
//! one would change what the other reads, as on a GPU.
//!
//! That must never happen to a buffer that is still needed, so each pool tracks which
//! buffer holds each byte range and until when that buffer has readers to come (the plan's
//! own liveness, which the interpreter computes from the IR and passes in as [`Holder`]s).
//! Placing a buffer over a range whose holder is still live is a [`MemError::Clobber`],
//! naming both buffers' ops; a dead holder simply loses its bytes, and any later access
//! through it is reported too ([`MemError::Evicted`]), never silently wrong data.

use crate::numeric;
use crate::tensor::{Data, ElemType, Tensor, TensorType};
use commlir_ir::OpId;
use std::borrow::Cow;
use std::ops::Range;

/// A handle to one storage of a rank's [`Memory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StorageId(u32);

/// A handle to one comm-buffer pool of a rank's [`Memory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolId(u32);

/// One storage: an owned tensor, or a typed view of a pool's bytes.
#[derive(Clone, Debug)]
enum Storage {
    Owned(Tensor),
    Slot {
        pool: PoolId,
        range: Range<usize>,
        ty: TensorType,
    },
}

/// Who holds a pool range, and for how long it is needed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The op that placed the buffer in the pool (its producer).
    pub producer: OpId,
    /// The last op that reads the buffer (through any alias, or through a collective until
    /// its wait), by the plan's liveness; the producer itself when nothing reads it.
    pub last_reader: OpId,
    /// Position of `last_reader` in the function body: the holder is live at every position
    /// up to and including it.
    pub last_pos: usize,
}

/// A pool access that would corrupt data or read reused bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemError {
    /// Placing a buffer at `range` of the pool would overwrite `victim`'s bytes `victim_range`
    /// while `victim` still has readers to come.
    Clobber {
        pool: String,
        range: Range<usize>,
        writer: OpId,
        victim: Holder,
        victim_range: Range<usize>,
    },
    /// The buffer placed by `holder` lost its bytes to `by`'s buffer and is accessed again.
    Evicted {
        pool: String,
        holder: Holder,
        by: Holder,
    },
    /// The pool was released before this access.
    Released { pool: String },
    /// Anything else (type mismatch, slot outside the pool).
    Other(String),
}

struct Pool {
    /// For messages: `symm_mem pool of @tp`.
    name: String,
    bytes: Vec<u8>,
    released: bool,
    /// The current holders, pairwise disjoint.
    holders: Vec<(Range<usize>, StorageId, Holder)>,
}

/// The storages and pools of one rank.
#[derive(Default)]
pub struct Memory {
    storages: Vec<Storage>,
    pools: Vec<Pool>,
    /// Slots whose bytes were taken by a later buffer: (slot, its holder, the new holder).
    evicted: Vec<(StorageId, Holder, Holder)>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("storages", &self.storages.len())
            .field("pools", &self.pools.len())
            .finish()
    }
}

/// The byte fill of a fresh pool: all-ones reads as NaN in every float format and -1 in
/// integers, so a read of bytes nobody wrote shows in digests.
const POOL_FILL: u8 = 0xff;

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

impl Memory {
    /// Stores a tensor in fresh storage.
    pub fn alloc(&mut self, t: Tensor) -> StorageId {
        let id = StorageId(self.storages.len() as u32);
        self.storages.push(Storage::Owned(t));
        id
    }

    /// Allocates a pool of `size` bytes; `name` appears in error messages.
    pub fn new_pool(&mut self, name: String, size: usize) -> PoolId {
        let id = PoolId(self.pools.len() as u32);
        self.pools.push(Pool {
            name,
            bytes: vec![POOL_FILL; size],
            released: false,
            holders: Vec::new(),
        });
        id
    }

    /// Releases a pool: its slots can no longer be read or written.
    pub fn release_pool(&mut self, pool: PoolId) {
        let p = &mut self.pools[pool.0 as usize];
        p.released = true;
        p.holders.clear();
        p.bytes = Vec::new();
    }

    /// Places `t` in `pool` at `offset` for `holder`, at position `now` of the function that
    /// owns the pool: every holder of an overlapping range must be dead by then (its last
    /// reader before `now`). Dead holders lose their bytes. Returns the new slot storage.
    pub fn place(
        &mut self,
        pool: PoolId,
        offset: usize,
        t: Tensor,
        holder: Holder,
        now: usize,
    ) -> Result<StorageId, MemError> {
        let len = t.numel() * t.ty.elem.byte_width();
        let range = offset..offset + len;
        let p = &self.pools[pool.0 as usize];
        if p.released {
            return Err(MemError::Released {
                pool: p.name.clone(),
            });
        }
        if range.end > p.bytes.len() {
            return Err(MemError::Other(format!(
                "places {len} bytes at offset {offset}, beyond the {} bytes of the {}",
                p.bytes.len(),
                p.name
            )));
        }
        if let Some((r, _, victim)) = p
            .holders
            .iter()
            .find(|(r, _, h)| overlaps(r, &range) && h.last_pos >= now)
        {
            return Err(MemError::Clobber {
                pool: p.name.clone(),
                range,
                writer: holder.producer,
                victim: victim.clone(),
                victim_range: r.clone(),
            });
        }
        let id = StorageId(self.storages.len() as u32);
        let p = &mut self.pools[pool.0 as usize];
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut p.holders)
            .into_iter()
            .partition(|(r, _, _)| overlaps(r, &range));
        p.holders = kept;
        p.holders.push((range.clone(), id, holder.clone()));
        self.evicted
            .extend(gone.into_iter().map(|(_, s, h)| (s, h, holder.clone())));
        self.storages.push(Storage::Slot {
            pool,
            range: range.clone(),
            ty: t.ty.clone(),
        });
        encode(&t, &mut self.pools[pool.0 as usize].bytes[range]);
        Ok(id)
    }

    /// Checks that slot `id` still owns its bytes in a live pool.
    fn check_slot(&self, id: StorageId, pool: PoolId) -> Result<(), MemError> {
        let p = &self.pools[pool.0 as usize];
        if p.released {
            return Err(MemError::Released {
                pool: p.name.clone(),
            });
        }
        if let Some((_, holder, by)) = self.evicted.iter().find(|(s, _, _)| *s == id) {
            return Err(MemError::Evicted {
                pool: p.name.clone(),
                holder: holder.clone(),
                by: by.clone(),
            });
        }
        Ok(())
    }

    /// The current contents of a storage (decoded from the pool for a slot).
    pub fn read(&self, id: StorageId) -> Result<Cow<'_, Tensor>, MemError> {
        match &self.storages[id.0 as usize] {
            Storage::Owned(t) => Ok(Cow::Borrowed(t)),
            Storage::Slot { pool, range, ty } => {
                self.check_slot(id, *pool)?;
                Ok(Cow::Owned(decode(
                    ty,
                    &self.pools[pool.0 as usize].bytes[range.clone()],
                )))
            }
        }
    }

    /// Overwrites a storage with a tensor of the same type (what a collective does to its
    /// destination buffer). A type mismatch means the IR and the semantics disagree.
    pub fn write(&mut self, id: StorageId, t: Tensor) -> Result<(), MemError> {
        let mismatch = |have: &TensorType| {
            MemError::Other(format!("writes {} into a buffer of type {have}", t.ty))
        };
        match &mut self.storages[id.0 as usize] {
            Storage::Owned(cur) => {
                if cur.ty != t.ty {
                    return Err(mismatch(&cur.ty));
                }
                *cur = t;
                Ok(())
            }
            Storage::Slot { pool, range, ty } => {
                if *ty != t.ty {
                    return Err(mismatch(ty));
                }
                let (pool, range) = (*pool, range.clone());
                self.check_slot(id, pool)?;
                encode(&t, &mut self.pools[pool.0 as usize].bytes[range]);
                Ok(())
            }
        }
    }
}

/// Writes `t`'s elements into `out` in their memory format (little-endian).
fn encode(t: &Tensor, out: &mut [u8]) {
    let w = t.ty.elem.byte_width();
    let chunks = out.chunks_exact_mut(w);
    match (&t.data, t.ty.elem) {
        (Data::F32(v), ElemType::F16) => chunks
            .zip(v)
            .for_each(|(o, x)| o.copy_from_slice(&numeric::f16_bits(f64::from(*x)).to_le_bytes())),
        (Data::F32(v), ElemType::BF16) => chunks
            .zip(v)
            .for_each(|(o, x)| o.copy_from_slice(&numeric::bf16_bits(f64::from(*x)).to_le_bytes())),
        (Data::F32(v), _) => chunks
            .zip(v)
            .for_each(|(o, x)| o.copy_from_slice(&x.to_bits().to_le_bytes())),
        (Data::F64(v), _) => chunks
            .zip(v)
            .for_each(|(o, x)| o.copy_from_slice(&x.to_bits().to_le_bytes())),
        // Integers keep their low `w` bytes; decoding re-extends them to the type's width.
        (Data::Int(v), _) => chunks
            .zip(v)
            .for_each(|(o, x)| o.copy_from_slice(&x.to_le_bytes()[..w])),
    }
}

/// Reads a tensor of type `ty` from `bytes` (its memory format, little-endian).
fn decode(ty: &TensorType, bytes: &[u8]) -> Tensor {
    let w = ty.elem.byte_width();
    let chunks = bytes.chunks_exact(w);
    let u16_of = |c: &[u8]| u16::from_le_bytes([c[0], c[1]]);
    let data = match ty.elem {
        ElemType::F16 => Data::F32(
            chunks
                .map(|c| numeric::f16_value(u16_of(c)) as f32)
                .collect(),
        ),
        ElemType::BF16 => Data::F32(
            chunks
                .map(|c| numeric::bf16_value(u16_of(c)) as f32)
                .collect(),
        ),
        ElemType::F32 => Data::F32(
            chunks
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        ElemType::F64 => Data::F64(
            chunks
                .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        ),
        e => Data::Int(
            chunks
                .map(|c| {
                    let mut b = [0u8; 8];
                    b[..w].copy_from_slice(c);
                    e.wrap(i64::from_le_bytes(b))
                })
                .collect(),
        ),
    };
    Tensor {
        ty: ty.clone(),
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use commlir_ir::Signedness;

    fn op(n: u32) -> OpId {
        OpId::from_index(n as usize)
    }

    fn holder(p: u32, last: usize) -> Holder {
        Holder {
            producer: op(p),
            last_reader: op(p + 100),
            last_pos: last,
        }
    }

    #[test]
    fn slots_round_trip_every_element_type() {
        let mut m = Memory::default();
        let pool = m.new_pool("test pool".into(), 4096);
        let types = [
            ElemType::F16,
            ElemType::BF16,
            ElemType::F32,
            ElemType::F64,
            ElemType::Index,
            ElemType::Int {
                width: 1,
                signedness: Signedness::Signless,
            },
            ElemType::Int {
                width: 8,
                signedness: Signedness::Signed,
            },
            ElemType::Int {
                width: 16,
                signedness: Signedness::Unsigned,
            },
            ElemType::Int {
                width: 33,
                signedness: Signedness::Signless,
            },
        ];
        for (i, e) in types.into_iter().enumerate() {
            let ty = TensorType {
                elem: e,
                shape: vec![3],
            };
            let t = Tensor::from_f64(ty, &[-1.5, 0.0, 1.0]);
            let id = m
                .place(pool, i * 64, t.clone(), holder(i as u32, 100), i)
                .unwrap();
            assert_eq!(*m.read(id).unwrap(), t, "{e}");
        }
    }

    #[test]
    fn live_overlap_is_caught_and_dead_overlap_reuses() {
        let mut m = Memory::default();
        let pool = m.new_pool("symm_mem pool of @tp".into(), 128);
        let ty = TensorType {
            elem: ElemType::F32,
            shape: vec![16],
        };
        let a = m
            .place(pool, 0, Tensor::splat(ty.clone(), 1.0), holder(1, 5), 1)
            .unwrap();
        // Overlaps `a` at position 3, before its last reader (5).
        let err = m
            .place(pool, 32, Tensor::splat(ty.clone(), 2.0), holder(2, 9), 3)
            .unwrap_err();
        assert!(matches!(err, MemError::Clobber { ref victim, .. } if victim.producer == op(1)));
        // After `a`'s last reader the bytes are free; `a` is gone for good.
        let b = m
            .place(pool, 32, Tensor::splat(ty.clone(), 2.0), holder(2, 9), 6)
            .unwrap();
        assert_eq!(m.read(b).unwrap().data, Tensor::splat(ty, 2.0).data);
        assert!(matches!(m.read(a), Err(MemError::Evicted { .. })));
        m.release_pool(pool);
        assert!(matches!(m.read(b), Err(MemError::Released { .. })));
    }
}
