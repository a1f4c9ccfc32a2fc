//! commlir-codegen: lowering of planned comm-level IR to the runtime-call dialect `rt`,
//! NVPTX kernels and the host program (LLVM 22 through inkwell).

/// The LLVM version the crate links, as a smoke check that LLVM is reachable.
pub fn llvm_version() -> (u32, u32, u32) {
    inkwell::support::get_llvm_version()
}
