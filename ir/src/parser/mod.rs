//! The MLIR textual format parser (pest). Filled in by the parser work.
