//! commlir-runtime: executes commlir programs. The `sim` backend is the reference
//! semantics every compiler pass is checked against.
