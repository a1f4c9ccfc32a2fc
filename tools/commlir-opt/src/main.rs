//! commlir-opt: the mlir-opt-like driver. All the logic lives in [`commlir::opt_main`], so
//! that embedders can build their own driver with their passes linked in.

fn main() -> std::process::ExitCode {
    // The passes build and drop dense tables of a few MB per pass; glibc's defaults serve
    // those from fresh mmaps and trim the heap after them, so every pass faults and zeroes
    // its pages again (at 100k ops: 59k page faults, 0.17 s of system time). Keeping freed
    // memory in the process halves both. A process-wide setting, so only the binary sets it.
    // SAFETY: mallopt only tunes glibc's allocator; called before any other thread starts.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20); // glibc's maximum
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
    commlir::opt_main()
}
