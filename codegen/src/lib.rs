//! commlir-codegen: the last stages of the compiler, from planned comm-level IR to what runs on
//! GPUs (docs/codegen.md describes the whole path and the runner's loading protocol).
//!
//! - [`lower_to_rt`]: the `comm-to-rt` pass, planned comm IR → the `rt` runtime-call dialect,
//!   with [`fusion`] of elementwise chains into single kernels.
//! - [`kernels`]: every `rt.kernel` → one NVPTX entry (inkwell, LLVM 22, `sm_90`), PTX text.
//! - [`symm_kernels`]: every `rt.symm_kernel` → a symmetric-memory collective kernel with
//!   peer barriers (same module and kernel table).
//! - [`host`]: every lowered function → host LLVM IR calling the runtime's C ABI ([`abi`]).
//! - [`slots`]: arguments and results that may live in comm-pool slots (copies skipped).
//! - [`artifact`]: the single-file artifact `commlir-run --backend=cuda` loads.
//! - [`translate`]: the `commlir-translate` driver.
//!
//! Only this crate and `commlir-translate` link LLVM; the runtime reads the artifact with no
//! LLVM at all.

pub mod abi;
pub mod artifact;
pub mod fusion;
pub mod host;
pub mod kernels;
pub mod lower_to_rt;
pub mod slots;
pub mod symm_kernels;
pub mod translate;

/// Forces the registrations of this crate (the `comm-to-rt` pass) and of the dialects and
/// passes it builds on to be linked into the final binary.
#[inline(never)]
pub fn link() {
    commlir_passes::link();
    std::hint::black_box(&lower_to_rt::COMM_TO_RT);
}

/// The LLVM version the crate links.
pub fn llvm_version() -> (u32, u32, u32) {
    inkwell::support::get_llvm_version()
}
