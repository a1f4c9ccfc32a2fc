//! The global pass registry: every [`PassInfo`] submitted with
//! [`register_pass!`](crate::register_pass) in any linked crate (an embedder's included),
//! collected by `inventory` on first use.

use super::def::PassInfo;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// A registration record collected by `inventory`.
pub struct PassRegistration(pub &'static PassInfo);
inventory::collect!(PassRegistration);

/// The passes known to this binary, by argument.
#[derive(Debug, Default)]
pub struct PassRegistry {
    passes: BTreeMap<&'static str, &'static PassInfo>,
}

impl PassRegistry {
    /// The registry of every pass registered with `inventory` in this binary.
    pub fn global() -> &'static PassRegistry {
        static GLOBAL: OnceLock<PassRegistry> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let mut r = PassRegistry::default();
            for p in inventory::iter::<PassRegistration> {
                r.insert(p.0);
            }
            r
        })
    }

    /// Adds a pass; a later registration of the same argument replaces an earlier one.
    pub fn insert(&mut self, info: &'static PassInfo) {
        self.passes.insert(info.argument, info);
    }

    /// The pass registered under `argument`.
    pub fn get(&self, argument: &str) -> Option<&'static PassInfo> {
        self.passes.get(argument).copied()
    }

    /// Every pass, sorted by argument (deterministic for `--help` and docs).
    pub fn passes(&self) -> impl Iterator<Item = &'static PassInfo> + '_ {
        self.passes.values().copied()
    }

    /// Number of registered passes.
    pub fn len(&self) -> usize {
        self.passes.len()
    }

    /// Whether no pass is registered.
    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }
}
