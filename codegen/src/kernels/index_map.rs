//! Index maps of views: where a fused kernel finds an element of a value it never stores.
//!
//! `compute.broadcast`, `compute.slice`, `compute.permute`, `compute.transpose` and a
//! `compute.reshape` of a view move no data: element `c` (a coordinate of the result) is
//! element `Σ c_d·stride_d + offset` of the operand's buffer, with strides that depend only on
//! the shapes and attributes. Chains of them compose: a slice of a permute of an argument is
//! still one such map over the argument's buffer ([`IndexMap`], uncollapsed, as views are
//! composed), and a fused kernel reads the argument there instead of materializing the views
//! (`crate::fusion`, *Absorbed views*). A reshape of a strided view is expressible the same way
//! only when the strides allow it (as for `torch.Tensor.view`); otherwise the maps are applied
//! one after the other ([`ViewIndex`]), which is always correct, only slower.
//!
//! A `compute.concat` in a chain is piecewise: in the range of its operand `k` along `dim`, its
//! element `c` is the operand's element `c - start_k·e_dim`, which turns an operand's map into
//! a map over the concat's result by one more offset ([`IndexMap::concat_piece`]); the kernel
//! picks the operand by the coordinate (`crate::kernels::fused`).
//!
//! For code generation a map is [`collapse`]d to a [`StridedIndex`]: size-1 dims dropped,
//! neighbours merged when contiguous together or both repeated, so that the common cases cost
//! one or two constant divisions, and the vector loops classify how a 16-byte vector of
//! consecutive elements reads it ([`Access`]).

use commlir_ir::{Context as IrContext, OpId};

/// Whether `name` is a view op whose result a fused kernel reads through its operand's index
/// map instead of a buffer of its own.
pub fn is_view(name: &str) -> bool {
    matches!(
        name,
        "compute.broadcast" | "compute.slice" | "compute.permute" | "compute.transpose"
    )
}

/// A view's index map in evaluation form: element `j` (flat, row-major) of the viewed value is
/// element `Σ j_d·stride_d + offset` of the buffer, over the value's [`collapse`]d dims
/// `(extent, stride)`, outer to inner. `[4096, 128] → [1, 32, 4096, 128]` broadcast is one dim
/// of 32 with stride 0 and one of 524288 with stride 1 (index `j mod 524288`),
/// `[1, 4096, 1] → [1, 4096, 4096]` is `[(4096, 1), (4096, 0)]` (index `j / 4096`), a scalar
/// (or all-1) operand has no dim with a non-zero stride (index 0); a slice adds an offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StridedIndex {
    /// `(extent, buffer stride)` per collapsed dim of the viewed value, outer to inner.
    pub dims: Vec<(u64, u64)>,
    /// Added to the index (negative only inside a concat's operand, whose own elements start
    /// past its offset: the sum is never negative for an element the kernel reads).
    pub offset: i64,
}

/// The index map of a broadcast (the name the absorbed broadcasts started with).
pub type BroadcastIndex = StridedIndex;

/// How the vector loop of a fused chain reads a view's `width` consecutive elements (from an
/// index that is a multiple of `width`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The innermost dim is contiguous in the buffer and a multiple of `width` long, and every
    /// other stride and the offset are multiples of `width`: the elements are `width`
    /// consecutive buffer elements from a multiple of `width`, one aligned vector load.
    Vector,
    /// The innermost dim is repeated and a multiple of `width` long, or every dim is (a
    /// scalar): one buffer element for every lane, one scalar load.
    Shared,
    /// Otherwise (a run shorter than a vector or not a multiple of it, a strided innermost
    /// dim, an odd offset): each lane computes its source index and loads one element.
    PerLane,
}

impl StridedIndex {
    /// The map of a broadcast of `operand`-shaped tensors to `result` (the operand's dims
    /// align with the result's trailing dims, each 1 or equal).
    pub fn new(operand: &[i64], result: &[i64]) -> Result<StridedIndex, String> {
        let op: Vec<u64> = operand.iter().map(|&d| d.max(0) as u64).collect();
        let res: Vec<u64> = result.iter().map(|&d| d.max(0) as u64).collect();
        Ok(IndexMap::identity(&op).broadcast(&res)?.strided())
    }

    /// The buffer index of element `j` (what the kernels compute).
    pub fn source(&self, j: u64) -> u64 {
        let mut rest = j;
        let mut src = 0u64;
        for &(size, stride) in self.dims.iter().rev() {
            src = src.wrapping_add(rest % size.max(1) * stride);
            rest /= size.max(1);
        }
        src.wrapping_add(self.offset as u64)
    }

    /// Whether the map is the identity (`j` itself: contiguous from 0).
    pub fn is_identity(&self) -> bool {
        self.offset == 0 && self.dims.iter().all(|d| d.1 == 1) && self.dims.len() <= 1
    }

    /// How a vector of `width` elements is read.
    pub fn access(&self, width: u64) -> Access {
        if self.dims.iter().all(|d| d.1 == 0) {
            return Access::Shared;
        }
        let aligned = |x: u64| x.is_multiple_of(width);
        match self.dims.split_last() {
            Some((&(e, 1), outer))
                if aligned(e)
                    && self.offset.rem_euclid(width as i64) == 0
                    && outer.iter().all(|d| aligned(d.1)) =>
            {
                Access::Vector
            }
            Some((&(e, 0), _)) if aligned(e) => Access::Shared,
            _ => Access::PerLane,
        }
    }
}

/// A strided gather's dims `(extent, source stride)`, outer to inner, simplified without
/// changing the index `Σ j_d · stride_d`: dims of extent 1 dropped, and a dim merged into its
/// inner neighbour when both are repeated (stride 0) or the outer's stride is the inner's
/// stride times its extent (contiguous together).
pub fn collapse(dims: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(dims.len());
    for (size, stride) in dims {
        if size == 1 {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.1 == stride * size => *last = (last.0 * size, stride),
            _ => out.push((size, stride)),
        }
    }
    out
}

/// A view's map in composition form: coordinate `c` of a value of `shape` is element
/// `Σ c_d·strides_d + offset` of the buffer. Views transform it ([`Self::broadcast`],
/// [`Self::permute`], …) from the buffer's [`identity`](Self::identity) up to the value a
/// chain reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexMap {
    pub shape: Vec<u64>,
    pub strides: Vec<u64>,
    pub offset: i64,
}

impl IndexMap {
    /// A contiguous buffer of `shape` read in order.
    pub fn identity(shape: &[u64]) -> IndexMap {
        let mut strides = vec![1u64; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1];
        }
        IndexMap {
            shape: shape.to_vec(),
            strides,
            offset: 0,
        }
    }

    pub fn numel(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The map of `broadcast(self)` to `result`: the value's dims align with the result's
    /// trailing dims; added dims and repeated dims of size 1 read stride 0.
    pub fn broadcast(&self, result: &[u64]) -> Result<IndexMap, String> {
        let lead = result
            .len()
            .checked_sub(self.shape.len())
            .ok_or("broadcast to a lower rank")?;
        let mut strides = Vec::with_capacity(result.len());
        for (d, &size) in result.iter().enumerate() {
            strides.push(match d.checked_sub(lead) {
                Some(k) if self.shape[k] == size && size != 1 => self.strides[k],
                Some(k) if self.shape[k] != 1 && self.shape[k] != size => {
                    return Err(format!(
                        "cannot broadcast dim of {} to {size}",
                        self.shape[k]
                    ))
                }
                _ => 0,
            });
        }
        Ok(IndexMap {
            shape: result.to_vec(),
            strides,
            offset: self.offset,
        })
    }

    /// The map of `permute(self, perm)`: result dim `d` is dim `perm[d]`.
    pub fn permute(&self, perm: &[i64]) -> Result<IndexMap, String> {
        if perm.len() != self.shape.len() {
            return Err("'perm' is not a permutation of the operand's dims".into());
        }
        let mut shape = Vec::with_capacity(perm.len());
        let mut strides = Vec::with_capacity(perm.len());
        for &p in perm {
            let p = usize::try_from(p)
                .ok()
                .filter(|p| *p < self.shape.len())
                .ok_or("'perm' is not a permutation of the operand's dims")?;
            shape.push(self.shape[p]);
            strides.push(self.strides[p]);
        }
        Ok(IndexMap {
            shape,
            strides,
            offset: self.offset,
        })
    }

    /// The map of `transpose(self)`: the last two dims swapped.
    pub fn transpose(&self) -> Result<IndexMap, String> {
        let r = self.shape.len();
        if r < 2 {
            return Err("transpose of a rank below 2".into());
        }
        let mut m = self.clone();
        m.shape.swap(r - 2, r - 1);
        m.strides.swap(r - 2, r - 1);
        Ok(m)
    }

    /// The map of `slice(self, dim, start, size)`.
    pub fn slice(&self, dim: usize, start: u64, size: u64) -> Result<IndexMap, String> {
        if dim >= self.shape.len() || start + size > self.shape[dim] {
            return Err("slice out of bounds".into());
        }
        let mut m = self.clone();
        m.shape[dim] = size;
        m.offset += (start * self.strides[dim]) as i64;
        Ok(m)
    }

    /// The map over a concat's result (`total` long along `dim`) of its operand whose map
    /// `self` is, starting at `start` along `dim`: valid for coordinates in the operand's
    /// range `[start, start + shape[dim])`, which the kernel selects it for.
    pub fn concat_piece(&self, dim: usize, start: u64, total: u64) -> IndexMap {
        let mut m = self.clone();
        m.shape[dim] = total;
        m.offset -= (start * self.strides[dim]) as i64;
        m
    }

    /// The same elements in row-major order under `shape` (a reshape of the viewed value),
    /// when every group of dims the reshape merges or splits is contiguous together in the
    /// buffer (`torch.Tensor.view`'s rule); `None` otherwise.
    pub fn reshape(&self, shape: &[u64]) -> Option<IndexMap> {
        let numel = self.numel();
        if shape.iter().product::<u64>() != numel {
            return None;
        }
        if numel <= 1 {
            return Some(IndexMap {
                shape: shape.to_vec(),
                strides: vec![0; shape.len()],
                offset: self.offset,
            });
        }
        // Size-1 dims carry no stride: drop them from the old shape.
        let old: Vec<(u64, u64)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(s, _)| **s != 1)
            .map(|(s, t)| (*s, *t))
            .collect();
        let mut strides = vec![0u64; shape.len()];
        let mut view_d = shape.len() as isize - 1;
        let mut chunk_base = old.last()?.1;
        let (mut tensor_numel, mut view_numel) = (1u64, 1u64);
        for td in (0..old.len()).rev() {
            tensor_numel *= old[td].0;
            // The end of a chunk of dims contiguous together.
            if td == 0 || old[td - 1].1 != tensor_numel * chunk_base {
                while view_d >= 0 && (view_numel < tensor_numel || shape[view_d as usize] == 1) {
                    strides[view_d as usize] = view_numel * chunk_base;
                    view_numel *= shape[view_d as usize];
                    view_d -= 1;
                }
                if view_numel != tensor_numel {
                    return None;
                }
                if td > 0 {
                    chunk_base = old[td - 1].1;
                    tensor_numel = 1;
                    view_numel = 1;
                }
            }
        }
        // Trailing size-1 dims of the new shape (outermost) keep stride 0.
        while view_d >= 0 {
            if shape[view_d as usize] != 1 {
                return None;
            }
            view_d -= 1;
        }
        Some(IndexMap {
            shape: shape.to_vec(),
            strides,
            offset: self.offset,
        })
    }

    /// The collapsed evaluation form.
    pub fn strided(&self) -> StridedIndex {
        StridedIndex {
            dims: collapse(
                self.shape
                    .iter()
                    .zip(&self.strides)
                    .map(|(s, t)| (*s, *t))
                    .collect(),
            ),
            offset: self.offset,
        }
    }

    /// The buffer index of coordinate-flat element `j` (tests and the planner's checks).
    pub fn source(&self, j: u64) -> u64 {
        self.strided().source(j)
    }
}

/// Where a fused kernel reads an element of a value it does not compute: a chain of maps
/// applied in order, the first over the value's own shape (or a concat's result), each
/// giving the flat index the next one is over, the last the buffer's. One map whenever the
/// views compose ([`IndexMap::reshape`] succeeded everywhere); otherwise a reshape starts a
/// new map over its result, whose flat index the previous maps then take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewIndex {
    /// Outermost (the reader's) first.
    pub maps: Vec<IndexMap>,
}

impl ViewIndex {
    /// A buffer of `shape` read in order.
    pub fn identity(shape: &[u64]) -> ViewIndex {
        ViewIndex {
            maps: vec![IndexMap::identity(shape)],
        }
    }

    fn outer(&mut self) -> &mut IndexMap {
        &mut self.maps[0]
    }

    /// The index after view `op` of the value this indexes (`op`'s operand), `result` being
    /// `op`'s result shape.
    pub fn apply(&self, ctx: &IrContext, op: OpId, result: &[u64]) -> Result<ViewIndex, String> {
        let int = |n: &str| -> Result<i64, String> {
            ctx.inherent_attr(op, n)
                .and_then(|a| ctx.attr_as_i64(a))
                .ok_or_else(|| format!("{} requires '{n}'", ctx.op_name(op)))
        };
        let mut v = self.clone();
        let m = v.outer();
        let next = match ctx.op_name(op) {
            "compute.broadcast" => m.broadcast(result)?,
            "compute.permute" => {
                let perm = ctx
                    .inherent_attr(op, "perm")
                    .and_then(|a| ctx.attr_as_i64_array(a))
                    .ok_or("compute.permute requires 'perm'")?;
                m.permute(&perm)?
            }
            "compute.transpose" => m.transpose()?,
            "compute.slice" => {
                let dim = int("dim")?.max(0) as usize;
                let start = int("start")?.max(0) as u64;
                let size = result.get(dim).copied().ok_or("slice dim out of range")?;
                m.slice(dim, start, size)?
            }
            "compute.reshape" | "compute.clone" => return Ok(v.reshaped(result)),
            other => return Err(format!("'{other}' is not a view")),
        };
        *m = next;
        Ok(v)
    }

    /// The same elements under `shape` (row-major): composed into the outer map where its
    /// strides allow, else as a new map in front.
    pub fn reshaped(&self, shape: &[u64]) -> ViewIndex {
        let mut v = self.clone();
        if v.maps[0].shape == shape {
            return v;
        }
        match v.maps[0].reshape(shape) {
            Some(m) => v.maps[0] = m,
            None => v.maps.insert(0, IndexMap::identity(shape)),
        }
        v
    }

    /// The index of a concat operand's element read over the concat's result (see
    /// [`IndexMap::concat_piece`]): `piece` is the operand's shape.
    pub fn concat_piece(&self, piece: &[u64], dim: usize, start: u64, total: u64) -> ViewIndex {
        let mut v = self.reshaped(piece);
        let m = v.outer().concat_piece(dim, start, total);
        *v.outer() = m;
        v
    }

    /// The collapsed maps, identities left out (none: the flat index itself).
    pub fn strided(&self) -> Vec<StridedIndex> {
        self.maps
            .iter()
            .map(IndexMap::strided)
            .filter(|s| !s.is_identity())
            .collect()
    }

    /// The buffer index of flat element `j`.
    pub fn source(&self, j: u64) -> u64 {
        self.maps.iter().fold(j, |i, m| m.source(i))
    }

    /// How a vector of `width` elements is read (a chain of maps: one load per lane).
    pub fn access(&self, width: u64) -> Access {
        match self.strided().as_slice() {
            [] => Access::Vector,
            [one] => one.access(width),
            _ => Access::PerLane,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `shape`'s coordinates of flat index `j`.
    fn coords(shape: &[u64], mut j: u64) -> Vec<u64> {
        let mut c = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            c[d] = j % shape[d];
            j /= shape[d];
        }
        c
    }

    #[test]
    fn slice_of_permute_is_one_map() {
        // [1,128,4,64] → permute(0,2,1,3) → [1,4,128,64] → slice dim 3 [32, 64).
        let x = IndexMap::identity(&[1, 128, 4, 64]);
        let p = x.permute(&[0, 2, 1, 3]).unwrap();
        let s = p.slice(3, 32, 32).unwrap();
        for j in 0..s.numel() {
            let c = coords(&s.shape, j);
            let want = c[2] * 256 + c[1] * 64 + c[3] + 32;
            assert_eq!(s.source(j), want);
        }
        assert_eq!(s.strided().access(8), Access::Vector);
        assert_eq!(
            p.slice(3, 3, 32).unwrap().strided().access(8),
            Access::PerLane
        );
        // The piece over a concat of two halves: [start 32, 64) reads the slice at c - 32.
        let piece = ViewIndex { maps: vec![s] }.concat_piece(&[1, 4, 128, 32], 3, 32, 64);
        for j in 0..(4 * 128 * 64) {
            let c = coords(&[1, 4, 128, 64], j);
            if c[3] >= 32 {
                assert_eq!(piece.source(j), c[2] * 256 + c[1] * 64 + (c[3] - 32) + 32);
            }
        }
    }

    #[test]
    fn reshape_composes_where_strides_allow() {
        // A contiguous buffer reshapes freely.
        let x = IndexMap::identity(&[2, 3, 4]);
        assert_eq!(x.reshape(&[6, 4]).unwrap(), IndexMap::identity(&[6, 4]));
        // A transposed view: splitting a dim works, merging the swapped dims does not.
        let t = x.transpose().unwrap(); // [2, 4, 3]
        assert!(t.reshape(&[2, 12]).is_none());
        let split = t.reshape(&[2, 2, 2, 3]).unwrap();
        for j in 0..24 {
            assert_eq!(split.source(j), t.source(j));
        }
        // Size-1 dims in and out.
        let b = IndexMap::identity(&[4]).broadcast(&[3, 1, 4]).unwrap();
        let r = b.reshape(&[3, 4, 1]).unwrap();
        for j in 0..12 {
            assert_eq!(r.source(j), b.source(j));
        }
        // A chain of maps when not composable, still the right elements.
        let v = ViewIndex {
            maps: vec![t.clone()],
        }
        .reshaped(&[24]);
        assert_eq!(v.maps.len(), 2);
        for j in 0..24 {
            assert_eq!(v.source(j), t.source(j));
        }
        assert_eq!(v.access(4), Access::PerLane);
    }
}
