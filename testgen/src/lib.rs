//! Deterministic generators of valid commlir programs, in the custom textual form.
//!
//! The differential tests of every pass run generated programs on the sim backend before and
//! after the pass; the benchmarks use the same generators at scale. Programs are valid by
//! construction (shapes follow each op's rules, every collective is waited before use), mix
//! every `compute` and `coll` op, and use several groups, including subgroup families and a
//! symmetric-memory group.

mod rng;
mod spmd;
mod transformer;

pub use rng::Rng;
pub use spmd::{random_program, GenConfig};
pub use transformer::{transformer_program, Parallelism, TransformerConfig};
