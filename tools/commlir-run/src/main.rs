//! `commlir-run`: executes a program on N simulated ranks.
fn main() {}
