//! commlir-opt: the mlir-opt-like driver. All the logic lives in [`commlir::opt_main`], so
//! that embedders can build their own driver with their passes linked in.

fn main() -> std::process::ExitCode {
    commlir::opt_main()
}
