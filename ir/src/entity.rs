//! Small copyable ids into the [`Context`](crate::Context) arenas.
//!
//! Every IR object (operation, block, region, value) lives in an arena owned by the context and
//! is named by a 32-bit index, as in Cranelift's entity module: ids are `Copy`, compare in O(1),
//! and never dangle in the memory-safety sense (an erased op keeps its slot, marked dead).

macro_rules! entity {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub(crate) u32);

        impl $name {
            /// The raw arena index.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
            /// Builds an id from a raw arena index (for side tables keyed by id).
            #[inline]
            pub fn from_index(i: usize) -> Self {
                $name(i as u32)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity!(
    /// An operation.
    OpId, "op"
);
entity!(
    /// A basic block.
    BlockId, "bb"
);
entity!(
    /// A region (a list of blocks owned by an op).
    RegionId, "region"
);
entity!(
    /// An SSA value: an op result or a block argument.
    Value, "v"
);
entity!(
    /// An interned type; equality of ids is equality of types.
    Type, "type"
);
entity!(
    /// An interned attribute; equality of ids is equality of attributes.
    Attr, "attr"
);
entity!(
    /// An interned string (op names, attribute names, symbols, file names).
    Ident, "ident"
);
entity!(
    /// An interned location.
    Loc, "loc"
);
