//! Hash-consing interner: each distinct value is stored once and named by a dense index.

use rustc_hash::FxHashMap;
use std::hash::Hash;

/// Interns values of type `T`, handing out dense `u32` indices.
#[derive(Debug, Clone)]
pub struct Interner<T: Eq + Hash + Clone> {
    map: FxHashMap<T, u32>,
    items: Vec<T>,
}

impl<T: Eq + Hash + Clone> Default for Interner<T> {
    fn default() -> Self {
        Self {
            map: FxHashMap::default(),
            items: Vec::new(),
        }
    }
}

impl<T: Eq + Hash + Clone> Interner<T> {
    /// Returns the index of `v`, inserting it if new.
    pub fn intern(&mut self, v: T) -> u32 {
        if let Some(&i) = self.map.get(&v) {
            return i;
        }
        let i = self.items.len() as u32;
        self.items.push(v.clone());
        self.map.insert(v, i);
        i
    }
    /// Looks a value up without inserting it.
    pub fn find(&self, v: &T) -> Option<u32> {
        self.map.get(v).copied()
    }
    /// The value at index `i`.
    #[inline]
    pub fn get(&self, i: u32) -> &T {
        &self.items[i as usize]
    }
    /// Number of distinct values.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// Whether nothing was interned yet.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}
